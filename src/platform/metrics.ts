/**
 * The process-wide Prometheus registry. Features register their own metric families here
 * (names with units, bounded label sets, never ids in labels); GET /metrics serves it.
 */
import { collectDefaultMetrics, Gauge, Registry } from 'prom-client';

export const registry = new Registry();
let defaultsStarted = false;

/** Default process metrics (CPU, memory, event loop lag, GC): once per process. */
export function startDefaultMetrics(): void {
  if (defaultsStarted) return;
  defaultsStarted = true;
  collectDefaultMetrics({ register: registry });
}

/** What the pool gauges read: the compute pool's own counters (src/compute/pool.ts). */
export interface PoolStats {
  readonly size: number;
  readonly utilization: number;
  readonly queueSize: number;
}

const pools = new Set<PoolStats>();
const sumPools = (f: (p: PoolStats) => number) => [...pools].reduce((a, p) => a + f(p), 0);

new Gauge({
  name: 'compute_pool_threads',
  help: 'Worker threads in the compute pool',
  registers: [registry],
  collect() {
    this.set(sumPools((p) => p.size));
  },
});

new Gauge({
  name: 'compute_pool_utilization_ratio',
  help: 'Share of time the compute threads were busy since the pool started (0..1)',
  registers: [registry],
  collect() {
    this.set(pools.size ? sumPools((p) => p.utilization) / pools.size : 0);
  },
});

new Gauge({
  name: 'compute_pool_queue_size',
  help: 'Compute tasks waiting for a free thread',
  registers: [registry],
  collect() {
    this.set(sumPools((p) => p.queueSize));
  },
});

/** Reports a pool in the gauges until the returned function is called (when the pool closes). */
export function observePool(pool: PoolStats): () => void {
  pools.add(pool);
  return () => void pools.delete(pool);
}
