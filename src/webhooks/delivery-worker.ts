/**
 * What one process's delivery worker shares between its jobs (one per WebhookDeps): the sending
 * limits and the group writes (Batcher: the claims, renewals, releases and outcomes of the
 * deliveries at the same stage at about the same time go in one statement).
 *
 * A group write that does not settle in time fails its batch (BatchWriteTimeout); the callers
 * treat it as the database being unavailable: a claim is not taken, an outcome not recorded, so
 * the delivery's claim lapses and the sweeper sends it again (receivers de-duplicate).
 */
import { Batcher } from '../platform/batcher.js';
import { backendUnavailable } from '../platform/http/problems.js';
import { keyedLimit, type KeyedLimit, limit, type Limit } from '../platform/limit.js';
import {
  type AttemptRow,
  claim,
  type Claimed,
  DISABLE_AFTER_FAILURES,
  disableFailing,
  recordAttempts,
  releaseClaims,
  renewClaims,
} from './delivery-store.js';
import { CONNECTIONS_PER_ENDPOINT } from './outbound.js';
import type { WebhookDeps } from './service.js';

export interface Worker {
  /** The HTTP requests in flight in the process; a waiting attempt's timeout has not started. */
  slots: Limit;
  /**
   * Direct deliveries in flight per webhook (CONNECTIONS_PER_ENDPOINT, the connections the agent
   * keeps per endpoint): one slow endpoint cannot take every slot of the process, and a request
   * does not wait for a connection inside the HTTP agent, where its timeout would already run. A
   * delivery takes its webhook's slot before a process slot, so a waiting one holds no process slot.
   */
  endpoints: KeyedLimit;
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

/** How long recording an attempt's outcome is retried through a database outage. */
export const RECORD_RETRY_MS = 4_000;

/**
 * The claim of a direct delivery: the timeout, the record retries and some slack, so that one
 * that waited up to about 5 s for a slot still needs no renewal.
 */
export function directLeaseMs(deps: WebhookDeps): number {
  return deps.timeoutMs + RECORD_RETRY_MS + 10_000;
}

const workers = new WeakMap<WebhookDeps, Worker>();

export function workerOf(deps: WebhookDeps): Worker {
  let w = workers.get(deps);
  if (!w) {
    w = newWorker(deps);
    workers.set(deps, w);
  }
  return w;
}

function newWorker(deps: WebhookDeps): Worker {
  const leaseMs = deps.timeoutMs + 5_000;
  const w: Worker = {
    slots: limit(deps.concurrency ?? 128),
    endpoints: keyedLimit(CONNECTIONS_PER_ENDPOINT),
    claims: new Batcher(async (ids) => {
      const rows = new Map((await claim(deps.db, ids, leaseMs)).map((d) => [d.id, d]));
      return ids.map((id) => rows.get(id) ?? null);
    }),
    renewals: new Batcher((items) => renewClaims(deps.db, items, directLeaseMs(deps))),
    releases: new Batcher(async (items) => {
      await releaseClaims(deps.db, items);
      return items.map(() => null);
    }),
    direct: { total: 0, byWebhook: new Map(), waiters: new Set(), stopped: new Map() },
    records: new Batcher((rows) => record(deps, w, rows)),
  };
  return w;
}

/**
 * Records a batch of outcomes and disables the webhooks that reached the limit; resolves, per row,
 * whether it is a failure whose webhook is disabled now.
 */
async function record(deps: WebhookDeps, w: Worker, rows: AttemptRow[]): Promise<boolean[]> {
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
      for (const id of stopped) if (w.direct.byWebhook.has(id)) w.direct.stopped.set(id, Date.now());
      return rows.map((r) => !r.ok && stopped.has(r.webhook_id));
    } catch (err) {
      if (!backendUnavailable(err) || Date.now() >= end) throw err;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
}
