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
import type { JobQueues, JobQueuesOptions } from './types.js';

export type { JobContext, JobHandler, JobOptions, JobQueues, JobQueuesOptions, QueueCounts } from './types.js';
export { backoffFor, jobDuration, observeQueues, queueDepth } from './shared.js';

// The backend is imported when chosen (lazily: a process without REDIS_URL never loads BullMQ);
// the backends import types.ts and shared.ts, never this file, so there is no cycle.
export async function createJobQueues(opts: JobQueuesOptions): Promise<JobQueues> {
  if (opts.redisUrl) {
    const { BullmqQueues } = await import('./bullmq-queues.js');
    return new BullmqQueues(opts);
  }
  const { DatabaseQueues } = await import('./database-queues.js');
  return new DatabaseQueues(opts);
}
