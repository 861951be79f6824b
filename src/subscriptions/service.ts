/**
 * Imagery subscriptions: a STAC API the service searches over the account's fields (the poller,
 * scheduler.ts, does the searching). This module keeps the resource: create, list, read, update,
 * delete, the request for a poll now, and the operator's default subscription every account gets.
 */
import type { Database, Sql } from '../platform/database.js';
import { ConfigError, type Config } from '../platform/config.js';
import { isCalendarDate } from '../platform/dates.js';
import { AppError, notFound, RefusedInput, type FieldIssue } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import type { HostLookup } from '../platform/net/address.js';
import { OutboundError, resolveTarget } from '../platform/net/target.js';
import type { MaskRequest } from '../compute/tasks.js';
import { DEFAULT_SCL_EXCLUDE, parseStatsOptions } from '../indices/index.js';
import { assetIssues } from './presets.js';
import type { Subscription, SubscriptionCreate, SubscriptionPatch, SubscriptionStatus } from './schemas.js';

export const DEFAULT_COLLECTION = 'sentinel-2-l2a';
export const DEFAULT_ASSETS = 'earth-search';
/** Days before today that a subscription without start_date searches back to. */
export const DEFAULT_LOOKBACK_DAYS = 30;

export interface SubscriptionDeps {
  db: Database;
  allowPrivateNetworks: boolean;
  maxPerAccount: number;
  /** Replaces the system resolver (tests). */
  lookup?: HostLookup;
}

interface SubscriptionRow {
  id: string;
  stac_api_url: string;
  collection: string;
  assets: string | Record<string, string>;
  max_cloud_cover: number | null;
  start_date: string;
  status: SubscriptionStatus;
  scl_exclude: number[] | null;
  cloud_dilation_m: number | null;
  is_default: boolean;
  last_polled_at: Date | null;
  last_error: string | null;
  items_registered: number;
  poll_requested_at: Date | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, stac_api_url, collection, assets, max_cloud_cover, to_char(start_date, 'YYYY-MM-DD') AS start_date,
  status, scl_exclude, cloud_dilation_m, is_default, last_polled_at, last_error, items_registered, poll_requested_at, created_at, updated_at`;

const iso = (d: Date | null) => (d ? d.toISOString() : null);

function toSubscription(r: SubscriptionRow): Subscription {
  return {
    id: r.id,
    stac_api_url: r.stac_api_url,
    collection: r.collection,
    assets: r.assets,
    max_cloud_cover: r.max_cloud_cover,
    start_date: r.start_date,
    status: r.status,
    scl_exclude: r.scl_exclude ? r.scl_exclude.map(Number) : [...DEFAULT_SCL_EXCLUDE],
    cloud_dilation_m: r.cloud_dilation_m ?? 0,
    default: r.is_default,
    last_polled_at: iso(r.last_polled_at),
    last_error: r.last_error,
    items_registered: r.items_registered,
    poll_requested_at: iso(r.poll_requested_at),
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

/** Today (UTC) as YYYY-MM-DD, minus `days`. */
export function utcDate(days = 0, now = new Date()): string {
  return new Date(now.getTime() - days * 86_400_000).toISOString().slice(0, 10);
}

/** What is wrong with a start date: not a calendar day, or after today (UTC). */
export function startDateIssue(date: string, now = new Date()): string | null {
  if (!isCalendarDate(date)) return `"${date}" is not a calendar date (YYYY-MM-DD)`;
  if (date > utcDate(0, now)) return `${date} is in the future; the search goes back from today to this date`;
  return null;
}

/**
 * The cloud mask a body sets, checked and made canonical as GET indices does (indices'
 * stats-options.ts): scl_exclude null when it is the default's, cloud_dilation_m null when 0.
 */
export function maskColumns(body: Pick<SubscriptionPatch, 'scl_exclude' | 'cloud_dilation_m'>): {
  scl_exclude: number[] | null;
  cloud_dilation_m: number | null;
  issues: FieldIssue[];
} {
  try {
    const { mask } = parseStatsOptions(
      { scl_exclude: body.scl_exclude ?? undefined, cloud_dilation_m: body.cloud_dilation_m ?? undefined },
      (k) => `/body/${k}`,
    );
    return { scl_exclude: mask.scl_exclude ?? null, cloud_dilation_m: mask.cloud_dilation_m ?? null, issues: [] };
  } catch (err) {
    if (err instanceof AppError && err.errors) return { scl_exclude: null, cloud_dilation_m: null, issues: err.errors };
    throw err;
  }
}

/** A subscription row's cloud mask as the compute tasks take it (absent members: the default). */
export function maskOf(r: { scl_exclude: number[] | null; cloud_dilation_m: number | null }): MaskRequest {
  return {
    ...(r.scl_exclude ? { scl_exclude: r.scl_exclude.map(Number) } : {}),
    ...(r.cloud_dilation_m ? { cloud_dilation_m: r.cloud_dilation_m } : {}),
  };
}

/** The issues of the members a body sets that the schema cannot judge (assets, start_date, the mask). */
export function bodyIssues(body: SubscriptionPatch, now = new Date()): FieldIssue[] {
  const issues: FieldIssue[] = [...maskColumns(body).issues];
  if (body.assets !== undefined) {
    for (const i of assetIssues(body.assets)) {
      issues.push({ path: `/body/assets${i.member ? `/${i.member}` : ''}`, code: i.code, message: i.message });
    }
  }
  if (body.start_date !== undefined) {
    const message = startDateIssue(body.start_date, now);
    if (message) issues.push({ path: '/body/start_date', code: 'invalid_date', message });
  }
  return issues;
}

function refuse(issues: FieldIssue[]): never {
  throw new AppError(
    'validation_failed',
    issues
      .slice(0, 3)
      .map((i) => `${i.path} ${i.message}`)
      .join('; '),
    { errors: issues },
  );
}

/** The SSRF rules of webhook registration, with http:// allowed too (platform/net/target.ts). */
async function checkUrl(deps: SubscriptionDeps, url: string): Promise<void> {
  try {
    await resolveTarget(url, deps.allowPrivateNetworks, deps.lookup, ['http:', 'https:']);
  } catch (err) {
    throw err instanceof OutboundError ? new RefusedInput(err, '/body/stac_api_url') : err;
  }
}

export async function createSubscription(
  deps: SubscriptionDeps,
  accountId: string,
  body: SubscriptionCreate,
): Promise<Subscription> {
  const issues = bodyIssues(body);
  if (issues.length) refuse(issues);
  const mask = maskColumns(body);
  await checkUrl(deps, body.stac_api_url);
  const row = await deps.db.transaction(async (tx) => {
    // One creation at a time per account, so that two at once cannot both pass the limit.
    await tx.query('SELECT id FROM accounts WHERE id = $1 FOR UPDATE', [accountId]);
    const [{ n }] = (await tx.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM imagery_subscriptions WHERE account_id = $1 AND NOT is_default',
      [accountId],
    )) as [{ n: number }];
    if (n >= deps.maxPerAccount) {
      throw new AppError(
        'conflict',
        `An account may create at most ${deps.maxPerAccount} subscriptions (the default one not counted); delete one first`,
      );
    }
    const rows = await tx.query<SubscriptionRow>(
      `INSERT INTO imagery_subscriptions (id, account_id, stac_api_url, collection, assets, max_cloud_cover, start_date, status,
                                          scl_exclude, cloud_dilation_m)
       VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7::date, $8, $9::integer[], $10) RETURNING ${COLUMNS}`,
      [
        newId('isub'),
        accountId,
        body.stac_api_url,
        body.collection ?? DEFAULT_COLLECTION,
        JSON.stringify(body.assets ?? DEFAULT_ASSETS),
        body.max_cloud_cover ?? null,
        body.start_date ?? utcDate(DEFAULT_LOOKBACK_DAYS),
        body.status ?? 'active',
        mask.scl_exclude,
        mask.cloud_dilation_m,
      ],
    );
    return rows[0]!;
  });
  return toSubscription(row);
}

export async function getSubscription(db: Sql, accountId: string, id: string): Promise<Subscription> {
  const rows = await db.query<SubscriptionRow>(
    `SELECT ${COLUMNS} FROM imagery_subscriptions WHERE id = $1 AND account_id = $2`,
    [id, accountId],
  );
  if (!rows[0]) throw notFound('Subscription', id);
  return toSubscription(rows[0]);
}

export async function listSubscriptions(
  db: Sql,
  accountId: string,
  q: { page: number; per_page: number },
): Promise<{ data: Subscription[]; total: number }> {
  const [{ n }] = (await db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM imagery_subscriptions WHERE account_id = $1',
    [accountId],
  )) as [{ n: number }];
  const rows = await db.query<SubscriptionRow>(
    `SELECT ${COLUMNS} FROM imagery_subscriptions WHERE account_id = $1 ORDER BY created_at, id LIMIT $2 OFFSET $3`,
    [accountId, q.per_page, (q.page - 1) * q.per_page],
  );
  return { data: rows.map(toSubscription), total: n };
}

/** Members that decide what is searched: changing one starts the search again from start_date. */
const SEARCH_MEMBERS = ['stac_api_url', 'collection', 'assets', 'max_cloud_cover', 'start_date'] as const;
/** Members of the cloud mask: they apply to the captures registered from then on. */
const MASK_MEMBERS = ['scl_exclude', 'cloud_dilation_m'] as const;

export async function updateSubscription(
  deps: SubscriptionDeps,
  accountId: string,
  id: string,
  patch: SubscriptionPatch,
): Promise<Subscription> {
  const issues = bodyIssues(patch);
  if (issues.length) refuse(issues);
  const current = await getSubscription(deps.db, accountId, id);
  const searchChanges = SEARCH_MEMBERS.filter((m) => patch[m] !== undefined);
  const maskChanges = MASK_MEMBERS.filter((m) => patch[m] !== undefined);
  if (current.default && (searchChanges.length || maskChanges.length)) {
    throw new AppError(
      'conflict',
      `The default subscription is set by the operator; only its status can change (not ${[...searchChanges, ...maskChanges].join(', ')})`,
    );
  }
  const mask = maskColumns(patch);
  if (patch.stac_api_url !== undefined && patch.stac_api_url !== current.stac_api_url)
    await checkUrl(deps, patch.stac_api_url);
  const rows = await deps.db.query<SubscriptionRow>(
    `UPDATE imagery_subscriptions
        SET stac_api_url = COALESCE($3, stac_api_url), collection = COALESCE($4, collection),
            assets = COALESCE($5::jsonb, assets),
            max_cloud_cover = CASE WHEN $6 THEN $7::double precision ELSE max_cloud_cover END,
            start_date = COALESCE($8::date, start_date), status = COALESCE($9, status),
            cursor = CASE WHEN $10 THEN NULL ELSE cursor END,
            failures = CASE WHEN $10 THEN 0 ELSE failures END,
            next_poll_at = CASE WHEN $10 THEN NULL ELSE next_poll_at END,
            last_error = CASE WHEN $10 THEN NULL ELSE last_error END,
            scl_exclude = CASE WHEN $11 THEN $12::integer[] ELSE scl_exclude END,
            cloud_dilation_m = CASE WHEN $13 THEN $14::double precision ELSE cloud_dilation_m END,
            updated_at = now()
      WHERE id = $1 AND account_id = $2 RETURNING ${COLUMNS}`,
    [
      id,
      accountId,
      patch.stac_api_url ?? null,
      patch.collection ?? null,
      patch.assets === undefined ? null : JSON.stringify(patch.assets),
      patch.max_cloud_cover !== undefined,
      patch.max_cloud_cover ?? null,
      patch.start_date ?? null,
      patch.status ?? null,
      searchChanges.length > 0,
      patch.scl_exclude !== undefined,
      mask.scl_exclude,
      patch.cloud_dilation_m !== undefined,
      mask.cloud_dilation_m,
    ],
  );
  if (!rows[0]) throw notFound('Subscription', id);
  return toSubscription(rows[0]);
}

/** Deletes the subscription; the captures it registered stay (their subscription_id becomes null). */
export async function deleteSubscription(db: Sql, accountId: string, id: string): Promise<void> {
  const rows = await db.query<{ is_default: boolean }>(
    `DELETE FROM imagery_subscriptions WHERE id = $1 AND account_id = $2 AND NOT is_default RETURNING is_default`,
    [id, accountId],
  );
  if (rows[0]) return;
  const current = await getSubscription(db, accountId, id); // 404 when there is none
  if (current.default) {
    throw new AppError(
      'conflict',
      'The default subscription is set by the operator and cannot be deleted; pause it (status: paused) instead',
    );
  }
}

/**
 * Asks for a poll at the scheduler's next turn, whatever the interval (a subscription backing off
 * after failures still waits for its back-off to end). A paused subscription is refused.
 */
export async function requestPoll(db: Sql, accountId: string, id: string): Promise<Subscription> {
  const rows = await db.query<SubscriptionRow>(
    `UPDATE imagery_subscriptions SET poll_requested_at = COALESCE(poll_requested_at, now())
      WHERE id = $1 AND account_id = $2 AND status = 'active' RETURNING ${COLUMNS}`,
    [id, accountId],
  );
  if (rows[0]) return toSubscription(rows[0]);
  await getSubscription(db, accountId, id); // 404 when there is none
  throw new AppError('conflict', `Subscription ${id} is paused; set status: active to poll it`);
}

/** DEFAULT_SUBSCRIPTION_ASSETS: a preset name or a JSON map band → asset key. */
export function parseDefaultAssets(text: string): string | Record<string, string> {
  let assets: unknown = text;
  if (/^\s*[[{]/.test(text)) {
    try {
      assets = JSON.parse(text);
    } catch {
      throw new ConfigError('DEFAULT_SUBSCRIPTION_ASSETS', 'is not valid JSON');
    }
  }
  const issues =
    typeof assets === 'string' || (assets && typeof assets === 'object' && !Array.isArray(assets))
      ? assetIssues(assets as string | Record<string, unknown>)
      : [{ message: 'must be a preset name or a JSON object' }];
  if (issues.length) throw new ConfigError('DEFAULT_SUBSCRIPTION_ASSETS', issues.map((i) => i.message).join('; '));
  return assets as string | Record<string, string>;
}

/**
 * Gives every account (or only `accountId`) the operator's default subscription
 * (DEFAULT_SUBSCRIPTION_*), marked `default`; private addresses are allowed for it. For all
 * accounts (start-up) it also brings existing default subscriptions in line with the
 * configuration: a changed URL, collection, assets, cloud cover or start date starts their search
 * again from the start date (their status, set by the account, stays), and with no
 * DEFAULT_SUBSCRIPTION_URL they are deleted (their captures stay). Safe to run in several
 * processes at once. Returns how many were created.
 */
export async function ensureDefaultSubscriptions(
  db: Sql,
  config: Pick<Config, 'subscriptions'>,
  accountId?: string,
): Promise<number> {
  const d = config.subscriptions.default;
  if (!d.url) {
    if (accountId === undefined) await db.query('DELETE FROM imagery_subscriptions WHERE is_default');
    return 0;
  }
  const assets = JSON.stringify(parseDefaultAssets(d.assets));
  if (d.startDate !== undefined) {
    const issue = startDateIssue(d.startDate);
    if (issue) throw new ConfigError('DEFAULT_SUBSCRIPTION_START_DATE', issue);
  }
  if (accountId === undefined) {
    await db.query(
      `UPDATE imagery_subscriptions
          SET stac_api_url = $1, collection = $2, assets = $3::jsonb, max_cloud_cover = $4::double precision,
              start_date = COALESCE($5::date, start_date), cursor = NULL, failures = 0, next_poll_at = NULL,
              last_error = NULL, updated_at = now()
        WHERE is_default AND (stac_api_url <> $1 OR collection <> $2 OR assets <> $3::jsonb
              OR max_cloud_cover IS DISTINCT FROM $4::double precision OR start_date <> COALESCE($5::date, start_date))`,
      [d.url, d.collection, assets, d.maxCloudCover ?? null, d.startDate ?? null],
    );
  }
  const missing = await db.query<{ id: string }>(
    `SELECT a.id FROM accounts a
      WHERE ($1::text IS NULL OR a.id = $1)
        AND NOT EXISTS (SELECT 1 FROM imagery_subscriptions s WHERE s.account_id = a.id AND s.is_default)`,
    [accountId ?? null],
  );
  if (!missing.length) return 0;
  const created = await db.query<{ id: string }>(
    `INSERT INTO imagery_subscriptions (id, account_id, stac_api_url, collection, assets, max_cloud_cover, start_date, status, is_default)
     SELECT u.id, u.account_id, $3, $4, $5::jsonb, $6::double precision, $7::date, 'active', true
       FROM unnest($1::text[], $2::text[]) AS u(id, account_id)
     ON CONFLICT (account_id) WHERE is_default DO NOTHING
     RETURNING id`,
    [
      missing.map(() => newId('isub')),
      missing.map((m) => m.id),
      d.url,
      d.collection,
      assets,
      d.maxCloudCover ?? null,
      d.startDate ?? utcDate(DEFAULT_LOOKBACK_DAYS),
    ],
  );
  return created.length;
}
