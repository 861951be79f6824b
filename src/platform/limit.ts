/**
 * Concurrency limits (on fastq, the queue fastify itself runs on): at most `n` calls at once, the
 * others wait in the order they came. A call that finds a free slot starts at once, before the
 * call that made it returns (p-limit starts it a microtask later): the webhook direct sink relies
 * on that, so that a delivery that had its slot when deliver() returned is sent even if drain()
 * follows at once (test/integration/webhook-batching.test.ts).
 */
import fastq from 'fastq';

export interface Limit {
  <T>(fn: () => Promise<T>): Promise<T>;
  /** Nothing runs and nothing waits. */
  idle(): boolean;
}

export function limit(n: number): Limit {
  const q = fastq.promise((fn: () => Promise<unknown>) => fn(), n);
  const run = <T>(fn: () => Promise<T>) => q.push(fn) as Promise<T>;
  return Object.assign(run, { idle: () => q.idle() });
}

export type KeyedLimit = <T>(key: string, fn: () => Promise<T>) => Promise<T>;

/**
 * A limit of `n` per key: one limit per key in use, dropped as soon as no call of that key runs
 * or waits, so the map holds only the keys in use.
 */
export function keyedLimit(n: number): KeyedLimit {
  const limits = new Map<string, Limit>();
  return async (key, fn) => {
    let l = limits.get(key);
    if (!l) {
      l = limit(n);
      limits.set(key, l);
    }
    try {
      return await l(fn);
    } finally {
      if (l.idle()) limits.delete(key);
    }
  };
}
