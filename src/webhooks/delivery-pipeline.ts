/**
 * One attempt of one claimed delivery, in three steps (as Svix's worker): prepare (sign the stored
 * body for this attempt), call (the HTTP request), handle (record the outcome; for a failure,
 * schedule the retry or stop: the webhook was disabled, or no retry is left).
 */
import type { AttemptRow, Claimed } from './delivery-store.js';
import type { Worker } from './delivery-worker.js';
import { webhookAttemptDuration, webhookDeliveryLag } from './metrics.js';
import { postJson, type PostResult } from './outbound.js';
import { jobIdFor, WEBHOOK_QUEUE, type WebhookDeps } from './service.js';
import { signDelivery, type SecretBox } from './signing.js';

export type AttemptOutcome = 'succeeded' | 'retry_scheduled' | 'failed' | 'webhook_disabled' | 'skipped';

/** A request ready to send. */
interface PendingDispatch {
  url: string;
  body: string;
  headers: Record<string, string>;
}

/** A request sent, with its result. */
export interface CompletedDispatch {
  d: Claimed;
  r: PostResult;
  attemptedAt: Date;
}

/** What to do after a failure: retry (after `delay`, as job `jobId`) or not. */
interface RetryPlan {
  retry: boolean;
  delay: number;
  jobId: string | null;
}

const opened = new Map<string, string>();
function openSecret(box: SecretBox, sealed: string): string {
  let s = opened.get(sealed);
  if (s === undefined) {
    s = box.open(sealed);
    if (opened.size >= 1000) opened.clear();
    opened.set(sealed, s);
  }
  return s;
}

/** prepare: the signed request of this attempt. */
function prepareDispatch(deps: WebhookDeps, d: Claimed): PendingDispatch {
  // The stored text, signed and sent as its UTF-8 bytes (HMAC.update and the request both encode
  // a string as UTF-8): the signature covers exactly the bytes on the wire.
  const body = d.body;
  const headers = signDelivery({
    secret: openSecret(deps.box, d.secret_sealed),
    event: d.event_type,
    deliveryId: d.id,
    rawBody: body,
  });
  return { url: d.url, body, headers: headers as unknown as Record<string, string> };
}

/** call: sends the request. */
async function makeHttpCall(deps: WebhookDeps, d: Claimed, p: PendingDispatch): Promise<CompletedDispatch> {
  const attemptedAt = new Date();
  const r = await postJson(p.url, p.body, p.headers, {
    timeoutMs: deps.timeoutMs,
    allowPrivateNetworks: deps.allowPrivateNetworks,
    ca: deps.ca,
    cacheResolution: true,
  });
  return { d, r, attemptedAt };
}

/** prepare → call: one attempt of a claimed delivery, sent. */
export function dispatch(deps: WebhookDeps, d: Claimed): Promise<CompletedDispatch> {
  return makeHttpCall(deps, d, prepareDispatch(deps, d));
}

function errorText(r: PostResult): string | null {
  if (r.error) return `${r.error.kind}: ${r.error.message}`;
  if (!r.ok) return `HTTP ${r.status}`;
  return null;
}

/** A failure is retried (except a 410 Gone) while the retry schedule has delays left. */
function retryPlan(deps: WebhookDeps, d: Claimed, r: PostResult, attempt: number): RetryPlan {
  const retryNumber = attempt - d.cycle_base; // 1 = first try of this run, 2 = first retry, ...
  const delays = deps.retryDelaysMs;
  const retry = !r.ok && r.status !== 410 && retryNumber <= delays.length;
  const delay = retry ? delays[retryNumber - 1]! : 0;
  const jobId = retry ? jobIdFor(d.id, attempt + 1) : null;
  return { retry, delay, jobId };
}

/** handle: records the attempt, then its outcome. */
export async function handleDispatch(
  deps: WebhookDeps,
  w: Worker,
  { d, r, attemptedAt }: CompletedDispatch,
): Promise<AttemptOutcome> {
  const attempt = d.attempt_count + 1;
  webhookAttemptDuration.observe({ result: r.ok ? 'ok' : 'error' }, r.latencyMs / 1000);
  if (r.ok) webhookDeliveryLag.observe((Date.now() - new Date(d.created_at).getTime()) / 1000);
  const plan = retryPlan(deps, d, r, attempt);
  const row: AttemptRow = {
    id: d.id,
    webhook_id: d.webhook_id,
    attempt,
    attempted_at: attemptedAt,
    status_code: r.status ?? null,
    error: errorText(r),
    latency_ms: r.latencyMs,
    first_attempt_at: d.first_attempt_at ?? attemptedAt,
    ok: r.ok,
    next_attempt_at: plan.retry ? new Date(Date.now() + plan.delay) : null,
    job_id: plan.jobId,
  };
  const disabled = await w.records.add(row);
  if (r.ok) return 'succeeded';
  return handleFailedDispatch(deps, d, plan, disabled);
}

async function handleFailedDispatch(
  deps: WebhookDeps,
  d: Claimed,
  plan: RetryPlan,
  disabled: boolean,
): Promise<AttemptOutcome> {
  // Disabled (by this failure or before it was recorded): the delivery was cancelled with the
  // webhook's other pending ones; no retry job.
  if (disabled) return 'webhook_disabled';
  if (!plan.retry) return 'failed';
  // Recorded first, queued second: a crash in between leaves a pending delivery whose job does
  // not exist, which the sweeper queues again.
  await deps.queues.enqueue(WEBHOOK_QUEUE, { delivery_id: d.id }, { jobId: plan.jobId!, delayMs: plan.delay });
  return 'retry_scheduled';
}
