/**
 * STAC API subscription metrics, per subscription (label `subscription`: its id). An exception to
 * "no ids in labels", as the operations view asks for per-subscription figures: the set is bounded
 * by the subscriptions that exist (SUBSCRIPTION limits per account), and the series of a
 * subscription that is no longer polled are dropped at the scheduler's next turn (forget()).
 * - subscription_polls_total{subscription, outcome}: ok | error | rate_limited
 * - subscription_items_total{subscription, outcome}: seen | registered | duplicate | skipped | failed
 *   (skipped: a malformed Item, skipped with a log line; failed: a transient failure, searched again)
 * - subscription_poll_duration_seconds{subscription}: claim to record
 * - subscription_lag_seconds{subscription}: now minus the newest Item datetime seen
 * - subscription_last_poll_age_seconds{subscription}: now minus the end of this process's last
 *   poll of it, any outcome (with several workers, the smallest across processes is the truth)
 */
import { Counter, Gauge, Histogram } from 'prom-client';
import { registry } from '../platform/metrics.js';

export type PollOutcome = 'ok' | 'error' | 'rate_limited';
export type ItemOutcome = 'seen' | 'registered' | 'duplicate' | 'skipped' | 'failed';

const polls = new Counter({
  name: 'subscription_polls_total',
  help: 'Polls of a STAC API subscription by outcome (ok, error, rate_limited)',
  labelNames: ['subscription', 'outcome'] as const,
  registers: [registry],
});

const items = new Counter({
  name: 'subscription_items_total',
  help: 'STAC Items of a subscription by outcome (seen, registered, duplicate, skipped, failed)',
  labelNames: ['subscription', 'outcome'] as const,
  registers: [registry],
});

const duration = new Histogram({
  name: 'subscription_poll_duration_seconds',
  help: 'Duration of one poll of a STAC API subscription (searches and registrations)',
  labelNames: ['subscription'] as const,
  buckets: [0.1, 0.5, 1, 5, 15, 60, 300, 1800],
  registers: [registry],
});

/** Newest Item datetime seen, per subscription (ms since the epoch); the gauge reads it at scrape time. */
const newest = new Map<string, number>();
/** Subscriptions with series in this process. */
const known = new Set<string>();

new Gauge({
  name: 'subscription_lag_seconds',
  help: "Now minus the datetime of the newest STAC Item a subscription's polls have seen",
  labelNames: ['subscription'] as const,
  registers: [registry],
  collect() {
    this.reset();
    const now = Date.now();
    for (const [id, at] of newest) this.set({ subscription: id }, Math.max(0, (now - at) / 1000));
  },
});

/** End of this process's last poll, per subscription (ms since the epoch). */
const lastPoll = new Map<string, number>();

new Gauge({
  name: 'subscription_last_poll_age_seconds',
  help: "Now minus the end of this process's last poll of a subscription (any outcome)",
  labelNames: ['subscription'] as const,
  registers: [registry],
  collect() {
    this.reset();
    const now = Date.now();
    for (const [id, at] of lastPoll) this.set({ subscription: id }, Math.max(0, (now - at) / 1000));
  },
});

export function recordPoll(id: string, outcome: PollOutcome, seconds: number): void {
  known.add(id);
  lastPoll.set(id, Date.now());
  polls.inc({ subscription: id, outcome });
  duration.observe({ subscription: id }, seconds);
}

export function recordItem(id: string, outcome: ItemOutcome): void {
  known.add(id);
  items.inc({ subscription: id, outcome });
}

export function recordNewest(id: string, at: Date | null): void {
  known.add(id);
  if (at) newest.set(id, at.getTime());
}

/** Drops the series of subscriptions not in `live` (deleted or paused). */
export function forgetExcept(live: ReadonlySet<string>): void {
  for (const id of known) {
    if (live.has(id)) continue;
    known.delete(id);
    newest.delete(id);
    lastPoll.delete(id);
    for (const outcome of ['ok', 'error', 'rate_limited']) polls.remove({ subscription: id, outcome });
    for (const outcome of ['seen', 'registered', 'duplicate', 'skipped', 'failed'])
      items.remove({ subscription: id, outcome });
    duration.remove({ subscription: id });
  }
}
