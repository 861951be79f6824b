/**
 * The worker role's subscription loop: every tick, the active subscriptions that are due (never
 * polled, last polled more than SUBSCRIPTION_POLL_INTERVAL ago, or asked for by POST …/poll; not
 * backing off; lease free or expired) are claimed one by one with a lease (so two workers never
 * poll one subscription at once, and a killed worker's subscriptions are taken again once its
 * lease runs out) and polled, at most `concurrency` at once. A running poll renews its lease; one
 * that lost it stops. A failing subscription is recorded and backed off by its poll and never
 * holds up the others.
 */
import { randomBytes } from 'node:crypto';
import os from 'node:os';
import { forgetExcept } from './metrics.js';
import { claimSubscription, pollSubscription, renewLease, type PollDeps, type PollResult } from './poller.js';

export interface SchedulerOptions {
  /** How often due subscriptions are looked for; 0: only when tick() is called (tests). */
  tickMs: number;
  /** Polls at once in this process. */
  concurrency: number;
  /** The lease holder's name (default: host, pid and a random part). */
  owner?: string;
  onError?: (err: unknown) => void;
}

export interface SubscriptionScheduler {
  readonly owner: string;
  /** Looks for due subscriptions now and waits for the polls it started. */
  tick(): Promise<PollResult[]>;
  /** Stops looking, stops running polls (their leases are given back) and waits for them. */
  stop(): Promise<void>;
}

/** Live subscriptions (for the metrics' series) are looked up at most this often. */
const LIVE_EVERY_MS = 60_000;

export function startSubscriptionScheduler(deps: PollDeps, opts: SchedulerOptions): SubscriptionScheduler {
  const owner = opts.owner ?? `${os.hostname()}:${process.pid}:${randomBytes(4).toString('hex')}`;
  const { intervalMs, leaseMs } = deps.settings;
  const running = new Map<string, { controller: AbortController; done: Promise<PollResult | null> }>();
  let stopped = false;
  let timer: NodeJS.Timeout | null = null;
  let liveAt = 0;

  const runOne = (id: string): Promise<PollResult | null> => {
    const controller = new AbortController();
    const done = (async () => {
      const sub = await claimSubscription(deps.db, id, owner, leaseMs);
      if (!sub) return null; // another worker took it
      const heartbeat = setInterval(
        () => {
          renewLease(deps.db, id, owner, leaseMs).then(
            (held) => {
              if (!held) controller.abort(new Error('subscription lease lost'));
            },
            (err) => opts.onError?.(err),
          );
        },
        Math.max(50, Math.floor(leaseMs / 3)),
      );
      heartbeat.unref();
      try {
        return await pollSubscription(deps, sub, owner, controller.signal);
      } finally {
        clearInterval(heartbeat);
      }
    })()
      .catch((err) => {
        opts.onError?.(err);
        return null;
      })
      .finally(() => running.delete(id));
    running.set(id, { controller, done });
    return done;
  };

  const tick = async (): Promise<PollResult[]> => {
    const free = opts.concurrency - running.size;
    if (stopped || free <= 0) return [];
    if (Date.now() - liveAt > LIVE_EVERY_MS) {
      liveAt = Date.now();
      const live = await deps.db.query<{ id: string }>("SELECT id FROM imagery_subscriptions WHERE status = 'active'");
      forgetExcept(new Set(live.map((r) => r.id)));
    }
    const due = await deps.db.query<{ id: string }>(
      `SELECT id FROM imagery_subscriptions
        WHERE status = 'active'
          AND (last_polled_at IS NULL OR last_polled_at <= now() - $1 * interval '1 millisecond' OR poll_requested_at IS NOT NULL)
          AND (next_poll_at IS NULL OR next_poll_at <= now())
          AND (lease_until IS NULL OR lease_until < now())
        ORDER BY poll_requested_at NULLS LAST, last_polled_at NULLS FIRST, id
        LIMIT $2`,
      [intervalMs, free + running.size],
    );
    const started = due
      .filter((r) => !running.has(r.id))
      .slice(0, free)
      .map((r) => runOne(r.id));
    const results = await Promise.all(started);
    return results.filter((r): r is PollResult => r !== null);
  };

  const loop = () => {
    if (stopped) return;
    // Not awaited by the timer: a long poll does not delay the look for other due subscriptions.
    tick().catch((err) => opts.onError?.(err));
    timer = setTimeout(loop, opts.tickMs);
    timer.unref();
  };
  if (opts.tickMs > 0) {
    timer = setTimeout(loop, 0);
    timer.unref();
  }

  return {
    owner,
    tick,
    async stop() {
      stopped = true;
      if (timer) clearTimeout(timer);
      for (const r of running.values()) r.controller.abort(new Error('worker stopping'));
      await Promise.all([...running.values()].map((r) => r.done));
    },
  };
}
