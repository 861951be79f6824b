/**
 * A batch job whose queue jobs are lost (BullMQ: every key of the queue deleted from the real
 * Redis, as a restart without its data; the database queue: its rows deleted) while its first
 * chunk runs, so that the chunks waiting behind it vanish, still completes: after BATCH_STALL_MS
 * without a chunk starting, the sweeper enqueues the chunks that are on no queue again. The file
 * has every feature × interval exactly once. On every queue backend.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { BullmqQueues } from '../../src/platform/queue/bullmq-queues.js';
import { buildServiceApp, queueBackends, type TestApp } from '../helpers/app.js';
import { downloadBatch, ndjsonRows, parcel, waitBatch } from '../helpers/batch.js';
import { seedSeason } from '../helpers/reports.js';

const SCENE = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 80 };
const FEATURES = Array.from({ length: 6 }, (_, i) => ({
  type: 'Feature',
  id: `f${i}`,
  geometry: parcel(SCENE, 20 + (i % 3) * 250, 30 + Math.floor(i / 3) * 350, 150, 200),
}));
const RANGE = { start_date: '2025-04-01', end_date: '2025-09-30' };
const WEEKS = Math.floor((Date.parse(RANGE.end_date) - Date.parse(RANGE.start_date)) / 86_400_000 / 7) + 1;

describe.each(queueBackends)('batch chunks lost from the queue on $name', (backend) => {
  let t: TestApp;
  let dir: string;
  let release: () => void = () => {};
  let firstStarted: (v: number) => void = () => {};
  const started = new Promise<number>((r) => (firstStarted = r));
  const gate = new Promise<void>((r) => (release = r));
  let gated = false;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'batch-lost-'));
    t = await buildServiceApp(backend, {
      env: { IMAGERY_ROOTS: dir, BATCH_CHUNK_FEATURES: '1', BATCH_CONCURRENCY: '1', BATCH_STALL_MS: '1000' },
      runtime: {
        // The first chunk to start waits until the test has deleted the queue's keys.
        batchChunk: async (stage, _job, chunk) => {
          if (stage !== 'start' || gated) return;
          gated = true;
          firstStarted(chunk);
          await gate;
        },
      },
    });
    await seedSeason(t, dir, { size: SCENE.size });
  }, 240_000);
  afterAll(async () => {
    release();
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the chunks that vanished are enqueued again; every row once', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/batch/statistics',
      headers: t.auth(),
      payload: {
        features: { type: 'FeatureCollection', features: FEATURES },
        indices: ['NDVI'],
        ...RANGE,
        interval: 'weekly',
        format: 'ndjson',
      },
    });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id as string;
    await started;
    const queues = t.runtime.queues;
    expect(await queues.counts('batch')).toMatchObject({ waiting: FEATURES.length - 1 });
    // The queue lost its data: the waiting chunks and the running one's job.
    if (queues.kind === 'bullmq') await (queues as BullmqQueues).obliterate();
    else await t.db.query(`DELETE FROM jobs WHERE queue LIKE '%batch'`);
    expect(await queues.counts('batch')).toMatchObject({ waiting: 0, active: 0 });
    release();
    const job = await waitBatch(t, id, 120_000);
    expect(job.status, JSON.stringify(job)).toBe('ready');
    const [requeued] = await t.db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM batch_chunks WHERE job_id = $1 AND attempts >= 1 AND done',
      [id],
    );
    expect(requeued!.n).toBe(FEATURES.length);
    const file = await downloadBatch(t, job.download_url);
    const rows = ndjsonRows(file.body);
    expect(rows).toHaveLength(FEATURES.length * WEEKS);
    const keys = new Set(rows.map((r) => `${r.field_id}|${r.interval_start}`));
    expect(keys.size).toBe(rows.length);
    for (const f of FEATURES) expect(rows.filter((r) => r.field_id === f.id)).toHaveLength(WEEKS);
  }, 180_000);
});
