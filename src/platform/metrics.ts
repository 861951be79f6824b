/**
 * The process-wide Prometheus registry. Features register their own metric families here
 * (names with units, bounded label sets, never ids in labels); GET /metrics serves it.
 */
import { collectDefaultMetrics, Registry } from 'prom-client';

export const registry = new Registry();
let defaultsStarted = false;

/** Default process metrics (CPU, memory, event loop lag, GC): once per process. */
export function startDefaultMetrics(): void {
  if (defaultsStarted) return;
  defaultsStarted = true;
  collectDefaultMetrics({ register: registry });
}
