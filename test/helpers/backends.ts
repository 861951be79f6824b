/**
 * Which real backends the suites run against. Embedded backends (PGlite, the database queue) always
 * run; PostgreSQL and Redis run when TEST_DATABASE_URL / TEST_REDIS_URL are set (.ci/run sets both
 * and fails if they do not answer). Every suite gets its own schema / queue prefix.
 */
import { createHash, randomBytes } from 'node:crypto';
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import { imageBlob, loadMigrations, migrate, openDatabase, type Database } from '../../src/platform/database.js';

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

/**
 * A fresh, migrated database on the given backend, in a schema of its own. A migrated PGlite
 * starts from an image of one that ran the migrations (each PGlite is a database of its own, so
 * they share the schema's name): made once per version of PGlite and of the migrations and kept
 * in the temporary directory for the other test processes. Starting from it takes ~0.4 s instead
 * of ~1.7 s for initdb and the migrations (database-contract.test.ts still migrates from empty).
 */
export async function freshDatabase(backend: DbBackend, opts: { migrate?: boolean } = {}): Promise<Database> {
  if (!backend.url && opts.migrate !== false) {
    pgliteImage ??= migratedImage();
    const db = await openDatabase({
      schema: IMAGE_SCHEMA,
      pgliteImage: await pgliteImage,
      pgliteSettings: PGLITE_SETTINGS,
    });
    if ((await migrate(db)).length > 0) throw new Error('the PGlite image is not fully migrated');
    return db;
  }
  const db = await openDatabase({ url: backend.url, schema: uniqueName('t'), maxConnections: 5 });
  if (opts.migrate !== false) await migrate(db);
  return db;
}

const IMAGE_SCHEMA = 't_image';
/**
 * The suites' databases hold a few MB: 16 MB of shared buffers instead of PGlite's 128 MB, whose
 * zeroing was half of a start from the image (~1.0 → ~0.5 s of CPU a database).
 */
export const PGLITE_SETTINGS = { shared_buffers: '16MB' };
let pgliteImage: Promise<Blob> | undefined;

async function migratedImage(): Promise<Blob> {
  const require = createRequire(import.meta.url);
  const pkg = path.join(path.dirname(require.resolve('@electric-sql/pglite')), '..', 'package.json');
  const key = createHash('sha256')
    .update(readFileSync(pkg))
    .update(JSON.stringify(loadMigrations()))
    .update(IMAGE_SCHEMA)
    .update('without templates')
    .digest('hex')
    .slice(0, 20);
  const file = path.join(os.tmpdir(), `field-analysis-pglite-${key}.tar`);
  try {
    const bytes = readFileSync(file);
    return imageBlob(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
  } catch {
    /* not made yet */
  }
  const db = await openDatabase({ schema: IMAGE_SCHEMA });
  await migrate(db);
  // No suite creates a database in PGlite: without the two templates the image is 25 MB, not 40,
  // and a start reads and copies that much less.
  for (const t of ['template0', 'template1'])
    for (const q of [`ALTER DATABASE ${t} IS_TEMPLATE false`, `DROP DATABASE ${t}`]) await db.query(q);
  const image = await imageBlob(await db.dumpImage!());
  await db.close();
  // written whole under another name, then renamed: a process never reads half of it
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}`;
  writeFileSync(tmp, Buffer.from(await image.arrayBuffer()));
  renameSync(tmp, file);
  return image;
}

/** Drops the suite's schema on PostgreSQL (PGlite in memory just goes away) and closes. */
export async function disposeDatabase(db: Database): Promise<void> {
  if (db.kind === 'postgres' && db.schema !== 'public') await db.query(`DROP SCHEMA IF EXISTS ${db.schema} CASCADE`);
  await db.close();
}
