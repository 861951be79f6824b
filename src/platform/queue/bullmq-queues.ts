/**
 * BullMQ on Redis. One Queue per queue name for producing; one Worker per consumed queue. Dead
 * workers are caught by BullMQ's stalled-job check (lock duration + stalled interval) and their
 * jobs moved back to waiting. Retries use a custom backoff strategy reading the job's own delay
 * list, so each job keeps the schedule it was enqueued with.
 */
import { Queue, Worker, type ConnectionOptions, type Job } from 'bullmq';
import { Redis } from 'ioredis';
import { newId } from '../ids.js';
import { backoffFor, jobDuration, observeQueues, reportFailure } from './shared.js';
import type { JobFailure, JobHandler, JobOptions, JobQueues, JobQueuesOptions, QueueCounts } from './types.js';

interface Envelope {
  payload: unknown;
  backoffMs: number[];
}

export class BullmqQueues implements JobQueues {
  readonly kind = 'bullmq' as const;
  private readonly connection: Redis;
  private readonly prefix: string;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly retainSec: number;
  private readonly onFailure?: (f: JobFailure) => void;
  private readonly queues = new Map<string, Queue>();
  private readonly workers: Worker[] = [];
  private readonly unobserve: Array<() => void> = [];
  /** Jobs this process is running, with the lock token that lets close() hand them back. */
  private readonly running = new Map<string, { job: Job<Envelope>; token?: string }>();
  private closed = false;

  private readonly connectionOptions: ConnectionOptions;

  constructor(opts: JobQueuesOptions) {
    const u = new URL(opts.redisUrl!);
    // BullMQ creates (and closes) its own connections from these options.
    this.connectionOptions = {
      host: u.hostname,
      port: Number(u.port || 6379),
      ...(u.username ? { username: decodeURIComponent(u.username) } : {}),
      ...(u.password ? { password: decodeURIComponent(u.password) } : {}),
      db: Number(u.pathname.slice(1) || 0),
      ...(u.protocol === 'rediss:' ? { tls: {} } : {}),
      maxRetriesPerRequest: null,
    };
    this.connection = new Redis(opts.redisUrl!, {
      maxRetriesPerRequest: null,
      enableReadyCheck: true,
      lazyConnect: false,
    });
    this.connection.on('error', () => {
      /* ioredis reconnects by itself; readiness reports the outage */
    });
    this.prefix = opts.prefix ? `fa:${opts.prefix}` : 'fa';
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.pollMs = opts.pollMs ?? 5_000;
    this.retainSec = Math.ceil((opts.retainMs ?? 3_600_000) / 1000);
    this.onFailure = opts.onFailure;
  }

  private queue(name: string): Queue {
    let q = this.queues.get(name);
    if (!q) {
      q = new Queue(name, { connection: this.connectionOptions, prefix: this.prefix });
      q.on('error', () => {});
      this.queues.set(name, q);
    }
    return q;
  }

  async enqueue<T>(queue: string, data: T, opts: JobOptions = {}): Promise<string> {
    if (this.closed) throw new Error('queue is closed');
    const job = this.job(data, opts);
    await this.queue(queue).add(queue, job.data, job.opts);
    return job.opts.jobId;
  }

  async enqueueMany<T>(queue: string, jobs: Array<{ data: T; opts?: JobOptions }>): Promise<string[]> {
    if (this.closed) throw new Error('queue is closed');
    if (!jobs.length) return [];
    const bulk = jobs.map((j) => ({ name: queue, ...this.job(j.data, j.opts) }));
    await this.queue(queue).addBulk(bulk);
    return bulk.map((b) => b.opts.jobId);
  }

  private job<T>(data: T, opts: JobOptions = {}) {
    const env: Envelope = { payload: data ?? null, backoffMs: opts.backoffMs ?? [] };
    return {
      data: env,
      opts: {
        jobId: opts.jobId ?? newId('job'),
        delay: Math.max(0, opts.delayMs ?? 0),
        attempts: Math.max(1, opts.attempts ?? 1),
        backoff: { type: 'custom' },
        removeOnComplete: { age: this.retainSec, count: 10_000 },
        removeOnFail: { age: this.retainSec * 24, count: 10_000 },
      },
    };
  }

  process<T>(queue: string, handler: JobHandler<T>, opts: { concurrency?: number } = {}): void {
    const worker = new Worker(
      queue,
      async (job: Job<Envelope>, token?: string) => {
        const started = performance.now();
        let outcome = 'completed';
        const key = `${queue}:${job.id}`;
        this.running.set(key, { job, token });
        try {
          await handler(job.data.payload as T, { id: job.id!, queue, attempt: job.attemptsMade + 1 });
        } catch (err) {
          const attempt = job.attemptsMade + 1;
          const attempts = job.opts.attempts ?? 1;
          const retried = attempt < attempts;
          const ended = retried ? 'retried' : 'failed';
          outcome = ended;
          reportFailure(this.onFailure, {
            queue,
            id: job.id!,
            outcome: ended,
            attempt,
            attempts,
            ...(retried ? { retry_in_ms: backoffFor(job.data.backoffMs, attempt) } : {}),
            error: err instanceof Error ? err.message : String(err),
          });
          throw err;
        } finally {
          this.running.delete(key);
          jobDuration.observe({ queue, outcome }, (performance.now() - started) / 1000);
        }
      },
      {
        connection: this.connectionOptions,
        prefix: this.prefix,
        concurrency: Math.max(1, opts.concurrency ?? 1),
        lockDuration: this.leaseMs,
        stalledInterval: Math.min(this.pollMs, this.leaseMs),
        maxStalledCount: 5,
        settings: {
          backoffStrategy: (attemptsMade: number, _type?: string, _err?: Error, job?: { data: Envelope }) =>
            backoffFor(job?.data.backoffMs, attemptsMade),
        },
      },
    );
    worker.on('error', () => {});
    this.workers.push(worker);
    this.unobserve.push(observeQueues(this, queue));
  }

  async counts(queue: string): Promise<QueueCounts> {
    const c = await this.queue(queue).getJobCounts(
      'waiting',
      'prioritized',
      'delayed',
      'active',
      'completed',
      'failed',
    );
    return {
      waiting: (c.waiting ?? 0) + (c.prioritized ?? 0),
      delayed: c.delayed ?? 0,
      active: c.active ?? 0,
      completed: c.completed ?? 0,
      failed: c.failed ?? 0,
    };
  }

  async oldestWaitingSeconds(queue: string): Promise<number> {
    // The wait list is pushed on the left: ascending order starts with the oldest job. A job became
    // runnable at its enqueueing plus its delay (a retry's backoff is its delay at that attempt).
    const q = this.queue(queue);
    const [wait] = await q.getJobs(['wait'], 0, 0, true);
    const [prioritized] = await q.getJobs(['prioritized'], 0, 0, true);
    const since = [wait, prioritized].filter((j): j is Job => j !== undefined).map((j) => j.timestamp + (j.delay ?? 0));
    return since.length ? Math.max(0, (Date.now() - Math.min(...since)) / 1000) : 0;
  }

  async remove(queue: string, jobId: string): Promise<boolean> {
    const job = await this.queue(queue).getJob(jobId);
    if (!job) return false;
    const state = await job.getState();
    if (state !== 'waiting' && state !== 'delayed' && state !== 'prioritized') return false;
    try {
      await job.remove();
      return true;
    } catch {
      return false; // taken by a worker in the meantime
    }
  }

  async pending(queue: string, jobId: string): Promise<boolean> {
    const job = await this.queue(queue).getJob(jobId);
    if (!job) return false;
    const state = await job.getState();
    return ['waiting', 'delayed', 'active', 'prioritized', 'waiting-children'].includes(state);
  }

  async ping(): Promise<void> {
    await this.connection.ping();
  }

  async close(graceMs = 10_000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const u of this.unobserve) u();
    // Stop taking jobs and wait for the running ones. Past the grace period those still running
    // are moved back to waiting (their lock released with our token), so another worker takes them
    // at once instead of after the lock expires; then the workers close without waiting for them.
    // (Worker.close() once called cannot be forced, hence pause first.)
    await Promise.all(this.workers.map((w) => w.pause(true).catch(() => {})));
    const end = Date.now() + graceMs;
    while (this.running.size && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
    const drained = this.running.size === 0;
    if (!drained)
      await Promise.all([...this.running.values()].map(({ job, token }) => job.moveToWait(token).catch(() => 0)));
    await Promise.all(this.workers.map((w) => w.close(!drained).catch(() => {})));
    await Promise.all([...this.queues.values()].map((q) => q.close().catch(() => {})));
    await this.connection.quit().catch(() => this.connection.disconnect());
  }

  /** Deletes every key of this prefix (tests). */
  async obliterate(): Promise<void> {
    const keys = await this.connection.keys(`${this.prefix}:*`);
    for (let i = 0; i < keys.length; i += 500) await this.connection.del(...keys.slice(i, i + 500));
  }
}
