/**
 * Webhook delivery metrics. Outcome labels are a closed set (AttemptOutcome); never ids in labels.
 * - webhook_deliveries_total{outcome}: attempts by outcome (succeeded, retry_scheduled, failed,
 *   webhook_disabled, skipped).
 * - webhook_delivery_duration_seconds{result}: one HTTP attempt, connect to last byte (result: ok | error).
 * - webhook_delivery_lag_seconds: from the event's creation to its successful delivery.
 * - webhook_direct_deliveries{state}: first attempts handed to this process's sending slots
 *   without a queue job (state: waiting = no slot yet, in_flight = request or record running);
 *   jobs_queue_depth does not see them.
 * - webhook_endpoints_failing: active webhooks whose last FAILING_AFTER (3) or more attempts all
 *   failed, read from the database at scrape time by each delivering process (the same figure from
 *   each: take max). Counts endpoints without naming them: no ids in labels.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import type { Database } from '../platform/database.js';
import { registry } from '../platform/metrics.js';

export const webhookDeliveries = new Counter({
  name: 'webhook_deliveries_total',
  help: 'Webhook delivery attempts by outcome',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

// Every outcome from the start, so that a first failure is an increase from 0 for rate() and increase().
for (const outcome of ['succeeded', 'retry_scheduled', 'failed', 'webhook_disabled', 'skipped'])
  webhookDeliveries.inc({ outcome }, 0);

export const webhookAttemptDuration = new Histogram({
  name: 'webhook_delivery_duration_seconds',
  help: 'Duration of one webhook HTTP attempt, connect to last byte, by result',
  labelNames: ['result'] as const,
  buckets: [0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10],
  registers: [registry],
});

export const webhookDeliveryLag = new Histogram({
  name: 'webhook_delivery_lag_seconds',
  help: 'Time from an event being emitted to its successful delivery',
  buckets: [0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 300, 3600],
  registers: [registry],
});

/** Direct-path counters of each sink in this process (see directSink in direct-sink.ts). */
export const directSinks = new Set<{ total(): number; waiting(): number }>();

export const webhookDirectDeliveries = new Gauge({
  name: 'webhook_direct_deliveries',
  help: 'First attempts handed to this process without a queue job, by state (waiting for a slot, in flight)',
  labelNames: ['state'] as const,
  registers: [registry],
  collect() {
    let total = 0;
    let waiting = 0;
    for (const s of directSinks) {
      total += s.total();
      waiting += s.waiting();
    }
    this.set({ state: 'waiting' }, waiting);
    this.set({ state: 'in_flight' }, total - waiting);
  },
});

/** Failed attempts in a row from which an active webhook counts as failing (it is disabled at 5). */
export const FAILING_AFTER = 3;

const failingCounts = new Set<() => Promise<number>>();

new Gauge({
  name: 'webhook_endpoints_failing',
  help: `Active webhooks whose last ${FAILING_AFTER} or more delivery attempts all failed (consecutive_failures)`,
  registers: [registry],
  async collect() {
    const [count] = failingCounts;
    if (!count) return;
    let timer: NodeJS.Timeout | undefined;
    const late = new Promise<never>((_, reject) => {
      timer = setTimeout(() => reject(new Error('no answer in 1 s')), 1000);
    });
    try {
      this.set(await Promise.race([count(), late]));
    } catch {
      /* the database does not answer: the last figure stays (dependency_up says why) */
    } finally {
      clearTimeout(timer);
    }
  },
});

/** Reports this database's failing webhooks in webhook_endpoints_failing until the returned function is called. */
export function observeFailingEndpoints(db: Database): () => void {
  const count = async () => {
    const rows = await db.query<{ n: number }>(
      `SELECT count(*)::int AS n FROM webhooks WHERE status = 'active' AND consecutive_failures >= $1`,
      [FAILING_AFTER],
    );
    return Number(rows[0]?.n ?? 0);
  };
  failingCounts.add(count);
  return () => void failingCounts.delete(count);
}
