/**
 * Where the key that seals webhook secrets at rest comes from, and moving secrets to it.
 *
 * The key must not live in the database it protects (a dump would hold both). In order:
 * 1. SECRETS_KEY;
 * 2. DATA_DIR/secrets.key: created (32 random bytes, mode 0600) on the first start of the embedded
 *    database, read if present otherwise (an operator can place one beside a PostgreSQL setup);
 * 3. SIGNING_KEY, which is kept in the database unless configured: the old behaviour, with a loud
 *    warning when DATABASE_URL is set.
 * Earlier keys (SECRETS_KEY_PREVIOUS, and always the signing key, under which every secret was
 * sealed before) still open; `resealWebhookSecrets` moves every secret to the current key at start.
 */
import { randomBytes } from 'node:crypto';
import { readFileSync, statSync, writeFileSync } from 'node:fs';
import type { Sql } from '../platform/database.js';
import type { SecretBox } from './signing.js';

export const KEY_FILE_NAME = 'secrets.key';

export interface SecretKeySource {
  /** SECRETS_KEY. */
  configured?: string;
  /** SECRETS_KEY_PREVIOUS. */
  previous: readonly string[];
  /** DATA_DIR/secrets.key, or undefined when there is no data directory of ours (tests' databases). */
  keyFile?: string;
  /** Create the key file when absent (the embedded database lives beside it). */
  createKeyFile: boolean;
  signingKey: string;
  /** DATABASE_URL is set: the fallback to the signing key is worth a loud warning. */
  externalDatabase: boolean;
  warn: (message: string) => void;
}

export interface SecretKeys {
  current: string;
  previous: string[];
  source: 'SECRETS_KEY' | 'key file' | 'signing key';
}

function readKeyFile(file: string, warn: (m: string) => void): string | undefined {
  let mode: number;
  try {
    mode = statSync(file).mode;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return undefined;
    throw err;
  }
  if (mode & 0o077) warn(`WARNING: ${file} is readable by others (mode ${(mode & 0o777).toString(8)}): chmod 600 it.`);
  const key = readFileSync(file, 'utf8').trim();
  if (key.length < 32) throw new Error(`${file} must hold a key of at least 32 characters`);
  return key;
}

export function resolveSecretKeys(s: SecretKeySource): SecretKeys {
  const keys = (current: string, source: SecretKeys['source']): SecretKeys => ({
    current,
    previous: [...new Set([...s.previous, s.signingKey])].filter((k) => k !== current),
    source,
  });
  if (s.configured) return keys(s.configured, 'SECRETS_KEY');
  if (s.keyFile) {
    const existing = readKeyFile(s.keyFile, s.warn);
    if (existing) return keys(existing, 'key file');
    if (s.createKeyFile) {
      try {
        writeFileSync(s.keyFile, `${randomBytes(32).toString('base64url')}\n`, { mode: 0o600, flag: 'wx' });
      } catch (err) {
        if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err;
      }
      return keys(readKeyFile(s.keyFile, s.warn)!, 'key file');
    }
  }
  if (s.externalDatabase) {
    s.warn(
      [
        '',
        '  ************************************************************************************',
        '  WARNING: SECRETS_KEY is not set and DATABASE_URL is. Webhook secrets are sealed with',
        '  a key derived from SIGNING_KEY, which the database itself holds unless SIGNING_KEY is',
        '  set: a dump of the database is then enough to read every webhook secret.',
        '  Set SECRETS_KEY (at least 32 characters, the same on every replica), or place a key',
        `  file at ${s.keyFile ?? `DATA_DIR/${KEY_FILE_NAME}`} (mode 0600). Existing secrets are re-sealed at the`,
        '  next start. See "Secrets at rest" in the README.',
        '  ************************************************************************************',
        '',
      ].join('\n'),
    );
  }
  return keys(s.signingKey, 'signing key');
}

/**
 * Re-seals under the current key every webhook secret sealed under an earlier one. Safe with
 * replicas starting together: a row is only replaced if it still holds the value that was read.
 * Returns the counts; secrets no key opens are left as they are (and counted).
 */
export async function resealWebhookSecrets(db: Sql, box: SecretBox): Promise<{ resealed: number; unreadable: number }> {
  const rows = await db.query<{ id: string; secret_sealed: string }>(
    'SELECT id, secret_sealed FROM webhooks ORDER BY id',
  );
  let resealed = 0;
  let unreadable = 0;
  for (const row of rows) {
    let plain: string;
    try {
      if (box.isCurrent(row.secret_sealed)) continue;
      plain = box.open(row.secret_sealed);
    } catch {
      unreadable++;
      continue;
    }
    const done = await db.query(
      'UPDATE webhooks SET secret_sealed = $1 WHERE id = $2 AND secret_sealed = $3 RETURNING id',
      [box.seal(plain), row.id, row.secret_sealed],
    );
    resealed += done.length;
  }
  return { resealed, unreadable };
}
