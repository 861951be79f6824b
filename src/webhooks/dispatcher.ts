/**
 * Fans outbox events out to webhooks. Events no webhook receives are written already dispatched
 * (events/outbox.ts) and never come here. Each batch, in one transaction: take undispatched events
 * and mark them dispatched, reading back only those an active webhook of their account subscribes
 * to (one statement; SKIP LOCKED, so several workers share the work without doubling it), then, if
 * any, the webhooks and one delivery per (active subscribed webhook, event) in one multi-row
 * INSERT. In a process that also delivers, the first attempts it has room for are inserted
 * claimed and handed to its sending slots after the commit (DirectSink, direct-sink.ts). The others
 * go to the queue in one bulk add, as jobs of up to `batchSize` deliveries of one webhook (a slow
 * endpoint holds up its own jobs only). If the process dies between the commit and the enqueue,
 * or with deliveries handed over, the sweeper finds the overdue pending deliveries once their
 * claims have lapsed and queues them again: nothing committed is lost.
 */
import { onOutboxCommit, outboxChannel } from '../events/index.js';
import type { Database } from '../platform/database.js';
import { newId } from '../platform/ids.js';
import type { Claimed } from './delivery-store.js';
import { DIRECT_MAX, type DirectSink } from './direct-sink.js';
import { enqueueDeliveries, jobIdFor, WEBHOOK_QUEUE, type DeliveryQueue } from './service.js';

interface Hook {
  id: string;
  account_id: string;
  events: string[];
  url: string;
  secret_sealed: string;
}

interface EventRow {
  id: string;
  seq: number;
  account_id: string;
  type: string;
  data: Record<string, unknown>;
  created_at: Date;
}

/**
 * `direct`: this process delivers too; the deliveries it has room for are inserted already claimed
 * and handed to it after the commit, without a queue job (see DirectSink); the rest are queued.
 */
export async function dispatchBatch(
  db: Database,
  queues: DeliveryQueue,
  limit = 500,
  batchSize = 50,
  direct?: DirectSink,
): Promise<{ events: number; deliveries: number; jobs: number; direct: number }> {
  const t0 = Date.now(); // before the transaction: the claim's lease ends no earlier than t0 + leaseMs
  const created = await db.transaction(async (tx) => {
    // One statement: take the next events (SKIP LOCKED: several workers share them without
    // doubling), mark them dispatched, and read back only those some active webhook of their
    // account subscribes to (by type or `*`); the others (their webhook disabled, deleted or
    // unsubscribed since they were written) need nothing more. `claimed` counts all of them, on
    // every row, and on the one row (of nulls otherwise) when none is read back.
    // The same statement reads the active webhooks of those events' accounts (on its first row
    // only): no second round trip inside the transaction.
    const rows = await tx.query<
      (EventRow | { [K in keyof EventRow]: null }) & { lease_until: Date; claimed: number; hooks: Hook[] | null }
    >(
      `WITH u AS (
         UPDATE outbox o SET dispatched_at = now()
          WHERE o.id IN (SELECT id FROM outbox WHERE dispatched_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED)
          RETURNING o.id, o.seq, o.account_id, o.type, o.data, o.created_at
       ), m AS (
         SELECT u.* FROM u
          WHERE EXISTS (SELECT 1 FROM webhooks w
                         WHERE w.account_id = u.account_id AND w.status = 'active' AND w.events && ARRAY[u.type, '*'])
       ), hk AS (
         SELECT json_agg(json_build_object('id', w.id, 'account_id', w.account_id, 'events', w.events, 'url', w.url,
                                           'secret_sealed', w.secret_sealed) ORDER BY w.id) AS hooks
           FROM webhooks w WHERE w.status = 'active' AND w.account_id IN (SELECT account_id FROM m)
       )
       SELECT m.id, m.seq::int8::float8 AS seq, m.account_id, m.type, m.data, m.created_at, c.claimed,
              date_trunc('milliseconds', now()) + ($2 || ' milliseconds')::interval AS lease_until,
              CASE WHEN row_number() OVER () = 1 THEN hk.hooks END AS hooks
         FROM (SELECT count(*)::int AS claimed FROM u) c CROSS JOIN hk LEFT JOIN m ON true`,
      [limit, String(direct?.leaseMs ?? 0)],
      { prepare: true },
    );
    const claimed = rows[0]?.claimed ?? 0;
    const hooks = rows[0]?.hooks ?? [];
    const events = rows.filter(
      (r): r is EventRow & { lease_until: Date; claimed: number; hooks: null } => r.id !== null,
    );
    if (!events.length)
      return {
        events: claimed,
        jobs: [] as Array<{ deliveryIds: string[]; jobId: string }>,
        direct: [] as Claimed[],
        token: null,
      };
    events.sort((a, b) => a.seq - b.seq);
    // The claim of the direct deliveries; exact to the millisecond, so it survives the round trip
    // as a Date and identifies the claim later (renewal).
    const token = events[0]!.lease_until;
    const cols: {
      id: string[];
      webhook: string[];
      account: string[];
      event: string[];
      type: string[];
      body: string[];
      job: (string | null)[];
    } = {
      id: [],
      webhook: [],
      account: [],
      event: [],
      type: [],
      body: [],
      job: [],
    };
    const jobs: Array<{ deliveryIds: string[]; jobId: string }> = [];
    const handed: Claimed[] = [];
    const bodies = new Map<string, string>();
    const now = new Date();
    // Webhook-major, events in order within each webhook; a job per run of `batchSize`.
    for (const h of hooks) {
      let job: { deliveryIds: string[]; jobId: string } | null = null;
      let room = direct ? direct.room(h.id) : 0;
      for (const e of events) {
        if (h.account_id !== e.account_id || !(h.events.includes('*') || h.events.includes(e.type))) continue;
        let body = bodies.get(e.id);
        if (body === undefined) {
          body = JSON.stringify({ event: e.type, timestamp: e.created_at.toISOString(), data: e.data });
          bodies.set(e.id, body);
        }
        const id = newId('dlv');
        cols.id.push(id);
        cols.webhook.push(h.id);
        cols.account.push(e.account_id);
        cols.event.push(e.id);
        cols.type.push(e.type);
        cols.body.push(body);
        if (room > 0) {
          room--;
          cols.job.push(null);
          handed.push({
            id,
            webhook_id: h.id,
            event_type: e.type,
            body,
            attempt_count: 0,
            cycle_base: 0,
            first_attempt_at: null,
            url: h.url,
            secret_sealed: h.secret_sealed,
            webhook_status: 'active',
            created_at: now,
          });
          continue;
        }
        if (!job || job.deliveryIds.length >= batchSize) {
          job = { deliveryIds: [], jobId: batchSize === 1 ? jobIdFor(id, 1) : `${id}.batch` };
          jobs.push(job);
        }
        job.deliveryIds.push(id);
        cols.job.push(job.jobId);
      }
    }
    let inserted: Set<string> | null = null;
    if (cols.id.length) {
      // A conflicting row (the pair fanned out already) is skipped; its job then finds nothing to
      // do for it, and it is not handed over. A direct delivery is inserted claimed (no job).
      const rows = await tx.query<{ id: string }>(
        `INSERT INTO deliveries (id, webhook_id, account_id, event_id, event_type, body, status, next_attempt_at, job_id, claimed_until)
         SELECT u.id, u.webhook_id, u.account_id, u.event_id, u.event_type, u.body, 'pending', now(), u.job_id,
                CASE WHEN u.job_id IS NULL THEN $8::timestamptz END
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[], $7::text[])
                AS u(id, webhook_id, account_id, event_id, event_type, body, job_id)
         ON CONFLICT (webhook_id, event_id) DO NOTHING
         RETURNING id`,
        [cols.id, cols.webhook, cols.account, cols.event, cols.type, cols.body, cols.job, token.toISOString()],
        { prepare: true },
      );
      if (handed.length && rows.length < cols.id.length) inserted = new Set(rows.map((r) => r.id));
    }
    return {
      events: claimed,
      jobs,
      direct: inserted ? handed.filter((d) => inserted!.has(d.id)) : handed,
      token,
    };
  });
  if (direct && created.direct.length) direct.deliver(created.direct, created.token!, t0 + direct.leaseMs);
  await enqueueDeliveries(db, queues, created.jobs, true);
  return {
    events: created.events,
    deliveries: created.jobs.reduce((n, j) => n + j.deliveryIds.length, 0) + created.direct.length,
    jobs: created.jobs.length,
    direct: created.direct.length,
  };
}

/**
 * Re-queues pending deliveries that are overdue by more than `graceMs`, not claimed, and whose job
 * no longer exists: the ones whose job was lost (a crash between commit and enqueue, a flushed
 * queue). A delivery merely waiting in a long queue keeps its job and is left alone. The new job id
 * carries the sweep time so that a finished job with the usual id cannot swallow it; the claim keeps
 * a duplicate job from sending twice.
 */
export async function sweepOverdue(
  db: Database,
  queues: DeliveryQueue,
  graceMs = 60_000,
  limit = 1000,
): Promise<number> {
  const rows = await db.query<{ id: string; attempt_count: number; job_id: string | null }>(
    `SELECT d.id, d.attempt_count, d.job_id FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.status = 'pending' AND w.status = 'active'
        AND d.next_attempt_at < now() - ($1 || ' milliseconds')::interval
        AND (d.claimed_until IS NULL OR d.claimed_until < now())
      ORDER BY d.next_attempt_at LIMIT $2`,
    [String(graceMs), limit],
  );
  const stamp = Date.now();
  const live = new Map<string, boolean>(); // a batch job is shared by many deliveries: ask once
  const lost: Array<{ deliveryIds: string[]; jobId: string }> = [];
  for (const d of rows) {
    if (d.job_id) {
      let pending = live.get(d.job_id);
      if (pending === undefined) {
        pending = await queues.pending(WEBHOOK_QUEUE, d.job_id);
        live.set(d.job_id, pending);
      }
      if (pending) continue;
    }
    lost.push({ deliveryIds: [d.id], jobId: `${jobIdFor(d.id, d.attempt_count + 1)}.sweep${stamp}` });
  }
  await enqueueDeliveries(db, queues, lost);
  return lost.length;
}

/**
 * Runs dispatch in a loop: immediately when woken (an emit in this process), otherwise every
 * `pollMs` (events written by other processes), and the sweeper every `sweepMs`.
 */
export class Dispatcher {
  private timer: NodeJS.Timeout | null = null;
  private running = false;
  private again = false;
  private stopped = false;
  private lastSweep = 0;
  constructor(
    private readonly db: Database,
    private readonly queues: DeliveryQueue,
    private readonly opts: {
      pollMs?: number;
      sweepMs?: number;
      sweepGraceMs?: number;
      batchSize?: number;
      direct?: DirectSink;
      onError?: (err: unknown) => void;
    } = {},
  ) {}

  /** Deliveries per event in the last batch (a first guess before any). */
  private fanout = 16;

  /**
   * Events to take now: with direct delivery, as many as the process has room for (at least a
   * quarter of DIRECT_MAX, else none until there is: the events wait in the outbox, where
   * another worker may take them); without, 500.
   */
  private limit(): number {
    const direct = this.opts.direct;
    if (!direct) return 500;
    const room = direct.totalRoom();
    if (room < DIRECT_MAX / 4) return 0;
    return Math.max(1, Math.min(500, Math.floor(room / this.fanout)));
  }

  private unsubscribe: (() => void) | null = null;
  private unlisten: Promise<(() => Promise<void>) | null> | null = null;

  start(): void {
    this.stopped = false;
    this.unsubscribe = onOutboxCommit(this.wake);
    // Events committed by other processes (the api role) wake it through PostgreSQL NOTIFY; the
    // poll stays as a fallback (a notification lost while the listening connection reconnects).
    this.unlisten = this.db.listen
      ? this.db.listen(outboxChannel(this.db.schema), this.wake).catch((err) => {
          this.opts.onError?.(err);
          return null;
        })
      : null;
    this.schedule(0);
  }

  wake = (): void => {
    if (this.stopped) return;
    if (this.running) this.again = true;
    else this.schedule(0);
  };

  private schedule(ms: number): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.tick(), ms);
  }

  private async tick(): Promise<void> {
    if (this.stopped) return;
    this.running = true;
    let busy = false;
    try {
      const limit = this.limit();
      if (limit > 0) {
        const r = await dispatchBatch(this.db, this.queues, limit, this.opts.batchSize, this.opts.direct);
        busy = r.events > 0;
        if (r.events) this.fanout = Math.max(1, r.deliveries / r.events);
      } else {
        this.opts.direct!.whenRoom(this.wake);
      }
      if (Date.now() - this.lastSweep > (this.opts.sweepMs ?? 30_000)) {
        this.lastSweep = Date.now();
        await sweepOverdue(this.db, this.queues, this.opts.sweepGraceMs ?? 60_000);
      }
    } catch (err) {
      this.opts.onError?.(err);
    } finally {
      this.running = false;
    }
    if (this.stopped) return;
    const more = busy || this.again;
    this.again = false;
    this.schedule(more ? 0 : (this.opts.pollMs ?? 250));
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    const unlisten = await this.unlisten;
    await unlisten?.().catch(() => {});
    if (this.timer) clearTimeout(this.timer);
    while (this.running) await new Promise((r) => setTimeout(r, 10));
  }
}
