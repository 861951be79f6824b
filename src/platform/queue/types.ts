/** The job-queue interface both backends implement (job-queues.ts says what they keep). */
import type { Database } from '../database.js';

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
  /** Seconds the oldest job waiting to run (not delayed) has been runnable; 0 when none waits. */
  oldestWaitingSeconds(queue: string): Promise<number>;
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
  /**
   * Database queue: the longest interval an idle consumer's polls back off to (doubling from
   * `pollMs` after each poll that found nothing). Default: 10 × `pollMs`, at most 5 s, on the
   * embedded database (one process: its own enqueues wake it at once), `pollMs` (no back-off) on
   * PostgreSQL, where other processes' jobs are found by polling.
   */
  idlePollMaxMs?: number;
  /** How long finished jobs are kept (for counts and jobId de-duplication). */
  retainMs?: number;
  /**
   * Told of every run that failed: `retried` (a later attempt follows) or `failed` (none does; the
   * database queue also fails a job that stalled too often). The runtime logs them: without it a
   * failed job left only a metric and a row.
   */
  onFailure?: (failure: JobFailure) => void;
}

export interface JobFailure {
  queue: string;
  id: string;
  outcome: 'retried' | 'failed';
  /** The run that failed (1 for the first), and the runs allowed. */
  attempt: number;
  attempts: number;
  /** When retried: the delay before the next run. */
  retry_in_ms?: number;
  error: string;
}
