/**
 * One poll of one subscription, by the worker that holds its lease:
 * 1. the account's fields, sorted along a Z-order curve of their centres and cut into batches of
 *    at most BATCH_FIELDS, each batch's boxes one MultiPolygon `intersects` (1,000 fields: 5
 *    searches). Fields the subscription has searched before are searched from the cursor minus
 *    SUBSCRIPTION_LOOKBACK (from start_date while it has no cursor); fields it has not (new ones,
 *    or all of them at the first poll) from start_date: their backfill, marked once searched;
 * 2. every Item found: skipped when its (collection, Item id) is registered for the account
 *   already; else described through the subscription's asset map (imagery's captureFromStac:
 *   processing-baseline offset, raster:bands scale/offset, SCL mask; hrefs stored unsigned, signed at each read), and registered
 *   by imagery's registerImagery with the `stac` origin, which inserts it once per account and
 *   emits imagery.available per covered field in the same transaction. A malformed Item (no id, no
 *   datetime, no usable asset, an unreadable file) is skipped with a log line; an Item whose
 *   files could not be read for a transient reason (5xx, timeout) is left for the next poll;
 * 3. the subscription's row: the cursor advances to the newest Item datetime handled, never past
 *    an Item left for later nor past a search cut short by SUBSCRIPTION_MAX_PAGES without ascending
 *    order; a failed search records last_error and backs off (429: Retry-After; else
 *    min(interval·2^failures, 6h)); the lease is released.
 */
import {
  captureFromStac,
  FieldSnapshot,
  registerImagery,
  type ImageryCreate,
  type ImageryDeps,
  type StacOrigin,
} from '../imagery/index.js';
import type { Database } from '../platform/database.js';
import { isCalendarDate } from '../platform/dates.js';
import { AppError, RefusedInput } from '../platform/errors.js';
import { recordItem, recordNewest, recordPoll, type ItemOutcome } from './metrics.js';
import { assetKeysFor } from './presets.js';
import { maskOf } from './service.js';
import { StacRateLimitedError, type StacClient } from './stac-client.js';

/** Fields per search request (their boxes as one MultiPolygon). */
export const BATCH_FIELDS = 200;
/** Items per page asked of the API. */
export const PAGE_LIMIT = 100;
/**
 * Items registered at once by one poll, beyond one per compute thread: each Item's coverage is one
 * task on one thread (registerImagery's `concurrent`), and the extra ones are inspected (also on
 * the threads) and written (on the main thread) while the others keep the threads busy. With one
 * extra, the bench's two threads got 14.3 and 11.7 CPU s of a 100-Item poll (the second one
 * waiting); with two, 13.5 and 12.7.
 */
export const ITEMS_BEYOND_THREADS = 2;
/** The longest back-off after failed polls. */
export const MAX_BACKOFF_MS = 6 * 3_600_000;

export interface SubscriptionRow {
  id: string;
  account_id: string;
  stac_api_url: string;
  collection: string;
  assets: string | Record<string, string>;
  max_cloud_cover: number | null;
  start_date: string;
  cursor: Date | null;
  failures: number;
  /** Set by configuration: its URL may be on a private network. */
  is_default: boolean;
  /** Its cloud mask (issue 23; null: the default's). */
  scl_exclude: number[] | null;
  cloud_dilation_m: number | null;
}

export interface PollSettings {
  intervalMs: number;
  lookbackMs: number;
  maxPages: number;
  leaseMs: number;
}

export interface PollDeps {
  db: Database;
  imagery: ImageryDeps;
  client: StacClient;
  settings: PollSettings;
  log?: { warn(obj: object, msg: string): void };
  /**
   * STAC API roots the operator trusts besides the default subscription's (private addresses
   * allowed): the demo catalogue the service serves itself (src/imagery/demo-catalogue.ts).
   */
  trustedUrls?: ReadonlySet<string>;
  /** Items registered at once (default: compute threads + ITEMS_BEYOND_THREADS). */
  itemsAtOnce?: number;
  /** Called as each Item has been handled (tests stop a poll there). */
  onItem?: (outcome: ItemOutcome, itemId: string) => void | Promise<void>;
}

export interface PollResult {
  outcome: 'ok' | 'error' | 'rate_limited' | 'lease_lost';
  searches: number;
  seen: number;
  registered: number;
  duplicate: number;
  skipped: number;
  failed: number;
  error?: string;
}

const SUBSCRIPTION_COLUMNS = `id, account_id, stac_api_url, collection, assets, max_cloud_cover, start_date::text AS start_date, cursor, failures, is_default,
  scl_exclude, cloud_dilation_m`;

/**
 * Takes the subscription's lease if it is free or expired (a killed worker's lease runs out):
 * the row, or null when another worker holds it. A pending poll request is consumed.
 */
export async function claimSubscription(
  db: Database,
  id: string,
  owner: string,
  leaseMs: number,
): Promise<SubscriptionRow | null> {
  const [row] = await db.query<SubscriptionRow>(
    `UPDATE imagery_subscriptions
        SET lease_until = now() + $3 * interval '1 millisecond', lease_owner = $2, poll_requested_at = NULL
      WHERE id = $1 AND status = 'active' AND (lease_until IS NULL OR lease_until < now())
      RETURNING ${SUBSCRIPTION_COLUMNS}`,
    [id, owner, leaseMs],
  );
  return row ?? null;
}

/** Extends a held lease; false when it was lost (expired and taken by another worker). */
export async function renewLease(db: Database, id: string, owner: string, leaseMs: number): Promise<boolean> {
  const rows = await db.query(
    `UPDATE imagery_subscriptions SET lease_until = now() + $3 * interval '1 millisecond'
      WHERE id = $1 AND lease_owner = $2 RETURNING id`,
    [id, owner, leaseMs],
  );
  return rows.length > 0;
}

/** Gives a lease back without recording a poll (a worker shutting down). */
export async function releaseLease(db: Database, id: string, owner: string): Promise<void> {
  await db.query(
    'UPDATE imagery_subscriptions SET lease_until = NULL, lease_owner = NULL WHERE id = $1 AND lease_owner = $2',
    [id, owner],
  );
}

interface FieldBox {
  id: string;
  bbox: [number, number, number, number];
  marked: boolean;
}

/** Interleaves the bits of two 16-bit numbers (Z-order). */
function zOrder(x: number, y: number): number {
  let z = 0;
  for (let i = 15; i >= 0; i--) z = z * 4 + ((x >> i) & 1) * 2 + ((y >> i) & 1);
  return z;
}

function zKey([x0, y0, x1, y1]: FieldBox['bbox']): number {
  const q = (v: number, lo: number, span: number) =>
    Math.max(0, Math.min(65535, Math.floor(((v - lo) / span) * 65536)));
  return zOrder(q((x0 + x1) / 2, -180, 360), q((y0 + y1) / 2, -90, 180));
}

/** Fields sorted along the curve and cut into batches: neighbours share a search. */
export function batchesOf<F extends { bbox: FieldBox['bbox'] }>(fields: F[], size = BATCH_FIELDS): F[][] {
  const sorted = fields.map((f) => ({ f, z: zKey(f.bbox) })).sort((a, b) => a.z - b.z);
  const out: F[][] = [];
  for (let i = 0; i < sorted.length; i += size) out.push(sorted.slice(i, i + size).map((s) => s.f));
  return out;
}

export function multiPolygonOf(boxes: Array<FieldBox['bbox']>): { type: 'MultiPolygon'; coordinates: number[][][][] } {
  return {
    type: 'MultiPolygon',
    coordinates: boxes.map(([x0, y0, x1, y1]) => [
      [
        [x0, y0],
        [x1, y0],
        [x1, y1],
        [x0, y1],
        [x0, y0],
      ],
    ]),
  };
}

/** A file read that may succeed later: the host answered 5xx or 429, or not in time, or not at all. */
const TRANSIENT =
  /HTTP (5\d\d|429)|fetch failed|no answer from|ECONN(REFUSED|RESET|ABORTED)|ETIMEDOUT|EAI_AGAIN|EPIPE|socket hang up|timed? ?out/i;

class Malformed extends Error {}

/**
 * The Item itself is at fault (refused as registration input, not for a transient read failure):
 * skipped. Anything else (a database error, a COG host down) leaves the Item for the next poll.
 */
function isMalformed(err: Error): boolean {
  if (err instanceof Malformed) return true;
  return (err instanceof AppError || err instanceof RefusedInput) && !TRANSIENT.test(err.message);
}

/**
 * The datetime of an Item (start_datetime for a range), or null. Its day must be a calendar day:
 * Date.parse rolls 2025-02-30 over to 2 March, which would register the capture under another date.
 */
function itemDatetime(props: Record<string, unknown>): Date | null {
  const raw = props.datetime ?? props.start_datetime;
  if (typeof raw !== 'string' || !isCalendarDate(raw.slice(0, 10))) return null;
  const t = Date.parse(raw);
  return Number.isFinite(t) ? new Date(t) : null;
}

/** Runs one poll of a subscription whose lease `owner` holds, and records it; never throws for the API's faults. */
export async function pollSubscription(
  deps: PollDeps,
  sub: SubscriptionRow,
  owner: string,
  signal?: AbortSignal,
): Promise<PollResult> {
  const started = performance.now();
  const result: PollResult = {
    outcome: 'ok',
    searches: 0,
    seen: 0,
    registered: 0,
    duplicate: 0,
    skipped: 0,
    failed: 0,
  };
  const count = (o: ItemOutcome) => {
    result[o]++;
    recordItem(sub.id, o);
  };
  let newest: Date | null = null;
  /** The cursor may not pass this (an Item left for later, a search cut short). */
  let bound = Infinity;
  let handledMax = -Infinity;
  let firstFailure: string | undefined;
  let retryAfterMs: number | null = null;
  let error: unknown;
  try {
    const keys = assetKeysFor(sub.assets);
    const fields = (
      await deps.db.query<{ id: string; bbox: FieldBox['bbox']; marked: boolean }>(
        `SELECT f.id, f.bbox, (s.field_id IS NOT NULL) AS marked FROM fields f
           LEFT JOIN imagery_subscription_fields s ON s.field_id = f.id AND s.subscription_id = $2
          WHERE f.account_id = $1`,
        [sub.account_id, sub.id],
      )
    ).map((f) => ({ ...f, bbox: f.bbox.map(Number) as FieldBox['bbox'] }));
    const startOf = `${sub.start_date}T00:00:00Z`;
    const since = sub.cursor ? new Date(sub.cursor.getTime() - deps.settings.lookbackMs).toISOString() : startOf;
    const handled = new Set<string>();
    // The account's fields for every Item of the poll (checked for changes before each use).
    const snapshot = new FieldSnapshot(deps.db, sub.account_id);
    const atOnce = deps.itemsAtOnce ?? deps.imagery.compute.size + ITEMS_BEYOND_THREADS;
    const searches: Array<{ fields: FieldBox[]; from: string; backfill: boolean }> = [
      ...batchesOf(fields.filter((f) => f.marked)).map((b) => ({ fields: b, from: since, backfill: false })),
      ...batchesOf(fields.filter((f) => !f.marked)).map((b) => ({ fields: b, from: startOf, backfill: true })),
    ];
    for (const s of searches) {
      signal?.throwIfAborted();
      const state: { truncated?: boolean } = {};
      let batchMax = -Infinity;
      let sorted = false;
      result.searches++;
      const pages = deps.client.search(
        sub.stac_api_url,
        {
          collections: [sub.collection],
          intersects: multiPolygonOf(s.fields.map((f) => f.bbox)),
          datetime: `${s.from}/..`,
          limit: PAGE_LIMIT,
          maxCloudCover: sub.max_cloud_cover,
        },
        deps.settings.maxPages,
        state,
        sub.is_default || (deps.trustedUrls?.has(sub.stac_api_url) ?? false),
      );
      // Items are registered ITEMS_AT_ONCE at a time: one's files are inspected and its rows
      // written while another's coverage keeps the compute threads busy. All of a search's Items
      // are done before the cursor is judged (below), as when they went one after another.
      const inflight = new Set<Promise<void>>();
      const itemErrors: unknown[] = []; // what onItem threw
      try {
        for await (const page of pages) {
          sorted = page.sorted;
          for (const item of page.items) {
            signal?.throwIfAborted();
            if (itemErrors.length) throw itemErrors[0];
            const props = (item.properties ?? {}) as Record<string, unknown>;
            const at = itemDatetime(props);
            const itemId = typeof item.id === 'string' && item.id ? item.id : null;
            const collection =
              typeof item.collection === 'string' && item.collection ? item.collection : sub.collection;
            const key = `${collection}\u0000${itemId}`;
            if (itemId && handled.has(key)) continue; // found again by another batch
            if (itemId) handled.add(key);
            count('seen');
            if (at && (!newest || at > newest)) newest = at;
            const one = (async () => {
              const outcome = await handleItem(deps, sub, keys, item, snapshot, atOnce > 1, {
                itemId,
                collection,
                at,
                backfill: s.backfill,
                cloudFiltered: page.cloudFiltered,
              }).catch((err: Error) => {
                if (isMalformed(err)) {
                  deps.log?.warn(
                    { subscription_id: sub.id, item_id: itemId, reason: err.message },
                    'STAC Item skipped: it cannot be registered',
                  );
                  return 'skipped' as const;
                }
                firstFailure ??= `Item ${itemId}: ${err.message}`;
                if (at) bound = Math.min(bound, at.getTime());
                return 'failed' as const;
              });
              if (outcome !== 'filtered') count(outcome);
              if (outcome !== 'failed' && at) batchMax = Math.max(batchMax, at.getTime());
              await deps.onItem?.(outcome === 'filtered' ? 'skipped' : outcome, itemId ?? '');
            })();
            inflight.add(one);
            one.then(
              () => inflight.delete(one),
              (err: unknown) => {
                inflight.delete(one);
                itemErrors.push(err);
              },
            );
            while (inflight.size >= atOnce) await Promise.race(inflight).catch(() => {});
          }
        }
      } finally {
        await Promise.allSettled([...inflight]);
      }
      if (itemErrors.length) throw itemErrors[0];
      if (state.truncated) {
        // Cut short by SUBSCRIPTION_MAX_PAGES: ascending order means everything older was handled.
        bound = Math.min(bound, sorted ? batchMax : -Infinity);
        deps.log?.warn(
          { subscription_id: sub.id, pages: deps.settings.maxPages },
          'STAC search has more pages than SUBSCRIPTION_MAX_PAGES: the rest is searched at the next poll',
        );
      } else if (s.backfill) {
        await deps.db.query(
          `INSERT INTO imagery_subscription_fields (subscription_id, field_id)
           SELECT $1, f.id FROM fields f WHERE f.id = ANY($2::text[]) ON CONFLICT DO NOTHING`,
          [sub.id, s.fields.map((f) => f.id)],
        );
      }
      handledMax = Math.max(handledMax, batchMax);
    }
  } catch (err) {
    error = err;
  }
  if (signal?.aborted) {
    // Stopped (shutdown, lease lost): the next holder of the lease polls again; nothing is recorded.
    await releaseLease(deps.db, sub.id, owner).catch(() => {});
    result.outcome = 'lease_lost';
    return result;
  }
  const cursorMs = Math.min(handledMax, bound);
  const cursor = error === undefined && Number.isFinite(cursorMs) ? new Date(cursorMs) : null;
  if (error !== undefined) {
    result.outcome = error instanceof StacRateLimitedError ? 'rate_limited' : 'error';
    result.error = (error as Error).message ?? String(error);
    if (error instanceof StacRateLimitedError) retryAfterMs = error.retryAfterMs;
  } else if (firstFailure) {
    result.error = `${result.failed} Item${result.failed === 1 ? '' : 's'} left for the next poll; ${firstFailure}`;
  }
  const failures = error === undefined ? 0 : sub.failures + 1;
  const backoff =
    error === undefined
      ? null
      : (retryAfterMs ?? Math.min(deps.settings.intervalMs * 2 ** sub.failures, MAX_BACKOFF_MS));
  const [row] = await deps.db.query<{ newest_item_at: Date | null }>(
    `UPDATE imagery_subscriptions SET
        last_polled_at = now(), last_error = $3, failures = $4,
        next_poll_at = CASE WHEN $5::double precision IS NULL THEN NULL ELSE now() + $5 * interval '1 millisecond' END,
        cursor = GREATEST(cursor, $6::timestamptz), newest_item_at = GREATEST(newest_item_at, $7::timestamptz),
        items_registered = (SELECT count(*)::int FROM imagery WHERE subscription_id = $1),
        lease_until = NULL, lease_owner = NULL
      WHERE id = $1 AND lease_owner = $2
      RETURNING newest_item_at`,
    [sub.id, owner, result.error ?? null, failures, backoff, cursor, newest],
  );
  if (!row) {
    deps.log?.warn({ subscription_id: sub.id }, 'subscription lease lost during a poll; the poll is not recorded');
    result.outcome = 'lease_lost';
  } else recordNewest(sub.id, row.newest_item_at);
  if (result.outcome !== 'lease_lost') recordPoll(sub.id, result.outcome, (performance.now() - started) / 1000);
  return result;
}

async function handleItem(
  deps: PollDeps,
  sub: SubscriptionRow,
  keys: Record<string, string>,
  item: Record<string, unknown>,
  fields: FieldSnapshot,
  concurrent: boolean,
  m: { itemId: string | null; collection: string; at: Date | null; backfill: boolean; cloudFiltered: boolean },
): Promise<ItemOutcome | 'filtered'> {
  if (!m.itemId) throw new Malformed('no id');
  if (!m.at) throw new Malformed('no datetime');
  const props = (item.properties ?? {}) as Record<string, unknown>;
  const cloud = props['eo:cloud_cover'];
  // The API could not filter by cloud cover: done here.
  if (!m.cloudFiltered && sub.max_cloud_cover !== null && typeof cloud === 'number' && cloud > sub.max_cloud_cover)
    return 'filtered';
  const [known] = await deps.db.query(
    'SELECT 1 FROM imagery WHERE account_id = $1 AND stac_collection = $2 AND stac_item_id = $3',
    [sub.account_id, m.collection, m.itemId],
  );
  if (known) return 'duplicate';
  // Hrefs are stored unsigned: a catalogue's short-lived tokens are added at each read
  // (imagery/href-signing.ts, IMAGERY_HREF_SIGNER).
  const create: ImageryCreate = { ...captureFromStac(item, keys), capture_date: m.at.toISOString().slice(0, 10) };
  if (!Object.keys(create.bands ?? {}).length)
    throw new Malformed(`none of the assets ${Object.values(keys).join(', ')} has an href`);
  const origin: StacOrigin = {
    collection: m.collection,
    itemId: m.itemId,
    subscriptionId: sub.id,
    backfill: m.backfill,
    mask: maskOf(sub),
  };
  const img = await registerImagery(deps.imagery, sub.account_id, create, { stac: origin, fields, concurrent });
  return img ? 'registered' : 'duplicate';
}
