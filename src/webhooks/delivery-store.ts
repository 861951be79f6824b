/**
 * The delivery worker's statements: claim pending deliveries, renew and release the claims of
 * direct deliveries, record attempts (with each webhook's failures in a row) and disable a webhook
 * that reached the limit. Each takes many rows in one statement (the worker batches them).
 */
import type { Database } from '../platform/database.js';
import { stopPendingDeliveries } from './service.js';

/** The spec's "consecutive failures before disabling". */
export const DISABLE_AFTER_FAILURES = 5;

export interface Claimed {
  id: string;
  webhook_id: string;
  event_type: string;
  body: string;
  attempt_count: number;
  cycle_base: number;
  first_attempt_at: Date | null;
  url: string;
  secret_sealed: string;
  webhook_status: string;
  created_at: Date;
}

/**
 * Claims the next attempt of the pending deliveries (of active webhooks) among `ids`. The rows are
 * found by primary key only: written as `d.status = 'pending'`, the condition lets the planner
 * AND a scan of the whole partial index of pending deliveries into the lookup, which made every
 * claim of a burst cost time in proportion to the backlog.
 */
export async function claim(db: Database, ids: string[], leaseMs: number): Promise<Claimed[]> {
  return db.query<Claimed>(
    `UPDATE deliveries d SET claimed_until = now() + ($2 || ' milliseconds')::interval
       FROM webhooks w
      WHERE d.id = ANY($1) AND w.id = d.webhook_id AND (d.status || '') = 'pending' AND w.status = 'active'
        AND (d.claimed_until IS NULL OR d.claimed_until < now())
      RETURNING d.id, d.webhook_id, d.event_type, d.body, d.attempt_count, d.cycle_base, d.first_attempt_at,
                w.url, w.secret_sealed, w.status AS webhook_status, d.created_at`,
    [ids, String(leaseMs)],
    { prepare: true },
  );
}

/**
 * Extends the claims of direct deliveries, only where the claim is still the one the dispatcher
 * made (its exact expiry is the token): one that lapsed and was taken by a queue job meanwhile
 * stays with that job. Returns each item's new expiry, or null.
 */
export async function renewClaims(
  db: Database,
  items: Array<{ id: string; token: Date }>,
  leaseMs: number,
): Promise<Array<Date | null>> {
  const rows = await db.query<{ id: string; claimed_until: Date }>(
    `UPDATE deliveries d SET claimed_until = date_trunc('milliseconds', now()) + ($3 || ' milliseconds')::interval
       FROM unnest($1::text[], $2::timestamptz[]) AS u(id, token), webhooks w
      WHERE d.id = u.id AND d.claimed_until = u.token AND (d.status || '') = 'pending' AND w.id = d.webhook_id AND w.status = 'active'
      RETURNING d.id, d.claimed_until`,
    [items.map((i) => i.id), items.map((i) => i.token.toISOString()), String(leaseMs)],
  );
  const renewed = new Map(rows.map((r) => [r.id, r.claimed_until]));
  return items.map((i) => renewed.get(i.id) ?? null);
}

/** Gives back the claims of direct deliveries that will not be sent (if still the dispatcher's). */
export async function releaseClaims(db: Database, items: Array<{ id: string; token: Date }>): Promise<void> {
  await db.query(
    `UPDATE deliveries d SET claimed_until = NULL FROM unnest($1::text[], $2::timestamptz[]) AS u(id, token) WHERE d.id = u.id AND d.claimed_until = u.token`,
    [items.map((i) => i.id), items.map((i) => i.token.toISOString())],
  );
}

export interface AttemptRow {
  id: string;
  webhook_id: string;
  attempt: number;
  attempted_at: Date;
  status_code: number | null;
  error: string | null;
  latency_ms: number;
  first_attempt_at: Date;
  /** A 2xx. */
  ok: boolean;
  /** Set: a failure whose retry is scheduled then (with job_id); null: a success or a last failure. */
  next_attempt_at: Date | null;
  job_id: string | null;
}

/** A webhook whose count the record changed: its state afterwards, and whether it answered 410. */
export interface Failing {
  id: string;
  status: string;
  consecutive_failures: number;
  gone: boolean;
}

/** Runs `fn` again when PostgreSQL picked it as a deadlock's victim (it rolled back: nothing done). */
async function onDeadlockRetry<T>(fn: () => Promise<T>): Promise<T> {
  for (let tries = 1; ; tries++) {
    try {
      return await fn();
    } catch (err) {
      if ((err as { code?: string }).code !== '40P01' || tries >= 3) throw err; // 40P01: deadlock
    }
  }
}

/**
 * Records many attempt results in one statement: the attempts, the deliveries' new state, and per
 * webhook its failures in a row and last success. A success marks the delivery succeeded, a last
 * failure (no retry left, or 410) failed; a scheduled retry keeps the delivery's status (one
 * cancelled meanwhile stays cancelled). Within the batch the rows are in the order their outcomes
 * came in: a webhook's count becomes its failures after its last success in the batch, or grows by
 * all of them. Only attempts this statement inserted count, so running it again after a lost
 * answer (or a deadlock) counts nothing twice. Returns the webhooks it updated, with their state.
 *
 * Successes only, on a webhook with no failures counted whose last_success_at is less than a
 * second older than theirs, leave its row alone: a busy endpoint's row is not rewritten (and
 * locked until commit, the delivering workers queueing on it) by every batch. The trade:
 * last_success_at (not shown by the API) may lag the last success by up to a second. A
 * concurrent failure is still counted; a success racing it either resets the count or, if it
 * saw the count at 0, is ordered before it, as either order is possible.
 */
export async function recordAttempts(db: Database, rows: AttemptRow[]): Promise<Failing[]> {
  return onDeadlockRetry(() =>
    db.query<Failing>(
      `WITH r AS (
         -- ok as 0/1: postgres.js cannot send an array of booleans.
         SELECT u.*, u.ok01 = 1 AS ok
           FROM unnest($1::text[], $2::text[], $3::int[], $4::timestamptz[], $5::int[], $6::text[], $7::float8[],
                       $8::timestamptz[], $9::timestamptz[], $10::text[], $11::int[])
                WITH ORDINALITY AS u(id, webhook_id, attempt, attempted_at, status_code, error, latency_ms, first_attempt_at, next_attempt_at, job_id, ok01, ord)
       ), ins AS (
         INSERT INTO delivery_attempts (delivery_id, attempt, attempted_at, status_code, error, latency_ms)
         SELECT id, attempt, attempted_at, status_code, error, latency_ms FROM r ON CONFLICT DO NOTHING
         RETURNING delivery_id, attempt
       ), upd AS (
         UPDATE deliveries d
            SET status = CASE WHEN r.ok THEN 'succeeded' WHEN r.next_attempt_at IS NULL THEN 'failed' ELSE d.status END,
                attempt_count = r.attempt, first_attempt_at = r.first_attempt_at, next_attempt_at = r.next_attempt_at,
                claimed_until = NULL, last_error = r.error, job_id = COALESCE(r.job_id, d.job_id), updated_at = now()
           FROM r WHERE d.id = r.id
       ), x AS (
         SELECT r.webhook_id, r.ok, r.ord, r.attempted_at, max(r.ord) FILTER (WHERE r.ok) OVER (PARTITION BY r.webhook_id) AS last_ok
           FROM r JOIN ins ON ins.delivery_id = r.id AND ins.attempt = r.attempt
       ), n AS (
         SELECT h.webhook_id, h.gone,
                COALESCE(bool_or(x.ok), false) AS reset,
                count(x.ord) FILTER (WHERE NOT x.ok AND x.ord > COALESCE(x.last_ok, 0))::int AS fails,
                max(x.attempted_at) FILTER (WHERE x.ok) AS ok_at
           FROM (SELECT webhook_id, bool_or(status_code = 410) AS gone FROM r GROUP BY webhook_id) h
           LEFT JOIN x ON x.webhook_id = h.webhook_id
          GROUP BY h.webhook_id, h.gone
       ), w AS (
         UPDATE webhooks w
            SET consecutive_failures = CASE WHEN n.reset THEN 0 ELSE w.consecutive_failures END + n.fails,
                last_success_at = CASE WHEN n.ok_at IS NULL THEN w.last_success_at ELSE GREATEST(COALESCE(w.last_success_at, n.ok_at), n.ok_at) END
           FROM n
          WHERE w.id = n.webhook_id
            AND (n.reset AND (w.consecutive_failures <> 0 OR w.last_success_at IS NULL
                              OR n.ok_at >= w.last_success_at + interval '1 second')
                 OR n.fails > 0 OR n.gone OR w.status <> 'active' OR w.consecutive_failures >= $12)
          RETURNING w.id, w.status, w.consecutive_failures
       )
       SELECT w.id, w.status, w.consecutive_failures, n.gone FROM w JOIN n ON n.webhook_id = w.id`,
      [
        rows.map((r) => r.id),
        rows.map((r) => r.webhook_id),
        rows.map((r) => r.attempt),
        // Timestamps as ISO text: postgres.js cannot type an array of Date objects.
        rows.map((r) => r.attempted_at.toISOString()),
        rows.map((r) => r.status_code),
        rows.map((r) => r.error),
        rows.map((r) => r.latency_ms),
        rows.map((r) => r.first_attempt_at.toISOString()),
        rows.map((r) => r.next_attempt_at?.toISOString() ?? null),
        rows.map((r) => r.job_id),
        rows.map((r) => (r.ok ? 1 : 0)),
        DISABLE_AFTER_FAILURES,
      ],
      { prepare: true },
    ),
  );
}

/**
 * Disables a webhook that reached the limit, with its pending deliveries, in one transaction; only
 * if it is still active and still at the limit (a success recorded meanwhile keeps it active).
 * Returns whether this call disabled it.
 */
export async function disableFailing(db: Database, h: Failing, rows: AttemptRow[]): Promise<boolean> {
  const last = rows.filter((r) => r.webhook_id === h.id && !r.ok).at(-1)?.error ?? 'unknown';
  const reason = h.gone
    ? 'the endpoint answered 410 Gone'
    : `${h.consecutive_failures} consecutive failed delivery attempts (last: ${last})`;
  return onDeadlockRetry(() =>
    db.transaction(async (tx) => {
      const hit = await tx.query(
        `UPDATE webhooks SET status = 'disabled', disabled_reason = $2, disabled_at = now(), updated_at = now()
          WHERE id = $1 AND status = 'active' AND (consecutive_failures >= $3 OR $4) RETURNING id`,
        [h.id, reason, DISABLE_AFTER_FAILURES, h.gone],
      );
      if (hit.length) await stopPendingDeliveries(tx, h.id, 'webhook_disabled');
      return hit.length > 0;
    }),
  );
}
