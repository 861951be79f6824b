/**
 * A batch statistics file stored in parts (BATCH_PART_BYTES) and downloaded part by part, on each
 * database backend: the downloaded bytes are exactly the header and the chunks' rows in chunk
 * order, whatever the part size; a chunk stored before parts existed (one body, which migration
 * 0025 makes a one-part array) gives the same bytes; multi-byte characters survive the text path.
 * The file is copied a chunk a statement, resumable and dropped with a job cancelled meanwhile. A
 * chunk that cannot store its rows (a wrapper around the real database refuses that statement)
 * fails its job on its last run, as one that cannot be computed: before, the job stayed `running`.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RowParts } from '../../src/batch/execute.js';
import { openBatchDownload, type BatchDeps } from '../../src/batch/service.js';
import { processBatchJob } from '../../src/batch/worker.js';
import { loadMigrations, migrate, type Database } from '../../src/platform/database.js';
import { signedDownloadUrl } from '../../src/platform/signed-links.js';
import { dbBackends, disposeDatabase, freshDatabase } from '../helpers/backends.js';

const HEADER =
  'field_id,index,interval_start,interval_end,date,imagery_id,count,min,max,mean,std,valid_fraction,cloud_cover\n';
const MAX_ATTEMPTS = 3;
const REQUEST = {
  indices: [{ name: 'NDVI' }],
  start_date: '2025-04-01',
  end_date: '2025-06-30',
  interval: 'weekly',
  format: 'csv',
  max_cloud_cover: 20,
  options: {},
};

/** Rows of chunk `c`: ids with 2-, 3- and 4-byte UTF-8 characters, quoted ones, rows of varied length. */
function chunkRows(c: number, n: number): string[] {
  const ids = ['parcelle-é', '田んぼ', 'field 🌾', '"quoted, id"', 'plain'];
  return Array.from({ length: n }, (_, i) => {
    const id = ids[(c + i) % ids.length]!;
    const cell = /[",]/.test(id) ? `"${id.replace(/"/g, '""')}"` : id;
    return `${cell}-${c}-${i},NDVI,2025-04-01,2025-04-07,2025-04-03,img_${c}_${i},${100 + i},0.1,0.9,${(i / 7).toString()},0.05,0.97,${i % 3 === 0 ? '' : '3.2'}\n`;
  });
}

describe.each(dbBackends)('batch file parts on $name', (backend) => {
  let db: Database;
  const signingKey = 'parts-test-signing-key-0123456789abcdef';
  // What storing and serving a file uses of the batch dependencies (no chunk is computed here).
  const deps = () =>
    ({ db, signingKey, publicBaseUrl: 'http://127.0.0.1', urlTtlMs: 3_600_000 }) as unknown as BatchDeps;

  beforeAll(async () => {
    db = await freshDatabase(backend);
    await db.query(`INSERT INTO accounts (id, name) VALUES ('acc_parts', 'parts')`);
  }, 60_000);
  afterAll(async () => {
    if (db) await disposeDatabase(db);
  });

  /**
   * A running job of chunks done with these bodies (null: none) and row counts, or, for `open`
   * chunks, not done and of no feature (nothing to compute, only rows to store).
   */
  async function newJob(id: string, bodies: Array<string[] | null>, rowCounts: number[], open = false) {
    await db.query(
      `INSERT INTO batch_jobs (id, account_id, status, request, format, feature_count, chunk_count, total)
       VALUES ($1, 'acc_parts', 'running', $2::jsonb, 'csv', $3, $3, $4)`,
      [id, JSON.stringify(REQUEST), bodies.length, String(bodies.length)],
    );
    for (const [c, body] of bodies.entries())
      await db.query(
        open
          ? 'INSERT INTO batch_chunks (job_id, chunk, first_seq, end_seq) VALUES ($1, $2, 0, 0)'
          : `INSERT INTO batch_chunks (job_id, chunk, first_seq, end_seq, done, row_count, body)
             VALUES ($1, $2, $2, $2 + 1, true, $3, $4::text[])`,
        open ? [id, c] : [id, c, rowCounts[c], body],
      );
  }

  /** A job whose chunks are done with these bodies, its file made by the file job, then downloaded. */
  async function fileOf(
    id: string,
    bodies: Array<string[] | null>,
    rowCounts: number[],
    beforeFileJob?: () => Promise<void>,
  ): Promise<Buffer> {
    await newJob(id, bodies, rowCounts);
    await beforeFileJob?.();
    await processBatchJob(deps(), { job_id: id, file: true });
    const [job] = await db.query<{ status: string; expires_at: Date; size_bytes: string }>(
      'SELECT status, expires_at, size_bytes FROM batch_jobs WHERE id = $1',
      [id],
    );
    expect(job!.status).toBe('ready');
    const url = new URL(signedDownloadUrl('http://127.0.0.1', signingKey, 'batch/statistics', id, job!.expires_at));
    const dl = await openBatchDownload(
      deps(),
      id,
      url.searchParams.get('expires') ?? undefined,
      url.searchParams.get('signature') ?? undefined,
    );
    const got: Buffer[] = [];
    for await (const b of dl.body(null)) got.push(b as Buffer);
    const bytes = Buffer.concat(got);
    expect(dl.size).toBe(bytes.length);
    expect(Number(job!.size_bytes)).toBe(bytes.length);
    return bytes;
  }

  it('the download is the header and every chunk’s rows in order, byte for byte, for any part size', async () => {
    const chunks = [chunkRows(0, 40), [], chunkRows(2, 1), chunkRows(3, 57)];
    const expected = Buffer.from(HEADER + chunks.map((r) => r.join('')).join(''), 'utf8');
    const counts = chunks.map((r) => r.length);
    // Before parts: one body per chunk (as migration 0025 keeps an old one); an empty chunk has none.
    const whole = await fileOf(
      'bat_parts_whole',
      chunks.map((r) => (r.length ? [r.join('')] : null)),
      counts,
    );
    expect(whole.equals(expected)).toBe(true);
    for (const partBytes of [1, 100, 1000, 1 << 20]) {
      const bodies = chunks.map((rows) => {
        const p = new RowParts(partBytes);
        for (const r of rows) p.push(r);
        return rows.length ? p.finish() : null;
      });
      // Parts hold whole rows and are cut once they reach partBytes.
      for (const b of bodies.filter((x): x is string[] => !!x)) {
        for (const part of b.slice(0, -1)) expect(Buffer.byteLength(part)).toBeGreaterThanOrEqual(partBytes);
        for (const part of b) expect(part.endsWith('\n')).toBe(true);
      }
      const got = await fileOf(`bat_parts_${partBytes}`, bodies, counts);
      expect(got.equals(expected), `part size ${partBytes}`).toBe(true);
      const [n] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM batch_files WHERE job_id = $1', [
        `bat_parts_${partBytes}`,
      ]);
      expect(n!.n).toBe(1 + bodies.reduce((a, b) => a + (b?.length ?? 0), 0));
    }
  });

  it('a file job run again after one that stopped part way adds only the parts missing', async () => {
    const chunks = [chunkRows(0, 30), chunkRows(1, 20), [], chunkRows(3, 25)];
    const expected = Buffer.from(HEADER + chunks.map((r) => r.join('')).join(''), 'utf8');
    const bodies = chunks.map((rows) => {
      const p = new RowParts(200);
      for (const r of rows) p.push(r);
      return rows.length ? p.finish() : null;
    });
    const parts = bodies.reduce((a, b) => a + (b?.length ?? 0), 0);
    // What a run that died after copying the header and the first chunk left: those parts, numbered
    // as every run numbers them (the file job copies a chunk a statement since the file of 1.15 GB).
    const id = 'bat_parts_resumed';
    const first = [HEADER, ...bodies[0]!];
    const got = await fileOf(
      id,
      bodies,
      chunks.map((r) => r.length),
      async () => {
        for (const [k, piece] of first.entries())
          await db.query('INSERT INTO batch_files (job_id, part, content) VALUES ($1, $2, $3::bytea)', [
            id,
            k,
            Buffer.from(piece),
          ]);
      },
    );
    expect(got.equals(expected)).toBe(true);
    const [n] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM batch_files WHERE job_id = $1', [id]);
    expect(n!.n).toBe(1 + parts);
  });

  it('the file is copied a chunk a statement, with a turn of the event loop before each', async () => {
    const id = 'bat_parts_turns';
    const chunks = [chunkRows(0, 10), chunkRows(1, 12), [], chunkRows(3, 9)];
    await newJob(
      id,
      chunks.map((rows) => (rows.length ? [rows.join('')] : null)),
      chunks.map((rows) => rows.length),
    );
    // turns of the event loop, counted by a callback that schedules itself again
    let turns = 0;
    let ticking = true;
    const tick = () => {
      turns++;
      if (ticking) setImmediate(tick);
    };
    setImmediate(tick);
    const copies: number[] = [];
    const watched = new Proxy(db, {
      get(target, key, receiver) {
        if (key !== 'query') return Reflect.get(target, key, receiver);
        return (text: string, params?: unknown[]) => {
          if (/INSERT INTO batch_files[\s\S]*FROM batch_chunks/.test(text)) copies.push(turns);
          return target.query(text, params as never);
        };
      },
    });
    try {
      await processBatchJob({ ...deps(), db: watched } as BatchDeps, { job_id: id, file: true });
    } finally {
      ticking = false;
    }
    expect(copies).toHaveLength(3); // the chunks with rows
    for (let k = 1; k < copies.length; k++) expect(copies[k]!).toBeGreaterThan(copies[k - 1]!);
    const [job] = await db.query<{ status: string; size_bytes: string }>(
      'SELECT status, size_bytes FROM batch_jobs WHERE id = $1',
      [id],
    );
    expect(job!.status).toBe('ready');
    expect(Number(job!.size_bytes)).toBe(Buffer.byteLength(HEADER + chunks.map((r) => r.join('')).join('')));
  });

  it('a job cancelled while its file was copied keeps no part of it', async () => {
    const id = 'bat_parts_cancelled';
    await newJob(id, [[chunkRows(0, 3).join('')]], [3]);
    // the cancel lands between the copy and the transaction that would mark the job ready
    const cancelling = new Proxy(db, {
      get(target, key, receiver) {
        if (key !== 'transaction') return Reflect.get(target, key, receiver);
        return async (fn: Parameters<Database['transaction']>[0]) => {
          await target.query(`UPDATE batch_jobs SET status = 'cancelled' WHERE id = $1`, [id]);
          return target.transaction(fn);
        };
      },
    });
    const d = { ...deps(), db: cancelling } as BatchDeps;
    await processBatchJob(d, { job_id: id, file: true });
    const [job] = await db.query<{ status: string }>('SELECT status FROM batch_jobs WHERE id = $1', [id]);
    expect(job!.status).toBe('cancelled');
    const [n] = await db.query<{ n: number }>('SELECT count(*)::int AS n FROM batch_files WHERE job_id = $1', [id]);
    expect(n!.n).toBe(0);
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
  // chunks of no feature: the compute pool is never asked for a task (only its size is read)
  const storing = (d: Database) => ({ ...deps(), db: d, maxAttempts: MAX_ATTEMPTS, compute: { size: 1 } }) as BatchDeps;

  it('fails the job with the reason on its last run, not before; the chunk stays undone', async () => {
    const id = 'bat_store_fails';
    await newJob(id, [null], [0], true);
    const status = async () =>
      (
        await db.query<{ status: string; error: string | null }>('SELECT status, error FROM batch_jobs WHERE id = $1', [
          id,
        ])
      )[0]!;
    for (let attempt = 1; attempt < MAX_ATTEMPTS; attempt++) {
      await expect(
        processBatchJob(storing(refusingStore()), { job_id: id, chunk: 0 }, { id: 'q', queue: 'batch', attempt }),
      ).rejects.toThrow('Invalid string length');
      expect(await status()).toEqual({ status: 'running', error: null });
    }
    await expect(
      processBatchJob(
        storing(refusingStore()),
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
    const id = 'bat_store_later';
    await newJob(id, [null, null], [0, 0], true);
    await expect(
      processBatchJob(storing(refusingStore()), { job_id: id, chunk: 0 }, { id: 'q', queue: 'batch', attempt: 1 }),
    ).rejects.toThrow();
    // chunk 1 is still open, so no file job is queued and the queues are not needed
    await processBatchJob(storing(db), { job_id: id, chunk: 0 }, { id: 'q', queue: 'batch', attempt: 2 });
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

  it('migration 0025 keeps a chunk body stored before it: it becomes a one-part array', async () => {
    const old = await freshDatabase(backend, { migrate: false });
    try {
      await migrate(
        old,
        loadMigrations().filter((m) => m.version < 25),
      );
      await old.query(`INSERT INTO accounts (id, name) VALUES ('acc_old', 'old')`);
      await old.query(
        `INSERT INTO batch_jobs (id, account_id, status, request, format, feature_count, chunk_count, total)
         VALUES ('bat_old', 'acc_old', 'running', $1::jsonb, 'csv', 2, 2, 2)`,
        [JSON.stringify(REQUEST)],
      );
      const body = chunkRows(7, 3).join('');
      await old.query(
        `INSERT INTO batch_chunks (job_id, chunk, first_seq, end_seq, done, row_count, body)
         VALUES ('bat_old', 0, 0, 1, true, 3, $1), ('bat_old', 1, 1, 2, false, 0, NULL)`,
        [body],
      );
      expect(await migrate(old)).toContain(25);
      const rows = await old.query<{ chunk: number; body: string[] | null }>(
        `SELECT chunk, body FROM batch_chunks WHERE job_id = 'bat_old' ORDER BY chunk`,
      );
      expect(rows.map((r) => r.body)).toEqual([[body], null]);
    } finally {
      await disposeDatabase(old);
    }
  });
});
