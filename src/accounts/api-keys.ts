/**
 * Accounts and API keys. A key is `fak_` + 32 random bytes (base64url); only its SHA-256 is
 * stored (a fast hash is right here: the key has 256 bits of entropy, so there is nothing to
 * brute-force, and every request must verify it cheaply). `prefix` (the first 12 characters) is
 * kept to recognise a key in listings without being able to use it.
 */
import { hash, randomBytes } from 'node:crypto';
import type { Config } from '../platform/config.js';
import type { Database, Sql } from '../platform/database.js';
import { newId } from '../platform/ids.js';
import { ensureDefaultSubscriptions } from '../subscriptions/index.js';

export const KEY_PREFIX = 'fak_';
const KEY_RE = /^fak_[A-Za-z0-9_-]{43}$/;

export interface Account {
  id: string;
  name: string;
}

export interface ApiKeyInfo {
  id: string;
  account_id: string;
  account_name: string;
  prefix: string;
  label: string | null;
  created_at: Date;
  last_used_at: Date | null;
  revoked_at: Date | null;
}

// One-shot crypto.hash (Node ≥ 20.12; package.json engines ask 20.19): no Hash object per request.

export function hashKey(key: string): string {
  return hash('sha256', key, 'hex');
}

export function isWellFormedKey(key: string): boolean {
  return KEY_RE.test(key);
}

/**
 * The account of that name, created when there is none. With `config`, the account also gets the
 * operator's default subscription (DEFAULT_SUBSCRIPTION_URL) if it has none yet.
 */
export async function findOrCreateAccount(
  db: Sql,
  name: string,
  config?: Pick<Config, 'subscriptions'>,
): Promise<Account> {
  const existing = await db.query<Account>('SELECT id, name FROM accounts WHERE name = $1', [name]);
  let account = existing[0];
  if (!account) {
    const rows = await db.query<Account>(
      `INSERT INTO accounts (id, name) VALUES ($1, $2)
       ON CONFLICT (name) DO UPDATE SET name = EXCLUDED.name RETURNING id, name`,
      [newId('acc'), name],
    );
    account = rows[0]!;
  }
  if (config) await ensureDefaultSubscriptions(db, config, account.id);
  return account;
}

/** Creates a key for the account; the plain key is returned once and never stored. */
export async function createApiKey(
  db: Sql,
  accountId: string,
  label?: string,
): Promise<{ key: string; id: string; prefix: string }> {
  const key = KEY_PREFIX + randomBytes(32).toString('base64url');
  const id = newId('key');
  const prefix = key.slice(0, 12);
  await db.query('INSERT INTO api_keys (id, account_id, prefix, key_hash, label) VALUES ($1, $2, $3, $4, $5)', [
    id,
    accountId,
    prefix,
    hashKey(key),
    label ?? null,
  ]);
  return { key, id, prefix };
}

export async function listApiKeys(db: Sql, accountName?: string): Promise<ApiKeyInfo[]> {
  return db.query<ApiKeyInfo>(
    `SELECT k.id, k.account_id, a.name AS account_name, k.prefix, k.label, k.created_at, k.last_used_at, k.revoked_at
       FROM api_keys k JOIN accounts a ON a.id = k.account_id
      WHERE ($1::text IS NULL OR a.name = $1)
      ORDER BY k.created_at, k.id`,
    [accountName ?? null],
  );
}

/** Revokes by key id (`key_…`) or by the plain key itself. Returns whether a live key was revoked. */
export async function revokeApiKey(db: Sql, idOrKey: string): Promise<boolean> {
  const byHash = idOrKey.startsWith(KEY_PREFIX) ? hashKey(idOrKey) : null;
  const rows = await db.query<{ id: string }>(
    `UPDATE api_keys SET revoked_at = now()
      WHERE revoked_at IS NULL AND (id = $1 OR key_hash = $2) RETURNING id`,
    [idOrKey, byHash],
  );
  forgetCachedKeys();
  return rows.length > 0;
}

/** How long a resolved key is trusted without asking the database again (AUTH_CACHE_MS). */
export const DEFAULT_AUTH_CACHE_MS = 5_000;
const AUTH_CACHE_MAX = 10_000;

// Resolved keys, kept briefly so that a burst of requests costs one lookup: keyed by the key's hash
// (never the key), each entry valid for the database handle that resolved it. Revocation through
// this process (revokeApiKey: the API, tests) takes effect at once, on every handle; from elsewhere
// (the CLI, another replica) within the cache time.
const authCache = new Map<string, { db: Database; result: AuthResult; until: number }>();

export function forgetCachedKeys(): void {
  authCache.clear();
}

/**
 * `unknown` covers revoked keys too: a revoked key and one that never existed take the same path
 * (one lookup that finds no live key) and get the same answer, so a caller cannot tell them apart.
 */
export type AuthResult =
  | { ok: true; account: Account; keyId: string }
  | { ok: false; reason: 'missing' | 'malformed' | 'unknown' };

const MISSING: AuthResult = Object.freeze({ ok: false, reason: 'missing' });
const MALFORMED: AuthResult = Object.freeze({ ok: false, reason: 'malformed' });
const UNKNOWN: AuthResult = Object.freeze({ ok: false, reason: 'unknown' });

/**
 * What an Authorization header value resolves to without asking the database: a missing or
 * malformed header, or a key resolved recently (within the cache time it was resolved with);
 * otherwise the key's hash, for `lookupKey`. Synchronous, so that a warm request's authentication costs no promise.
 */
export function authenticateCached(db: Database, header: string | undefined): AuthResult | string {
  if (!header) return MISSING;
  const m = /^Bearer\s+(\S+)\s*$/i.exec(header);
  if (!m || !isWellFormedKey(m[1]!)) return MALFORMED;
  const hash = hashKey(m[1]!);
  const cached = authCache.get(hash);
  if (cached && cached.db === db && cached.until > Date.now()) return cached.result;
  return hash;
}

/**
 * Parses an Authorization header value and resolves the key to its account; a key resolved less
 * than `cacheMs` ago is not looked up again (0: every request asks the database).
 */
export async function authenticate(
  db: Database,
  header: string | undefined,
  cacheMs = DEFAULT_AUTH_CACHE_MS,
): Promise<AuthResult> {
  const known = authenticateCached(db, header);
  return typeof known === 'string' ? lookupKey(db, known, cacheMs) : known;
}

/** Resolves a key by its hash in the database (a live key only) and caches the answer for `cacheMs`. */
export async function lookupKey(db: Database, hash: string, cacheMs = DEFAULT_AUTH_CACHE_MS): Promise<AuthResult> {
  const rows = await db.query<{ key_id: string; account_id: string; account_name: string; stale: boolean }>(
    `SELECT k.id AS key_id, a.id AS account_id, a.name AS account_name,
            (k.last_used_at IS NULL OR k.last_used_at < now() - interval '1 minute') AS stale
       FROM api_keys k JOIN accounts a ON a.id = k.account_id WHERE k.key_hash = $1 AND k.revoked_at IS NULL`,
    [hash],
  );
  const row = rows[0];
  if (!row) return UNKNOWN;
  if (row.stale) {
    // At most one write a minute per key: usage is visible in `keys list` without a write per request.
    db.query('UPDATE api_keys SET last_used_at = now() WHERE id = $1', [row.key_id]).catch(() => {});
  }
  const result: AuthResult = Object.freeze({
    ok: true,
    account: Object.freeze({ id: row.account_id, name: row.account_name }),
    keyId: row.key_id,
  });
  if (cacheMs > 0) {
    if (authCache.size >= AUTH_CACHE_MAX) authCache.clear();
    authCache.set(hash, { db, result, until: Date.now() + cacheMs });
  }
  return result;
}
