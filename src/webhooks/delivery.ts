/**
 * The delivery worker: claim, then the pipeline prepare → call → handle (delivery-pipeline.ts:
 * sign, send, record, schedule).
 * A job attempts one delivery (a retry, a replay, a manual re-send) or a batch of first attempts
 * (the dispatcher's fan-out); first attempts handed over directly by this process's dispatcher
 * skip the queue and the claim (directSink). The claim (a short lease on the delivery rows, one
 * statement for the batch) keeps two workers from sending the same attempt; the delivery id in X-Service-Delivery
 * lets receivers drop the duplicates at-least-once delivery can still produce. Claims, and the
 * outcomes of the deliveries at the same stage at about the same time in this process, are
 * written together (delivery-worker.ts: one statement for many). The statements are
 * delivery-store.ts; the in-process path of first attempts direct-sink.ts.
 *
 * Disabling ("5 consecutive failed delivery attempts", docs/api.md): the webhook counts its failed
 * attempts in a row across all its deliveries (webhooks.consecutive_failures), in the order the
 * outcomes are recorded; a 2xx sets it back to 0. The count is kept by the statement that records
 * the attempts (the webhook row's lock orders concurrent workers; an attempt recorded twice is
 * counted once). At DISABLE_AFTER_FAILURES, or on a 410 Gone, the webhook is disabled and its
 * pending deliveries are cancelled (stopped_reason webhook_disabled: PATCH {"status": "active",
 * "replay": true} sends them again); attempts already in flight finish and are recorded.
 */
import { type AttemptOutcome, dispatch, handleDispatch } from './delivery-pipeline.js';
import { workerOf } from './delivery-worker.js';
import { webhookDeliveries } from './metrics.js';
import type { WebhookDeps } from './service.js';

export type { AttemptOutcome } from './delivery-pipeline.js';
export { type DirectSink, directSink } from './direct-sink.js';

export interface DeliveryJob {
  /** One delivery (retries, replays, manual re-sends, the sweeper). */
  delivery_id?: string;
  /** First attempts of a batch of deliveries (the dispatcher's fan-out). */
  delivery_ids?: string[];
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
      const sent = await w.slots(async () => {
        const d = await w.claims.add(id);
        return d ? await dispatch(deps, d) : null;
      });
      const outcome = sent ? await handleDispatch(deps, w, sent) : 'skipped';
      webhookDeliveries.inc({ outcome });
      return outcome;
    }),
  );
}

/** One attempt of one delivery (the job of a retry), with its outcome. */
export async function attemptDelivery(deps: WebhookDeps, job: { delivery_id: string }): Promise<AttemptOutcome> {
  return (await processDeliveryJob(deps, { delivery_id: job.delivery_id }))[0]!;
}
