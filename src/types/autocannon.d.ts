// The part of autocannon's API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  interface Result {
    requests: { average: number; total: number };
    latency: { p50: number; p90: number; p99: number; average: number; max: number };
    errors: number;
    non2xx: number;
    timeouts: number;
  }
  function autocannon(opts: { url: string; connections?: number; duration?: number; headers?: Record<string, string>; method?: string; body?: string }): Promise<Result>;
  export default autocannon;
}
