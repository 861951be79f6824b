/**
 * Which real backends the suites run against. Embedded backends (PGlite, the database queue) always
 * run; PostgreSQL and Redis run when TEST_DATABASE_URL / TEST_REDIS_URL are set (.ci/run sets both
 * and fails if they do not answer). Every suite gets its own schema / queue prefix.
 */
import { randomBytes } from 'node:crypto';
import { openDatabase, migrate, type Database } from '../../src/platform/database.js';

export const TEST_DATABASE_URL = process.env.TEST_DATABASE_URL || undefined;
export const TEST_REDIS_URL = process.env.TEST_REDIS_URL || undefined;

export interface DbBackend {
  name: 'pglite' | 'postgres';
  url?: string;
}

export const dbBackends: DbBackend[] = [
  { name: 'pglite' },
  ...(TEST_DATABASE_URL ? [{ name: 'postgres' as const, url: TEST_DATABASE_URL }] : []),
];

if (!TEST_DATABASE_URL) console.warn('[test] TEST_DATABASE_URL not set: PostgreSQL suites skipped, PGlite only');
if (!TEST_REDIS_URL) console.warn('[test] TEST_REDIS_URL not set: BullMQ/Redis suites skipped, embedded queue only');

export function uniqueName(prefix: string): string {
  return `${prefix}_${randomBytes(5).toString('hex')}`;
}

/** A fresh, migrated database on the given backend, in a schema of its own. */
export async function freshDatabase(backend: DbBackend, opts: { migrate?: boolean } = {}): Promise<Database> {
  const db = await openDatabase({ url: backend.url, schema: uniqueName('t'), maxConnections: 5 });
  if (opts.migrate !== false) await migrate(db);
  return db;
}

/** Drops the suite's schema on PostgreSQL (PGlite in memory just goes away) and closes. */
export async function disposeDatabase(db: Database): Promise<void> {
  if (db.kind === 'postgres' && db.schema !== 'public') await db.query(`DROP SCHEMA IF EXISTS ${db.schema} CASCADE`);
  await db.close();
}
