/**
 * A batch statistics job loses no chunk and duplicates no row when its worker dies: a child
 * process running the real worker is SIGKILLed with one chunk computed but not stored and another
 * stored but its queue job unfinished; another worker then finishes the job. On the embedded
 * default (PGlite data directory, the database queue) and on PostgreSQL with the database queue
 * or BullMQ on Redis. The file then has every feature × interval exactly once, and the same rows
 * as the same job run by an undisturbed worker.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, findOrCreateAccount } from '../../src/accounts/api-keys.js';
import { buildApp } from '../../src/app.js';
import { listOutbox } from '../../src/events/outbox.js';
import { loadConfig } from '../../src/platform/config.js';
import { migrate, openDatabase, type Database } from '../../src/platform/database.js';
import { openRuntime } from '../../src/runtime.js';
import { buildServiceApp, queueBackends, type TestApp } from '../helpers/app.js';
import { uniqueName } from '../helpers/backends.js';
import { kill9, type ScriptChild, startScript, untilOrExit } from '../helpers/processes.js';
import { ndjsonRows, parcel } from '../helpers/batch.js';
import { seedSeason } from '../helpers/reports.js';

const SIGNING_KEY = 'batch-faults-signing-key-0123456789abcdef';
const SCENE = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 80 };
const FEATURES = Array.from({ length: 12 }, (_, i) => ({
  type: 'Feature',
  id: `f${i}`,
  geometry: parcel(SCENE, 20 + (i % 4) * 190, 30 + Math.floor(i / 4) * 250, 150, 200),
}));
const BODY = {
  features: { type: 'FeatureCollection', features: FEATURES },
  indices: ['NDVI'],
  start_date: '2025-04-01',
  end_date: '2025-09-30',
  interval: 'weekly',
  format: 'ndjson',
};
const WEEKS = Math.floor((Date.parse('2025-09-30') - Date.parse('2025-04-01')) / 86_400_000 / 7) + 1;
const common = (dir: string, extra: Record<string, string> = {}) => ({
  IMAGERY_ROOTS: dir,
  QUEUE_LEASE_MS: '4000',
  SIGNING_KEY,
  PUBLIC_BASE_URL: 'http://localhost:3000',
  COMPUTE_THREADS: '1',
  LOG_LEVEL: 'silent',
  DEMO: 'false',
  DEV_BOOTSTRAP: 'false',
  BATCH_CHUNK_FEATURES: '2',
  BATCH_CONCURRENCY: '2',
  ...extra,
});

const startChild = (env: Record<string, string>) => startScript('test/helpers/batch-worker-child.mjs', env);
const until = (what: string, cond: () => boolean | Promise<boolean>, ms = 90_000, child?: ScriptChild) =>
  untilOrExit(what, cond, ms, child);

/** Both stops reached: a chunk computed but not stored, another stored but unacknowledged. */
const bothStops = (c: ScriptChild, id: string) =>
  new RegExp(`mid ${id} \\d+ computed`).test(c.out()) && new RegExp(`mid ${id} \\d+ stored`).test(c.out());

async function waitJob(db: Database, id: string): Promise<{ status: string; error: string | null }> {
  let row: { status: string; error: string | null } | undefined;
  await until('the job to finish', async () => {
    [row] = await db.query<{ status: string; error: string | null }>(
      'SELECT status, error FROM batch_jobs WHERE id = $1',
      [id],
    );
    return ['ready', 'failed', 'cancelled'].includes(row!.status);
  });
  return row!;
}

/** The job's file, read from its parts as the download streams them. */
async function fileOf(db: Database, id: string): Promise<string> {
  const parts = await db.query<{ content: Uint8Array }>(
    'SELECT content FROM batch_files WHERE job_id = $1 ORDER BY part',
    [id],
  );
  return parts.map((p) => Buffer.from(p.content).toString('utf8')).join('');
}

/** Every feature × week exactly once; at least one row with statistics. */
function checkRows(text: string): Array<Record<string, any>> {
  const rows = ndjsonRows(text);
  const keys = rows.map((r) => `${r.field_id}|${r.index}|${r.interval_start}`);
  expect(new Set(keys).size).toBe(keys.length);
  expect(rows.length).toBe(FEATURES.length * WEEKS);
  expect(new Set(rows.map((r) => r.field_id))).toEqual(new Set(FEATURES.map((f) => f.id)));
  expect(rows.some((r) => r.mean !== null)).toBe(true);
  return rows;
}

async function afterKill(db: Database, accountId: string, id: string, reference?: string): Promise<void> {
  const done = await waitJob(db, id);
  expect(done.status, done.error ?? '').toBe('ready');
  const chunks = await db.query<{ chunk: number; attempts: number; done: boolean }>(
    'SELECT chunk, attempts, done FROM batch_chunks WHERE job_id = $1 ORDER BY chunk',
    [id],
  );
  expect(chunks.every((c) => c.done)).toBe(true);
  // the two interrupted chunks ran again
  expect(chunks.filter((c) => c.attempts >= 2).length).toBeGreaterThanOrEqual(2);
  const text = await fileOf(db, id);
  checkRows(text);
  if (reference !== undefined) expect(text).toBe(reference);
  expect((await listOutbox(db, accountId, 'batch.completed')).filter((e) => e.data.batch_id === id)).toHaveLength(1);
}

describe('embedded default (PGlite data directory): the worker process killed mid-job', () => {
  let dir: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'bat-kill-'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('another worker finishes the job: no chunk lost, no row twice', async () => {
    const dataDir = path.join(dir, uniqueName('d'));
    const env = common(path.join(dataDir, 'imagery'));
    // The job, requested from an api-only service on the data directory (which then closes)
    let jobId: string;
    let accountId: string;
    {
      const db = await openDatabase({ dataDir });
      await migrate(db);
      const runtime = await openRuntime(loadConfig({ ...env, ROLE: 'api' }), { db, pollMs: 50, log: () => {} });
      const app = await buildApp(runtime);
      const account = await findOrCreateAccount(db, 'kill');
      const { key } = await createApiKey(db, account.id);
      const t = { app, auth: (k = key) => ({ authorization: `Bearer ${k}` }) } as unknown as TestApp;
      await seedSeason(t, path.join(dataDir, 'imagery'), { size: SCENE.size });
      const res = await app.inject({ method: 'POST', url: '/v1/batch/statistics', headers: t.auth(), payload: BODY });
      expect(res.statusCode, res.body).toBe(202);
      jobId = res.json().id;
      accountId = account.id;
      await app.close();
      await runtime.close();
      await db.close();
    }
    const child = startChild({ ...env, DB_DIR: dataDir, PREFIX: '' });
    try {
      await until('the child to stop in two chunks', () => bothStops(child, jobId), 90_000, child);
    } finally {
      await kill9(child);
    }
    const db = await openDatabase({ dataDir });
    try {
      const runtime = await openRuntime(loadConfig({ ...env, ROLE: 'all' }), { db, pollMs: 50, log: () => {} });
      try {
        await afterKill(db, accountId, jobId);
      } finally {
        await runtime.close();
      }
    } finally {
      await db.close();
    }
  }, 240_000);
});

describe.each(queueBackends.filter((b) => b.db.name === 'postgres'))(
  '$name: the worker process killed mid-job',
  (backend) => {
    let dir: string;
    let t: TestApp;
    const prefix = uniqueName('q');
    beforeAll(async () => {
      dir = mkdtempSync(path.join(os.tmpdir(), 'bat-kill-'));
      t = await buildServiceApp(backend, { env: common(dir, { ROLE: 'api' }), queuePrefix: prefix });
      await seedSeason(t, dir, { size: SCENE.size });
    }, 120_000);
    afterAll(async () => {
      await t?.close();
      rmSync(dir, { recursive: true, force: true });
    });

    it('another worker finishes the job with the rows an undisturbed worker gives', async () => {
      const workerEnv = {
        ...common(dir),
        ROLE: 'worker',
        ...(backend.redisUrl ? { REDIS_URL: backend.redisUrl } : {}),
      };
      // The reference: the same job, run by an undisturbed worker.
      const ref = await t.app.inject({ method: 'POST', url: '/v1/batch/statistics', headers: t.auth(), payload: BODY });
      expect(ref.statusCode).toBe(202);
      let reference: string;
      {
        const worker = await openRuntime(loadConfig(workerEnv), {
          db: t.db,
          queuePrefix: prefix,
          pollMs: 50,
          log: () => {},
        });
        try {
          expect((await waitJob(t.db, ref.json().id)).status).toBe('ready');
          reference = await fileOf(t.db, ref.json().id);
          checkRows(reference);
        } finally {
          await worker.close();
        }
      }
      const res = await t.app.inject({ method: 'POST', url: '/v1/batch/statistics', headers: t.auth(), payload: BODY });
      const id = res.json().id;
      const child = startChild({
        ...common(dir),
        DB_URL: backend.db.url!,
        DB_SCHEMA: t.db.schema,
        PREFIX: prefix,
        ...(backend.redisUrl ? { REDIS_URL: backend.redisUrl } : { REDIS_URL: '' }),
      });
      try {
        await until('the child to stop in two chunks', () => bothStops(child, id), 90_000, child);
      } finally {
        await kill9(child);
      }
      const worker = await openRuntime(loadConfig(workerEnv), {
        db: t.db,
        queuePrefix: prefix,
        pollMs: 50,
        log: () => {},
      });
      try {
        await afterKill(t.db, t.accountId, id, reference);
      } finally {
        await worker.close();
      }
    }, 240_000);
  },
);
