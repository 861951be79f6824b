// The part of autocannon's API the benchmarks use (the package ships no types).
declare module 'autocannon' {
  interface Result {
    requests: { average: number; total: number };
    latency: { p50: number; p90: number; p99: number; average: number; max: number };
    errors: number;
    non2xx: number;
    timeouts: number;
    duration: number;
  }
  interface Request {
    method?: string;
    path?: string;
    body?: string;
    headers?: Record<string, string>;
    /** Returns the request to send (may change method, path, body); `context` is per connection. */
    // biome-ignore lint/suspicious/noExplicitAny: autocannon's request and per-connection context are plain objects each caller shapes
    setupRequest?: (req: any, context: any) => any;
    // biome-ignore lint/suspicious/noExplicitAny: as above
    onResponse?: (status: number, body: string, context: any, headers: Record<string, string>) => void;
  }
  function autocannon(opts: {
    url: string | string[];
    connections?: number;
    duration?: number;
    amount?: number;
    /** Requests per second over all connections. */
    overallRate?: number;
    /** Seconds before a request counts as a timeout (default 10). */
    timeout?: number;
    headers?: Record<string, string>;
    method?: string;
    body?: string;
    requests?: Request[];
  }): Promise<Result>;
  export default autocannon;
}
