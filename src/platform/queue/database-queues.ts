/**
 * The embedded queue: jobs are rows (table `jobs`), claimed with FOR UPDATE SKIP LOCKED under a
 * lease that a heartbeat renews while the handler runs. A process that dies leaves an expired lease
 * and the job is claimed again (that does not count as a failed attempt; after 5 such stalls the
 * job is failed, so a job that kills its worker cannot loop forever). Works on PGlite (one
 * process) and on PostgreSQL (many processes). In-process enqueues wake the consumer at once,
 * delayed jobs and retries at their time; other processes' jobs are found by polling. On the
 * embedded database, where there are no other processes, an idle consumer's polls back off (to
 * 10 × the poll interval, at most 5 s): they only find jobs whose lease ran out.
 */
import { randomBytes } from 'node:crypto';
import type { Database } from '../database.js';
import { newId } from '../ids.js';
import { backoffFor, jobDuration, observeQueues, reportFailure } from './shared.js';
import type { JobFailure, JobHandler, JobOptions, JobQueues, JobQueuesOptions, QueueCounts } from './types.js';

const MAX_STALLS = 5;

interface Consumer {
  queue: string;
  handler: JobHandler<unknown>;
  concurrency: number;
  running: Map<string, Promise<void>>;
  timer: NodeJS.Timeout | null;
  /** When `timer` fires (ms since the epoch). */
  due: number;
  polling: boolean;
  again: boolean;
  /** The next idle poll's interval: `pollMs`, doubled after each poll that found nothing. */
  idleMs: number;
  /** Wake-ups asked for (delayed jobs, retries), ascending, not yet passed by a poll. */
  wakes: number[];
}

/** Wake-ups remembered per consumer; past that, the latest are dropped (an idle poll finds them). */
const MAX_WAKES = 1000;

interface ClaimedRow {
  id: string;
  data: unknown;
  attempts_made: number;
  max_attempts: number;
  backoff_ms: number[];
  stalls: number;
}

export class DatabaseQueues implements JobQueues {
  readonly kind = 'database' as const;
  private readonly db: Database;
  private readonly ns: string;
  private readonly leaseMs: number;
  private readonly pollMs: number;
  private readonly idlePollMaxMs: number;
  private readonly retainMs: number;
  private readonly onFailure?: (f: JobFailure) => void;
  private readonly worker = `${process.pid}-${randomBytes(4).toString('hex')}`;
  private readonly consumers = new Map<string, Consumer>();
  private heartbeat: NodeJS.Timeout | null = null;
  private closed = false;
  private lastPrune = 0;
  private readonly unobserve: Array<() => void> = [];

  constructor(opts: JobQueuesOptions) {
    this.db = opts.db;
    this.ns = opts.prefix ? `${opts.prefix}:` : '';
    this.leaseMs = opts.leaseMs ?? 30_000;
    this.pollMs = opts.pollMs ?? 500;
    this.idlePollMaxMs = Math.max(
      this.pollMs,
      opts.idlePollMaxMs ?? (this.db.kind === 'pglite' ? Math.min(10 * this.pollMs, 5000) : this.pollMs),
    );
    this.retainMs = opts.retainMs ?? 3_600_000;
    this.onFailure = opts.onFailure;
  }

  private q(queue: string): string {
    return this.ns + queue;
  }

  async enqueue<T>(queue: string, data: T, opts: JobOptions = {}): Promise<string> {
    if (this.closed) throw new Error('queue is closed');
    const id = opts.jobId ?? newId('job');
    const delay = Math.max(0, opts.delayMs ?? 0);
    await this.db.query(
      `INSERT INTO jobs (queue, id, data, state, run_at, max_attempts, backoff_ms)
       VALUES ($1, $2, $3::jsonb, 'waiting', now() + ($4 || ' milliseconds')::interval, $5, $6)
       ON CONFLICT (queue, id) DO NOTHING`,
      [
        this.q(queue),
        id,
        JSON.stringify(data ?? null),
        String(delay),
        Math.max(1, opts.attempts ?? 1),
        opts.backoffMs ?? [],
      ],
    );
    const c = this.consumers.get(queue);
    if (c) this.schedule(c, delay);
    return id;
  }

  async enqueueMany<T>(queue: string, jobs: Array<{ data: T; opts?: JobOptions }>): Promise<string[]> {
    if (this.closed) throw new Error('queue is closed');
    if (!jobs.length) return [];
    const ids = jobs.map((j) => j.opts?.jobId ?? newId('job'));
    const delays = jobs.map((j) => Math.max(0, j.opts?.delayMs ?? 0));
    // Backoff lists differ per job: passed as JSON text and turned back into int[] per row.
    await this.db.query(
      `INSERT INTO jobs (queue, id, data, state, run_at, max_attempts, backoff_ms)
       SELECT $1, u.id, u.data::jsonb, 'waiting', now() + u.delay * interval '1 millisecond', u.attempts,
              ARRAY(SELECT jsonb_array_elements_text(u.backoff::jsonb)::int)
         FROM unnest($2::text[], $3::text[], $4::int[], $5::int[], $6::text[]) AS u(id, data, delay, attempts, backoff)
       ON CONFLICT (queue, id) DO NOTHING`,
      [
        this.q(queue),
        ids,
        jobs.map((j) => JSON.stringify(j.data ?? null)),
        delays,
        jobs.map((j) => Math.max(1, j.opts?.attempts ?? 1)),
        jobs.map((j) => JSON.stringify(j.opts?.backoffMs ?? [])),
      ],
    );
    const c = this.consumers.get(queue);
    if (c) this.schedule(c, Math.min(...delays));
    return ids;
  }

  process<T>(queue: string, handler: JobHandler<T>, opts: { concurrency?: number } = {}): void {
    if (this.consumers.has(queue)) throw new Error(`queue ${queue} already has a handler in this process`);
    const c: Consumer = {
      queue,
      handler: handler as JobHandler<unknown>,
      concurrency: Math.max(1, opts.concurrency ?? 1),
      running: new Map(),
      timer: null,
      due: Number.POSITIVE_INFINITY,
      polling: false,
      again: false,
      idleMs: this.pollMs,
      wakes: [],
    };
    this.consumers.set(queue, c);
    this.unobserve.push(observeQueues(this, queue));
    if (!this.heartbeat) {
      this.heartbeat = setInterval(() => void this.renewLeases(), Math.max(50, Math.floor(this.leaseMs / 3)));
      this.heartbeat.unref();
    }
    this.schedule(c, 0);
  }

  /** Asks for a poll in `ms` (0: at once; during a poll, right after it). No wake-up asked for is lost. */
  private schedule(c: Consumer, ms: number): void {
    if (this.closed) return;
    if (ms > 0) {
      const at = Date.now() + ms;
      let i = c.wakes.length;
      while (i > 0 && c.wakes[i - 1]! > at) i--;
      if (c.wakes[i - 1] !== at) c.wakes.splice(i, 0, at);
      if (c.wakes.length > MAX_WAKES) c.wakes.length = MAX_WAKES;
    } else if (c.polling) c.again = true;
    if (!c.polling) this.arm(c, ms);
  }

  /** The consumer's timer, at `ms` from now unless it is due earlier already. */
  private arm(c: Consumer, ms: number): void {
    const at = Date.now() + ms;
    if (c.timer) {
      // Keep an earlier wake-up; replace a later one.
      if (c.due <= at) return;
      clearTimeout(c.timer);
    }
    c.due = at;
    c.timer = setTimeout(() => void this.poll(c), ms);
  }

  private async poll(c: Consumer): Promise<void> {
    c.timer = null;
    c.due = Number.POSITIVE_INFINITY;
    if (this.closed) return;
    c.polling = true;
    const started = Date.now();
    let claimed: ClaimedRow[] = [];
    try {
      const free = c.concurrency - c.running.size;
      if (free > 0) claimed = await this.claim(c.queue, free);
      if (Date.now() - this.lastPrune > 60_000) {
        this.lastPrune = Date.now();
        await this.db.query(`DELETE FROM jobs WHERE finished_at < now() - ($1 || ' milliseconds')::interval`, [
          String(this.retainMs),
        ]);
      }
    } catch {
      /* database unavailable: try again at the next poll */
    } finally {
      c.polling = false;
    }
    for (const row of claimed) this.run(c, row);
    if (this.closed) return;
    // Wake-ups due when this poll began have been served by it.
    let served = 0;
    while (served < c.wakes.length && c.wakes[served]! <= started) served++;
    if (served) c.wakes.splice(0, served);
    if (claimed.length) c.idleMs = this.pollMs;
    if (c.running.size >= c.concurrency) return; // a finishing job asks for the next poll
    const more = claimed.length > 0 || c.again;
    c.again = false;
    if (more) return this.arm(c, 0);
    // Nothing to do: the next poll a little later each time, up to the bound, or at the next
    // wake-up asked for if that comes first.
    const idle = c.idleMs;
    c.idleMs = Math.min(2 * idle, this.idlePollMaxMs);
    const next = c.wakes[0];
    this.arm(c, next === undefined ? idle : Math.max(0, Math.min(idle, next - Date.now())));
  }

  private async claim(queue: string, n: number): Promise<ClaimedRow[]> {
    const rows = await this.db.query<ClaimedRow>(
      `UPDATE jobs j SET state = 'active', locked_by = $3,
              locked_until = now() + ($4 || ' milliseconds')::interval,
              stalls = j.stalls + CASE WHEN j.state = 'active' THEN 1 ELSE 0 END
        WHERE (j.queue, j.id) IN (
          SELECT queue, id FROM jobs
           WHERE queue = $1 AND ((state = 'waiting' AND run_at <= now()) OR (state = 'active' AND locked_until < now()))
           ORDER BY run_at, created_at LIMIT $2 FOR UPDATE SKIP LOCKED)
        RETURNING j.id, j.data, j.attempts_made, j.max_attempts, j.backoff_ms, j.stalls`,
      [this.q(queue), n, this.worker, String(this.leaseMs)],
    );
    const runnable: ClaimedRow[] = [];
    for (const r of rows) {
      if (r.stalls > MAX_STALLS) {
        const error = `the job stalled ${r.stalls} times (its worker died or hung while handling it)`;
        await this.finish(queue, r.id, 'failed', error);
        reportFailure(this.onFailure, {
          queue,
          id: r.id,
          outcome: 'failed',
          attempt: r.attempts_made + 1,
          attempts: r.max_attempts,
          error,
        });
      } else runnable.push(r);
    }
    return runnable;
  }

  private run(c: Consumer, row: ClaimedRow): void {
    const started = performance.now();
    const attempt = row.attempts_made + 1;
    const p = (async () => {
      let outcome = 'completed';
      try {
        await c.handler(row.data, { id: row.id, queue: c.queue, attempt });
        await this.finish(c.queue, row.id, 'completed', null);
      } catch (err) {
        const message = err instanceof Error ? err.message : String(err);
        const failure = { queue: c.queue, id: row.id, attempt, attempts: row.max_attempts, error: message };
        if (attempt < row.max_attempts) {
          outcome = 'retried';
          const delay = backoffFor(row.backoff_ms, attempt);
          reportFailure(this.onFailure, { ...failure, outcome: 'retried', retry_in_ms: delay });
          await this.db
            .query(
              `UPDATE jobs SET state = 'waiting', attempts_made = $3, last_error = $4, locked_by = NULL, locked_until = NULL,
                      run_at = now() + ($5 || ' milliseconds')::interval
                WHERE queue = $1 AND id = $2 AND locked_by = $6`,
              [this.q(c.queue), row.id, attempt, message, String(delay), this.worker],
            )
            .catch(() => {});
          this.schedule(c, delay);
        } else {
          outcome = 'failed';
          reportFailure(this.onFailure, { ...failure, outcome: 'failed' });
          await this.finish(c.queue, row.id, 'failed', message, attempt);
        }
      } finally {
        jobDuration.observe({ queue: c.queue, outcome }, (performance.now() - started) / 1000);
        c.running.delete(row.id);
        this.schedule(c, 0);
      }
    })();
    c.running.set(row.id, p);
  }

  private async finish(
    queue: string,
    id: string,
    state: 'completed' | 'failed',
    error: string | null,
    attempts?: number,
  ): Promise<void> {
    await this.db
      .query(
        `UPDATE jobs SET state = $3, last_error = $4, finished_at = now(), locked_by = NULL, locked_until = NULL,
                attempts_made = COALESCE($5, attempts_made + CASE WHEN $3 = 'completed' THEN 1 ELSE 0 END)
          WHERE queue = $1 AND id = $2`,
        [this.q(queue), id, state, error, attempts ?? null],
      )
      .catch(() => {});
  }

  private async renewLeases(): Promise<void> {
    for (const c of this.consumers.values()) {
      if (!c.running.size) continue;
      await this.db
        .query(
          `UPDATE jobs SET locked_until = now() + ($3 || ' milliseconds')::interval
            WHERE queue = $1 AND id = ANY($2) AND locked_by = $4 AND state = 'active'`,
          [this.q(c.queue), [...c.running.keys()], String(this.leaseMs), this.worker],
        )
        .catch(() => {});
    }
  }

  async counts(queue: string): Promise<QueueCounts> {
    const rows = await this.db.query<{
      waiting: number;
      delayed: number;
      active: number;
      completed: number;
      failed: number;
    }>(
      `SELECT count(*) FILTER (WHERE state = 'waiting' AND run_at <= now())::int AS waiting,
              count(*) FILTER (WHERE state = 'waiting' AND run_at > now())::int AS delayed,
              count(*) FILTER (WHERE state = 'active')::int AS active,
              count(*) FILTER (WHERE state = 'completed')::int AS completed,
              count(*) FILTER (WHERE state = 'failed')::int AS failed
         FROM jobs WHERE queue = $1`,
      [this.q(queue)],
    );
    return rows[0]!;
  }

  async oldestWaitingSeconds(queue: string): Promise<number> {
    // run_at is when a job became runnable: its enqueueing, the end of its delay or of a retry's backoff.
    const rows = await this.db.query<{ age: number | null }>(
      `SELECT EXTRACT(EPOCH FROM now() - min(run_at))::float8 AS age
         FROM jobs WHERE queue = $1 AND state = 'waiting' AND run_at <= now()`,
      [this.q(queue)],
    );
    return Math.max(0, Number(rows[0]?.age ?? 0));
  }

  async remove(queue: string, jobId: string): Promise<boolean> {
    const rows = await this.db.query(
      `DELETE FROM jobs WHERE queue = $1 AND id = $2 AND state = 'waiting' RETURNING id`,
      [this.q(queue), jobId],
    );
    return rows.length > 0;
  }

  async pending(queue: string, jobId: string): Promise<boolean> {
    const rows = await this.db.query(
      `SELECT 1 FROM jobs WHERE queue = $1 AND id = $2 AND state IN ('waiting', 'active')`,
      [this.q(queue), jobId],
    );
    return rows.length > 0;
  }

  async ping(): Promise<void> {
    await this.db.query('SELECT 1 FROM jobs LIMIT 1');
  }

  async close(graceMs = 10_000): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    for (const c of this.consumers.values()) if (c.timer) clearTimeout(c.timer);
    const running = [...this.consumers.values()].flatMap((c) => [...c.running.values()]);
    await Promise.race([Promise.allSettled(running), new Promise((r) => setTimeout(r, graceMs).unref())]);
    if (this.heartbeat) clearInterval(this.heartbeat);
    // Whatever still runs is handed back: another process (or this one after a restart) takes it.
    for (const c of this.consumers.values()) {
      if (!c.running.size) continue;
      await this.db
        .query(
          `UPDATE jobs SET state = 'waiting', locked_by = NULL, locked_until = NULL WHERE queue = $1 AND id = ANY($2) AND locked_by = $3`,
          [this.q(c.queue), [...c.running.keys()], this.worker],
        )
        .catch(() => {});
    }
    for (const u of this.unobserve) u();
  }
}
