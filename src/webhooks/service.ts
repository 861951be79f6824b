/**
 * Webhook registration and management. Registration sends `webhook.test` at once and stores the
 * webhook only when the endpoint answered 200 within the timeout; the secret (given or generated)
 * is sealed at rest and a generated one is returned once, in the creation response.
 */
import { randomBytes } from 'node:crypto';
import type { Database } from '../platform/database.js';
import { AppError, notFound, RefusedInput, type FieldIssue } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { OutboundError, postJson, resolveTarget, type PostResult } from './outbound.js';
import type { Webhook, WebhookCreate, WebhookPatch } from './schemas.js';
import { SUBSCRIBABLE } from './schemas.js';
import { generateSecret, signDelivery, type SecretBox } from './signing.js';

/** The part of the job queues webhooks use (structural, so any backend fits). */
export interface DeliveryQueue {
  enqueue<T>(queue: string, data: T, opts?: { delayMs?: number; jobId?: string }): Promise<string>;
  enqueueMany<T>(
    queue: string,
    jobs: Array<{ data: T; opts?: { delayMs?: number; jobId?: string } }>,
  ): Promise<string[]>;
  remove(queue: string, jobId: string): Promise<boolean>;
  pending(queue: string, jobId: string): Promise<boolean>;
}

/** Queues the next attempt of a delivery and remembers the job, for the sweeper. */
export async function enqueueDelivery(
  db: { query: Database['query'] },
  queues: DeliveryQueue,
  deliveryId: string,
  jobId: string,
  delayMs = 0,
): Promise<void> {
  await queues.enqueue(WEBHOOK_QUEUE, { delivery_id: deliveryId }, { jobId, delayMs });
  await db.query('UPDATE deliveries SET job_id = $2 WHERE id = $1', [deliveryId, jobId]);
}

/**
 * Queues jobs that each attempt one or more deliveries, in one round trip, then records each
 * delivery's job (one statement) for the sweeper. `recorded`: the job ids are already stored.
 */
export async function enqueueDeliveries(
  db: { query: Database['query'] },
  queues: DeliveryQueue,
  jobs: Array<{ deliveryIds: string[]; jobId: string; delayMs?: number }>,
  recorded = false,
): Promise<void> {
  if (!jobs.length) return;
  await queues.enqueueMany(
    WEBHOOK_QUEUE,
    jobs.map((j) => ({
      data: j.deliveryIds.length === 1 ? { delivery_id: j.deliveryIds[0]! } : { delivery_ids: j.deliveryIds },
      opts: { jobId: j.jobId, delayMs: j.delayMs ?? 0 },
    })),
  );
  if (recorded) return;
  const ids = jobs.flatMap((j) => j.deliveryIds);
  const jobIds = jobs.flatMap((j) => j.deliveryIds.map(() => j.jobId));
  await db.query(
    'UPDATE deliveries d SET job_id = u.job_id FROM unnest($1::text[], $2::text[]) AS u(id, job_id) WHERE d.id = u.id',
    [ids, jobIds],
  );
}

export const WEBHOOK_QUEUE = 'webhooks';

export interface WebhookDeps {
  db: Database;
  queues: DeliveryQueue;
  box: SecretBox;
  retryDelaysMs: number[];
  timeoutMs: number;
  allowPrivateNetworks: boolean;
  maxPerAccount: number;
  /** Extra trusted CAs (tests); production uses the system store + NODE_EXTRA_CA_CERTS. */
  ca?: string[];
  /** Called after deliveries were queued or state changed, so the dispatcher wakes at once. */
  wake?: () => void;
  /** HTTP requests in flight per process (WEBHOOK_CONCURRENCY); default 128. */
  concurrency?: number;
}

interface WebhookRow {
  id: string;
  url: string;
  events: string[];
  status: 'active' | 'disabled';
  disabled_reason: string | null;
  consecutive_failures: number;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = 'id, url, events, status, disabled_reason, consecutive_failures, created_at, updated_at';

function toWebhook(r: WebhookRow): Webhook {
  return {
    id: r.id,
    url: r.url,
    events: r.events,
    status: r.status,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
    disabled_reason: r.disabled_reason,
    consecutive_failures: r.consecutive_failures,
  };
}

function checkEvents(events: string[], path: string): void {
  const issues: FieldIssue[] = [];
  events.forEach((e, i) => {
    if (e !== '*' && !(SUBSCRIBABLE as readonly string[]).includes(e)) {
      issues.push({
        path: `${path}/${i}`,
        code: 'unknown_event',
        message: `"${e}" is not an event type; use one of ${SUBSCRIBABLE.join(', ')} or *`,
      });
    }
  });
  if (issues.length)
    throw new AppError('validation_failed', issues.map((i) => i.message).join('; '), { errors: issues });
}

async function checkUrl(url: string, allowPrivate: boolean, path: string): Promise<void> {
  try {
    await resolveTarget(url, allowPrivate);
  } catch (err) {
    throw err instanceof OutboundError ? new RefusedInput(err, path) : err;
  }
}

function describeFailure(r: PostResult, timeoutMs: number): string {
  if (r.error) {
    switch (r.error.kind) {
      case 'timeout':
        return `the endpoint did not answer within ${timeoutMs / 1000} s`;
      case 'tls':
        return `the TLS handshake failed (${r.error.message}); the certificate must be valid for the host and trusted`;
      case 'dns':
        return `the host could not be resolved (${r.error.message})`;
      case 'blocked_address':
        return `the host is not a public address (${r.error.message})`;
      default:
        return `the endpoint could not be reached (${r.error.message})`;
    }
  }
  return `the endpoint answered ${r.status}; it must answer 200`;
}

/** Sends `webhook.test` with a random challenge; throws 422 unless the answer is 200 in time. */
async function testEndpoint(deps: WebhookDeps, url: string, secret: string): Promise<void> {
  const deliveryId = newId('dlv');
  const raw = Buffer.from(
    JSON.stringify({
      event: 'webhook.test',
      timestamp: new Date().toISOString(),
      data: { challenge: randomBytes(24).toString('base64url') },
    }),
  );
  const headers = signDelivery({ secret, event: 'webhook.test', deliveryId, rawBody: raw });
  const r = await postJson(
    url,
    raw,
    { ...headers },
    { timeoutMs: deps.timeoutMs, allowPrivateNetworks: deps.allowPrivateNetworks, ca: deps.ca },
  );
  if (r.ok && r.status === 200) return;
  throw new AppError(
    'webhook_test_failed',
    `The webhook.test delivery failed: ${describeFailure(r, deps.timeoutMs)}. Nothing was stored.`,
    {
      extra: {
        test_delivery: {
          status_code: r.status ?? null,
          error: r.error?.kind ?? (r.ok ? 'non_200_status' : 'http_status'),
          latency_ms: Math.round(r.latencyMs),
        },
      },
    },
  );
}

export async function createWebhook(deps: WebhookDeps, accountId: string, input: WebhookCreate): Promise<Webhook> {
  checkEvents(input.events, '/body/events');
  await checkUrl(input.url, deps.allowPrivateNetworks, '/body/url');
  const [{ n }] = (await deps.db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhooks WHERE account_id = $1', [
    accountId,
  ])) as [{ n: number }];
  if (n >= deps.maxPerAccount) {
    throw new AppError(
      'webhook_limit_reached',
      `An account may register at most ${deps.maxPerAccount} webhooks; delete one first`,
    );
  }
  const generated = input.secret === undefined;
  const secret = input.secret ?? generateSecret();
  await testEndpoint(deps, input.url, secret);
  const rows = await deps.db.query<WebhookRow>(
    `INSERT INTO webhooks (id, account_id, url, events, secret_sealed, status) VALUES ($1, $2, $3, $4, $5, 'active') RETURNING ${COLUMNS}`,
    [newId('wh'), accountId, input.url, input.events, deps.box.seal(secret)],
  );
  const wh = toWebhook(rows[0]!);
  return generated ? { ...wh, secret } : wh;
}

export async function getWebhook(db: Database, accountId: string, id: string): Promise<Webhook> {
  const rows = await db.query<WebhookRow>(`SELECT ${COLUMNS} FROM webhooks WHERE id = $1 AND account_id = $2`, [
    id,
    accountId,
  ]);
  if (!rows[0]) throw notFound('Webhook', id);
  return toWebhook(rows[0]);
}

export async function listWebhooks(
  db: Database,
  accountId: string,
  q: { page: number; per_page: number },
): Promise<{ data: Webhook[]; total: number }> {
  const [{ n }] = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM webhooks WHERE account_id = $1', [
    accountId,
  ])) as [{ n: number }];
  const rows = await db.query<WebhookRow>(
    `SELECT ${COLUMNS} FROM webhooks WHERE account_id = $1 ORDER BY created_at, id LIMIT $2 OFFSET $3`,
    [accountId, q.per_page, (q.page - 1) * q.per_page],
  );
  return { data: rows.map(toWebhook), total: n };
}

/**
 * `status: active` re-enables (the failures in a row count from 0 again, as after a new url passed
 * its test); with `replay: true` the deliveries stopped or failed while it was disabled are queued
 * again. A new url is tested like at registration before anything is changed.
 */
export async function updateWebhook(
  deps: WebhookDeps,
  accountId: string,
  id: string,
  patch: WebhookPatch,
): Promise<Webhook> {
  if (patch.events) checkEvents(patch.events, '/body/events');
  if (patch.replay && patch.status !== 'active') {
    throw new AppError('validation_failed', 'replay goes with status: active', {
      errors: [{ path: '/body/replay', code: 'requires_status_active', message: 'replay goes with status: active' }],
    });
  }
  const current = await deps.db.query<WebhookRow & { secret_sealed: string; disabled_at: Date | null }>(
    `SELECT ${COLUMNS}, secret_sealed, disabled_at FROM webhooks WHERE id = $1 AND account_id = $2`,
    [id, accountId],
  );
  const row = current[0];
  if (!row) throw notFound('Webhook', id);
  if (patch.url !== undefined && patch.url !== row.url) {
    await checkUrl(patch.url, deps.allowPrivateNetworks, '/body/url');
    await testEndpoint(deps, patch.url, deps.box.open(row.secret_sealed));
  }
  const replayIds = await deps.db.transaction(async (tx) => {
    const enabling = patch.status === 'active' && row.status === 'disabled';
    const disabling = patch.status === 'disabled' && row.status === 'active';
    await tx.query(
      `UPDATE webhooks SET url = COALESCE($3, url), events = COALESCE($4, events),
              status = COALESCE($5, status),
              disabled_reason = CASE WHEN $6 THEN NULL WHEN $7 THEN 'disabled by the account' ELSE disabled_reason END,
              disabled_at = CASE WHEN $6 THEN NULL WHEN $7 THEN now() ELSE disabled_at END,
              consecutive_failures = CASE WHEN $6 OR $3::text <> url THEN 0 ELSE consecutive_failures END,
              updated_at = now()
        WHERE id = $1 AND account_id = $2`,
      [id, accountId, patch.url ?? null, patch.events ?? null, patch.status ?? null, enabling, disabling],
    );
    if (disabling) await stopPendingDeliveries(tx, id, 'webhook_disabled');
    if (!(enabling && patch.replay)) return [];
    const since = row.disabled_at ?? new Date(0);
    const replay = await tx.query<{ id: string }>(
      `UPDATE deliveries SET status = 'pending', stopped_reason = NULL, cycle_base = attempt_count, first_attempt_at = NULL,
              next_attempt_at = now(), updated_at = now()
        WHERE webhook_id = $1 AND (status = 'cancelled' AND stopped_reason = 'webhook_disabled'
                                   OR status = 'failed' AND updated_at >= $2)
        RETURNING id`,
      [id, since],
    );
    return replay.map((r) => r.id);
  });
  const stamp = Date.now();
  await enqueueDeliveries(
    deps.db,
    deps.queues,
    replayIds.map((dlv) => ({ deliveryIds: [dlv], jobId: `${dlv}.replay${stamp}` })),
  );
  return getWebhook(deps.db, accountId, id);
}

export async function stopPendingDeliveries(
  tx: { query: Database['query'] },
  webhookId: string,
  reason: string,
): Promise<string[]> {
  const rows = await tx.query<{ id: string }>(
    `UPDATE deliveries SET status = 'cancelled', stopped_reason = $2, next_attempt_at = NULL, updated_at = now()
      WHERE webhook_id = $1 AND status = 'pending' RETURNING id`,
    [webhookId, reason],
  );
  return rows.map((r) => r.id);
}

/** Deletes the webhook; its pending deliveries stop at once (cancelled rows, queued jobs removed). */
export async function deleteWebhook(deps: WebhookDeps, accountId: string, id: string): Promise<void> {
  const pending = await deps.db.transaction(async (tx) => {
    const hit = await tx.query<{ id: string }>('SELECT id FROM webhooks WHERE id = $1 AND account_id = $2 FOR UPDATE', [
      id,
      accountId,
    ]);
    if (!hit[0]) throw notFound('Webhook', id);
    const rows = await tx.query<{ id: string; job_id: string | null }>(
      `SELECT id, job_id FROM deliveries WHERE webhook_id = $1 AND status = 'pending'`,
      [id],
    );
    await tx.query('DELETE FROM webhooks WHERE id = $1', [id]);
    return rows;
  });
  // The rows are gone with the webhook, so a job that still runs finds nothing and sends nothing;
  // removing the jobs just keeps the queue clean.
  await Promise.all(
    pending.filter((d) => d.job_id).map((d) => deps.queues.remove(WEBHOOK_QUEUE, d.job_id!).catch(() => false)),
  );
}

export function jobIdFor(deliveryId: string, attempt: number): string {
  return `${deliveryId}.${attempt}`;
}
