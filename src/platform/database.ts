/**
 * One small database interface with two backends: PGlite (embedded, WASM Postgres) when no
 * DATABASE_URL is configured, postgres.js against a real PostgreSQL otherwise. SQL is written once:
 * PGlite is real Postgres. Conventions for callers: parameters are `$1..$n`; pass JSON as a string
 * and cast (`$1::jsonb`); avoid int8/numeric in results (postgres.js returns them as strings) —
 * use int4 or double precision, or cast.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import postgres from 'postgres';
import { migrationsDir } from './paths.js';

export interface QueryOptions {
  /**
   * PostgreSQL: run as a named prepared statement (parsed and planned once per connection, then
   * only bound and executed). For the hot statements of fixed text only: every distinct text is
   * kept on every connection. Ignored by the embedded backend.
   */
  prepare?: boolean;
  /**
   * The statement writes only a cache of values derived from immutable inputs (index_stats): it
   * is not counted by writeCount, so caches that watch the count are not re-read because of it.
   */
  cacheWrite?: boolean;
}

export interface Sql {
  query<T = Record<string, unknown>>(text: string, params?: unknown[], opts?: QueryOptions): Promise<T[]>;
  /** Inside a transaction: runs `fn` after a successful commit (never on rollback). Outside: soon. */
  afterCommit?(fn: () => void): void;
}

export interface Database extends Sql {
  readonly kind: 'pglite' | 'postgres';
  readonly schema: string;
  /** Runs `fn` in one transaction: commits when it resolves, rolls back when it throws. */
  transaction<T>(fn: (tx: Sql) => Promise<T>): Promise<T>;
  /**
   * LISTEN on a channel (PostgreSQL only: the embedded database has one process, which notifies
   * itself in memory). Resolves once listening, to a function that stops it.
   */
  listen?(channel: string, onNotify: () => void): Promise<() => Promise<void>>;
  close(): Promise<void>;
  /**
   * Embedded backend only: how many statements that may write have been issued so far. PGlite's
   * data directory belongs to one process (embedded-lock.ts) and every statement goes through
   * this object, so an unchanged count means unchanged data, and a cache may skip re-reading.
   * Absent for PostgreSQL, where other processes write.
   */
  writeCount?(): number;
  /**
   * Embedded backend only: an image of the data directory (PGlite's dumpDataDir, uncompressed
   * tar) that `pgliteImage` starts another in-memory database from. The suites start each of
   * theirs from one migrated image: a new PGlite otherwise runs initdb, about 1.5 s of CPU each.
   */
  dumpImage?(): Promise<Blob>;
}

// Statements that cannot change table data (no SELECT here calls a writing function).
const READ_ONLY = /^\s*select\b/i;

export interface DatabaseOptions {
  /** postgres:// URL; when absent the embedded PGlite backend is used. */
  url?: string;
  /** PGlite data directory; absent means in-memory. Ignored for postgres. */
  dataDir?: string;
  /** Schema holding every table (tests give each suite its own). Default `public`. */
  schema?: string;
  /** Max pooled connections for postgres.js. */
  maxConnections?: number;
  /** PGlite in memory only: start from this image (Database.dumpImage) instead of an empty cluster. */
  pgliteImage?: Blob;
  /**
   * PGlite only: PostgreSQL settings given at its start (`-c name=value`), as the suites' many
   * short-lived databases take `shared_buffers=16MB` (PGlite's default 128MB is zeroed at every
   * start: half of a start from an image).
   */
  pgliteSettings?: Record<string, string>;
}

const SCHEMA_RE = /^[a-z_][a-z0-9_]{0,62}$/;

/**
 * Seconds before reconnecting after failed attempts. postgres.js's default grows with every failed
 * attempt of the whole pool (3^n / 100 s, up to 20 s), and a query handed to a closed connection
 * waits that long before its attempt: after a 3 s PostgreSQL restart under 20 req/s the pool
 * stayed away ~9 s after the server was back, and requests hung meanwhile (bench/faults). Attempts
 * are made only for queries that wait, so retrying soon costs a refused connect while the server
 * is down, and the first query after its return connects within a quarter of a second.
 */
const reconnectDelaySeconds = (failures: number): number => Math.min(0.25, 0.01 * 2 ** failures);

/**
 * Errors that say the connection a statement used is gone (closed or reset by the peer, the
 * backend terminated or shut down), not that the server refuses new ones: the statement may be
 * run again on another connection.
 */
const LOST = new Set(['CONNECTION_CLOSED', 'ECONNRESET', 'EPIPE', '57P01', '57P02', '08003', '08006']);
const connectionLost = (err: unknown) => LOST.has(String((err as { code?: unknown })?.code ?? ''));

/** A read (or a transaction that never began) is retried only within this time from its start. */
const READ_DEADLINE_MS = 10_000;

export async function openDatabase(opts: DatabaseOptions): Promise<Database> {
  const schema = opts.schema ?? 'public';
  if (!SCHEMA_RE.test(schema)) throw new Error(`invalid schema name: ${schema}`);
  if (opts.pgliteImage && (opts.url || opts.dataDir)) throw new Error('pgliteImage is for an in-memory PGlite');
  return opts.url
    ? openPostgres(opts.url, schema, opts.maxConnections ?? 10)
    : openPglite(opts.dataDir, schema, opts.pgliteImage, opts.pgliteSettings);
}

/**
 * An image whose bytes are read at once: PGlite reads `loadDataDir` with Blob.arrayBuffer(), which
 * Node 20 assembles chunk by chunk (about a quarter of a second for the suites' 40 MB image).
 */
class ImageBytes extends Blob {
  readonly #image: ArrayBuffer;
  constructor(image: ArrayBuffer) {
    super([]);
    this.#image = image;
  }
  // The same bytes every time, not a copy: PGlite only reads them (untar, then MEMFS copies each
  // file's bytes into its own storage), and a 40 MB copy a start cost ~0.1 s of page faults.
  override arrayBuffer(): Promise<ArrayBuffer> {
    return Promise.resolve(this.#image);
  }
}

/** A Blob of an image that PGlite reads at once (see ImageBytes). */
export async function imageBlob(image: Blob | ArrayBuffer): Promise<Blob> {
  if (image instanceof ImageBytes) return image;
  return new ImageBytes(image instanceof ArrayBuffer ? image : await image.arrayBuffer());
}

async function openPglite(
  dataDir: string | undefined,
  schema: string,
  image?: Blob,
  settings?: Record<string, string>,
): Promise<Database> {
  const startParams = settings
    ? [...PGlite.defaultStartParams, ...Object.entries(settings).flatMap(([k, v]) => ['-c', `${k}=${v}`])]
    : undefined;
  const pg = await PGlite.create({
    ...(dataDir ? { dataDir } : image ? { loadDataDir: await imageBlob(image) } : {}),
    ...(startParams ? { startParams } : {}),
  });
  if (schema !== 'public') {
    await pg.exec(`CREATE SCHEMA IF NOT EXISTS ${schema}; SET search_path TO ${schema}, public;`);
  }
  let writes = 0;
  const wrap = (q: { query: PGlite['query'] }): Sql => ({
    async query<T>(text: string, params?: unknown[], opts?: QueryOptions) {
      if (!READ_ONLY.test(text) && !opts?.cacheWrite) writes++;
      const r = await q.query<T>(text, params as unknown[] | undefined);
      return r.rows;
    },
  });
  const root = wrap(pg);
  return {
    kind: 'pglite',
    schema,
    query: root.query,
    transaction: (fn) =>
      withAfterCommit((hooks) => pg.transaction((tx) => fn({ ...wrap(tx), afterCommit: (f) => hooks.push(f) }))),
    afterCommit: (f) => setImmediate(f),
    close: () => pg.close(),
    writeCount: () => writes,
    dumpImage: () => pg.dumpDataDir('none'),
  };
}

async function openPostgres(url: string, schema: string, max: number): Promise<Database> {
  if (schema !== 'public') {
    const admin = postgres(url, { max: 1, onnotice: () => {} });
    try {
      await admin.unsafe(`CREATE SCHEMA IF NOT EXISTS ${schema}`);
    } catch (err) {
      // Two processes creating the same schema at once race on the catalog's unique index.
      if ((err as { code?: string }).code !== '23505') throw err;
    } finally {
      await admin.end();
    }
  }
  const options = {
    onnotice: () => {},
    backoff: reconnectDelaySeconds,
    connection: { search_path: schema === 'public' ? 'public' : `${schema},public` },
    // JSON arrives from callers already serialised (PGlite and postgres.js then agree): pass
    // strings through instead of letting postgres.js stringify them a second time.
    types: {
      bigint: postgres.BigInt,
      jsonb: { to: 3802, from: [3802], serialize: passJson, parse: (x: string) => JSON.parse(x) },
      json: { to: 114, from: [114], serialize: passJson, parse: (x: string) => JSON.parse(x) },
    },
  };
  const sql = postgres(url, { ...options, max });
  const wrap = (s: postgres.Sql | postgres.TransactionSql): Sql => ({
    async query<T>(text: string, params?: unknown[], opts?: QueryOptions) {
      const rows = await s.unsafe(
        text,
        (params ?? []) as postgres.ParameterOrJSON<never>[],
        opts?.prepare ? { prepare: true } : undefined,
      );
      return rows as unknown as T[];
    },
  });
  const root = wrap(sql);
  /**
   * Runs `work` on a connection of its own, closed afterwards. The pool learns that its other
   * connections died with the same event one socket at a time, over several turns of the event
   * loop, so a retry through the pool may meet another dead one.
   */
  const onFreshConnection = async <T>(msLeft: number, work: (one: postgres.Sql) => Promise<T>): Promise<T> => {
    const one = postgres(url, { ...options, max: 1, connect_timeout: Math.max(1, Math.floor(msLeft / 1000)) });
    try {
      return await work(one);
    } finally {
      await one.end({ timeout: 1 });
    }
  };
  const begin = <T>(s: postgres.Sql, fn: (tx: Sql) => Promise<T>, hooks: Array<() => void>) =>
    s.begin((tx) => fn({ ...wrap(tx), afterCommit: (f) => hooks.push(f) })) as Promise<T>;
  return {
    kind: 'postgres',
    schema,
    // A read on a connection that died under it (a restarted server, a terminated backend, a
    // dropped proxy) is run once more on a fresh connection, within its deadline: only a
    // database that is really down fails a read. Writes are not: one whose connection died may
    // have been applied.
    async query<T>(text: string, params?: unknown[], opts?: QueryOptions) {
      const started = Date.now();
      try {
        return await root.query<T>(text, params, opts);
      } catch (err) {
        const msLeft = started + READ_DEADLINE_MS - Date.now();
        if (!READ_ONLY.test(text) || !connectionLost(err) || msLeft < 1000) throw err;
        return onFreshConnection(msLeft, (one) => wrap(one).query<T>(text, params, opts));
      }
    },
    // A transaction whose BEGIN met a dead connection ran nothing: it runs once more, likewise.
    transaction: (fn) =>
      withAfterCommit(async (hooks) => {
        const started = Date.now();
        let entered = false;
        const body = (tx: Sql) => {
          entered = true;
          return fn(tx);
        };
        try {
          return await begin(sql, body, hooks);
        } catch (err) {
          const msLeft = started + READ_DEADLINE_MS - Date.now();
          if (entered || !connectionLost(err) || msLeft < 1000) throw err;
          return onFreshConnection(msLeft, (one) => begin(one, body, hooks));
        }
      }),
    afterCommit: (f) => setImmediate(f),
    // postgres.js keeps one dedicated connection for LISTEN and re-listens after a reconnect.
    listen: async (channel, onNotify) => {
      const l = await sql.listen(channel, () => onNotify());
      return () => l.unlisten();
    },
    close: () => sql.end({ timeout: 5 }),
  };
}

async function withAfterCommit<T>(run: (hooks: Array<() => void>) => Promise<T>): Promise<T> {
  const hooks: Array<() => void> = [];
  const result = await run(hooks);
  for (const h of hooks) {
    try {
      h();
    } catch {
      /* a notification must not fail a committed transaction */
    }
  }
  return result;
}

function passJson(x: unknown): string {
  return typeof x === 'string' ? x : JSON.stringify(x);
}

export interface Migration {
  version: number;
  name: string;
  sql: string;
}

export function loadMigrations(dir = migrationsDir): Migration[] {
  return readdirSync(dir)
    .filter((f) => /^\d{4}_[a-z0-9_]+\.sql$/.test(f))
    .sort()
    .map((f) => ({
      version: Number(f.slice(0, 4)),
      name: f.slice(5, -4),
      sql: readFileSync(path.join(dir, f), 'utf8'),
    }));
}

/**
 * Applies pending migrations in one transaction under a transaction-scoped advisory lock keyed
 * by the schema, so that replicas starting at once apply each migration exactly once.
 * Returns the versions this call applied.
 */
export async function migrate(db: Database, migrations = loadMigrations()): Promise<number[]> {
  return db.transaction(async (tx) => {
    await tx.query(`SELECT pg_advisory_xact_lock(hashtext($1))`, [`migrations:${db.schema}`]);
    await tx.query(`CREATE TABLE IF NOT EXISTS schema_migrations (
      version int PRIMARY KEY, name text NOT NULL, applied_at timestamptz NOT NULL DEFAULT now())`);
    const done = new Set(
      (await tx.query<{ version: number }>(`SELECT version FROM schema_migrations`)).map((r) => r.version),
    );
    const applied: number[] = [];
    for (const m of migrations) {
      if (done.has(m.version)) continue;
      for (const stmt of splitStatements(m.sql)) await tx.query(stmt);
      await tx.query(`INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, [m.version, m.name]);
      applied.push(m.version);
    }
    return applied;
  });
}

/** Splits a migration on `;` at line ends, outside dollar-quoted bodies (parameterless protocol-safe). */
export function splitStatements(sqlText: string): string[] {
  const out: string[] = [];
  let cur = '';
  let inDollar = false;
  for (const line of sqlText.split('\n')) {
    const trimmed = line.replace(/--.*$/, '');
    if ((trimmed.match(/\$\$/g) ?? []).length % 2 === 1) inDollar = !inDollar;
    cur += `${line}\n`;
    if (!inDollar && /;\s*$/.test(trimmed)) {
      if (cur.trim()) out.push(cur.trim());
      cur = '';
    }
  }
  if (cur.trim()) out.push(cur.trim());
  return out;
}
