/**
 * The delivery worker, as a pipeline of small steps: claim → sign → send → record → schedule.
 * A job attempts one delivery (a retry, a replay, a manual re-send) or a batch of first attempts
 * (the dispatcher's fan-out); first attempts handed over directly by this process's dispatcher
 * skip the queue and the claim (directSink). The claim (a short lease on the delivery rows, one statement for the
 * batch) keeps two workers from sending the same attempt; the delivery id in X-Service-Delivery
 * lets receivers drop the duplicates at-least-once delivery can still produce. Claims, and the
 * outcomes of the deliveries at the same stage at about the same time in this process, are
 * written together (Batcher: one statement for many).
 *
 * Disabling ("5 consecutive failed delivery attempts", docs/api.md): the webhook counts its failed
 * attempts in a row across all its deliveries (webhooks.consecutive_failures), in the order the
 * outcomes are recorded; a 2xx sets it back to 0. The count is kept by the statement that records
 * the attempts (the webhook row's lock orders concurrent workers; an attempt recorded twice is
 * counted once). At DISABLE_AFTER_FAILURES, or on a 410 Gone, the webhook is disabled and its
 * pending deliveries are cancelled (stopped_reason webhook_disabled: PATCH {"status": "active",
 * "replay": true} sends them again); attempts already in flight finish and are recorded.
 */
import type { Database } from '../platform/database.js';
import { backendUnavailable } from '../platform/unavailable.js';
import { CONNECTIONS_PER_ENDPOINT, postJson, type PostResult } from './outbound.js';
import { enqueueDeliveries, jobIdFor, stopPendingDeliveries, WEBHOOK_QUEUE, type WebhookDeps } from './service.js';
import { directSinks, webhookAttemptDuration, webhookDeliveries, webhookDeliveryLag } from './metrics.js';
import { signDelivery, type SecretBox } from './signing.js';

/** The spec's "consecutive failures before disabling". */
export const DISABLE_AFTER_FAILURES = 5;

export interface DeliveryJob {
  /** One delivery (retries, replays, manual re-sends, the sweeper). */
  delivery_id?: string;
  /** First attempts of a batch of deliveries (the dispatcher's fan-out). */
  delivery_ids?: string[];
}

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

export type AttemptOutcome = 'succeeded' | 'retry_scheduled' | 'failed' | 'webhook_disabled' | 'skipped';

/**
 * Claims the next attempt of the pending deliveries (of active webhooks) among `ids`. The rows are
 * found by primary key only: written as `d.status = 'pending'`, the condition lets the planner
 * AND a scan of the whole partial index of pending deliveries into the lookup, which made every
 * claim of a burst cost time in proportion to the backlog.
 */
async function claim(db: Database, ids: string[], leaseMs: number): Promise<Claimed[]> {
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

function errorText(r: PostResult): string | null {
  if (r.error) return `${r.error.kind}: ${r.error.message}`;
  if (!r.ok) return `HTTP ${r.status}`;
  return null;
}

/**
 * Runs one queue job: attempts each of its deliveries; resolves when all are recorded. Each
 * delivery is claimed once it has a sending slot (claims of deliveries that get a slot together
 * are one statement), so that the claim's lease (the timeout + 5 s) covers the send itself and not
 * the wait for a slot: a worker that dies mid-send releases the delivery to the sweeper soon after.
 */
export async function processDeliveryJob(deps: WebhookDeps, job: DeliveryJob): Promise<AttemptOutcome[]> {
  const ids = job.delivery_ids ?? (job.delivery_id ? [job.delivery_id] : []);
  const w = workerOf(deps);
  return Promise.all(
    ids.map(async (id) => {
      const sent = await w.slots.run(async () => {
        const d = await w.claims.add(id);
        return d ? await send(deps, d) : null;
      });
      const outcome = sent ? await settle(deps, w, sent.d, sent.r, sent.attemptedAt) : 'skipped';
      webhookDeliveries.inc({ outcome });
      return outcome;
    }),
  );
}

/** One attempt of one delivery (the job of a retry), with its outcome. */
export async function attemptDelivery(deps: WebhookDeps, job: { delivery_id: string }): Promise<AttemptOutcome> {
  return (await processDeliveryJob(deps, { delivery_id: job.delivery_id }))[0]!;
}

/** Limits the HTTP requests in flight per process; a waiting attempt's timeout has not started. */
class Slots {
  private free: number;
  private readonly waiting: Array<() => void> = [];
  constructor(n: number) {
    this.free = n;
  }
  idle(n: number): boolean {
    return this.free === n && this.waiting.length === 0;
  }
  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.free > 0) this.free--;
    else await new Promise<void>((r) => this.waiting.push(r));
    try {
      return await fn();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.free++;
    }
  }
}

/**
 * Direct deliveries in flight per webhook (CONNECTIONS_PER_ENDPOINT, the connections the agent
 * keeps per endpoint): one slow endpoint cannot take every slot of the process, and a request
 * does not wait for a connection inside the HTTP agent, where its timeout would already run. A
 * delivery takes its webhook's slot before a process slot, so a waiting one holds no process slot.
 */
class EndpointSlots {
  private readonly slots = new Map<string, Slots>();
  constructor(private readonly n: number) {}
  async run<T>(key: string, fn: () => Promise<T>): Promise<T> {
    let s = this.slots.get(key);
    if (!s) this.slots.set(key, (s = new Slots(this.n)));
    try {
      return await s.run(fn);
    } finally {
      if (s.idle(this.n)) this.slots.delete(key);
    }
  }
}

/**
 * Group commit: the first item is written at once (next turn of the event loop); the items that
 * arrive while that write runs are written together by the next one, in one statement.
 *
 * Writes run one at a time, so one that never settles would hold up every later claim, record and
 * renewal of the process for good: postgres.js can leave a query unsettled when its connection is
 * cut mid-flight (a PostgreSQL restart). A write that has not settled within `timeoutMs` therefore
 * fails its batch (the callers treat it as the database being unavailable: a claim is not taken, an
 * outcome not recorded, so the delivery's claim lapses and the sweeper sends it again; receivers
 * de-duplicate) and the next batch goes ahead. Its late result, if any, is ignored.
 */
export class Batcher<I, R> {
  private queue: Array<{ item: I; resolve: (r: R) => void; reject: (e: unknown) => void }> = [];
  private writing = false;
  constructor(
    private readonly write: (items: I[]) => Promise<R[]>,
    private readonly maxBatch = 500,
    private readonly timeoutMs = BATCH_WRITE_TIMEOUT_MS,
  ) {}

  add(item: I): Promise<R> {
    return new Promise<R>((resolve, reject) => {
      this.queue.push({ item, resolve, reject });
      if (!this.writing) {
        this.writing = true;
        setImmediate(() => void this.drain());
      }
    });
  }

  private async drain(): Promise<void> {
    while (this.queue.length) {
      const batch = this.queue.splice(0, this.maxBatch);
      let timer: NodeJS.Timeout | undefined;
      try {
        const write = this.write(batch.map((b) => b.item));
        write.catch(() => {}); // settles after the timeout: nobody waits for it any more
        const results = await Promise.race([
          write,
          new Promise<never>((_, reject) => {
            timer = setTimeout(() => reject(new BatchWriteTimeout(this.timeoutMs)), this.timeoutMs);
          }),
        ]);
        batch.forEach((b, i) => b.resolve(results[i]!));
      } catch (err) {
        for (const b of batch) b.reject(err);
      } finally {
        clearTimeout(timer);
      }
    }
    this.writing = false;
  }
}

/** How long one group write may take before its batch fails and the next one goes ahead. */
export const BATCH_WRITE_TIMEOUT_MS = 30_000;

export class BatchWriteTimeout extends Error {
  constructor(ms: number) {
    super(`database write did not settle within ${ms} ms`);
    this.name = 'BatchWriteTimeout';
  }
}

interface Worker {
  slots: Slots;
  endpoints: EndpointSlots;
  claims: Batcher<string, Claimed | null>;
  /** Extends the claim of a direct delivery that waited long for a slot (see directSink). */
  renewals: Batcher<{ id: string; token: Date }, Date | null>;
  /** Resolves true for a failure whose webhook is disabled now: no retry is scheduled. */
  records: Batcher<AttemptRow, boolean>;
  /** Gives back the claim of a direct delivery that will not be sent (its webhook was disabled). */
  releases: Batcher<{ id: string; token: Date }, null>;
  /**
   * Direct deliveries handed over and not yet recorded, in total and per webhook; `stopped`: when
   * this process learnt that a webhook it holds some for was disabled (those not started by then
   * are not sent).
   */
  direct: { total: number; byWebhook: Map<string, number>; waiters: Set<() => void>; stopped: Map<string, number> };
}

const workers = new WeakMap<WebhookDeps, Worker>();
function workerOf(deps: WebhookDeps): Worker {
  let w = workers.get(deps);
  if (!w) {
    const leaseMs = deps.timeoutMs + 5_000;
    w = {
      slots: new Slots(deps.concurrency ?? 128),
      endpoints: new EndpointSlots(CONNECTIONS_PER_ENDPOINT),
      claims: new Batcher(async (ids) => {
        const rows = new Map((await claim(deps.db, ids, leaseMs)).map((d) => [d.id, d]));
        return ids.map((id) => rows.get(id) ?? null);
      }),
      renewals: new Batcher(async (items) => {
        // Only a claim that is still the one the dispatcher made (its exact expiry is the token):
        // one that lapsed and was taken by a queue job meanwhile stays with that job.
        const rows = await deps.db.query<{ id: string; claimed_until: Date }>(
          `UPDATE deliveries d SET claimed_until = date_trunc('milliseconds', now()) + ($3 || ' milliseconds')::interval
             FROM unnest($1::text[], $2::timestamptz[]) AS u(id, token), webhooks w
            WHERE d.id = u.id AND d.claimed_until = u.token AND (d.status || '') = 'pending' AND w.id = d.webhook_id AND w.status = 'active'
            RETURNING d.id, d.claimed_until`,
          [items.map((i) => i.id), items.map((i) => i.token.toISOString()), String(directLeaseMs(deps))],
        );
        const renewed = new Map(rows.map((r) => [r.id, r.claimed_until]));
        return items.map((i) => renewed.get(i.id) ?? null);
      }),
      releases: new Batcher(async (items) => {
        await deps.db.query(
          `UPDATE deliveries d SET claimed_until = NULL FROM unnest($1::text[], $2::timestamptz[]) AS u(id, token) WHERE d.id = u.id AND d.claimed_until = u.token`,
          [items.map((i) => i.id), items.map((i) => i.token.toISOString())],
        );
        return items.map(() => null);
      }),
      direct: { total: 0, byWebhook: new Map(), waiters: new Set(), stopped: new Map() },
      records: new Batcher(async (rows) => {
        // Sent but not recorded is the one way a success gets sent again (the claim lapses and the
        // sweeper re-queues it): through a short database outage (a restart), keep trying for up
        // to RECORD_RETRY_MS, well inside the claim's lease.
        const end = Date.now() + RECORD_RETRY_MS;
        for (;;) {
          try {
            // Run again after a lost answer, the statement counts nothing twice and still names
            // the webhooks to disable; disabling one twice changes nothing.
            const stopped = new Set<string>(); // disabled now (by this write or before it)
            const hooks = await recordAttempts(deps.db, rows);
            for (const h of hooks) {
              const limit = h.status === 'active' && (h.consecutive_failures >= DISABLE_AFTER_FAILURES || h.gone);
              if (h.status !== 'active' || (limit && (await disableFailing(deps.db, h, rows)))) stopped.add(h.id);
            }
            for (const id of stopped) if (w!.direct.byWebhook.has(id)) w!.direct.stopped.set(id, Date.now());
            return rows.map((r) => !r.ok && stopped.has(r.webhook_id));
          } catch (err) {
            if (!backendUnavailable(err) || Date.now() >= end) throw err;
            await new Promise((r) => setTimeout(r, 250));
          }
        }
      }),
    };
    workers.set(deps, w);
  }
  return w!;
}

/** How long recording an attempt's outcome is retried through a database outage. */
const RECORD_RETRY_MS = 4_000;

/**
 * The claim of a direct delivery: the timeout, the record retries and some slack, so that one
 * that waited up to about 5 s for a slot still needs no renewal.
 */
function directLeaseMs(deps: WebhookDeps): number {
  return deps.timeoutMs + RECORD_RETRY_MS + 10_000;
}

/** Direct deliveries a process holds at most (handed over, not yet recorded), and per webhook. */
export const DIRECT_MAX = 2048;
export const DIRECT_MAX_PER_WEBHOOK = 256;

/**
 * The in-process path of first attempts. When the dispatcher runs in a process that also delivers
 * (ROLE=worker, or the single embedded process), it inserts the deliveries it hands over here
 * already claimed (claimed_until = `token`, lease `leaseMs`) and gives them to this process's
 * sending slots: no queue job, no claim statement, no round trip through the queue. Nothing is
 * lost if the process dies: the rows are committed and pending, and once the claim has lapsed the
 * sweeper queues them like any lost job. A delivery that waited so long for a slot that its claim
 * might lapse during the request renews it first, and only if the claim is still the dispatcher's
 * (the token): one that lapsed and was taken by another worker is left to it.
 *
 * Room: at most DIRECT_MAX deliveries in the process and DIRECT_MAX_PER_WEBHOOK per webhook; the
 * dispatcher sends the rest through the queue (a slow endpoint's backlog goes to the queue and
 * does not hold up the others), and takes fewer events from the outbox while the process is full
 * (they stay there for another worker, or for this one once there is room). Webhooks at their own
 * limit do not count against the process's, so slow endpoints never stop the dispatcher.
 */
export interface DirectSink {
  readonly leaseMs: number;
  /** Deliveries of this webhook the process takes now. */
  room(webhookId: string): number;
  /** Deliveries the process takes now, in total (webhooks at their own limit left out). */
  totalRoom(): number;
  /** Runs `fn` once the process has room again for a quarter of DIRECT_MAX. */
  whenRoom(fn: () => void): void;
  deliver(rows: Claimed[], token: Date, deadline: number): void;
  /** Stops taking deliveries, waits up to `graceMs`, then hands the ones not started to the queue. */
  drain(graceMs: number): Promise<void>;
}

export function directSink(deps: WebhookDeps, onError: (err: unknown) => void = () => {}): DirectSink {
  const w = workerOf(deps);
  const leaseMs = directLeaseMs(deps);
  const st = w.direct;
  let closed = false;
  const waiting = new Set<string>(); // handed over, request not started
  const handback = new Set<string>(); // reached a slot after drain() began: not sent
  const gauge = { total: () => st.total, waiting: () => waiting.size };
  directSinks.add(gauge);
  const used = () => {
    let n = st.total;
    for (const c of st.byWebhook.values()) if (c >= DIRECT_MAX_PER_WEBHOOK) n -= c;
    return n;
  };
  const done = (d: Claimed) => {
    st.total--;
    const c = (st.byWebhook.get(d.webhook_id) ?? 1) - 1;
    if (c > 0) st.byWebhook.set(d.webhook_id, c);
    else {
      st.byWebhook.delete(d.webhook_id);
      st.stopped.delete(d.webhook_id);
    }
    if (st.waiters.size && DIRECT_MAX - used() >= DIRECT_MAX / 4) {
      const fns = [...st.waiters];
      st.waiters.clear();
      for (const f of fns) f();
    }
  };
  const one = async (d: Claimed, token: Date, deadline: number, handedAt: number): Promise<void> => {
    try {
      const sent = await w.endpoints.run(d.webhook_id, () =>
        w.slots.run(async () => {
          if (closed) {
            handback.add(d.id);
            return null;
          }
          waiting.delete(d.id);
          if ((st.stopped.get(d.webhook_id) ?? -1) >= handedAt) {
            // Its webhook was disabled while it waited: cancelled with the other pending ones.
            await w.releases.add({ id: d.id, token });
            return null;
          }
          if (Date.now() + deps.timeoutMs + RECORD_RETRY_MS + 1_000 > deadline) {
            const renewedAt = Date.now();
            if (!(await w.renewals.add({ id: d.id, token }))) return null;
            deadline = renewedAt + leaseMs;
          }
          return send(deps, d);
        }),
      );
      const outcome = sent ? await settle(deps, w, sent.d, sent.r, sent.attemptedAt) : 'skipped';
      webhookDeliveries.inc({ outcome });
    } catch (err) {
      // Not recorded (the database is unavailable): the claim lapses and the sweeper queues it.
      onError(err);
    } finally {
      waiting.delete(d.id);
      done(d);
    }
  };
  return {
    leaseMs,
    room: (webhookId) => (closed ? 0 : Math.max(0, DIRECT_MAX_PER_WEBHOOK - (st.byWebhook.get(webhookId) ?? 0))),
    totalRoom: () => (closed ? 0 : Math.max(0, DIRECT_MAX - used())),
    whenRoom: (fn) => void st.waiters.add(fn),
    deliver(rows, token, deadline) {
      const now = Date.now();
      for (const d of rows) {
        st.total++;
        st.byWebhook.set(d.webhook_id, (st.byWebhook.get(d.webhook_id) ?? 0) + 1);
        waiting.add(d.id);
        void one(d, token, deadline, now);
      }
    },
    async drain(graceMs) {
      closed = true;
      const end = Date.now() + graceMs;
      while (st.total > 0 && Date.now() < end) await new Promise((r) => setTimeout(r, 20));
      // Requests not started: their claims are released and they go to the queue (another
      // worker, or this one after a restart); a request still running keeps its claim until it
      // lapses, then the sweeper takes it.
      const back = [...new Set([...handback, ...waiting])];
      handback.clear();
      waiting.clear();
      directSinks.delete(gauge);
      if (!back.length) return;
      await deps.db.query(`UPDATE deliveries SET claimed_until = NULL WHERE id = ANY($1) AND status = 'pending'`, [back]);
      const stamp = Date.now();
      await enqueueDeliveries(deps.db, deps.queues, back.map((id) => ({ deliveryIds: [id], jobId: `${jobIdFor(id, 1)}.handback${stamp}` })));
    },
  };
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

async function send(deps: WebhookDeps, d: Claimed): Promise<{ d: Claimed; r: PostResult; attemptedAt: Date }> {
  // The stored text, signed and sent as its UTF-8 bytes (HMAC.update and the request both encode
  // a string as UTF-8): the signature covers exactly the bytes on the wire.
  const raw = d.body;
  const headers = signDelivery({ secret: openSecret(deps.box, d.secret_sealed), event: d.event_type, deliveryId: d.id, rawBody: raw });
  const attemptedAt = new Date();
  const r = await postJson(d.url, raw, headers as unknown as Record<string, string>, { timeoutMs: deps.timeoutMs, allowPrivateNetworks: deps.allowPrivateNetworks, ca: deps.ca, cacheResolution: true });
  return { d, r, attemptedAt };
}

async function settle(deps: WebhookDeps, w: Worker, d: Claimed, r: PostResult, attemptedAt: Date): Promise<AttemptOutcome> {
  const attempt = d.attempt_count + 1;
  webhookAttemptDuration.observe({ result: r.ok ? 'ok' : 'error' }, r.latencyMs / 1000);
  if (r.ok) webhookDeliveryLag.observe((Date.now() - new Date(d.created_at).getTime()) / 1000);
  const retryNumber = attempt - d.cycle_base; // 1 = first try of this run, 2 = first retry, ...
  const delays = deps.retryDelaysMs;
  const retry = !r.ok && r.status !== 410 && retryNumber <= delays.length;
  const delay = retry ? delays[retryNumber - 1]! : 0;
  const jobId = retry ? jobIdFor(d.id, attempt + 1) : null;
  const disabled = await w.records.add({
    id: d.id, webhook_id: d.webhook_id, attempt, attempted_at: attemptedAt, status_code: r.status ?? null, error: errorText(r),
    latency_ms: r.latencyMs, first_attempt_at: d.first_attempt_at ?? attemptedAt, ok: r.ok,
    next_attempt_at: retry ? new Date(Date.now() + delay) : null, job_id: jobId,
  });
  if (r.ok) return 'succeeded';
  // Disabled (by this failure or before it was recorded): the delivery was cancelled with the
  // webhook's other pending ones; no retry job.
  if (disabled) return 'webhook_disabled';
  if (!retry) return 'failed';
  // Recorded first, queued second: a crash in between leaves a pending delivery whose job does
  // not exist, which the sweeper queues again.
  await deps.queues.enqueue(WEBHOOK_QUEUE, { delivery_id: d.id }, { jobId: jobId!, delayMs: delay });
  return 'retry_scheduled';
}

interface AttemptRow {
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
interface Failing {
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
 */
async function recordAttempts(db: Database, rows: AttemptRow[]): Promise<Failing[]> {
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
          WHERE w.id = n.webhook_id AND (n.reset OR n.fails > 0 OR n.gone OR w.status = 'active' AND w.consecutive_failures >= $12)
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
async function disableFailing(db: Database, h: Failing, rows: AttemptRow[]): Promise<boolean> {
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
