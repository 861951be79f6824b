/**
 * Fans outbox events out to webhooks. Each batch, in one transaction: take undispatched events
 * (SKIP LOCKED, so several workers share the work without doubling it), create one delivery per
 * (active subscribed webhook, event), mark the events dispatched. After the commit, one queue job
 * per delivery. If the process dies between the commit and the enqueue, the sweeper finds the
 * overdue pending deliveries and queues them again: nothing committed is lost.
 */
import { onOutboxCommit } from '../events/outbox.js';
import type { Database } from '../platform/database.js';
import { newId } from '../platform/ids.js';
import type { DeliveryJob } from './delivery.js';
import { enqueueDelivery, jobIdFor, WEBHOOK_QUEUE, type DeliveryQueue } from './service.js';

interface EventRow {
  id: string;
  account_id: string;
  type: string;
  data: Record<string, unknown>;
  created_at: Date;
}

export async function dispatchBatch(db: Database, queues: DeliveryQueue, limit = 500): Promise<{ events: number; deliveries: number }> {
  const created = await db.transaction(async (tx) => {
    const events = await tx.query<EventRow>(
      `SELECT id, account_id, type, data, created_at FROM outbox
        WHERE dispatched_at IS NULL ORDER BY seq LIMIT $1 FOR UPDATE SKIP LOCKED`,
      [limit],
    );
    if (!events.length) return { events: 0, ids: [] as string[] };
    const accounts = [...new Set(events.map((e) => e.account_id))];
    const hooks = await tx.query<{ id: string; account_id: string; events: string[] }>(
      `SELECT id, account_id, events FROM webhooks WHERE status = 'active' AND account_id = ANY($1)`,
      [accounts],
    );
    const cols: { id: string[]; webhook: string[]; account: string[]; event: string[]; type: string[]; body: string[] } = {
      id: [], webhook: [], account: [], event: [], type: [], body: [],
    };
    for (const e of events) {
      const body = JSON.stringify({ event: e.type, timestamp: e.created_at.toISOString(), data: e.data });
      for (const h of hooks) {
        if (h.account_id !== e.account_id || !(h.events.includes('*') || h.events.includes(e.type))) continue;
        cols.id.push(newId('dlv'));
        cols.webhook.push(h.id);
        cols.account.push(e.account_id);
        cols.event.push(e.id);
        cols.type.push(e.type);
        cols.body.push(body);
      }
    }
    let ids: string[] = [];
    if (cols.id.length) {
      const rows = await tx.query<{ id: string }>(
        `INSERT INTO deliveries (id, webhook_id, account_id, event_id, event_type, body, status, next_attempt_at, job_id)
         SELECT u.id, u.webhook_id, u.account_id, u.event_id, u.event_type, u.body, 'pending', now(), u.id || '.1'
           FROM unnest($1::text[], $2::text[], $3::text[], $4::text[], $5::text[], $6::text[])
                AS u(id, webhook_id, account_id, event_id, event_type, body)
         ON CONFLICT (webhook_id, event_id) DO NOTHING RETURNING id`,
        [cols.id, cols.webhook, cols.account, cols.event, cols.type, cols.body],
      );
      ids = rows.map((r) => r.id);
    }
    await tx.query('UPDATE outbox SET dispatched_at = now() WHERE id = ANY($1)', [events.map((e) => e.id)]);
    return { events: events.length, ids };
  });
  await enqueueAll(queues, created.ids.map((id) => ({ id, attempt: 1 })));
  return { events: created.events, deliveries: created.ids.length };
}

async function enqueueAll(queues: DeliveryQueue, items: Array<{ id: string; attempt: number }>): Promise<void> {
  const CHUNK = 100;
  for (let i = 0; i < items.length; i += CHUNK) {
    await Promise.all(
      items.slice(i, i + CHUNK).map((d) => queues.enqueue<DeliveryJob>(WEBHOOK_QUEUE, { delivery_id: d.id }, { jobId: jobIdFor(d.id, d.attempt) })),
    );
  }
}

/**
 * Re-queues pending deliveries that are overdue by more than `graceMs`, not claimed, and whose job
 * no longer exists: the ones whose job was lost (a crash between commit and enqueue, a flushed
 * queue). A delivery merely waiting in a long queue keeps its job and is left alone. The new job id
 * carries the sweep time so that a finished job with the usual id cannot swallow it; the claim keeps
 * a duplicate job from sending twice.
 */
export async function sweepOverdue(db: Database, queues: DeliveryQueue, graceMs = 60_000, limit = 1000): Promise<number> {
  const rows = await db.query<{ id: string; attempt_count: number; job_id: string | null }>(
    `SELECT d.id, d.attempt_count, d.job_id FROM deliveries d JOIN webhooks w ON w.id = d.webhook_id
      WHERE d.status = 'pending' AND w.status = 'active'
        AND d.next_attempt_at < now() - ($1 || ' milliseconds')::interval
        AND (d.claimed_until IS NULL OR d.claimed_until < now())
      ORDER BY d.next_attempt_at LIMIT $2`,
    [String(graceMs), limit],
  );
  const stamp = Date.now();
  let requeued = 0;
  for (const d of rows) {
    if (d.job_id && (await queues.pending(WEBHOOK_QUEUE, d.job_id))) continue;
    await enqueueDelivery(db, queues, d.id, `${jobIdFor(d.id, d.attempt_count + 1)}.sweep${stamp}`);
    requeued++;
  }
  return requeued;
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
    private readonly opts: { pollMs?: number; sweepMs?: number; sweepGraceMs?: number; onError?: (err: unknown) => void } = {},
  ) {}

  private unsubscribe: (() => void) | null = null;

  start(): void {
    this.stopped = false;
    this.unsubscribe = onOutboxCommit(this.wake);
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
      const r = await dispatchBatch(this.db, this.queues);
      busy = r.events > 0;
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
    this.schedule(more ? 0 : this.opts.pollMs ?? 250);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    this.unsubscribe?.();
    if (this.timer) clearTimeout(this.timer);
    while (this.running) await new Promise((r) => setTimeout(r, 10));
  }
}
