/**
 * The job-queue contract, run on every backend: the database queue on PGlite (always) and on
 * PostgreSQL, and BullMQ on Redis (when TEST_DATABASE_URL / TEST_REDIS_URL are set).
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { migrate, openDatabase, type Database } from '../../src/platform/database.js';
import { createJobQueues, type JobQueues } from '../../src/platform/queue/job-queues.js';
import type { JobFailure } from '../../src/platform/queue/types.js';
import { packageRoot } from '../../src/platform/paths.js';
import { TEST_DATABASE_URL, TEST_REDIS_URL, disposeDatabase, freshDatabase, uniqueName } from '../helpers/backends.js';

interface Backend {
  name: string;
  db: { name: 'pglite' | 'postgres'; url?: string };
  redisUrl?: string;
}

const backends: Backend[] = [
  { name: 'database queue on pglite', db: { name: 'pglite' } },
  ...(TEST_DATABASE_URL
    ? [{ name: 'database queue on postgres', db: { name: 'postgres' as const, url: TEST_DATABASE_URL } }]
    : []),
  ...(TEST_REDIS_URL ? [{ name: 'bullmq on redis', db: { name: 'pglite' as const }, redisUrl: TEST_REDIS_URL }] : []),
];

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
async function until(what: string, cond: () => boolean | Promise<boolean>, ms = 10_000): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await sleep(20);
  }
  throw new Error(`timed out waiting for ${what}`);
}

describe.each(backends)('job queue contract: $name', (backend) => {
  let db: Database;
  const open: JobQueues[] = [];
  const make = async (prefix = uniqueName('q'), leaseMs = 1000, onFailure?: (f: JobFailure) => void) => {
    const q = await createJobQueues({ db, redisUrl: backend.redisUrl, prefix, leaseMs, pollMs: 50, onFailure });
    open.push(q);
    return q;
  };
  beforeAll(async () => {
    db = await freshDatabase(backend.db);
  });
  afterAll(async () => {
    for (const q of open) await q.close(1000).catch(() => {});
    for (const q of open) await (q as { obliterate?: () => Promise<void> }).obliterate?.().catch(() => {});
    await disposeDatabase(db);
  });

  it('runs a job with its data', async () => {
    const q = await make();
    const got: unknown[] = [];
    q.process<{ n: number }>('a', async (data, ctx) => {
      got.push({ data, attempt: ctx.attempt });
    });
    const id = await q.enqueue('a', { n: 1 });
    expect(typeof id).toBe('string');
    await until('job ran', () => got.length === 1);
    expect(got[0]).toEqual({ data: { n: 1 }, attempt: 1 });
    await until('completed count', async () => (await q.counts('a')).completed === 1);
  });

  it('enqueueMany adds many jobs at once: each runs with its data, delays and job ids kept, a known id ignored', async () => {
    const q = await make();
    const got: Array<{ n: number; at: number }> = [];
    q.process<{ n: number }>('m', async (data) => void got.push({ ...data, at: Date.now() }));
    await q.enqueue('m', { n: -1 }, { jobId: 'm-dup', delayMs: 60_000 });
    const t0 = Date.now();
    const ids = await q.enqueueMany('m', [
      { data: { n: 1 }, opts: { jobId: 'm-1' } },
      { data: { n: 2 } },
      { data: { n: 3 }, opts: { jobId: 'm-3', delayMs: 400 } },
      { data: { n: 4 }, opts: { jobId: 'm-dup' } },
    ]);
    expect(ids[0]).toBe('m-1');
    expect(ids[2]).toBe('m-3');
    expect(new Set(ids).size).toBe(4);
    await until('three jobs ran', () => got.length === 3);
    expect(got.map((g) => g.n).sort()).toEqual([1, 2, 3]);
    expect(got.find((g) => g.n === 3)!.at - t0).toBeGreaterThanOrEqual(380);
    expect(await q.pending('m', 'm-dup')).toBe(true); // the delayed original, not replaced
    expect(await q.enqueueMany('m', [])).toEqual([]);
  });

  it('oldestWaitingSeconds: the age of the oldest runnable job, delayed ones not counted, 0 when none', async () => {
    const q = await make();
    expect(await q.oldestWaitingSeconds('o')).toBe(0);
    await q.enqueue('o', { n: 1 }, { delayMs: 60_000 });
    expect(await q.oldestWaitingSeconds('o')).toBe(0); // delayed: not runnable yet
    const t0 = Date.now();
    await q.enqueue('o', { n: 2 });
    await sleep(700);
    await q.enqueue('o', { n: 3 });
    await sleep(500);
    // Nothing consumes 'o': the first runnable job has waited since t0, the later one less.
    const age = await q.oldestWaitingSeconds('o');
    const elapsed = (Date.now() - t0) / 1000;
    expect(age).toBeGreaterThanOrEqual(1.1);
    expect(age).toBeLessThanOrEqual(elapsed + 0.1);
    // Once a consumer takes them, none waits.
    q.process('o', async () => {});
    await until('the queue drained', async () => (await q.oldestWaitingSeconds('o')) === 0, 5000);
  });

  it('respects a delay: not before, soon after', async () => {
    const q = await make();
    const ranAt: number[] = [];
    q.process('d', async () => void ranAt.push(Date.now()));
    const t0 = Date.now();
    await q.enqueue('d', {}, { delayMs: 600 });
    await until('delayed count', async () => (await q.counts('d')).delayed === 1 || ranAt.length > 0, 2000);
    await until('delayed job ran', () => ranAt.length === 1, 5000);
    expect(ranAt[0]! - t0).toBeGreaterThanOrEqual(590);
    expect(ranAt[0]! - t0).toBeLessThan(2500);
  });

  it('retries with the backoff schedule, then fails', async () => {
    const q = await make();
    const at: number[] = [];
    q.process('r', async (_d, ctx) => {
      at.push(Date.now());
      throw new Error(`attempt ${ctx.attempt} failed`);
    });
    await q.enqueue('r', {}, { attempts: 3, backoffMs: [200, 400] });
    await until('three attempts', () => at.length === 3, 8000);
    await until('failed count', async () => (await q.counts('r')).failed === 1, 3000);
    expect(at[1]! - at[0]!).toBeGreaterThanOrEqual(190);
    expect(at[2]! - at[1]!).toBeGreaterThanOrEqual(390);
    await sleep(600);
    expect(at).toHaveLength(3);
  });

  it('tells onFailure of every failed run: retried with its delay, then failed; a completed job of none', async () => {
    const failures: JobFailure[] = [];
    const q = await make(undefined, undefined, (f) => {
      failures.push(f);
      throw new Error('a listener that throws changes nothing');
    });
    let ok = 0;
    q.process<{ fail: boolean }>('f', async (data, ctx) => {
      if (data.fail) throw new Error(`attempt ${ctx.attempt} failed`);
      ok++;
    });
    const id = await q.enqueue('f', { fail: true }, { attempts: 3, backoffMs: [100, 200] });
    await q.enqueue('f', { fail: false }, { attempts: 3 });
    await until('failed count', async () => (await q.counts('f')).failed === 1, 8000);
    await until('completed count', async () => (await q.counts('f')).completed === 1, 3000);
    expect(ok).toBe(1);
    expect(failures).toEqual([
      { queue: 'f', id, outcome: 'retried', attempt: 1, attempts: 3, retry_in_ms: 100, error: 'attempt 1 failed' },
      { queue: 'f', id, outcome: 'retried', attempt: 2, attempts: 3, retry_in_ms: 200, error: 'attempt 2 failed' },
      { queue: 'f', id, outcome: 'failed', attempt: 3, attempts: 3, error: 'attempt 3 failed' },
    ]);
  });

  it('succeeds on a retry after failures', async () => {
    const q = await make();
    let n = 0;
    q.process('s', async () => {
      if (++n < 2) throw new Error('first run fails');
    });
    await q.enqueue('s', {}, { attempts: 3, backoffMs: [100] });
    await until('completed after a retry', async () => (await q.counts('s')).completed === 1, 5000);
    expect(n).toBe(2);
  });

  it('a jobId makes enqueue idempotent', async () => {
    const q = await make();
    let runs = 0;
    await q.enqueue('u', { v: 1 }, { jobId: 'same-id', delayMs: 300 });
    await q.enqueue('u', { v: 2 }, { jobId: 'same-id', delayMs: 300 });
    q.process('u', async () => void runs++);
    await q.enqueue('u', { v: 3 }, { jobId: 'same-id' });
    await until('ran', () => runs >= 1, 5000);
    await sleep(500);
    expect(runs).toBe(1);
  });

  it('remove cancels a delayed job', async () => {
    const q = await make();
    let runs = 0;
    q.process('x', async () => void runs++);
    await q.enqueue('x', {}, { jobId: 'cancel-me', delayMs: 400 });
    expect(await q.remove('x', 'cancel-me')).toBe(true);
    expect(await q.remove('x', 'cancel-me')).toBe(false);
    await sleep(800);
    expect(runs).toBe(0);
  });

  it('runs up to `concurrency` handlers at once', async () => {
    const q = await make();
    let active = 0;
    let peak = 0;
    let done = 0;
    q.process(
      'c',
      async () => {
        active++;
        peak = Math.max(peak, active);
        await sleep(150);
        active--;
        done++;
      },
      { concurrency: 3 },
    );
    for (let i = 0; i < 9; i++) await q.enqueue('c', { i });
    await until('all done', () => done === 9, 10_000);
    expect(peak).toBe(3);
  });

  it('close waits for a running handler', async () => {
    const q = await make();
    let finished = false;
    let started = false;
    q.process('w', async () => {
      started = true;
      await sleep(300);
      finished = true;
    });
    await q.enqueue('w', {});
    await until('started', () => started);
    await q.close(5000);
    expect(finished).toBe(true);
  });

  it('close past its grace period hands a running job back: another consumer runs it at once, not after the lease', async () => {
    const prefix = uniqueName('q');
    const first = await make(prefix, 30_000);
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    const runs: string[] = [];
    first.process('long', async () => {
      runs.push('first');
      await held;
    });
    await first.enqueue('long', { x: 1 });
    await until('the first consumer took it', () => runs.length === 1);
    await first.close(200);
    const second = await make(prefix, 30_000);
    second.process('long', async () => void runs.push('second'));
    // Well inside the 30 s lease: only the hand-back explains a second run this soon.
    await until('the second consumer ran it', () => runs.length === 2, 10_000);
    expect(runs).toEqual(['first', 'second']);
    release();
  });

  it('a delayed job survives a restart', async () => {
    const prefix = uniqueName('q');
    const first = await make(prefix);
    await first.enqueue('survive', { keep: true }, { delayMs: 400 });
    await first.close();
    const second = await make(prefix);
    const got: unknown[] = [];
    second.process('survive', async (d) => void got.push(d));
    await until('job ran after restart', () => got.length === 1, 5000);
    expect(got[0]).toEqual({ keep: true });
  });

  it('a worker process killed mid-job: the job runs again in another process', async () => {
    const prefix = uniqueName('q');
    let dir: string | undefined;
    let childDb: Database | undefined;
    const env: Record<string, string> = { ...(process.env as Record<string, string>), PREFIX: prefix, LEASE_MS: '800' };
    if (backend.redisUrl) env.REDIS_URL = backend.redisUrl;
    if (backend.db.url) {
      env.DB_URL = backend.db.url;
      env.DB_SCHEMA = db.schema;
    } else {
      // PGlite lives in one process: the child owns a data directory, the test opens it after the kill.
      dir = mkdtempSync(path.join(os.tmpdir(), 'pglite-kill-'));
      const seed = await openDatabase({ dataDir: dir });
      await migrate(seed);
      if (!backend.redisUrl) {
        // The database queue: enqueue through the child's database, closed before the child starts.
        const pq = await createJobQueues({ db: seed, prefix });
        await pq.enqueue('kill', { precious: 1 }, { jobId: 'precious' });
        await pq.close();
      }
      await seed.close();
      env.DB_DIR = dir;
    }
    if (backend.redisUrl || backend.db.url) {
      const pq = await make(prefix, 800);
      await pq.enqueue('kill', { precious: 1 }, { jobId: 'precious' });
    }
    const child = spawn(process.execPath, [path.join(packageRoot, 'test/helpers/queue-child.mjs')], {
      env,
      stdio: ['ignore', 'pipe', 'inherit'],
    });
    let out = '';
    child.stdout.on('data', (c: Buffer) => (out += c.toString()));
    try {
      await until('child took the job', () => out.includes('started precious'), 20_000);
      child.kill('SIGKILL');
      await new Promise((r) => child.once('exit', r));
      let qdb = db;
      if (dir) {
        childDb = await openDatabase({ dataDir: dir });
        qdb = childDb;
      }
      const q = await createJobQueues({ db: qdb, redisUrl: backend.redisUrl, prefix, leaseMs: 800, pollMs: 50 });
      open.push(q);
      const got: Array<{ data: unknown; attempt: number }> = [];
      q.process('kill', async (data, ctx) => void got.push({ data, attempt: ctx.attempt }));
      await until('job ran again after the kill', () => got.length === 1, 20_000);
      expect(got[0]!.data).toEqual({ precious: 1 });
      await sleep(300);
      expect(got).toHaveLength(1);
    } finally {
      child.kill('SIGKILL');
      if (childDb) {
        const q = open.pop()!;
        await q.close(500).catch(() => {});
        await childDb.close();
      }
      if (dir) rmSync(dir, { recursive: true, force: true });
    }
  });
});
