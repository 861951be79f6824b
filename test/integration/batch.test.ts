/**
 * Batch statistics through HTTP on every queue backend (embedded queue on PGlite; the database
 * queue on PostgreSQL and BullMQ on Redis when configured): a job over registered fields equals,
 * row for row, what GET /v1/fields/{id}/indices/timeseries answers for each field, index and
 * interval; ad-hoc polygons give the same rows as the same boundaries registered, and an invalid
 * one fails alone; percentiles; cancel; Idempotency-Key; the signed link; batch.completed; every
 * kind of bad input is a 4xx problem. Files are stored in parts of 700 bytes (BATCH_PART_BYTES), so
 * every file here is many parts.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { rowBytes } from '../../src/batch/execute.js';
import { chunkSize } from '../../src/batch/service.js';
import { cacheFor } from '../../src/indices/cache.js';
import { buildServiceApp, queueBackends, type TestApp } from '../helpers/app.js';
import {
  csvRows,
  downloadBatch,
  ndjsonRows,
  parcel,
  pickSeries as pick,
  waitBatch,
  type Scene,
} from '../helpers/batch.js';
import { checkRanges, hasCurl, wholeFile } from '../helpers/ranges.js';
import { seedSeason } from '../helpers/reports.js';

const SCENE: Scene = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 100 };
const RANGE = { start_date: '2025-04-01', end_date: '2025-09-30' };
const run$ = promisify(execFile);
/** n ad-hoc 50 m squares in a row, ids 0 to n − 1. */
const squares = (n: number) => ({
  type: 'FeatureCollection',
  features: Array.from({ length: n }, (_, i) => ({
    type: 'Feature',
    id: i,
    geometry: parcel(SCENE, 10 * i, 10, 50, 50),
  })),
});
const postJob = (t: TestApp, payload: object) =>
  t.app.inject({ method: 'POST', url: '/v1/batch/statistics', headers: t.auth(), payload });
const INDICES = ['NDVI', 'NDRE', { name: 'ratio', formula: 'B08/B03-1' }] as const;
// metres from the scene's corner: inside, across the scene's right edge, small, large
const PARCELS: Array<[string, number, number, number, number]> = [
  ['p1', 40, 60, 180, 140],
  ['p2', 300, 80, 120, 260],
  ['p3', 900, 400, 160, 120],
  ['p4', 610, 700, 45, 60],
  ['p5', 120, 520, 400, 380],
];

describe.each(queueBackends)('batch statistics on $name', (backend) => {
  let t: TestApp;
  let dir: string;
  const fieldIds = new Map<string, string>();
  const post = (payload: object, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'POST', url: '/v1/batch/statistics', headers: { ...t.auth(), ...headers }, payload });
  async function run(payload: object) {
    const res = await post(payload);
    expect(res.statusCode, res.body).toBe(202);
    expect(res.json().id).toMatch(/^bat_/);
    const job = await waitBatch(t, res.json().id);
    expect(job.status, JSON.stringify(job)).toBe('ready');
    const file = await downloadBatch(t, job.download_url);
    expect(file.status).toBe(200);
    return { job, file };
  }
  /**
   * The statistics cache emptied (index_stats, this process's field states, statistics and
   * bodies), so that the time series computes its numbers on its own path, not the batch's.
   */
  async function forgetStats() {
    await t.db.query('DELETE FROM index_stats');
    const c = cacheFor(t.db);
    c.stats.clear();
    c.fields.clear();
    c.bodies.clear();
  }
  async function series(
    fieldId: string,
    index: (typeof INDICES)[number],
    interval = 'weekly',
    extra: Record<string, string> = {},
  ) {
    const q = new URLSearchParams({
      ...RANGE,
      interval,
      ...extra,
      ...(typeof index === 'string' ? { index } : { index: 'custom', formula: index.formula }),
    });
    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${fieldId}/indices/timeseries?${q}`,
      headers: t.auth(),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json() as Array<Record<string, any>>;
  }

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'batch-'));
    t = await buildServiceApp(backend, {
      env: { IMAGERY_ROOTS: dir, BATCH_CHUNK_FEATURES: '2', BATCH_PART_BYTES: '700' },
    });
    const seeded = await seedSeason(t, dir, { size: SCENE.size });
    fieldIds.set('demo', seeded.fieldId);
    for (const [name, x, y, w, h] of PARCELS) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name, boundary: parcel(SCENE, x, y, w, h) },
      });
      expect(res.statusCode, res.body).toBe(201);
      fieldIds.set(name, res.json().id);
    }
  }, 240_000);
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('fields "all", three indices, ndjson: every row equals the field time series; progress; batch.completed', async () => {
    const { job, file } = await run({
      fields: 'all',
      indices: INDICES,
      ...RANGE,
      interval: 'weekly',
      format: 'ndjson',
    });
    expect(file.type).toContain('application/x-ndjson');
    const rows = ndjsonRows(file.body);
    const weeks = Math.floor((Date.parse('2025-09-30') - Date.parse('2025-04-01')) / 86_400_000 / 7) + 1;
    expect(rows.length).toBe(fieldIds.size * INDICES.length * weeks);
    expect(job.progress).toEqual({ done: rows.length, total: rows.length, chunks_done: 3, chunks: 3 });
    expect(job.feature_count).toBe(fieldIds.size);
    expect(job.error_count).toBe(0);
    expect(new Set(rows.map((r) => r.field_id))).toEqual(new Set(fieldIds.values()));
    let gaps = 0;
    await forgetStats();
    for (const id of fieldIds.values()) {
      for (const index of INDICES) {
        const name = typeof index === 'string' ? index : index.name;
        const mine = rows.filter((r) => r.field_id === id && r.index === name);
        const want = await series(id, index);
        expect(mine.map(pick), `${id} ${name}`).toEqual(want.map(pick));
        for (const r of mine) {
          if (r.imagery_id === null) gaps++;
          else expect(r.count).toBeGreaterThan(0);
        }
      }
    }
    expect(gaps).toBeGreaterThan(0); // cloudy weeks are there, as null statistics
    expect(rows.some((r) => r.mean !== null)).toBe(true);
    const events = (await listOutbox(t.db, t.accountId, 'batch.completed')).filter((e) => e.data.batch_id === job.id);
    expect(events).toHaveLength(1);
    expect(events[0]!.data).toEqual({
      batch_id: job.id,
      status: 'ready',
      format: 'ndjson',
      feature_count: fieldIds.size,
      error_count: 0,
      download_url: job.download_url,
      expires_at: job.expires_at,
      size_bytes: Buffer.byteLength(file.body),
    });
  });

  it("ad-hoc polygons (csv, biweekly): the registered boundaries' numbers; one invalid polygon fails alone", async () => {
    const bowtie = {
      type: 'Polygon',
      coordinates: [
        [
          [4.87, 50.55],
          [4.88, 50.56],
          [4.88, 50.55],
          [4.87, 50.56],
          [4.87, 50.55],
        ],
      ],
    };
    const features = [
      ...PARCELS.map(([name, x, y, w, h]) => ({
        type: 'Feature',
        properties: { id: name },
        geometry: parcel(SCENE, x, y, w, h),
      })),
      { type: 'Feature', id: 'bad, "bow-tie"', properties: {}, geometry: bowtie },
    ];
    const { job, file } = await run({
      features: { type: 'FeatureCollection', features },
      indices: ['NDVI'],
      ...RANGE,
      interval: 'biweekly',
      format: 'csv',
    });
    expect(file.type).toContain('text/csv');
    expect(job.error_count).toBe(1);
    expect(job.errors).toHaveLength(1);
    expect(job.errors[0].feature_id).toBe('bad, "bow-tie"');
    expect(job.errors[0].error).toMatch(/self_intersection/);
    const rows = await csvRows(file.body);
    expect(new Set(rows.map((r) => r.field_id))).toEqual(new Set(PARCELS.map((p) => p[0])));
    await forgetStats();
    for (const [name] of PARCELS) {
      const want = await series(fieldIds.get(name)!, 'NDVI', 'biweekly');
      expect(rows.filter((r) => r.field_id === name).map(pick), name).toEqual(want.map(pick));
    }
  });

  it('the cloud mask and weighting options: rows equal the time series under the same options', async () => {
    const options = { cloud_dilation_m: 30, weighting: 'coverage', scl_exclude: [0, 1, 3, 8, 9, 10] };
    const { job, file } = await run({ fields: 'all', indices: ['NDVI'], ...RANGE, format: 'ndjson', ...options });
    // the job shows the options it was asked for, as given
    expect(job).toMatchObject({ ...options, max_cloud_cover: 20 });
    expect(job).not.toHaveProperty('percentiles');
    expect(job).not.toHaveProperty('histogram');
    const rows = ndjsonRows(file.body);
    await forgetStats();
    for (const id of fieldIds.values()) {
      const want = await series(id, 'NDVI', 'weekly', {
        cloud_dilation_m: '30',
        weighting: 'coverage',
        scl_exclude: '0,1,3,8,9,10',
      });
      expect(rows.filter((r) => r.field_id === id).map(pick), id).toEqual(want.map(pick));
    }
    // the dilation changes the choice against the default mask somewhere
    const plain = await series(fieldIds.get('demo')!, 'NDVI');
    expect(rows.filter((r) => r.field_id === fieldIds.get('demo')).map(pick)).not.toEqual(plain.map(pick));
  });

  it('interval capture and percentiles: a row per capture over the field, p50 as the single-date endpoint', async () => {
    const id = fieldIds.get('p1')!;
    const { job, file } = await run({
      fields: [id],
      indices: ['NDVI'],
      ...RANGE,
      interval: 'capture',
      percentiles: [50],
      max_cloud_cover: 100,
    });
    expect(job).toMatchObject({ percentiles: [50], max_cloud_cover: 100 });
    expect(job).not.toHaveProperty('weighting');
    const rows = await csvRows(file.body);
    const caps = (
      await t.app.inject({ method: 'GET', url: `/v1/fields/${id}/imagery?per_page=100`, headers: t.auth() })
    ).json().data as Array<{ capture_date: string }>;
    const inRange = caps.filter((c) => c.capture_date >= RANGE.start_date && c.capture_date <= RANGE.end_date);
    expect(rows.length).toBe(new Set(inRange.map((c) => c.capture_date)).size);
    const shown = rows.filter((r) => r.imagery_id !== null);
    expect(shown.length).toBeGreaterThan(3);
    for (const r of shown.slice(0, 3)) {
      const one = (
        await t.app.inject({
          method: 'GET',
          url: `/v1/fields/${id}/indices?index=NDVI&date=${r.date}&imagery_id=${r.imagery_id}&zonal_stats=true&geojson=false&percentiles=50`,
          headers: t.auth(),
        })
      ).json();
      expect(r.p50).toBe(one.zonal_stats.percentiles[0].value);
      expect(r.mean).toBe(one.zonal_stats.mean);
      expect(r.count).toBe(one.zonal_stats.count);
    }
  });

  it('Idempotency-Key: the same key and body answer the same job; another body is a 422', async () => {
    const body = { fields: [fieldIds.get('p4')!], indices: ['NDVI'], ...RANGE };
    const a = await post(body, { 'idempotency-key': 'batch-key-1' });
    const b = await post(body, { 'idempotency-key': 'batch-key-1' });
    expect(a.statusCode).toBe(202);
    expect(b.statusCode).toBe(202);
    expect(b.json().id).toBe(a.json().id);
    expect(b.headers['idempotent-replayed']).toBe('true');
    const c = await post({ ...body, interval: 'daily' }, { 'idempotency-key': 'batch-key-1' });
    expect(c.statusCode).toBe(422);
    expect(c.json().code).toBe('idempotency_key_reused');
    // a body of features, hashed after its polygons were validated: the same with its members in
    // another order is a replay; one corner moved is another body
    const square = parcel(SCENE, 40, 40, 30, 30);
    const fc = {
      type: 'FeatureCollection',
      features: [{ type: 'Feature', id: 'sq', properties: {}, geometry: square }],
    };
    const d = await post({ features: fc, indices: ['NDVI'], ...RANGE }, { 'idempotency-key': 'batch-key-2' });
    expect(d.statusCode, d.body).toBe(202);
    const reordered = { ...RANGE, indices: ['NDVI'], features: { features: fc.features, type: fc.type } };
    const e = await post(reordered, { 'idempotency-key': 'batch-key-2' });
    expect([e.statusCode, e.json().id, e.headers['idempotent-replayed']]).toEqual([202, d.json().id, 'true']);
    const moved = structuredClone(fc);
    moved.features[0]!.geometry.coordinates[0]![1]![0]! += 1e-6;
    const f = await post({ features: moved, indices: ['NDVI'], ...RANGE }, { 'idempotency-key': 'batch-key-2' });
    expect([f.statusCode, f.json().code]).toEqual([422, 'idempotency_key_reused']);
    await waitBatch(t, d.json().id);
    await waitBatch(t, a.json().id);
    const jobs = (
      await t.app.inject({ method: 'GET', url: '/v1/batch/statistics?per_page=100', headers: t.auth() })
    ).json();
    expect(jobs.data.filter((j: { id: string }) => j.id === a.json().id)).toHaveLength(1);
  });

  it('DELETE cancels a running job (no file, no event); DELETE of a finished job deletes it', async () => {
    const many = Array.from({ length: 60 }, (_, i) => ({
      type: 'Feature',
      id: `c${i}`,
      geometry: parcel(SCENE, (i % 10) * 95, Math.floor(i / 10) * 150, 80, 120),
    }));
    const res = await post({
      features: { type: 'FeatureCollection', features: many },
      indices: ['NDVI', 'EVI'],
      start_date: '2025-03-26',
      end_date: '2025-10-07',
      interval: 'daily',
    });
    expect(res.statusCode).toBe(202);
    const id = res.json().id;
    const del = await t.app.inject({ method: 'DELETE', url: `/v1/batch/statistics/${id}`, headers: t.auth() });
    expect(del.statusCode).toBe(200);
    expect(del.json().status).toBe('cancelled');
    await new Promise((r) => setTimeout(r, 1500));
    const after = await waitBatch(t, id);
    expect(after.status).toBe('cancelled');
    expect(after.download_url).toBeNull();
    expect(after.progress.chunks_done).toBeLessThan(after.progress.chunks);
    expect((await listOutbox(t.db, t.accountId, 'batch.completed')).some((e) => e.data.batch_id === id)).toBe(false);
    const gone = await t.app.inject({ method: 'DELETE', url: `/v1/batch/statistics/${id}`, headers: t.auth() });
    expect(gone.statusCode).toBe(204);
    const missing = await t.app.inject({ method: 'GET', url: `/v1/batch/statistics/${id}`, headers: t.auth() });
    expect(missing.statusCode).toBe(404);
  });

  it('the signed link: altered is 403; another account sees no job and no field', async () => {
    const { job } = await run({ fields: [fieldIds.get('p4')!], indices: ['NDVI'], ...RANGE });
    const u = new URL(job.download_url);
    u.searchParams.set('expires', String(Number(u.searchParams.get('expires')) + 60));
    const bad = await t.app.inject({ method: 'GET', url: u.pathname + u.search });
    expect(bad.statusCode).toBe(403);
    expect(bad.headers['content-type']).toContain('application/problem+json');
    expect(bad.json().code).toBe('invalid_signature');
    const other = await t.otherAccount();
    const read = await t.app.inject({
      method: 'GET',
      url: `/v1/batch/statistics/${job.id}`,
      headers: t.auth(other.key),
    });
    expect(read.statusCode).toBe(404);
    const theirs = await t.app.inject({
      method: 'POST',
      url: '/v1/batch/statistics',
      headers: t.auth(other.key),
      payload: { fields: [fieldIds.get('p4')!], indices: ['NDVI'], ...RANGE },
    });
    expect(theirs.statusCode).toBe(400);
    expect(theirs.json().errors[0].code).toBe('unknown_field');
  });

  it('the download in byte ranges across its parts; curl resumes a broken download', async () => {
    const { job } = await run({ fields: ['p1', 'p2', 'p4'].map((k) => fieldIds.get(k)!), indices: ['NDVI'], ...RANGE });
    const { url, full } = await wholeFile(t, job.download_url);
    const parts = await t.db.query<{ n: number }>(
      'SELECT octet_length(content) AS n FROM batch_files WHERE job_id = $1 ORDER BY part',
      [job.id],
    );
    expect(parts.length).toBeGreaterThan(3); // BATCH_PART_BYTES is 700 here
    // Each part's first and last byte and their neighbours, and every 97th byte; 731 bytes spans a part.
    const starts = new Set<number>([0, 1]);
    let at = 0;
    for (const { n } of parts) {
      for (const s of [at - 1, at, at + 1, at + n - 1]) if (s >= 0) starts.add(s);
      at += Number(n);
    }
    expect(at).toBe(full.length);
    for (let s = 0; s < full.length; s += 97) starts.add(s);
    await checkRanges(t, job.download_url, [...starts], 731);
    // HEAD answers the size, the ETag and the ranges without reading the file's parts.
    const query = t.db.query;
    let reads = 0;
    t.db.query = ((sql: string, ...rest: unknown[]) => {
      if (sql.includes('convert_from')) reads++;
      return (query as (...a: unknown[]) => unknown).call(t.db, sql, ...rest);
    }) as typeof query;
    try {
      for (const range of [undefined, 'bytes=100-']) {
        const head = await t.app.inject({ method: 'HEAD', url, headers: range ? { range } : {} });
        expect(head.statusCode).toBe(range ? 206 : 200);
        expect(head.headers['content-length']).toBe(String(range ? full.length - 100 : full.length));
        expect(head.headers['accept-ranges']).toBe('bytes');
        expect(head.rawPayload.length).toBe(0);
      }
      expect(reads).toBe(0);
      await t.app.inject({ method: 'GET', url });
      expect(reads).toBeGreaterThan(3); // the count sees a GET's reads
    } finally {
      t.db.query = query;
    }
    if (!hasCurl()) return;
    // A download broken after 1,000 bytes, resumed by curl (-C -: a Range from the file's size).
    const file = path.join(dir, 'resumed.csv');
    writeFileSync(file, full.subarray(0, 1000));
    const address = await t.app.listen({ port: 0, host: '127.0.0.1' });
    // Asynchronously: the server answering curl runs in this process.
    const { stdout: headers } = await run$('curl', [
      '-sS',
      '-f',
      '-m',
      '20',
      '-C',
      '-',
      '-o',
      file,
      '-D',
      '-',
      `${address}${url}`,
    ]);
    expect(headers).toMatch(/^HTTP\/1\.1 206/);
    expect(headers).toContain(`content-range: bytes 1000-${full.length - 1}/${full.length}`);
    expect(readFileSync(file).equals(full)).toBe(true);
  });

  it('rows of 1,000-bin histograms: chunks sized by their bytes, every row within its estimate', async () => {
    // daily over RANGE, three indices, 1,000 bins: 549 rows a feature of up to 48,356 bytes, 25.3
    // MiB a feature, so one feature a chunk (BATCH_CHUNK_FEATURES is 2 here) and three of them
    const payload = {
      fields: ['p1', 'p2', 'p4'].map((k) => fieldIds.get(k)!),
      indices: INDICES,
      ...RANGE,
      interval: 'daily',
      histogram: 1000,
      percentiles: [5, 95],
      max_cloud_cover: 100,
    };
    const perRow = rowBytes({
      indices: INDICES.map((ix) => (typeof ix === 'string' ? { name: ix } : ix)),
      ...RANGE,
      interval: 'daily',
      format: 'csv',
      max_cloud_cover: 100,
      options: { histogram: payload.histogram, percentiles: payload.percentiles },
    });
    expect(perRow).toBe(300 + 24 * 2 + 32 + 24 * 2001);
    expect(chunkSize(2, 549 * perRow)).toBe(1);
    const { job, file } = await run(payload);
    expect(job.progress.chunks).toBe(3);
    const lines = file.body.trimEnd().split('\n');
    expect(lines.length - 1).toBe(3 * INDICES.length * 183);
    let full = 0;
    for (const line of lines.slice(1)) {
      expect(Buffer.byteLength(line) + 1).toBeLessThanOrEqual(perRow);
      if (line.includes('counts')) full++;
    }
    expect(full).toBeGreaterThan(3 * INDICES.length * 10);
  });

  it("a job's compute tasks wait their turn: at most twice the threads a chunk on the pool", async () => {
    // All at once, a chunk's tasks (captures × groups) pushed the pool's queue past
    // SHED_POOL_QUEUE, and the API shed requests with 503 while a batch job ran.
    const pool = t.runtime.compute;
    const original = pool.fieldStatsBatch;
    let inFlight = 0;
    let most = 0;
    let calls = 0;
    pool.fieldStatsBatch = async (task) => {
      calls++;
      most = Math.max(most, ++inFlight);
      try {
        return await original.call(pool, task);
      } finally {
        inFlight--;
      }
    };
    try {
      await forgetStats();
      const { job } = await run({ fields: 'all', indices: ['NDVI'], ...RANGE, interval: 'weekly' });
      expect(job.progress.chunks).toBe(3);
    } finally {
      pool.fieldStatsBatch = original;
    }
    const chunksAtOnce = t.config.batch.concurrency;
    expect(calls).toBeGreaterThan(4 * chunksAtOnce * Math.max(2, 2 * pool.size));
    expect(most).toBeLessThanOrEqual(chunksAtOnce * Math.max(2, 2 * pool.size));
    expect(most).toBeGreaterThan(1);
  });

  it('bad input of every kind is a 4xx problem with its code', async () => {
    const ok = { fields: [fieldIds.get('p4')!], indices: ['NDVI'], ...RANGE };
    const fc = (features: unknown[]) => ({ type: 'FeatureCollection', features });
    const square = parcel(SCENE, 10, 10, 50, 50);
    const cases: Array<[string, object, number, string, string?]> = [
      ['bad date', { ...ok, start_date: '2025-02-30' }, 400, 'validation_failed', 'invalid_date'],
      ['end before start', { ...ok, end_date: '2025-03-01' }, 400, 'validation_failed', 'before_start'],
      ['unknown index', { ...ok, indices: ['NOPE'] }, 400, 'validation_failed', 'unknown_index'],
      ['bad formula', { ...ok, indices: [{ name: 'x', formula: 'B08 +* B04' }] }, 400, 'invalid_formula'],
      ['unknown band', { ...ok, indices: [{ name: 'x', formula: 'B99 - B04' }] }, 400, 'invalid_formula'],
      ['duplicate index', { ...ok, indices: ['NDVI', 'ndvi'] }, 400, 'validation_failed', 'duplicate_index'],
      ['duplicate percentile', { ...ok, percentiles: [50, 5, 50.0] }, 400, 'validation_failed', 'duplicate_percentile'],
      ['no index', { ...ok, indices: [] }, 400, 'validation_failed'],
      ['bad interval', { ...ok, interval: 'monthly' }, 400, 'validation_failed'],
      ['bad format', { ...ok, format: 'parquet' }, 400, 'validation_failed'],
      ['unknown field', { ...ok, fields: ['fld_nope'] }, 400, 'validation_failed', 'unknown_field'],
      ['duplicate field', { ...ok, fields: [ok.fields[0], ok.fields[0]] }, 400, 'validation_failed', 'duplicate_id'],
      ['both fields and features', { ...ok, features: fc([]) }, 400, 'validation_failed', 'fields_or_features'],
      ['neither', { indices: ['NDVI'], ...RANGE }, 400, 'validation_failed', 'fields_or_features'],
      [
        'not a FeatureCollection',
        { indices: ['NDVI'], ...RANGE, features: { type: 'Feature', geometry: square } },
        400,
        'validation_failed',
        'invalid_geojson',
      ],
      ['no features', { indices: ['NDVI'], ...RANGE, features: fc([]) }, 400, 'validation_failed', 'no_features'],
      [
        'feature not a Feature',
        { indices: ['NDVI'], ...RANGE, features: fc([square]) },
        400,
        'validation_failed',
        'invalid_geojson',
      ],
      [
        'feature without id',
        { indices: ['NDVI'], ...RANGE, features: fc([{ type: 'Feature', properties: {}, geometry: square }]) },
        400,
        'validation_failed',
        'missing_id',
      ],
      [
        'repeated id',
        {
          indices: ['NDVI'],
          ...RANGE,
          features: fc([
            { type: 'Feature', id: 'a', geometry: square },
            { type: 'Feature', id: 'a', geometry: square },
          ]),
        },
        400,
        'validation_failed',
        'duplicate_id',
      ],
      [
        'an id number beyond 2^53 - 1 (2^60 would come back as 1152921504606847000)',
        { indices: ['NDVI'], ...RANGE, features: fc([{ type: 'Feature', id: 2 ** 60, geometry: square }]) },
        400,
        'validation_failed',
        'unsafe_id',
      ],
      [
        'an id property beyond 2^53 - 1',
        {
          indices: ['NDVI'],
          ...RANGE,
          features: fc([{ type: 'Feature', properties: { id: -(2 ** 53) }, geometry: square }]),
        },
        400,
        'validation_failed',
        'unsafe_id',
      ],
      ['percentile out of range', { ...ok, percentiles: [101] }, 400, 'validation_failed', 'percentile_out_of_range'],
      ['unknown SCL class', { ...ok, scl_exclude: [12] }, 400, 'validation_failed', 'unknown_scl_class'],
      ['negative dilation', { ...ok, cloud_dilation_m: -1 }, 400, 'validation_failed', 'negative_dilation'],
      ['unknown member', { ...ok, colour: 'red' }, 400, 'validation_failed'],
      [
        // 20 indices × 183 days × rows of up to 48,356 bytes (1,000 bins): 169 MiB a feature
        'rows of one feature over FEATURE_MAX_BYTES',
        {
          ...ok,
          indices: Array.from({ length: 20 }, (_, i) => ({ name: `i${i}`, formula: `B08 - ${i}` })),
          interval: 'daily',
          histogram: 1000,
        },
        400,
        'validation_failed',
        'job_too_large',
      ],
    ];
    for (const [what, body, status, code, issue] of cases) {
      const res = await post(body);
      expect(res.statusCode, `${what}: ${res.body}`).toBe(status);
      expect(res.headers['content-type'], what).toContain('application/problem+json');
      expect(res.json().code, what).toBe(code);
      if (issue)
        expect(
          res.json().errors?.map((e: { code: string }) => e.code),
          what,
        ).toContain(issue);
    }
    const malformed = await t.app.inject({
      method: 'POST',
      url: '/v1/batch/statistics',
      headers: { ...t.auth(), 'content-type': 'application/json' },
      payload: '{"fields": [',
    });
    expect(malformed.statusCode).toBe(400);
    expect(malformed.json().code).toBe('malformed_json');
    const badKey = await post(ok, { 'idempotency-key': 'é' });
    expect(badKey.statusCode).toBe(400);
  });
});

describe('batch statistics limits', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildServiceApp(queueBackends[0]!, {
      env: { BATCH_MAX_FEATURES: '3', BATCH_MAX_BODY_BYTES: '4096', BATCH_MAX_JOB_BYTES: String(2 ** 20) },
    });
  }, 120_000);
  afterAll(async () => t?.close());

  it('too many features is a 400; a body past BATCH_MAX_BODY_BYTES a 413', async () => {
    const res = await postJob(t, { features: squares(4), indices: ['NDVI'], ...RANGE });
    expect(res.statusCode, res.body).toBe(400);
    expect(res.json().errors[0].code).toBe('too_many_features');
    const big = await postJob(t, { features: squares(40), indices: ['NDVI'], ...RANGE });
    expect(big.statusCode).toBe(413);
    expect(big.json().code).toBe('payload_too_large');
  });

  it('a job whose rows would pass BATCH_MAX_JOB_BYTES is a 400 job_too_large; one just within it is made', async () => {
    // 100 daily rows a feature, each 5,156 bytes by the estimate with 100 bins (300 + 32 + 24 × 201):
    // 515,600 a feature, so two features (1,031,200) fit in 1 MiB and three (1,546,800) do not.
    const post = (n: number) =>
      postJob(t, {
        features: squares(n),
        indices: ['NDVI'],
        start_date: '2025-04-01',
        end_date: '2025-07-09',
        interval: 'daily',
        histogram: 100,
      });
    const refused = await post(3);
    expect(refused.statusCode, refused.body).toBe(400);
    expect(refused.headers['content-type']).toContain('application/problem+json');
    const [issue] = refused.json().errors;
    expect(issue).toMatchObject({ path: '/body', code: 'job_too_large' });
    expect(issue.message).toContain("the job's 300 rows");
    expect(issue.message).toContain('BATCH_MAX_JOB_BYTES');
    expect(await t.db.query('SELECT id FROM batch_jobs')).toEqual([]); // nothing made
    const made = await post(2);
    expect(made.statusCode, made.body).toBe(202);
    expect(made.json()).toMatchObject({ feature_count: 2 });
  });
});

describe('a batch chunk that fails every run', () => {
  let t: TestApp;
  const logged: Array<[string, unknown]> = [];
  beforeAll(async () => {
    t = await buildServiceApp(queueBackends[0]!, {
      env: { BATCH_MAX_ATTEMPTS: '2' },
      runtime: {
        log: (msg, fields) => void logged.push([msg, fields]),
        batchChunk: (stage) => {
          if (stage === 'computed') throw new Error('the rows could not be stored');
        },
      },
    });
  }, 120_000);
  afterAll(async () => t?.close());

  it('fails the job, and the log tells of each failed run: retried, then no attempt left', async () => {
    const res = await postJob(t, { features: squares(1), indices: ['NDVI'], ...RANGE });
    expect(res.statusCode, res.body).toBe(202);
    const id = res.json().id as string;
    const job = await waitBatch(t, id, 20_000);
    expect(job.status).toBe('failed');
    expect(job.error).toBe('chunk 0 failed after 2 attempts: the rows could not be stored');
    const runs = logged.filter(([msg]) => msg.startsWith('queue job failed'));
    expect(runs).toEqual([
      [
        'queue job failed; it runs again',
        expect.objectContaining({
          queue: 'batch',
          outcome: 'retried',
          attempt: 1,
          attempts: 2,
          retry_in_ms: 1000,
          error: 'the rows could not be stored',
        }),
      ],
      [
        'queue job failed; no attempt left',
        expect.objectContaining({
          queue: 'batch',
          outcome: 'failed',
          attempt: 2,
          attempts: 2,
          error: 'the rows could not be stored',
        }),
      ],
    ]);
  }, 30_000);
});
