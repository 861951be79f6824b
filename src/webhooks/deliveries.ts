/** The delivery log of a webhook and manual re-sends. */
import type { Database } from '../platform/database.js';
import { AppError, notFound } from '../platform/errors.js';
import type { Delivery } from './schemas.js';
import { enqueueDelivery, type WebhookDeps } from './service.js';

interface Row {
  id: string;
  webhook_id: string;
  event_id: string;
  event_type: string;
  status: Delivery['status'];
  attempt_count: number;
  next_attempt_at: Date | null;
  stopped_reason: string | null;
  created_at: Date;
}

async function ownWebhook(db: Database, accountId: string, webhookId: string): Promise<void> {
  const rows = await db.query('SELECT 1 FROM webhooks WHERE id = $1 AND account_id = $2', [webhookId, accountId]);
  if (!rows.length) throw notFound('Webhook', webhookId);
}

async function withAttempts(db: Database, rows: Row[]): Promise<Delivery[]> {
  if (!rows.length) return [];
  const attempts = await db.query<{
    delivery_id: string;
    attempt: number;
    attempted_at: Date;
    status_code: number | null;
    error: string | null;
    latency_ms: number;
  }>(
    'SELECT delivery_id, attempt, attempted_at, status_code, error, latency_ms FROM delivery_attempts WHERE delivery_id = ANY($1) ORDER BY attempt',
    [rows.map((r) => r.id)],
  );
  return rows.map((r) => ({
    id: r.id,
    webhook_id: r.webhook_id,
    event_id: r.event_id,
    event_type: r.event_type,
    status: r.status,
    attempt_count: r.attempt_count,
    next_attempt_at: r.status === 'pending' && r.next_attempt_at ? r.next_attempt_at.toISOString() : null,
    stopped_reason: r.stopped_reason,
    created_at: r.created_at.toISOString(),
    attempts: attempts
      .filter((a) => a.delivery_id === r.id)
      .map((a) => ({
        attempt: a.attempt,
        attempted_at: a.attempted_at.toISOString(),
        status_code: a.status_code,
        error: a.error,
        latency_ms: Math.round(a.latency_ms * 10) / 10,
      })),
  }));
}

const COLUMNS =
  'id, webhook_id, event_id, event_type, status, attempt_count, next_attempt_at, stopped_reason, created_at';

export async function listDeliveries(
  db: Database,
  accountId: string,
  webhookId: string,
  q: { page: number; per_page: number; status?: string },
): Promise<{ data: Delivery[]; total: number }> {
  await ownWebhook(db, accountId, webhookId);
  const params = [webhookId, q.status ?? null];
  const where = 'webhook_id = $1 AND ($2::text IS NULL OR status = $2)';
  const [{ n }] = (await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM deliveries WHERE ${where}`,
    params,
  )) as [{ n: number }];
  const rows = await db.query<Row>(
    `SELECT ${COLUMNS} FROM deliveries WHERE ${where} ORDER BY created_at DESC, id LIMIT $3 OFFSET $4`,
    [...params, q.per_page, (q.page - 1) * q.per_page],
  );
  return { data: await withAttempts(db, rows), total: n };
}

export async function getDelivery(
  db: Database,
  accountId: string,
  webhookId: string,
  deliveryId: string,
): Promise<Delivery> {
  await ownWebhook(db, accountId, webhookId);
  const rows = await db.query<Row>(`SELECT ${COLUMNS} FROM deliveries WHERE id = $1 AND webhook_id = $2`, [
    deliveryId,
    webhookId,
  ]);
  if (!rows[0]) throw notFound('Delivery', deliveryId);
  return (await withAttempts(db, rows))[0]!;
}

export async function retryDelivery(
  deps: WebhookDeps,
  accountId: string,
  webhookId: string,
  deliveryId: string,
): Promise<Delivery> {
  await ownWebhook(deps.db, accountId, webhookId);
  const [wh] = await deps.db.query<{ status: string }>('SELECT status FROM webhooks WHERE id = $1', [webhookId]);
  if (wh?.status !== 'active') {
    throw new AppError(
      'webhook_disabled',
      'The webhook is disabled; re-enable it with PATCH {"status": "active"} first',
    );
  }
  const rows = await deps.db.query<{ id: string }>(
    `UPDATE deliveries SET status = 'pending', stopped_reason = NULL, cycle_base = attempt_count, first_attempt_at = NULL,
            next_attempt_at = now(), claimed_until = NULL, updated_at = now()
      WHERE id = $1 AND webhook_id = $2 RETURNING id`,
    [deliveryId, webhookId],
  );
  if (!rows[0]) throw notFound('Delivery', deliveryId);
  await enqueueDelivery(deps.db, deps.queues, deliveryId, `${deliveryId}.manual${Date.now()}`);
  return getDelivery(deps.db, accountId, webhookId, deliveryId);
}
