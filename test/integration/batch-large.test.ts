/**
 * Batch statistics at the documented limit, with the default configuration (no limit, chunk or
 * part size overridden): a FeatureCollection of exactly BATCH_MAX_FEATURES (100,000) ad-hoc
 * polygons — 3×3-pixel squares tiled over a 9.6 km synthetic scene, numeric and string ids, some
 * outside the scene and some self-intersecting — is accepted, runs to `ready` and its file has
 * one row per feature × index × interval, none twice; the invalid polygons are the job's errors;
 * sampled rows equal the time series of the same boundaries registered as fields and, on the clear
 * capture, a float64 NDVI computed here from the files' pixels (geotiff.js, not the service's
 * reader). One feature more is a 400 `too_many_features`. On the embedded database and on
 * PostgreSQL (the database queue).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fromFile } from 'geotiff';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { toWgs84 } from '../../src/imagery/crs.js';
import { writeSyntheticSeason, type SyntheticCapture } from '../../src/imagery/synthetic.js';
import { SCL_MASKED } from '../../src/imagery/window-reader.js';
import { buildServiceApp, queueBackends, type TestApp } from '../helpers/app.js';
import { csvRows, downloadBatch, parcel, pickSeries as pick, waitBatch, type Scene } from '../helpers/batch.js';
import { registerCaptures } from '../helpers/captures.js';

const SIZE = 960; // px at 10 m: 320 × 320 tiles of 3 × 3 px
const SCENE: Scene = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: SIZE };
const TILES = SIZE / 3;
// Two captures, a week apart: the first clear, the second with a cloud patch (gaps where it covers).
const DATES = ['2025-06-03', '2025-06-10'];
const RANGE = { start_date: '2025-06-02', end_date: '2025-06-15' }; // two weekly intervals
const LIMIT = 100_000; // the "at least 100,000": BATCH_MAX_FEATURES's default, checked below
const OUTSIDE = 150;
const INVALID = 150;
const INSIDE = LIMIT - OUTSIDE - INVALID;

/** Tile k (row-major) as [column, row] of tiles. */
const tileOf = (k: number): [number, number] => [k % TILES, Math.floor(k / TILES)];
/** A square a metre inside tile (c, r): its 9 pixel centres inside, no edge on a pixel edge. */
const tileSquare = (c: number, r: number) => parcel(SCENE, c * 30 + 1, r * 30 + 1, 28, 28, 1);
/** Ids: numbers for even tiles, strings for odd ones (as a client mixing both would send them). */
const tileId = (k: number): string | number => (k % 2 === 0 ? k : `t${k}`);

function bowtie(j: number) {
  const inv = toWgs84(SCENE.epsg);
  const [c, r] = tileOf(INSIDE + j); // a tile no valid feature uses
  const X = SCENE.originX + c * 30;
  const Y = SCENE.originY - r * 30;
  const a = inv([X + 2, Y - 2]);
  return {
    type: 'Polygon' as const,
    coordinates: [[a, inv([X + 28, Y - 28]), inv([X + 28, Y - 2]), inv([X + 2, Y - 28]), a]],
  };
}

type Feature = { type: 'Feature'; id?: string | number; properties: Record<string, unknown>; geometry: unknown };

/** LIMIT features: the tiles, and interleaved with them the ones outside the scene and the bow-ties. */
function collection(): Feature[] {
  const out: Feature[] = [];
  let outside = 0;
  let invalid = 0;
  for (let k = 0; k < INSIDE; k++) {
    const id = tileId(k);
    const geometry = tileSquare(...tileOf(k));
    // the id as the Feature member for numbers, as a property for strings
    out.push(
      typeof id === 'number'
        ? { type: 'Feature', id, properties: {}, geometry }
        : { type: 'Feature', properties: { id }, geometry },
    );
    if (k % 331 === 7 && outside < OUTSIDE) {
      // right of the scene's east edge by 50–320 m
      const j = outside++;
      out.push({
        type: 'Feature',
        id: `out-${j}`,
        properties: {},
        geometry: parcel(SCENE, SIZE * 10 + 50 + 30 * (j % 10), 30 * Math.floor(j / 10), 28, 28, 1),
      });
    }
    if (k % 331 === 200 && invalid < INVALID) {
      const j = invalid++;
      out.push({ type: 'Feature', id: 1_000_000 + j, properties: {}, geometry: bowtie(j) });
    }
  }
  expect([outside, invalid]).toEqual([OUTSIDE, INVALID]);
  return out;
}

/** Float64 NDVI of tile (c, r) on a capture, from its B04, B08 and SCL files read with geotiff.js. */
async function float64Ndvi(cap: SyntheticCapture, c: number, r: number) {
  const win = async (file: string, res: number) => {
    const f = res / 10;
    const x0 = Math.floor((c * 3) / f);
    const y0 = Math.floor((r * 3) / f);
    const x1 = Math.floor((c * 3 + 2) / f) + 1;
    const y1 = Math.floor((r * 3 + 2) / f) + 1;
    const img = await (await fromFile(file)).getImage();
    const [data] = (await img.readRasters({ window: [x0, y0, x1, y1] })) as unknown as [ArrayLike<number>];
    // the value at 10 m pixel (i, j) of the tile
    return (i: number, j: number) =>
      data[(Math.floor((r * 3 + j) / f) - y0) * (x1 - x0) + Math.floor((c * 3 + i) / f) - x0]!;
  };
  const red = await win(cap.files.B04!, 10);
  const nir = await win(cap.files.B08!, 10);
  const scl = await win(cap.scl, 20);
  const v: number[] = [];
  let masked = 0;
  for (let j = 0; j < 3; j++)
    for (let i = 0; i < 3; i++) {
      if (SCL_MASKED.has(scl(i, j))) {
        masked++;
        continue;
      }
      const a = red(i, j) * 1e-4 - 0.1;
      const b = nir(i, j) * 1e-4 - 0.1;
      v.push((b - a) / (b + a));
    }
  const mean = v.reduce((s, x) => s + x, 0) / v.length;
  const std = Math.sqrt(v.reduce((s, x) => s + (x - mean) ** 2, 0) / v.length);
  return { masked, count: v.length, min: Math.min(...v), max: Math.max(...v), mean, std };
}

let dir: string;
let caps: SyntheticCapture[];
let features: Feature[];

beforeAll(() => {
  dir = mkdtempSync(path.join(os.tmpdir(), 'batch-large-'));
  caps = writeSyntheticSeason(dir, { ...SCENE, seed: 22 }, DATES, '2025-04-10', '2025-09-20', { deflateLevel: 1 });
  features = collection();
}, 120_000);
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// The embedded default and PostgreSQL; BullMQ changes only the queue, which batch.test.ts covers.
describe.each(queueBackends.filter((b) => !b.redisUrl))('batch statistics at 100,000 features on $name', (backend) => {
  let t: TestApp;
  const post = (payload: object) =>
    t.app.inject({ method: 'POST', url: '/v1/batch/statistics', headers: t.auth(), payload });

  beforeAll(async () => {
    t = await buildServiceApp(backend, { env: { IMAGERY_ROOTS: dir } });
    await registerCaptures(t, caps);
  }, 120_000);
  afterAll(async () => t?.close());

  it(`${LIMIT} features (the default BATCH_MAX_FEATURES): ready, a row per feature × interval, errors listed, sampled rows equal the time series and float64`, async () => {
    expect(t.config.batch.maxFeatures).toBe(LIMIT); // the default, not overridden
    expect(features).toHaveLength(LIMIT);
    const body = { features: { type: 'FeatureCollection', features }, indices: ['NDVI'], ...RANGE, interval: 'weekly' };
    // Figures for docs/batch.md, printed, never asserted: seconds per phase, and this process's
    // RSS (the test's own data, the service and its database when embedded) sampled every 100 ms.
    const mib = (b: number) => (b / 1_048_576).toFixed(0);
    const rssBefore = process.memoryUsage.rss();
    let rssPeak = rssBefore;
    const sampler = setInterval(() => (rssPeak = Math.max(rssPeak, process.memoryUsage.rss())), 100);
    // The longest the event loop stood still during the POST (what another request would wait): the
    // longest gap between the ticks of a 10 ms timer. The body is written out first, as a client's is.
    const text = JSON.stringify(body);
    let last = performance.now();
    let stall = 0;
    const ticker = setInterval(() => {
      const now = performance.now();
      stall = Math.max(stall, now - last);
      last = now;
    }, 10);
    // Turns of the event loop while the POST runs, counted up to TURNS (then no more are asked): the
    // validation (one every 1,000 features) and the inserts give it 110 on the embedded database,
    // whose statements run on the event loop, so other requests are served meanwhile. Before, the
    // whole POST was one block there: 1 turn. On PostgreSQL the waits for the server give many.
    const TURNS = 100;
    let turns = 0;
    const turn = () => void (++turns < TURNS && setImmediate(turn));
    setImmediate(turn);
    const t0 = performance.now();
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/batch/statistics',
      headers: { ...t.auth(), 'content-type': 'application/json' },
      payload: text,
    });
    const t1 = performance.now();
    const turnsDuringPost = turns;
    clearInterval(ticker);
    stall = Math.max(stall, t1 - last);
    const rssPost = Math.max(rssPeak, process.memoryUsage.rss());
    expect(res.statusCode, res.body.slice(0, 2000)).toBe(202);
    expect(turnsDuringPost).toBe(TURNS);
    const job = await waitBatch(t, res.json().id, 600_000, 500);
    const t2 = performance.now();
    const rssJob = rssPeak;
    expect(job.status, JSON.stringify(job).slice(0, 2000)).toBe('ready');
    const file = await downloadBatch(t, job.download_url);
    const t3 = performance.now();
    clearInterval(sampler);
    expect(file.status).toBe(200);
    expect(Buffer.byteLength(file.body)).toBe(job.size_bytes);
    const rows = await csvRows(file.body);
    console.info(
      `${backend.name}: ${LIMIT} features, body ${(Buffer.byteLength(text) / 1_048_576).toFixed(1)} MiB; POST ${((t1 - t0) / 1000).toFixed(1)} s, ` +
        `longest event-loop stall ${(stall / 1000).toFixed(2)} s, to ready ${((t2 - t1) / 1000).toFixed(1)} s, download ${((t3 - t2) / 1000).toFixed(1)} s ` +
        `(${(file.body.length / 1_048_576).toFixed(1)} MiB, ${rows.length} rows); RSS ${mib(rssBefore)} MiB before the POST, ` +
        `peak ${mib(rssPost)} MiB to 202, ${mib(rssJob)} MiB to ready, ${mib(rssPeak)} MiB with the download; load ${os.loadavg()[0]!.toFixed(1)}`,
    );

    // The job: every feature counted, 100 chunks of the default 1,000, the bow-ties its errors.
    const intervals = 2;
    expect(job.feature_count).toBe(LIMIT);
    expect(job.progress).toEqual({ done: LIMIT * intervals, total: LIMIT * intervals, chunks_done: 100, chunks: 100 });
    expect(job.error_count).toBe(INVALID);
    expect(job.errors).toHaveLength(100); // the first 100 listed
    for (const e of job.errors) {
      expect(Number(e.feature_id)).toBeGreaterThanOrEqual(1_000_000);
      expect(e.error).toMatch(/self_intersection/);
    }
    const events = (await listOutbox(t.db, t.accountId, 'batch.completed')).filter((e) => e.data.batch_id === job.id);
    expect(events.map((e) => e.data.error_count)).toEqual([INVALID]);

    // One row per valid feature × interval, none twice, none for a bow-tie.
    expect(rows.length).toBe((LIMIT - INVALID) * intervals);
    const keys = new Set(rows.map((r) => `${r.field_id}|${r.index}|${r.interval_start}`));
    expect(keys.size).toBe(rows.length);
    const want = new Set<string>();
    for (let k = 0; k < INSIDE; k++) want.add(String(tileId(k)));
    for (let j = 0; j < OUTSIDE; j++) want.add(`out-${j}`);
    const byId = new Map<string, Array<Record<string, any>>>();
    for (const r of rows) {
      expect(r.index).toBe('NDVI');
      const l = byId.get(r.field_id);
      if (l) l.push(r);
      else byId.set(r.field_id, [r]);
    }
    expect(byId.size).toBe(want.size);
    for (const id of want) expect(byId.get(id)?.map((r) => r.interval_start)).toEqual(['2025-06-02', '2025-06-09']);
    // outside the scene: no capture, every row a gap
    for (let j = 0; j < OUTSIDE; j++)
      for (const r of byId.get(`out-${j}`)!)
        expect([r.imagery_id, r.count, r.mean, r.cloud_cover]).toEqual([null, null, null, null]);
    // inside: the clear capture everywhere (9 pixels), the cloudy one a gap under its cloud
    let gaps = 0;
    for (let k = 0; k < INSIDE; k++) {
      const [a, b] = byId.get(String(tileId(k)))!;
      expect(a!.date).toBe(DATES[0]);
      expect(a!.count).toBe(9);
      if (b!.imagery_id === null) gaps++;
      else expect(b!.date).toBe(DATES[1]);
    }
    expect(gaps).toBeGreaterThan(0);
    expect(gaps).toBeLessThan(INSIDE / 2);

    // ~20 sampled features (and one outside) registered as fields: the time series of each gives
    // the same rows; on the clear capture, the float64 NDVI of the tile's pixels.
    const sample = Array.from({ length: 20 }, (_, i) => (i * 4_987 + 13) % INSIDE);
    const check = async (id: string, boundary: unknown) => {
      const f = await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: id, boundary },
      });
      expect(f.statusCode, f.body).toBe(201);
      const q = new URLSearchParams({ ...RANGE, interval: 'weekly', index: 'NDVI' });
      const ts = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${f.json().id}/indices/timeseries?${q}`,
        headers: t.auth(),
      });
      expect(ts.statusCode, ts.body).toBe(200);
      expect(byId.get(id)!.map(pick), id).toEqual(ts.json().map(pick));
    };
    let cloudySampled = 0;
    for (const k of sample) {
      const id = String(tileId(k));
      await check(id, tileSquare(...tileOf(k)));
      const [a, b] = byId.get(id)!;
      if (b!.imagery_id === null) cloudySampled++;
      const ref = await float64Ndvi(caps[0]!, ...tileOf(k));
      expect(ref.masked).toBe(0);
      expect(a!.count).toBe(ref.count);
      // the kernel's NDVI is float32 per pixel (~1e-7 from float64 here); its sums are float64
      for (const s of ['min', 'max', 'mean', 'std'] as const)
        expect(Math.abs(a![s] - ref[s]), `${id} ${s}: ${a![s]} vs ${ref[s]}`).toBeLessThan(1e-6);
    }
    await check('out-7', features.find((f) => f.id === 'out-7')!.geometry);
    console.info(`${backend.name}: ${sample.length} sampled tiles, ${cloudySampled} with a cloudy second week`);
  }, 900_000);

  it(`${LIMIT + 1} features is a 400 too_many_features`, async () => {
    const more = [...features, { type: 'Feature', id: 'one-more', properties: {}, geometry: tileSquare(0, TILES - 1) }];
    const res = await post({ features: { type: 'FeatureCollection', features: more }, indices: ['NDVI'], ...RANGE });
    expect(res.statusCode, res.body.slice(0, 2000)).toBe(400);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.json().errors.map((e: { code: string }) => e.code)).toEqual(['too_many_features']);
    expect(res.json().errors[0].message).toContain(`${LIMIT + 1} features`);
  }, 120_000);
});
