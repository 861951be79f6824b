/**
 * GET /v1/fields/{id}/indices through HTTP on the real Sentinel-2 scenes: every index whose bands
 * exist matches the independent reference statistics (counts exact, values within 1e-4); capture
 * selection; per-pixel GeoJSON; custom formulas. Bad input, which needs no real data, on a
 * synthetic scene.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { selectBestCapture } from '../../src/indices/selection.js';
import { buildTestApp, square, type TestApp } from '../helpers/app.js';
import { hasRealData, polygonOf, realDataDir, referenceResults, REF_INDEX, scenes } from '../helpers/real-data.js';
import { seedSeason } from '../helpers/reports.js';

describe('selectBestCapture', () => {
  const c = (id: string, capture_date: string, invalid: number, bands = ['B04', 'B08']) => ({
    id,
    capture_date,
    field_pixels: 100,
    valid_pixels: 100 - invalid,
    bands,
  });
  it('on the date: fewest unusable pixels; else nearest; ties: fewer unusable, then earlier', () => {
    const cs = [
      c('a', '2025-06-10', 30),
      c('b', '2025-06-10', 10),
      c('d', '2025-06-14', 5),
      c('e', '2025-06-06', 5),
      c('f', '2025-06-20', 0),
    ];
    expect(selectBestCapture(cs, '2025-06-10', ['B04'])!.id).toBe('b');
    // 06-12: b (2 days, 10 unusable) and d (2 days, 5 unusable) → d
    expect(selectBestCapture(cs, '2025-06-12', ['B04'])!.id).toBe('d');
    // 06-10 ± 4: e (06-06) and d (06-14) both 5 unusable → the earlier, e; but b is on the date
    expect(selectBestCapture([cs[2]!, cs[3]!], '2025-06-10', ['B04'])!.id).toBe('e');
    expect(selectBestCapture(cs, '2025-06-10', ['B05'])).toBeNull();
    expect(selectBestCapture([c('g', '2025-06-10', 0, ['B04'])], '2025-06-10', ['B04', 'B08'])).toBeNull();
  });
});

describe.runIf(hasRealData)('field indices on real Sentinel-2 data', () => {
  let t: TestApp;
  const fieldOf: Record<string, string> = {};
  const imageryOf: Record<string, string> = {};

  beforeAll(async () => {
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: realDataDir } });
    for (const ref of referenceResults()) {
      const scene = scenes[ref.scene]!;
      const key = ref.polygon_file;
      if (!fieldOf[key]) {
        const f = await t.app.inject({
          method: 'POST',
          url: '/v1/fields',
          headers: t.auth(),
          payload: { name: ref.scene, boundary: polygonOf(ref) },
        });
        expect(f.statusCode, f.body).toBe(201);
        fieldOf[key] = f.json().id;
      }
      const img = await t.app.inject({
        method: 'POST',
        url: '/v1/imagery',
        headers: t.auth(),
        payload: { source: scene.source, capture_date: scene.date, ...scene.capture },
      });
      expect(img.statusCode, img.body).toBe(201);
      imageryOf[ref.scene] = img.json().id;
    }
  });
  afterAll(async () => t.close());

  it('every index matches the reference: valid counts exactly, min/max/mean/std within 1e-4', async () => {
    let checked = 0;
    for (const ref of referenceResults()) {
      for (const [refName, stats] of Object.entries(ref.indices)) {
        const res = await t.app.inject({
          method: 'GET',
          url: `/v1/fields/${fieldOf[ref.polygon_file]}/indices?index=${REF_INDEX[refName]}&date=${scenes[ref.scene]!.date}&zonal_stats=true&geojson=false`,
          headers: t.auth(),
        });
        expect(res.statusCode, res.body).toBe(200);
        const body = res.json();
        expect(body.imagery_id, ref.scene).toBe(imageryOf[ref.scene]);
        expect(body.date).toBe(scenes[ref.scene]!.date);
        expect(body.zonal_stats.count, `${ref.scene} ${refName}`).toBe(stats.count);
        for (const k of ['min', 'max', 'mean', 'std'] as const) {
          expect(Math.abs(body.zonal_stats[k] - stats[k]), `${ref.scene} ${refName} ${k}`).toBeLessThan(1e-4);
        }
        expect(body.zonal_stats.valid_fraction).toBeCloseTo(stats.count / ref.pixels_centre_in_polygon, 5);
        expect(body.zonal_stats.median).toBeGreaterThanOrEqual(stats.min - 1e-6);
        checked++;
      }
    }
    expect(checked).toBeGreaterThanOrEqual(20);
  });

  it('GeoJSON: one closed WGS84 square per field pixel, null where masked', async () => {
    const ref = referenceResults().find((r) => r.scene.startsWith('EH_29RKH'))!;
    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${fieldOf[ref.polygon_file]}/indices?index=NDVI&date=2020-02-19&zonal_stats=true&imagery_id=${imageryOf[ref.scene]}`,
      headers: t.auth(),
    });
    expect(res.statusCode).toBe(200);
    expect(res.headers['content-type']).toMatch(/application\/json/);
    const body = res.json();
    const fc = body.geojson;
    expect(fc.type).toBe('FeatureCollection');
    expect(fc.features).toHaveLength(ref.pixels_centre_in_polygon);
    let nulls = 0;
    for (const f of fc.features) {
      expect(f.type).toBe('Feature');
      expect(f.geometry.type).toBe('Polygon');
      const ring = f.geometry.coordinates[0];
      expect(ring).toHaveLength(5);
      expect(ring[0]).toEqual(ring[4]);
      for (const [lon, lat] of ring) {
        expect(lon).toBeGreaterThan(-11.1);
        expect(lon).toBeLessThan(-10.9);
        expect(lat).toBeGreaterThan(25.1);
        expect(lat).toBeLessThan(25.3);
      }
      const area = ring
        .slice(0, 4)
        .reduce((a: number, p: number[], i: number) => a + p[0]! * ring[i + 1][1] - ring[i + 1][0] * p[1]!, 0);
      expect(area).toBeGreaterThan(0); // counter-clockwise
      if (f.properties.value === null) nulls++;
      else expect(typeof f.properties.value).toBe('number');
    }
    expect(nulls).toBe(ref.pixels_centre_in_polygon - body.zonal_stats.count);
  });

  it('selection: on the date, nearest, ties; pinned imagery that does not cover the field; another account', async () => {
    const ftwField = fieldOf['polygons/poly_T33UUP_ftw_center.geojson']!;
    const june = imageryOf.AT_T33UUP_20210617_L2A_FTW!;
    const sept = imageryOf.AT_T33UUP_20210925_L2A_FTW!;
    const get = (q: string, key = t.key) =>
      t.app.inject({
        method: 'GET',
        url: `/v1/fields/${ftwField}/indices?index=NDVI&geojson=false&${q}`,
        headers: t.auth(key),
      });
    expect((await get('date=2021-06-17')).json().imagery_id).toBe(june);
    expect((await get('date=2021-09-20')).json().imagery_id).toBe(sept);
    expect((await get('date=2021-01-01')).json()).toMatchObject({ imagery_id: june, date: '2021-06-17' });
    // 2021-08-06 is 50 days from 06-17 and 50 days from 09-25: equal clouds → the earlier date.
    expect((await get('date=2021-08-06')).json().imagery_id).toBe(june);
    expect((await get(`date=2021-06-17&imagery_id=${sept}`)).json().imagery_id).toBe(sept);
    const rkh = imageryOf.EH_29RKH_20200219_L2A!;
    const notCovering = await get(`date=2021-06-17&imagery_id=${rkh}`);
    expect(notCovering.statusCode).toBe(422);
    expect(notCovering.json().code).toBe('imagery_does_not_cover_field');
    const other = await t.otherAccount();
    expect((await get('date=2021-06-17', other.key)).statusCode).toBe(404);
    // NDRE needs B05, which the Austrian captures lack.
    const ndre = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${ftwField}/indices?index=NDRE&date=2021-06-17`,
      headers: t.auth(),
    });
    expect(ndre.statusCode).toBe(422);
    expect(ndre.json().code).toBe('missing_bands');
  });
});

describe.runIf(hasRealData)('time series and stored custom indices on real data', () => {
  let t: TestApp;
  let field: string;
  let june: string;
  let sept: string;
  beforeAll(async () => {
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: realDataDir } });
    const ref = referenceResults().find((r) => r.scene === 'AT_T33UUP_20210617_L2A_FTW')!;
    field = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'Austria', boundary: polygonOf(ref) },
      })
    ).json().id;
    for (const name of ['AT_T33UUP_20210617_L2A_FTW', 'AT_T33UUP_20210925_L2A_FTW']) {
      const s = scenes[name]!;
      const id = (
        await t.app.inject({
          method: 'POST',
          url: '/v1/imagery',
          headers: t.auth(),
          payload: { source: s.source, capture_date: s.date, ...s.capture },
        })
      ).json().id;
      if (name.includes('0617')) june = id;
      else sept = id;
    }
  });
  afterAll(async () => t.close());

  it('weekly series: one element per interval, the capture in it, gaps elsewhere; cached statistics', async () => {
    const url = `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=2021-06-01&end_date=2021-09-30`;
    const res = await t.app.inject({ method: 'GET', url, headers: t.auth() });
    expect(res.statusCode, res.body).toBe(200);
    const series = res.json();
    expect(series).toHaveLength(18); // 122 days → 17 full weeks and a cut one
    expect(series[0]).toMatchObject({
      interval_start: '2021-06-01',
      interval_end: '2021-06-07',
      date: '2021-06-01',
      mean: null,
      imagery_id: null,
    });
    expect(series.at(-1)).toMatchObject({ interval_start: '2021-09-28', interval_end: '2021-09-30' });
    const hits = series.filter((e: { imagery_id: string | null }) => e.imagery_id);
    expect(hits.map((e: { imagery_id: string }) => e.imagery_id)).toEqual([june, sept]);
    expect(hits[0]).toMatchObject({
      date: '2021-06-17',
      interval_start: '2021-06-15',
      interval_end: '2021-06-21',
      valid_fraction: 1,
    });
    const ndvi = referenceResults().find((r) => r.scene === 'AT_T33UUP_20210617_L2A_FTW')!.indices.NDVI!;
    expect(Math.abs(hits[0].mean - ndvi.mean)).toBeLessThan(1e-4);
    for (const k of ['mean', 'min', 'max', 'std']) expect(series[0][k]).toBeNull();
    const cached = await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM index_stats WHERE field_id = $1', [
      field,
    ]);
    expect(cached[0]!.n).toBe(2);
    // The same series again is served from the cache (and answers the same).
    const again = await t.app.inject({ method: 'GET', url, headers: t.auth() });
    expect(again.json()).toEqual(series);
    const daily = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=2021-06-17&end_date=2021-06-18&interval=daily`,
      headers: t.auth(),
    });
    expect(daily.json().map((e: { date: string }) => e.date)).toEqual(['2021-06-17', '2021-06-18']);
  });

  it('an interval whose best capture is too cloudy is a gap (max_cloud_cover)', async () => {
    await t.db.query('UPDATE imagery_fields SET valid_pixels = 1000, cloud_cover = 57.72 WHERE imagery_id = $1', [
      sept,
    ]);
    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=2021-09-20&end_date=2021-10-03&interval=biweekly`,
      headers: t.auth(),
    });
    expect(res.json()).toEqual([
      expect.objectContaining({ date: '2021-09-20', mean: null, imagery_id: null, cloud_cover: 57.72 }),
    ]);
    const lenient = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=2021-09-20&end_date=2021-10-03&interval=biweekly&max_cloud_cover=60`,
      headers: t.auth(),
    });
    expect(lenient.json()[0]).toMatchObject({ date: '2021-09-25', imagery_id: sept });
    await t.db.query('UPDATE imagery_fields SET valid_pixels = field_pixels, cloud_cover = 0 WHERE imagery_id = $1', [
      sept,
    ]);
  });

  it('POST custom stores the result (201 with cix_ id), GET reads it back; division by zero gives nulls', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${field}/indices/custom`,
      headers: t.auth(),
      payload: { name: 'green ratio', formula: 'B08 / B03 - 1', date: '2021-06-17' },
    });
    expect(res.statusCode, res.body).toBe(201);
    const c = res.json();
    expect(c).toMatchObject({
      name: 'green ratio',
      formula: 'B08 / B03 - 1',
      field_id: field,
      date: '2021-06-17',
      imagery_id: june,
    });
    expect(c.id).toMatch(/^cix_/);
    expect(c.zonal_stats.count).toBe(2365);
    expect(c.geojson.features).toHaveLength(2365);
    const back = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices/custom/${c.id}`,
      headers: t.auth(),
    });
    expect(back.json()).toEqual(c);
    const list = (
      await t.app.inject({ method: 'GET', url: `/v1/fields/${field}/indices/custom`, headers: t.auth() })
    ).json();
    expect(list).toMatchObject({ total: 1, data: [{ id: c.id }] });
    expect(list.data[0].geojson).toBeUndefined();
    const zero = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${field}/indices/custom`,
      headers: t.auth(),
      payload: { name: 'zero', formula: '1 / (B04 - B04)', date: '2021-06-17' },
    });
    expect(zero.statusCode).toBe(201);
    expect(zero.json().zonal_stats).toMatchObject({ count: 0, mean: null });
    const bad = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${field}/indices/custom`,
      headers: t.auth(),
      payload: { name: 'x', formula: 'sqrt(B04', date: '2021-06-17' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({
      code: 'invalid_formula',
      errors: [{ path: '/body/formula', code: 'unbalanced_parenthesis' }],
    });
    const other = await t.otherAccount();
    expect(
      (
        await t.app.inject({
          method: 'GET',
          url: `/v1/fields/${field}/indices/custom/${c.id}`,
          headers: t.auth(other.key),
        })
      ).statusCode,
    ).toBe(404);
  });
});

describe('field indices: bad input, on a synthetic scene', () => {
  let t: TestApp;
  let dir: string;
  let field: string;
  let date: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'indices-bad-'));
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: dir } });
    // One clear capture, before planting.
    const seeded = await seedSeason(t, dir, { step: 400 });
    [field, date] = [seeded.fieldId, seeded.dates[0]!];
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('custom formulas: division by zero gives nulls, not an error; a bad formula is a 400 with the position', async () => {
    const q = (formula: string) =>
      t.app.inject({
        method: 'GET',
        url: `/v1/fields/${field}/indices?index=custom&date=${date}&zonal_stats=true&formula=${encodeURIComponent(formula)}`,
        headers: t.auth(),
      });
    const zero = await q('B08 / (B04 - B04)');
    expect(zero.statusCode).toBe(200);
    const body = zero.json();
    expect(body.zonal_stats).toMatchObject({ count: 0, mean: null, min: null });
    expect(body.geojson.features.every((f: { properties: { value: unknown } }) => f.properties.value === null)).toBe(
      true,
    );
    expect(body.formula).toBe('B08 / (B04 - B04)');
    const ok = await q('(B08 - B04) / (B08 + B04)');
    const ndvi = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices?index=NDVI&date=${date}&zonal_stats=true&geojson=false`,
      headers: t.auth(),
    });
    expect(ok.json().zonal_stats.mean).toBeCloseTo(ndvi.json().zonal_stats.mean, 9);
    const bad = await q('B08 +* B04');
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_formula', position: 5 });
  });

  it('bad input answers 4xx', async () => {
    const f = field;
    const cases: Array<[string, number, string]> = [
      [`/v1/fields/${f}/indices?date=2021-06-17`, 400, 'validation_failed'],
      [`/v1/fields/${f}/indices?index=NDVI`, 400, 'validation_failed'],
      [`/v1/fields/${f}/indices?index=NDVI&date=2021-02-30`, 400, 'validation_failed'],
      [`/v1/fields/${f}/indices?index=NDVI&date=17/06/2021`, 400, 'validation_failed'],
      [`/v1/fields/${f}/indices?index=XYZ&date=2021-06-17`, 400, 'validation_failed'],
      [`/v1/fields/${f}/indices?index=custom&date=2021-06-17`, 400, 'validation_failed'],
      [`/v1/fields/${f}/indices?index=NDVI&date=2021-06-17&zonal_stats=perhaps`, 400, 'validation_failed'],
      [`/v1/fields/${f}/indices?index=NDVI&date=2021-06-17&imagery_id=img_nope`, 404, 'not_found'],
      [`/v1/fields/fld_nope/indices?index=NDVI&date=2021-06-17`, 404, 'not_found'],
    ];
    for (const [url, status, code] of cases) {
      const res = await t.app.inject({ method: 'GET', url, headers: t.auth() });
      expect(res.statusCode, url).toBe(status);
      expect(res.json().code, url).toBe(code);
    }
    const lonely = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'no imagery', boundary: square(100, 10) },
      })
    ).json();
    const none = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${lonely.id}/indices?index=NDVI&date=2021-06-17`,
      headers: t.auth(),
    });
    expect(none.statusCode).toBe(404);
    expect(none.json().code).toBe('no_imagery');
  });

  it('series bad input: range limit, order, interval, dates', async () => {
    for (const [q, status] of [
      ['index=NDVI&start_date=2000-01-01&end_date=2011-01-01&interval=daily', 400],
      ['index=NDVI&start_date=2021-06-10&end_date=2021-06-01', 400],
      ['index=NDVI&start_date=2021-06-01&end_date=2021-06-10&interval=monthly', 400],
      ['index=NDVI&start_date=2021-06-31&end_date=2021-07-10', 400],
      ['index=NDVI&start_date=2021-06-01', 400],
      ['index=NDVI&start_date=2021-06-01&end_date=2021-06-10&max_cloud_cover=101', 400],
    ] as const) {
      const res = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${field}/indices/timeseries?${q}`,
        headers: t.auth(),
      });
      expect(res.statusCode, q).toBe(status);
    }
    const ok = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=2000-01-01&end_date=2010-01-06&interval=daily`,
      headers: t.auth(),
    });
    expect(ok.statusCode).toBe(200); // 3,659 intervals: within the limit
  });
});
