/**
 * A chunk whose rows cannot be stored fails its job once its runs are used up, as one whose rows
 * cannot be computed does (src/batch/worker.ts). Before, only computing was inside the handler's
 * catch: a store that failed on every run (a chunk of 1.5 GB of histogram rows) left the queue job
 * failed and the batch job `running` for ever. The statement fails here by a wrapper around a real
 * database that refuses that one statement; on each database backend.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BatchDeps } from '../../src/batch/service.js';
import { processBatchJob } from '../../src/batch/worker.js';
import type { Database } from '../../src/platform/database.js';
import { dbBackends, disposeDatabase, freshDatabase } from '../helpers/backends.js';

const REQUEST = {
  indices: [{ name: 'NDVI' }],
  start_date: '2025-04-01',
  end_date: '2025-06-30',
  interval: 'weekly',
  format: 'csv',
  max_cloud_cover: 20,
  options: {},
};
const MAX_ATTEMPTS = 3;

describe.each(dbBackends)('a chunk that cannot store its rows, on $name', (backend) => {
  let db: Database;
  beforeAll(async () => {
    db = await freshDatabase(backend);
    await db.query(`INSERT INTO accounts (id, name) VALUES ('acc_store', 'store')`);
  }, 60_000);
  afterAll(async () => {
    if (db) await disposeDatabase(db);
  });

  /** The database, but the statement storing a chunk's rows throws what a too-large body threw. */
  const refusingStore = (): Database =>
    new Proxy(db, {
      get(target, key, receiver) {
        if (key !== 'query') return Reflect.get(target, key, receiver);
        return (text: string, params?: unknown[]) =>
          /^\s*UPDATE batch_chunks SET done = true/.test(text)
            ? Promise.reject(new RangeError('Invalid string length'))
            : target.query(text, params as never);
      },
    });
  const deps = (d: Database) => ({ db: d, maxAttempts: MAX_ATTEMPTS }) as unknown as BatchDeps;

  it('fails the job with the reason on its last run, not before; the chunk stays undone', async () => {
    const id = `bat_store_${backend.name}`;
    await db.query(
      `INSERT INTO batch_jobs (id, account_id, status, request, format, feature_count, chunk_count, total)
       VALUES ($1, 'acc_store', 'pending', $2::jsonb, 'csv', 0, 1, '0')`,
      [id, JSON.stringify(REQUEST)],
    );
    // a chunk of no feature: nothing to compute, only its (empty) rows to store
    await db.query('INSERT INTO batch_chunks (job_id, chunk, first_seq, end_seq) VALUES ($1, 0, 0, 0)', [id]);
    const status = async () =>
      (
        await db.query<{ status: string; error: string | null }>('SELECT status, error FROM batch_jobs WHERE id = $1', [
          id,
        ])
      )[0]!;
    for (let attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
      await expect(
        processBatchJob(deps(refusingStore()), { job_id: id, chunk: 0 }, { id: 'q', queue: 'batch', attempt }),
      ).rejects.toThrow('Invalid string length');
      expect(await status()).toEqual({ status: 'running', error: null });
    }
    await expect(
      processBatchJob(
        deps(refusingStore()),
        { job_id: id, chunk: 0 },
        { id: 'q', queue: 'batch', attempt: MAX_ATTEMPTS },
      ),
    ).rejects.toThrow('Invalid string length');
    expect(await status()).toEqual({
      status: 'failed',
      error: `chunk 0 failed after ${MAX_ATTEMPTS} attempts: Invalid string length`,
    });
    const [chunk] = await db.query<{ done: boolean }>('SELECT done FROM batch_chunks WHERE job_id = $1', [id]);
    expect(chunk!.done).toBe(false);
  });

  it('a store that succeeds on a later run completes the chunk (the database as it is)', async () => {
    const id = `bat_store_ok_${backend.name}`;
    await db.query(
      `INSERT INTO batch_jobs (id, account_id, status, request, format, feature_count, chunk_count, total)
       VALUES ($1, 'acc_store', 'pending', $2::jsonb, 'csv', 0, 2, '0')`,
      [id, JSON.stringify(REQUEST)],
    );
    await db.query('INSERT INTO batch_chunks (job_id, chunk, first_seq, end_seq) VALUES ($1, 0, 0, 0), ($1, 1, 0, 0)', [
      id,
    ]);
    await expect(
      processBatchJob(deps(refusingStore()), { job_id: id, chunk: 0 }, { id: 'q', queue: 'batch', attempt: 1 }),
    ).rejects.toThrow();
    // chunk 1 is still open, so no file job is queued and the queues are not needed
    await processBatchJob(deps(db), { job_id: id, chunk: 0 }, { id: 'q', queue: 'batch', attempt: 2 });
    const rows = await db.query<{ chunk: number; done: boolean }>(
      'SELECT chunk, done FROM batch_chunks WHERE job_id = $1 ORDER BY chunk',
      [id],
    );
    expect(rows).toEqual([
      { chunk: 0, done: true },
      { chunk: 1, done: false },
    ]);
    const [job] = await db.query<{ status: string }>('SELECT status FROM batch_jobs WHERE id = $1', [id]);
    expect(job!.status).toBe('running');
  });
});
