/** What both queue backends share: their metrics and the retry delay of an attempt. */
import { Gauge, Histogram } from 'prom-client';
import { registry } from '../metrics.js';
import type { JobFailure, JobQueues } from './types.js';

/**
 * A queue figure within 1 s, else none: a backend that does not answer (BullMQ waits for Redis to
 * come back) must not hold the scrape past Prometheus's timeout, which would hide every other
 * metric of the process, dependency_up among them.
 */
function bounded<T>(p: Promise<T>, ms = 1000): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  const late = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
  });
  p.catch(() => {});
  return Promise.race([p, late]).finally(() => clearTimeout(timer));
}

export const jobDuration = new Histogram({
  name: 'jobs_duration_seconds',
  help: 'Job handler duration by queue and outcome',
  labelNames: ['queue', 'outcome'] as const,
  buckets: [0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
  registers: [registry],
});

const known = new Set<JobQueues>();
const watched = new Set<string>();
export const queueDepth = new Gauge({
  name: 'jobs_queue_depth',
  help: 'Jobs per queue and state',
  labelNames: ['queue', 'state'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const q of known) {
      for (const name of watched) {
        try {
          const c = await bounded(q.counts(name));
          for (const [state, n] of Object.entries(c)) this.set({ queue: name, state }, n);
        } catch {
          /* a backend that is down reports nothing this scrape */
        }
      }
    }
  },
});

export const oldestWaiting = new Gauge({
  name: 'jobs_oldest_waiting_age_seconds',
  help: 'Seconds the oldest runnable job of each queue has waited for a worker (0: none waits)',
  labelNames: ['queue'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    for (const q of known) {
      for (const name of watched) {
        try {
          this.set({ queue: name }, await bounded(q.oldestWaitingSeconds(name)));
        } catch {
          /* a backend that is down reports nothing this scrape */
        }
      }
    }
  },
});

export function observeQueues(q: JobQueues, name: string): () => void {
  known.add(q);
  watched.add(name);
  return () => known.delete(q);
}

export function backoffFor(backoffMs: number[] | undefined, attempt: number): number {
  const list = backoffMs?.length ? backoffMs : [1000];
  return list[Math.min(attempt - 1, list.length - 1)]!;
}

/** Hands a failure to the owner's `onFailure`; a throwing listener never fails the queue. */
export function reportFailure(listener: ((f: JobFailure) => void) | undefined, failure: JobFailure): void {
  try {
    listener?.(failure);
  } catch {
    /* a logger's fault is not the job's */
  }
}
