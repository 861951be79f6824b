/**
 * The delivery worker, as a pipeline of small steps: claim → load → sign → send → record →
 * schedule. One job = one attempt of one delivery. The claim (a short lease on the delivery row)
 * keeps two workers from sending the same attempt; the delivery id in X-Service-Delivery lets
 * receivers drop the duplicates at-least-once delivery can still produce.
 *
 * Reading of "5 consecutive failed delivery attempts" (README): a delivery is tried once and then
 * retried after each delay of WEBHOOK_RETRY_DELAYS (five by default). When the last retry of one
 * delivery has failed and the webhook had no successful delivery since that delivery's first
 * attempt, the webhook is disabled and its other pending deliveries stop. A burst of failing
 * events therefore cannot disable an endpoint within minutes: every retry of the table is reached.
 * A 410 Gone disables at once.
 */
import type { Database, Sql } from '../platform/database.js';
import { postJson, type PostResult } from './outbound.js';
import { enqueueDelivery, jobIdFor, stopPendingDeliveries, type WebhookDeps } from './service.js';
import { webhookAttemptDuration, webhookDeliveries, webhookDeliveryLag } from './metrics.js';
import { signDelivery } from './signing.js';

export interface DeliveryJob {
  delivery_id: string;
}

interface Claimed {
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
  last_success_at: Date | null;
  created_at: Date;
}

export type AttemptOutcome = 'succeeded' | 'retry_scheduled' | 'failed' | 'webhook_disabled' | 'skipped';

/** Claims the next attempt of a pending delivery of an active webhook; null when there is nothing to do. */
async function claim(db: Database, deliveryId: string, leaseMs: number): Promise<Claimed | null> {
  const rows = await db.query<Claimed>(
    `UPDATE deliveries d SET claimed_until = now() + ($2 || ' milliseconds')::interval
       FROM webhooks w
      WHERE d.id = $1 AND w.id = d.webhook_id AND d.status = 'pending' AND w.status = 'active'
        AND (d.claimed_until IS NULL OR d.claimed_until < now())
      RETURNING d.id, d.webhook_id, d.event_type, d.body, d.attempt_count, d.cycle_base, d.first_attempt_at,
                w.url, w.secret_sealed, w.status AS webhook_status, w.last_success_at, d.created_at`,
    [deliveryId, String(leaseMs)],
  );
  return rows[0] ?? null;
}

function errorText(r: PostResult): string | null {
  if (r.error) return `${r.error.kind}: ${r.error.message}`;
  if (!r.ok) return `HTTP ${r.status}`;
  return null;
}

export async function attemptDelivery(deps: WebhookDeps, job: DeliveryJob): Promise<AttemptOutcome> {
  const outcome = await attemptOnce(deps, job);
  webhookDeliveries.inc({ outcome });
  return outcome;
}

async function attemptOnce(deps: WebhookDeps, job: DeliveryJob): Promise<AttemptOutcome> {
  // The claim outlives one attempt (timeout + margin) and no more: a worker that dies mid-send
  // releases the delivery to the sweeper soon after.
  const d = await claim(deps.db, job.delivery_id, deps.timeoutMs + 5_000);
  if (!d) return 'skipped';
  const attempt = d.attempt_count + 1;
  const raw = Buffer.from(d.body, 'utf8');
  const headers = signDelivery({ secret: deps.box.open(d.secret_sealed), event: d.event_type, deliveryId: d.id, rawBody: raw });
  const attemptedAt = new Date();
  const r = await postJson(d.url, raw, { ...headers }, { timeoutMs: deps.timeoutMs, allowPrivateNetworks: deps.allowPrivateNetworks, ca: deps.ca });
  webhookAttemptDuration.observe({ result: r.ok ? 'ok' : 'error' }, r.latencyMs / 1000);
  if (r.ok) webhookDeliveryLag.observe((Date.now() - new Date(d.created_at).getTime()) / 1000);
  const retryNumber = attempt - d.cycle_base; // 1 = first try of this run, 2 = first retry, ...
  const delays = deps.retryDelaysMs;

  const outcome = await deps.db.transaction(async (tx): Promise<AttemptOutcome> => {
    await tx.query(
      `INSERT INTO delivery_attempts (delivery_id, attempt, attempted_at, status_code, error, latency_ms)
       VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT DO NOTHING`,
      [d.id, attempt, attemptedAt, r.status ?? null, errorText(r), r.latencyMs],
    );
    const firstAttemptAt = d.first_attempt_at ?? attemptedAt;
    if (r.ok) {
      await tx.query(
        `UPDATE deliveries SET status = 'succeeded', attempt_count = $2, first_attempt_at = $3, next_attempt_at = NULL,
                claimed_until = NULL, last_error = NULL, updated_at = now() WHERE id = $1`,
        [d.id, attempt, firstAttemptAt],
      );
      await tx.query('UPDATE webhooks SET last_success_at = GREATEST(COALESCE(last_success_at, $2), $2) WHERE id = $1', [d.webhook_id, attemptedAt]);
      return 'succeeded';
    }
    if (r.status === 410) {
      await finishFailed(tx, d.id, attempt, firstAttemptAt, errorText(r));
      await disable(tx, d.webhook_id, 'the endpoint answered 410 Gone');
      return 'webhook_disabled';
    }
    if (retryNumber <= delays.length) {
      const delay = delays[retryNumber - 1]!;
      await tx.query(
        `UPDATE deliveries SET attempt_count = $2, first_attempt_at = $3, next_attempt_at = $4, claimed_until = NULL,
                last_error = $5, updated_at = now() WHERE id = $1`,
        [d.id, attempt, firstAttemptAt, new Date(Date.now() + delay), errorText(r)],
      );
      return 'retry_scheduled';
    }
    await finishFailed(tx, d.id, attempt, firstAttemptAt, errorText(r));
    const [wh] = await tx.query<{ last_success_at: Date | null }>('SELECT last_success_at FROM webhooks WHERE id = $1 FOR UPDATE', [d.webhook_id]);
    if (!wh?.last_success_at || wh.last_success_at < firstAttemptAt) {
      await disable(tx, d.webhook_id, `every retry of delivery ${d.id} failed (last: ${errorText(r)})`);
      return 'webhook_disabled';
    }
    return 'failed';
  });

  if (outcome === 'retry_scheduled') {
    await enqueueDelivery(deps.db, deps.queues, d.id, jobIdFor(d.id, attempt + 1), delays[retryNumber - 1]!);
  }
  return outcome;
}

async function finishFailed(tx: Sql, id: string, attempt: number, firstAttemptAt: Date, error: string | null): Promise<void> {
  await tx.query(
    `UPDATE deliveries SET status = 'failed', attempt_count = $2, first_attempt_at = $3, next_attempt_at = NULL,
            claimed_until = NULL, last_error = $4, updated_at = now() WHERE id = $1`,
    [id, attempt, firstAttemptAt, error],
  );
}

async function disable(tx: Sql, webhookId: string, reason: string): Promise<void> {
  await tx.query(
    `UPDATE webhooks SET status = 'disabled', disabled_reason = $2, disabled_at = now(), updated_at = now()
      WHERE id = $1 AND status = 'active'`,
    [webhookId, reason],
  );
  await stopPendingDeliveries(tx, webhookId, 'webhook_disabled');
}
