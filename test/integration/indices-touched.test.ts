/**
 * Fields smaller or thinner than a pixel (issue 23): a triangle inside one 10 m pixel and a 3 m
 * strip between two columns of pixel centres have no pixel centre of the capture inside. They were
 * never linked to the capture, so even weighting=coverage answered 404 no_imagery, the time series
 * and batch had no row and a report failed. Now they are linked by the weights of the pixels they
 * touch, whether the capture came before the field (linking at creation) or after (registration),
 * and:
 * - GET /v1/fields/{id}/imagery lists the captures, field_pixels 0, the cloud cover of the weights;
 * - weighting=coverage answers, on every path (GET indices, time series, batch for the registered
 *   field and for the same polygon ad hoc, a scouting report), the weighted statistics checked here
 *   against weights from polygon-clipping's exact pixel ∩ polygon areas (1e-9) and the pixels'
 *   values read from a larger field's per-pixel GeoJSON (mean 1e-6);
 * - the pixel-centre rule (the default) says why there is nothing: 422 no_usable_imagery naming
 *   weighting=coverage, a series of gaps, a report failure naming options.weighting;
 * - imagery.available is sent for them, with that cloud cover.
 * On every queue backend (the embedded queue on PGlite; PostgreSQL and BullMQ when configured).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import polygonClipping from 'polygon-clipping';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { fromWgs84, toWgs84 } from '../../src/imagery/crs.js';
import { sceneField, writeSyntheticSeason, type SyntheticCapture } from '../../src/imagery/synthetic.js';
import { buildServiceApp, queueBackends, type TestApp } from '../helpers/app.js';
import { downloadBatch, ndjsonRows, waitBatch } from '../helpers/batch.js';
import { registerCapture } from '../helpers/captures.js';
import { waitReport } from '../helpers/reports.js';

const SPEC = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 40, seed: 11 };
const DATES = ['2025-06-01', '2025-06-06', '2025-06-11'];
const inv = toWgs84(SPEC.epsg);
const fwd = fromWgs84(SPEC.epsg);
const X = (m: number) => SPEC.originX + m;
const Y = (m: number) => SPEC.originY - m;
const polygon = (ring: Array<[number, number]>) => {
  const ll = ring.map((p) => inv(p));
  return { type: 'Polygon' as const, coordinates: [[...ll, ll[0]!]] };
};
// Inside the pixel of column 12, row 15 (x 120–130 m, y 150–160 m from the corner), away from its
// centre (125, 155): 10.5 m², a weight of 0.105.
const TRIANGLE = polygon([
  [X(121), Y(151)],
  [X(124), Y(151)],
  [X(121), Y(158)],
]);
// x 106–109 m: between the centres of columns 10 (105) and 11 (115), rows 10–19 (y 100–200 m, a
// little inside so that its ends do not lie on pixel edges): ten pixels, each about 0.3.
const STRIP = polygon([
  [X(106), Y(100.5)],
  [X(109), Y(100.5)],
  [X(109), Y(199.5)],
  [X(106), Y(199.5)],
]);

/**
 * The exact share of each pixel's area inside `geom` (polygon-clipping, on the UTM grid), by
 * "col,row". In metres from the scene's corner: UTM coordinates themselves (6e5, 5.6e6) would
 * leave the shoelace's products with an ulp of 2^-11 m².
 */
function weightsOf(geom: { coordinates: Array<Array<[number, number]>> }): Map<string, number> {
  const ring = geom.coordinates[0]!.map((p): [number, number] => {
    const [x, y] = fwd(p);
    return [x - SPEC.originX, y - SPEC.originY];
  });
  const out = new Map<string, number>();
  for (let col = 0; col < SPEC.size; col++)
    for (let row = 0; row < SPEC.size; row++) {
      const x0 = col * 10;
      const y1 = -row * 10;
      const px: Array<[number, number]> = [
        [x0, y1 - 10],
        [x0 + 10, y1 - 10],
        [x0 + 10, y1],
        [x0, y1],
        [x0, y1 - 10],
      ];
      const area = polygonClipping
        .intersection([ring], [px])
        .reduce(
          (a, poly) => a + poly.reduce((b, r, k) => b + (k === 0 ? 1 : -1) * Math.abs(shoelace(r as never)), 0),
          0,
        );
      if (area / 100 > 1e-9) out.set(`${col},${row}`, area / 100);
    }
  return out;
}
const shoelace = (r: Array<[number, number]>) => {
  let a = 0;
  for (let k = 0; k + 1 < r.length; k++) a += r[k]![0] * r[k + 1]![1] - r[k + 1]![0] * r[k]![1];
  return a / 2;
};

interface Expected {
  pixels: number;
  fieldWeight: number;
  count: number;
  mean: number | null;
  min: number | null;
  max: number | null;
  cloud: number;
}
const round2 = (x: number) => Math.round(x * 100) / 100;

/** The float64 weighted statistics of a field's weights over one capture's per-pixel values. */
function expected(weights: Map<string, number>, values: Map<string, number | null>): Expected {
  let fw = 0;
  let vw = 0;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (const [k, w] of weights) {
    fw += w;
    const v = values.get(k);
    if (v === null || v === undefined) continue;
    vw += w;
    sum += w * v;
    min = Math.min(min, v);
    max = Math.max(max, v);
  }
  return {
    pixels: weights.size,
    fieldWeight: fw,
    count: vw,
    mean: vw ? sum / vw : null,
    min: vw ? min : null,
    max: vw ? max : null,
    cloud: round2(100 * (1 - vw / fw)),
  };
}

describe.each(queueBackends)('fields smaller or thinner than a pixel on $name', (backend) => {
  let t: TestApp;
  let dir: string;
  const caps: SyntheticCapture[] = [];
  const imagery: string[] = [];
  const ids: Record<'triangle' | 'strip' | 'control', string> = { triangle: '', strip: '', control: '' };
  // from the boundaries as stored (GET /v1/fields/{id}), set in beforeAll
  const weights = { triangle: new Map<string, number>(), strip: new Map<string, number>() };
  /** Per capture date, NDVI of each pixel ("col,row") from the control field's per-pixel GeoJSON. */
  const values = new Map<string, Map<string, number | null>>();
  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: t.auth() });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'touched-'));
    t = await buildServiceApp(backend, { env: { IMAGERY_ROOTS: dir } });
    caps.push(...writeSyntheticSeason(dir, SPEC, DATES, '2025-04-01', '2025-09-30'));
    // the first capture before the fields (linked when each is made), the others after (registration)
    imagery.push(await registerCapture(t, caps[0]!));
    ids.triangle = await t.createField('triangle', TRIANGLE);
    ids.strip = await t.createField('strip', STRIP);
    ids.control = await t.createField('control', sceneField(SPEC));
    for (const c of caps.slice(1)) imagery.push(await registerCapture(t, c));
    for (const name of ['triangle', 'strip'] as const) {
      const res = await get(`/v1/fields/${ids[name]}`);
      expect(res.statusCode, res.body).toBe(200);
      weights[name] = weightsOf(res.json().boundary);
    }
    for (const [k, d] of DATES.entries()) {
      const res = await get(`/v1/fields/${ids.control}/indices?index=NDVI&date=${d}&imagery_id=${imagery[k]}`);
      expect(res.statusCode, res.body).toBe(200);
      const px = new Map<string, number | null>();
      for (const f of res.json().geojson.features as Array<{
        geometry: { coordinates: Array<Array<[number, number]>> };
        properties: { value: number | null };
      }>) {
        const corners = f.geometry.coordinates[0]!.slice(0, 4).map((p) => fwd(p));
        const cx = corners.reduce((a, p) => a + p[0], 0) / 4;
        const cy = corners.reduce((a, p) => a + p[1], 0) / 4;
        px.set(`${Math.floor((cx - SPEC.originX) / 10)},${Math.floor((SPEC.originY - cy) / 10)}`, f.properties.value);
      }
      values.set(d, px);
    }
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the reference: no pixel centre inside, the weights add up to the area, some pixels usable', () => {
    expect(weights.triangle.size).toBe(1);
    expect(Math.abs(weights.triangle.get('12,15')! - 0.105)).toBeLessThan(1e-6);
    expect(weights.strip.size).toBe(10);
    expect(Math.abs([...weights.strip.values()].reduce((a, b) => a + b, 0) - (3 * 99) / 100)).toBeLessThan(1e-6);
    // a check that cannot pass vacuously: each field has usable pixels in some capture, and not in all
    for (const w of Object.values(weights)) {
      const usable = DATES.map((d) => expected(w, values.get(d)!).count > 0);
      expect(usable).toContain(true);
    }
  });

  it('linked before and after the field was made: field_pixels 0, the cloud cover of the weights', async () => {
    for (const name of ['triangle', 'strip'] as const) {
      const res = await get(`/v1/fields/${ids[name]}/imagery`);
      expect(res.statusCode, res.body).toBe(200);
      const data = res.json().data as Array<Record<string, any>>;
      expect(data.map((d) => d.id)).toEqual(imagery);
      for (const [k, d] of data.entries()) {
        expect(d.field_pixels).toBe(0);
        expect(d.valid_pixels).toBe(0);
        expect(d.cloud_cover, `${name} ${DATES[k]}`).toBe(expected(weights[name], values.get(DATES[k]!)!).cloud);
      }
    }
    // imagery.available for the captures registered after the fields
    const events = await listOutbox(t.db, t.accountId, 'imagery.available');
    for (const name of ['triangle', 'strip'] as const)
      for (const k of [1, 2]) {
        const e = events.filter((x) => x.data.field_id === ids[name] && x.data.imagery_id === imagery[k]);
        expect(e, `${name} ${DATES[k]}`).toHaveLength(1);
        expect(e[0]!.data.cloud_cover).toBe(expected(weights[name], values.get(DATES[k]!)!).cloud);
      }
  });

  it('GET indices: weighting=coverage answers the weighted statistics; the default and rasters say why not', async () => {
    for (const name of ['triangle', 'strip'] as const)
      for (const [k, d] of DATES.entries()) {
        const want = expected(weights[name], values.get(d)!);
        const res = await get(
          `/v1/fields/${ids[name]}/indices?index=NDVI&date=${d}&imagery_id=${imagery[k]}&zonal_stats=true&geojson=false&weighting=coverage`,
        );
        expect(res.statusCode, res.body).toBe(200);
        const z = res.json().zonal_stats;
        expect(z.pixels).toBe(want.pixels);
        expect(Math.abs(z.count - want.count), `${name} ${d} count`).toBeLessThan(1e-9);
        if (want.mean === null) expect(z.mean).toBeNull();
        else {
          expect(Math.abs(z.mean - want.mean), `${name} ${d} mean`).toBeLessThan(1e-6);
          expect(Math.abs(z.min - want.min!)).toBeLessThan(1e-6);
          expect(Math.abs(z.max - want.max!)).toBeLessThan(1e-6);
          expect(Math.abs(z.valid_fraction - want.count / want.fieldWeight)).toBeLessThan(1e-6);
        }
        // the default: no pixel centre of any capture inside
        const centre = await get(`/v1/fields/${ids[name]}/indices?index=NDVI&date=${d}&zonal_stats=true&geojson=false`);
        expect(centre.statusCode, centre.body).toBe(422);
        expect(centre.json().code).toBe('no_usable_imagery');
        expect(centre.json().detail).toMatch(/no pixel centre.*weighting=coverage/i);
        const pinned = await get(`/v1/fields/${ids[name]}/indices?index=NDVI&date=${d}&imagery_id=${imagery[k]}`);
        expect(pinned.statusCode, pinned.body).toBe(422);
        expect(pinned.json().code).toBe('no_usable_imagery');
        // an image has pixel centres or nothing (rasters take no weighting)
        const raster = await get(`/v1/fields/${ids[name]}/indices/raster?index=NDVI&date=${d}`);
        expect(raster.statusCode, raster.body).toBe(422);
        expect(raster.json().code).toBe('no_usable_imagery');
      }
    // a mask of the request's own recounts the captures (masked-coverage.ts) by their weights too:
    // with no SCL class left out, every touched pixel with data is usable (the scenes have no no-data)
    for (const name of ['triangle', 'strip'] as const) {
      const res = await get(
        `/v1/fields/${ids[name]}/indices?index=NDVI&date=2025-06-06&zonal_stats=true&geojson=false&weighting=coverage&scl_exclude=`,
      );
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json().date).toBe('2025-06-06');
      expect(Math.abs(res.json().zonal_stats.count - expected(weights[name], new Map()).fieldWeight)).toBeLessThan(
        1e-9,
      );
    }
    // unpinned, the choice follows the weights: the nearest capture with a usable weight
    const res = await get(
      `/v1/fields/${ids.strip}/indices?index=NDVI&date=2025-06-06&zonal_stats=true&geojson=false&weighting=coverage`,
    );
    expect(res.statusCode, res.body).toBe(200);
    const usable = DATES.filter((d) => expected(weights.strip, values.get(d)!).count > 0);
    const nearest = usable.sort(
      (a, b) => Math.abs(Date.parse(a) - Date.parse('2025-06-06')) - Math.abs(Date.parse(b) - Date.parse('2025-06-06')),
    )[0];
    const tied = usable.filter(
      (d) =>
        Math.abs(Date.parse(d) - Date.parse('2025-06-06')) ===
        Math.abs(Date.parse(nearest!) - Date.parse('2025-06-06')),
    );
    expect(tied).toContain(res.json().date);
  });

  it('the time series: the weighted statistics of each capture under coverage, gaps by pixel centres', async () => {
    const q = 'index=NDVI&start_date=2025-06-01&end_date=2025-06-11&interval=daily&max_cloud_cover=100';
    for (const name of ['triangle', 'strip'] as const) {
      const cov = await get(`/v1/fields/${ids[name]}/indices/timeseries?${q}&weighting=coverage`);
      expect(cov.statusCode, cov.body).toBe(200);
      const els = cov.json() as Array<Record<string, any>>;
      for (const [k, d] of DATES.entries()) {
        const e = els.find((x) => x.interval_start === d)!;
        const want = expected(weights[name], values.get(d)!);
        expect(e.imagery_id, `${name} ${d}`).toBe(want.count > 0 ? imagery[k] : e.imagery_id);
        expect(e.cloud_cover).toBe(want.cloud);
        if (want.mean === null) expect(e.mean).toBeNull();
        else expect(Math.abs(e.mean - want.mean), `${name} ${d}`).toBeLessThan(1e-6);
      }
      const centre = await get(`/v1/fields/${ids[name]}/indices/timeseries?${q}`);
      expect(centre.statusCode, centre.body).toBe(200);
      expect((centre.json() as Array<Record<string, any>>).every((e) => e.imagery_id === null && e.mean === null)).toBe(
        true,
      );
    }
  });

  it('batch: the registered fields and the same polygons ad hoc give the weighted statistics', async () => {
    const run = async (body: object) => {
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/batch/statistics',
        headers: t.auth(),
        payload: {
          indices: ['NDVI'],
          start_date: '2025-06-01',
          end_date: '2025-06-11',
          interval: 'capture',
          format: 'ndjson',
          weighting: 'coverage',
          ...body,
        },
      });
      expect(res.statusCode, res.body).toBe(202);
      const job = await waitBatch(t, res.json().id);
      expect(job.status, JSON.stringify(job)).toBe('ready');
      expect(job.error_count).toBe(0);
      return ndjsonRows((await downloadBatch(t, job.download_url)).body);
    };
    const registered = await run({ fields: [ids.triangle, ids.strip] });
    const adhoc = await run({
      features: {
        type: 'FeatureCollection',
        features: [
          { type: 'Feature', properties: { id: ids.triangle }, geometry: TRIANGLE },
          { type: 'Feature', properties: { id: ids.strip }, geometry: STRIP },
        ],
      },
    });
    for (const rows of [registered, adhoc])
      for (const name of ['triangle', 'strip'] as const)
        for (const [k, d] of DATES.entries()) {
          const want = expected(weights[name], values.get(d)!);
          const r = rows.find((x) => x.field_id === ids[name] && x.date === d);
          expect(r, `${name} ${d}`).toBeDefined();
          expect(r!.imagery_id).toBe(imagery[k]);
          if (want.mean === null) expect(r!.mean).toBeNull();
          else expect(Math.abs(r!.mean - want.mean), `${name} ${d}`).toBeLessThan(1e-6);
        }
    // by pixel centres (the default) those captures do not cover the fields: every interval a gap
    for (const rows of [
      await run({ fields: [ids.triangle, ids.strip], weighting: 'centre', interval: 'weekly' }),
      await run({
        features: {
          type: 'FeatureCollection',
          features: [{ type: 'Feature', properties: { id: 'triangle' }, geometry: TRIANGLE }],
        },
        weighting: 'centre',
        interval: 'weekly',
      }),
    ]) {
      expect(rows.length).toBeGreaterThan(0);
      for (const r of rows) expect([r.imagery_id, r.mean]).toEqual([null, null]);
    }
  });

  it('reports under coverage use the captures; by pixel centres they fail saying why', async () => {
    const make = async (options: object, type = 'scouting') => {
      const res = await t.app.inject({
        method: 'POST',
        url: `/v1/fields/${ids.strip}/reports`,
        headers: t.auth(),
        payload: { type, format: 'json', options: { index: 'NDVI', ...options } },
      });
      expect(res.statusCode, res.body).toBe(202);
      return waitReport(t, res.json().id);
    };
    const ok = await make({ weighting: 'coverage' });
    expect(ok.status, ok.error).toBe('ready');
    const u = new URL(ok.download_url);
    const content = (await t.app.inject({ method: 'GET', url: u.pathname + u.search })).json();
    const k = imagery.indexOf(content.capture.imagery_id);
    const want = expected(weights.strip, values.get(DATES[k]!)!);
    // the usable weight over the touched weight (it was the weight over the touched pixels' number)
    expect(content.capture.usable_fraction).toBe(Math.round((want.count / want.fieldWeight) * 1e4) / 1e4);
    const failed = await make({});
    expect(failed.status).toBe('failed');
    expect(failed.error).toMatch(/no pixel centre.*options\.weighting "coverage"/i);
    // the seasonal and health-summary reports read the time series: gaps by pixel centres
    const range = { start_date: '2025-06-01', end_date: '2025-06-11' };
    for (const type of ['seasonal', 'health_summary']) {
      const seasonal = await make({ ...range, weighting: 'coverage' }, type);
      expect(seasonal.status, seasonal.error).toBe('ready');
      const gaps = await make(range, type);
      expect(gaps.status).toBe('failed');
      expect(gaps.error).toMatch(/no pixel centre.*options\.weighting "coverage"/i);
    }
  });
});
