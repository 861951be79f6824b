/**
 * Webhook delivery metrics. Outcome labels are a closed set (AttemptOutcome); never ids in labels.
 * - webhook_deliveries_total{outcome}: attempts by outcome (succeeded, retry_scheduled, failed,
 *   webhook_disabled, skipped).
 * - webhook_delivery_duration_seconds{result}: one HTTP attempt, connect to last byte (result: ok | error).
 * - webhook_delivery_lag_seconds: from the event's creation to its successful delivery.
 * - webhook_direct_deliveries{state}: first attempts handed to this process's sending slots
 *   without a queue job (state: waiting = no slot yet, in_flight = request or record running);
 *   jobs_queue_depth does not see them.
 */
import { Counter, Gauge, Histogram } from 'prom-client';
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
