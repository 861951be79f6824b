/**
 * One small job-queue interface with two backends: BullMQ on Redis when REDIS_URL is set, and a
 * durable queue kept in the database otherwise. Semantics both keep (the contract suite checks):
 * - enqueue now or after `delayMs`; a `jobId` makes enqueue idempotent while a job with that id
 *   is kept (waiting, delayed, active, or finished within the retention window);
 * - a handler that throws is retried after `backoffMs[attempt-1]` (the last delay repeats) until
 *   `attempts` runs have failed, then the job is failed;
 * - a job whose process dies mid-handler is run again later (lease / stalled-job detection);
 * - close() stops taking jobs, waits a bounded time for running handlers, and hands the rest back.
 */
import type { Database } from '../database.js';
import { registry } from '../metrics.js';
import { Gauge, Histogram } from 'prom-client';

export interface JobOptions {
  delayMs?: number;
  jobId?: string;
  /** Total runs allowed (1 = no retry). Default 1. */
  attempts?: number;
  /** Delay before each retry; the last one repeats. Default [1000]. */
  backoffMs?: number[];
}

export interface JobContext {
  id: string;
  queue: string;
  /** 1 for the first run. */
  attempt: number;
}

export type JobHandler<T> = (data: T, ctx: JobContext) => Promise<void>;

export interface QueueCounts {
  waiting: number;
  delayed: number;
  active: number;
  completed: number;
  failed: number;
}

export interface JobQueues {
  readonly kind: 'bullmq' | 'database';
  enqueue<T>(queue: string, data: T, opts?: JobOptions): Promise<string>;
  /** Enqueues many jobs in one round trip (BullMQ addBulk / one INSERT); same semantics as enqueue. */
  enqueueMany<T>(queue: string, jobs: Array<{ data: T; opts?: JobOptions }>): Promise<string[]>;
  process<T>(queue: string, handler: JobHandler<T>, opts?: { concurrency?: number }): void;
  counts(queue: string): Promise<QueueCounts>;
  /** Cancels a waiting or delayed job; false when there was none (or it is running). */
  remove(queue: string, jobId: string): Promise<boolean>;
  /** Whether a job is waiting, delayed or running (not finished, not unknown). */
  pending(queue: string, jobId: string): Promise<boolean>;
  ping(): Promise<void>;
  close(graceMs?: number): Promise<void>;
}

export interface JobQueuesOptions {
  db: Database;
  redisUrl?: string;
  /** Key prefix (BullMQ) / namespace (database queue): tests give each suite its own. */
  prefix?: string;
  /** How long a claimed job stays owned without a heartbeat (database) / lock duration (BullMQ). */
  leaseMs?: number;
  /** Polling interval of the database queue, and BullMQ's stalled-job check interval. */
  pollMs?: number;
  /** How long finished jobs are kept (for counts and jobId de-duplication). */
  retainMs?: number;
}

export async function createJobQueues(opts: JobQueuesOptions): Promise<JobQueues> {
  if (opts.redisUrl) {
    const { BullmqQueues } = await import('./bullmq-queues.js');
    return new BullmqQueues(opts);
  }
  const { DatabaseQueues } = await import('./database-queues.js');
  return new DatabaseQueues(opts);
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
          const c = await q.counts(name);
          for (const [state, n] of Object.entries(c)) this.set({ queue: name, state }, n);
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
