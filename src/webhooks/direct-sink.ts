/**
 * The in-process path of first attempts (see DirectSink): deliveries the dispatcher inserted
 * already claimed go straight to this process's sending slots, within its room.
 */
import type { Claimed } from './delivery-store.js';
import { dispatch, handleDispatch } from './delivery-pipeline.js';
import { directLeaseMs, RECORD_RETRY_MS, workerOf } from './delivery-worker.js';
import { directSinks, webhookDeliveries } from './metrics.js';
import { enqueueDeliveries, jobIdFor, type WebhookDeps } from './service.js';

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
      const sent = await w.endpoints(d.webhook_id, () =>
        w.slots(async () => {
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
          return dispatch(deps, d);
        }),
      );
      const outcome = sent ? await handleDispatch(deps, w, sent) : 'skipped';
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
      await deps.db.query(`UPDATE deliveries SET claimed_until = NULL WHERE id = ANY($1) AND status = 'pending'`, [
        back,
      ]);
      const stamp = Date.now();
      await enqueueDeliveries(
        deps.db,
        deps.queues,
        back.map((id) => ({ deliveryIds: [id], jobId: `${jobIdFor(id, 1)}.handback${stamp}` })),
      );
    },
  };
}
