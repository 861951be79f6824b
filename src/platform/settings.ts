import { randomBytes } from 'node:crypto';
import type { Sql } from './database.js';

/**
 * Returns the stored value of a setting, creating it with `make()` if absent. Race-safe: replicas
 * starting together all end up with the first value written.
 */
export async function getOrCreateSetting(db: Sql, key: string, make: () => string): Promise<string> {
  await db.query('INSERT INTO settings (key, value) VALUES ($1, $2) ON CONFLICT (key) DO NOTHING', [key, make()]);
  const rows = await db.query<{ value: string }>('SELECT value FROM settings WHERE key = $1', [key]);
  return rows[0]!.value;
}

/** SIGNING_KEY when configured; otherwise one generated on first start and kept in the database. */
export async function resolveSigningKey(db: Sql, configured: string | undefined): Promise<string> {
  return configured ?? getOrCreateSetting(db, 'signing_key', () => randomBytes(32).toString('base64url'));
}
