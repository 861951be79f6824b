/**
 * The index endpoints and the scouting report on the demo season (src/imagery/demo.ts, the field a
 * first start creates), on every database backend: formulas that read no band, the "best
 * available image" rule (a capture with no usable field pixel is never chosen unless pinned),
 * `missing_bands` naming only the missing bands, and the scouting report's default capture.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDemo } from '../../src/imagery/demo.js';
import { fieldCaptures } from '../../src/indices/service.js';
import type { Candidate } from '../../src/indices/selection.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { dbBackends } from '../helpers/backends.js';
import { waitReport } from '../helpers/reports.js';

/** Formulas without a band: the constant each pixel gets (null: not finite, so no value). */
const CONSTANT_FORMULAS: Array<[string, number | null]> = [
  ['1/0', null],
  ['0/0', null],
  ['2', 2],
  ['log(0)', null],
  ['sqrt(-1)', null],
  ['exp(1000)', null],
  ['-(3 - 0.5) * 2', -5],
];

describe.each(dbBackends)('indices on the demo season ($name)', (backend) => {
  let t: TestApp;
  let dir: string;
  let fieldId: string;
  let caps: Candidate[];
  const byDate = (d: string) => caps.find((c) => c.capture_date === d)!;
  const get = (url: string, key?: string) => t.app.inject({ method: 'GET', url, headers: t.auth(key) });

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'demo-indices-'));
    t = await buildTestApp(backend, { env: { IMAGERY_ROOTS: dir } });
    const demo = await createDemo(
      { db: t.db, compute: t.runtime.compute, roots: t.config.imageryRoots, maxAreaHa: t.config.maxFieldAreaHa },
      t.accountId,
    );
    fieldId = demo.fieldId;
    caps = await fieldCaptures(t.db, t.accountId, fieldId);
  }, 240_000);
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the demo has what these tests rely on: 2025-04-25 entirely under cloud, 04-19 partly, 05-01 clear', () => {
    expect(byDate('2025-04-25')).toMatchObject({ valid_pixels: 0 });
    expect(byDate('2025-04-19').valid_pixels).toBeGreaterThan(0);
    expect(byDate('2025-04-19').valid_pixels).toBeLessThan(byDate('2025-04-19').field_pixels);
    expect(byDate('2025-05-01').valid_pixels).toBe(byDate('2025-05-01').field_pixels);
  });

  describe("formulas that read no band: a value on the capture's usable field pixels, null when not finite", () => {
    // 2025-07-06 is partly under cloud: the usable pixels are fewer than the field's.
    const date = '2025-07-06';
    it.each(CONSTANT_FORMULAS)('GET indices with formula %s', async (formula, value) => {
      const c = byDate(date);
      expect(c.valid_pixels).toBeLessThan(c.field_pixels);
      const res = await get(
        `/v1/fields/${fieldId}/indices?index=custom&date=${date}&zonal_stats=true&formula=${encodeURIComponent(formula)}`,
      );
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({ imagery_id: c.id, date, formula });
      const count = value === null ? 0 : c.valid_pixels;
      expect(body.zonal_stats).toMatchObject({
        count,
        min: value,
        max: value,
        mean: value,
        median: value,
        std: value === null ? null : 0,
      });
      expect(body.zonal_stats.valid_fraction).toBeCloseTo(count / c.field_pixels, 6);
      const values = body.geojson.features.map((f: { properties: { value: number | null } }) => f.properties.value);
      expect(values.length).toBe(c.field_pixels);
      expect(values.filter((v: number | null) => v !== null).length).toBe(count);
      expect(values.every((v: number | null) => v === null || v === value)).toBe(true);
    });

    it.each(CONSTANT_FORMULAS)('POST indices/custom with formula %s', async (formula, value) => {
      const res = await t.app.inject({
        method: 'POST',
        url: `/v1/fields/${fieldId}/indices/custom`,
        headers: t.auth(),
        payload: { name: `constant ${formula}`, formula, date },
      });
      expect(res.statusCode, res.body).toBe(201);
      const body = res.json();
      expect(body.zonal_stats).toMatchObject({ count: value === null ? 0 : byDate(date).valid_pixels, mean: value });
      const again = await get(`/v1/fields/${fieldId}/indices/custom/${body.id}`);
      expect(again.statusCode).toBe(200);
      expect(again.json().zonal_stats).toEqual(body.zonal_stats);
    });

    it.each(CONSTANT_FORMULAS)('time series with formula %s', async (formula, value) => {
      const res = await get(
        `/v1/fields/${fieldId}/indices/timeseries?index=custom&formula=${encodeURIComponent(formula)}&start_date=2025-06-01&end_date=2025-07-31&interval=weekly&max_cloud_cover=30`,
      );
      expect(res.statusCode, res.body).toBe(200);
      const used = res.json().filter((e: { imagery_id: string | null }) => e.imagery_id !== null);
      expect(used.length).toBeGreaterThan(3);
      for (const e of used) {
        expect(e).toMatchObject({ mean: value, min: value, max: value, std: value === null ? null : 0 });
        expect(e.valid_fraction).toBeCloseTo(value === null ? 0 : 1 - e.cloud_cover / 100, 3);
      }
    });
  });

  describe('best available image', () => {
    it('date=2025-04-25 (that day entirely under cloud) uses the nearest capture with usable pixels: 05-01 (0 % cloud) over 04-19 (same distance, 54 %)', async () => {
      const res = await get(`/v1/fields/${fieldId}/indices?index=NDVI&date=2025-04-25&zonal_stats=true&geojson=false`);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({ date: '2025-05-01', imagery_id: byDate('2025-05-01').id });
      expect(res.json().zonal_stats.valid_fraction).toBe(1);
      // 04-22 is 3 days from 04-19 and from 04-25: 04-25 has no usable pixel, so 04-19.
      expect((await get(`/v1/fields/${fieldId}/indices?index=NDVI&date=2025-04-22&geojson=false`)).json().date).toBe(
        '2025-04-19',
      );
    });

    it('pinned by imagery_id, the cloudy capture is used (every statistic null)', async () => {
      const cloudy = byDate('2025-04-25');
      const res = await get(
        `/v1/fields/${fieldId}/indices?index=NDVI&date=2025-04-25&imagery_id=${cloudy.id}&zonal_stats=true&geojson=false`,
      );
      expect(res.statusCode, res.body).toBe(200);
      expect(res.json()).toMatchObject({
        imagery_id: cloudy.id,
        zonal_stats: { count: 0, mean: null, valid_fraction: 0 },
      });
    });

    it('the time series never uses a capture without a usable pixel, even with max_cloud_cover=100', async () => {
      const res = await get(
        `/v1/fields/${fieldId}/indices/timeseries?index=NDVI&start_date=2025-04-24&end_date=2025-04-26&interval=daily&max_cloud_cover=100`,
      );
      expect(res.statusCode, res.body).toBe(200);
      const day = res.json().find((e: { interval_start: string }) => e.interval_start === '2025-04-25');
      expect(day).toMatchObject({ date: '2025-04-25', imagery_id: null, mean: null, cloud_cover: 100 });
    });

    it('a scouting report for options.date=2025-04-25 uses the same rule (05-01), instead of failing', async () => {
      const post = await t.app.inject({
        method: 'POST',
        url: `/v1/fields/${fieldId}/reports`,
        headers: t.auth(),
        payload: { type: 'scouting', format: 'json', options: { date: '2025-04-25' } },
      });
      expect(post.statusCode, post.body).toBe(202);
      const r = await waitReport(t, post.json().id, 120_000);
      expect(r.status, r.error).toBe('ready');
      const content = (
        await t.app.inject({ method: 'GET', url: new URL(r.download_url).pathname + new URL(r.download_url).search })
      ).json();
      expect(content.capture).toMatchObject({ date: '2025-05-01', usable_fraction: 1 });
    });
  });

  describe('errors: 422 problem+json naming what is missing', () => {
    let other: { key: string; accountId: string };
    let otherField: string;
    let redNir: string;
    beforeAll(async () => {
      // Another account: the demo's captures do not cover its field. One capture with B04 and B08
      // only (the demo's 2025-07-12 files), one entirely under cloud (2025-04-25).
      other = await t.otherAccount();
      const field = await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(other.key),
        payload: { name: 'other', boundary: (await get(`/v1/fields/${fieldId}`)).json().boundary },
      });
      expect(field.statusCode, field.body).toBe(201);
      otherField = field.json().id;
      const files = (d: string, bands: string[]) =>
        Object.fromEntries(bands.map((b) => [b, path.join(dir, 'demo', `${d}_${b}.tif`)]));
      const img = await t.app.inject({
        method: 'POST',
        url: '/v1/imagery',
        headers: t.auth(other.key),
        payload: {
          source: 'sentinel-2-l2a',
          capture_date: '2025-07-12',
          bands: files('2025-07-12', ['B04', 'B08']),
          offset: -0.1,
        },
      });
      expect(img.statusCode, img.body).toBe(201);
      redNir = img.json().id;
    });

    const problem = async (url: string, key: string) => {
      const res = await get(url, key);
      expect(res.statusCode, res.body).toBe(422);
      expect(res.headers['content-type']).toContain('application/problem+json');
      return res.json();
    };

    it.each([
      ['NDRE (B05, B08): only B05 is missing', 'index=NDRE', ['B05']],
      ['EVI (B02, B04, B08): only B02 is missing', 'index=EVI', ['B02']],
      [
        'a custom formula on B03, B04, B08, B11',
        `index=custom&formula=${encodeURIComponent('(B03 + B11) / (B08 - B04)')}`,
        ['B03', 'B11'],
      ],
    ])('missing_bands, %s', async (_name, q, missing) => {
      for (const pin of ['', `&imagery_id=${redNir}`]) {
        const body = await problem(`/v1/fields/${otherField}/indices?${q}&date=2025-07-12${pin}`, other.key);
        expect(body.code).toBe('missing_bands');
        for (const b of ['B04', 'B08']) expect(body.detail, `${b} is present`).not.toContain(b);
        for (const b of missing) expect(body.detail).toContain(b);
        expect(body.missing_bands).toEqual(missing);
      }
    });

    it('no_usable_imagery when every capture with the bands is entirely under cloud; pinned, it is used', async () => {
      const bands = Object.fromEntries(
        ['B04', 'B05', 'B08'].map((b) => [b, path.join(dir, 'demo', `2025-04-25_${b}.tif`)]),
      );
      const img = await t.app.inject({
        method: 'POST',
        url: '/v1/imagery',
        headers: t.auth(other.key),
        payload: {
          source: 'sentinel-2-l2a',
          capture_date: '2025-04-25',
          bands,
          mask: { href: path.join(dir, 'demo', '2025-04-25_SCL.tif'), kind: 'scl' },
          offset: -0.1,
        },
      });
      expect(img.statusCode, img.body).toBe(201);
      const body = await problem(`/v1/fields/${otherField}/indices?index=NDRE&date=2025-04-25`, other.key);
      expect(body.code).toBe('no_usable_imagery');
      const pinned = await get(
        `/v1/fields/${otherField}/indices?index=NDRE&date=2025-04-25&imagery_id=${img.json().id}&zonal_stats=true&geojson=false`,
        other.key,
      );
      expect(pinned.statusCode, pinned.body).toBe(200);
      expect(pinned.json().zonal_stats).toMatchObject({ count: 0, mean: null });
    });
  });

  it('weighting=coverage on the demo field, drawn on the 10 m grid: the pixel-centre statistics, no pixel outside it touched', async () => {
    // The boundary is stored in lon/lat; reprojected, its corners lie a few 1e-10 px off the grid
    // lines. Those slivers count as no coverage (coverage-fraction.ts), so the field touches its
    // 80 × 80 pixels, each wholly inside, and its statistics are the pixel-centre ones.
    const url = `/v1/fields/${fieldId}/indices?index=NDVI&date=2025-05-01&zonal_stats=true&geojson=false&percentiles=5,50,95`;
    const centre = await get(url);
    const weighted = await get(`${url}&weighting=coverage`);
    expect(centre.statusCode, centre.body).toBe(200);
    expect(weighted.statusCode, weighted.body).toBe(200);
    const c = centre.json().zonal_stats;
    const w = weighted.json().zonal_stats;
    expect(c.count).toBe(6400);
    expect(w).toMatchObject({ count: 6400, pixels: 6400, valid_fraction: 1, min: c.min, max: c.max });
    expect(w.mean).toBeCloseTo(c.mean, 12);
    expect(w.std).toBeCloseTo(c.std, 12);
    for (const [i, p] of w.percentiles.entries()) expect(p.value).toBeCloseTo(c.percentiles[i].value, 12);
  });

  it('the default scouting report uses the latest clear capture (≥ 70 % of the field usable) inside the season', async () => {
    const field = (await get(`/v1/fields/${fieldId}`)).json();
    expect(field).toMatchObject({ planting_date: '2025-04-10', harvest_date: '2025-09-20' });
    const clearInSeason = caps
      .filter(
        (c) =>
          c.valid_pixels / c.field_pixels >= 0.7 &&
          c.capture_date >= field.planting_date &&
          c.capture_date <= field.harvest_date,
      )
      .map((c) => c.capture_date)
      .sort();
    // The demo has clear captures after harvest too (2025-10-04): those are bare soil.
    expect(caps.some((c) => c.capture_date > field.harvest_date && c.valid_pixels / c.field_pixels >= 0.7)).toBe(true);
    const post = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${fieldId}/reports`,
      headers: t.auth(),
      payload: { type: 'scouting', format: 'json' },
    });
    expect(post.statusCode, post.body).toBe(202);
    const r = await waitReport(t, post.json().id, 120_000);
    expect(r.status, r.error).toBe('ready');
    const content = (
      await t.app.inject({ method: 'GET', url: new URL(r.download_url).pathname + new URL(r.download_url).search })
    ).json();
    expect(content.capture.date).toBe(clearInSeason.at(-1));
    expect(content.capture.usable_fraction).toBeGreaterThanOrEqual(0.7);
  });
});
