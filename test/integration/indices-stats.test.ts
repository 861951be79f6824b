/**
 * The statistics options of GET /v1/fields/{id}/indices (issue 23) through HTTP: percentiles and
 * histograms on the real Sentinel-2 scenes against a float64 reference computed here from the
 * field window's digital numbers (reference.ts's evaluator, a sort, numpy's rules); bad input on
 * a synthetic scene.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fromFile } from 'geotiff';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findIndex } from '../../src/compute/catalog.js';
import { referenceValues } from '../../src/compute/reference.js';
import type { Boundary } from '../../src/fields/boundary.js';
import { readFieldWindow, type CaptureBand } from '../../src/imagery/window-reader.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { npPercentile } from '../helpers/numpy.js';
import { hasRealData, polygonOf, realDataDir, referenceResults, REF_INDEX, scenes } from '../helpers/real-data.js';
import { seedSeason } from '../helpers/reports.js';

/** The index's float64 values over the field's valid pixels (NaN elsewhere), from the window's DNs. */
async function float64Values(capture: (typeof scenes)[string]['capture'], boundary: Boundary, index: string) {
  const entry = findIndex(index)!;
  const bands = entry.bands as CaptureBand[];
  const win = await readFieldWindow(capture, boundary, bands, { roots: [realDataDir] });
  const n = win.width * win.height;
  const input = Object.fromEntries(
    bands.map((b) => {
      const w = win.bands[b]!;
      return [b, { data: w.data, spec: { dtype: w.dtype, scale: w.scale, offset: w.offset, nodata: w.nodata } }];
    }),
  );
  const v = referenceValues(entry.formula, input, n, win.valid);
  return Float64Array.from(v.filter((x) => !Number.isNaN(x))).sort();
}

describe.runIf(hasRealData)('percentiles and histograms on the real scenes', () => {
  let t: TestApp;
  const fieldOf: Record<string, string> = {};
  const imageryOf: Record<string, string> = {};

  beforeAll(async () => {
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: realDataDir } });
    for (const ref of referenceResults()) {
      const scene = scenes[ref.scene]!;
      if (!fieldOf[ref.polygon_file]) {
        const f = await t.app.inject({
          method: 'POST',
          url: '/v1/fields',
          headers: t.auth(),
          payload: { name: ref.scene, boundary: polygonOf(ref) },
        });
        expect(f.statusCode, f.body).toBe(201);
        fieldOf[ref.polygon_file] = f.json().id;
      }
      if (!imageryOf[ref.scene]) {
        const img = await t.app.inject({
          method: 'POST',
          url: '/v1/imagery',
          headers: t.auth(),
          payload: { source: scene.source, capture_date: scene.date, ...scene.capture },
        });
        expect(img.statusCode, img.body).toBe(201);
        imageryOf[ref.scene] = img.json().id;
      }
    }
  }, 120_000);
  afterAll(async () => t?.close());

  it('any percentiles and both histogram forms equal the float64 reference (1e-6; counts up to edge ties)', async () => {
    const ps = [0, 1, 2.5, 5, 10, 33.3, 50, 90, 95, 99.9, 100];
    let checked = 0;
    for (const ref of referenceResults()) {
      for (const refName of ['NDVI', 'EVI', 'NDRE']) {
        if (!ref.indices[refName]) continue;
        const index = REF_INDEX[refName]!;
        const scene = scenes[ref.scene]!;
        const sorted = await float64Values(scene.capture, polygonOf(ref) as never, index);
        const edges = [-1, -0.2, 0, 0.15, 0.3, 0.45, 0.6, 0.8, 1];
        for (const histogram of ['17', edges.join(',')]) {
          const res = await t.app.inject({
            method: 'GET',
            url: `/v1/fields/${fieldOf[ref.polygon_file]}/indices?index=${index}&imagery_id=${imageryOf[ref.scene]}&date=${scene.date}&zonal_stats=true&geojson=false&percentiles=${ps.join(',')}&histogram=${histogram}`,
            headers: t.auth(),
          });
          expect(res.statusCode, res.body).toBe(200);
          const z = res.json().zonal_stats;
          const label = `${ref.scene} ${ref.polygon_file} ${index}`;
          expect(z.count, label).toBe(sorted.length);
          const got = z.percentiles as Array<{ percentile: number; value: number }>;
          expect(got.map((x) => x.percentile)).toEqual(ps);
          for (const [i, p] of ps.entries())
            expect(Math.abs(got[i]!.value - npPercentile(sorted, p)), `${label} p${p}`).toBeLessThan(1e-6);
          expect(got[6]!.value).toBe(z.median);
          // zonal_stats' own order statistics, placed with them
          for (const [k, p] of [
            ['p10', 10],
            ['p25', 25],
            ['median', 50],
            ['p75', 75],
            ['p90', 90],
          ] as const)
            expect(Math.abs(z[k] - npPercentile(sorted, p)), `${label} ${k}`).toBeLessThan(1e-6);
          // the bins of the float64 values; a value within 1e-6 of an edge may fall on either side of it
          const h = z.histogram as { edges: number[]; counts: number[] };
          if (histogram === '17') {
            expect(h.edges).toHaveLength(18);
            expect(Math.abs(h.edges[0]! - sorted[0]!)).toBeLessThan(1e-6);
            expect(Math.abs(h.edges[17]! - sorted[sorted.length - 1]!)).toBeLessThan(1e-6);
          } else expect(h.edges).toEqual(edges);
          const counts = new Array(h.edges.length - 1).fill(0);
          let ambiguous = 0;
          const last = h.edges.length - 1;
          for (const v of sorted) {
            if (h.edges.some((e) => Math.abs(v - e) < 1e-6)) ambiguous++;
            if (v < h.edges[0]! || v > h.edges[last]!) continue;
            let b = 0;
            while (b < last - 1 && h.edges[b + 1]! <= v) b++;
            counts[b]++;
          }
          const off = counts.reduce((a, c, i) => a + Math.abs(c - h.counts[i]!), 0);
          expect(off, label).toBeLessThanOrEqual(2 * ambiguous);
          if (histogram === '17') expect(h.counts.reduce((a, c) => a + c, 0)).toBe(sorted.length);
          checked++;
        }
      }
    }
    expect(checked).toBeGreaterThanOrEqual(10);
  });

  it("zonal_stats' order statistics and the percentiles asked, placed as one list, each in its place", async () => {
    // one pass over the values for both lists (one sort when weighted): each list in the order
    // asked, duplicates kept, whatever else is asked with it
    const ref = referenceResults().find((r) => r.indices.NDVI)!;
    const scene = scenes[ref.scene]!;
    const get = async (q: string) => {
      const res = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${fieldOf[ref.polygon_file]}/indices?index=NDVI&imagery_id=${imageryOf[ref.scene]}&date=${scene.date}&geojson=false${q}`,
        headers: t.auth(),
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json().zonal_stats;
    };
    for (const w of ['', '&weighting=coverage']) {
      const z = await get(`&zonal_stats=true${w}`);
      const alone = (await get(`&zonal_stats=true${w}&percentiles=95,5`)).percentiles;
      const both = await get(`&zonal_stats=true${w}&percentiles=95,10,50,5,95`);
      expect(z.p10, w).toBeLessThan(z.p90);
      expect(alone[0].value, w).toBeGreaterThan(alone[1].value);
      expect(both.percentiles, w).toEqual([
        alone[0],
        { percentile: 10, value: z.p10 },
        { percentile: 50, value: z.median },
        alone[1],
        alone[0],
      ]);
      for (const k of ['p10', 'p25', 'median', 'p75', 'p90'] as const) expect(both[k], `${w} ${k}`).toBe(z[k]);
    }
  });
});

describe('statistics options: bad input, on a synthetic scene', () => {
  let t: TestApp;
  let dir: string;
  let field: string;
  let date: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'indices-stats-'));
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: dir } });
    const seeded = await seedSeason(t, dir, { step: 400 });
    [field, date] = [seeded.fieldId, seeded.dates[0]!];
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('percentiles out of range, too many bins, bad edges: 400 problem+json with a stable code', async () => {
    const cases: Array<[string, string]> = [
      ['percentiles=101', 'percentile_out_of_range'],
      ['percentiles=-1', 'percentile_out_of_range'],
      ['percentiles=5,abc', 'percentile_out_of_range'],
      ['percentiles=', 'invalid_percentiles'],
      [`percentiles=${Array.from({ length: 101 }, () => 5).join(',')}`, 'invalid_percentiles'],
      ['histogram=1001', 'too_many_bins'],
      [`histogram=${Array.from({ length: 1002 }, (_, i) => i).join(',')}`, 'too_many_bins'],
      ['histogram=0', 'invalid_histogram'],
      ['histogram=2.5', 'invalid_histogram'],
      ['histogram=0.5,0.5', 'invalid_histogram'],
      ['histogram=0.5,0.2,0.9', 'invalid_histogram'],
      // a typo in a list is refused, not read as a shorter list
      ['percentiles=5,,50', 'empty_list_item'],
      ['scl_exclude=3,9,', 'empty_list_item'],
      // a list given as the parameter repeated, not comma-separated: named as such
      ['percentiles=5&percentiles=95', 'repeated'],
      ['histogram=10&histogram=20', 'repeated'],
      ['scl_exclude=3&scl_exclude=9', 'repeated'],
      ['weighting=coverage&weighting=coverage', 'repeated'],
    ];
    for (const [q, code] of cases) {
      const res = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${field}/indices?index=NDVI&date=${date}&zonal_stats=true&geojson=false&${q}`,
        headers: t.auth(),
      });
      expect(res.statusCode, q).toBe(400);
      expect(res.headers['content-type'], q).toMatch(/^application\/problem\+json/);
      expect(res.json().code, q).toBe('validation_failed');
      expect(res.json().errors[0].code, q).toBe(code);
    }
  });

  it('percentiles or a histogram without zonal_stats=true: 400, not computed and left out', async () => {
    for (const [q, paths] of [
      ['percentiles=5,50,95&geojson=false', ['/query/percentiles']],
      ['histogram=10&zonal_stats=false&geojson=false', ['/query/histogram']],
      ['percentiles=50&histogram=0,0.5,1', ['/query/percentiles', '/query/histogram']],
    ] as const) {
      const res = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${field}/indices?index=NDVI&date=${date}&${q}`,
        headers: t.auth(),
      });
      expect(res.statusCode, q).toBe(400);
      expect(res.headers['content-type'], q).toMatch(/^application\/problem\+json/);
      expect(res.json().code, q).toBe('validation_failed');
      expect(res.json().detail, q).toBe(
        paths.map((p) => `${p} is part of zonal_stats: add zonal_stats=true`).join('; '),
      );
      expect(
        res.json().errors.map((e: { path: string; code: string }) => [e.path, e.code]),
        q,
      ).toEqual(paths.map((p) => [p, 'needs_zonal_stats']));
    }
    // the mask and weighting options also decide the capture and the pixels: allowed without zonal_stats
    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices?index=NDVI&date=${date}&scl_exclude=9&weighting=coverage&cloud_dilation_m=10`,
      headers: t.auth(),
    });
    expect(res.statusCode).toBe(200);
    expect(res.json().zonal_stats).toBeUndefined();
  });

  it('an unknown weighting or interval names the values allowed', async () => {
    for (const [url, path, message] of [
      [
        `/v1/fields/${field}/indices?index=NDVI&date=${date}&weighting=area`,
        '/query/weighting',
        'must be one of: centre, coverage',
      ],
      [
        `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=${date}&end_date=${date}&interval=hourly`,
        '/query/interval',
        'must be one of: daily, weekly, biweekly',
      ],
    ]) {
      const res = await t.app.inject({ method: 'GET', url: url!, headers: t.auth() });
      expect(res.statusCode, url).toBe(400);
      expect(res.json().errors, url).toEqual([{ path, code: 'const', message }]);
    }
  });

  it('the defaults answer exactly what no option answers; options come back only when asked', async () => {
    const get = async (q: string) =>
      (
        await t.app.inject({
          method: 'GET',
          url: `/v1/fields/${field}/indices?index=NDVI&date=${date}&zonal_stats=true&geojson=false${q}`,
          headers: t.auth(),
        })
      ).json();
    const plain = await get('');
    expect(plain.zonal_stats.percentiles).toBeUndefined();
    expect(plain.zonal_stats.histogram).toBeUndefined();
    const asked = await get('&percentiles=10,90&histogram=4');
    expect(asked.zonal_stats.percentiles).toEqual([
      { percentile: 10, value: plain.zonal_stats.p10 },
      { percentile: 90, value: plain.zonal_stats.p90 },
    ]);
    expect(asked.zonal_stats.histogram.counts.reduce((a: number, c: number) => a + c, 0)).toBe(plain.zonal_stats.count);
    for (const k of ['count', 'min', 'max', 'mean', 'std', 'median'] as const)
      expect(asked.zonal_stats[k]).toBe(plain.zonal_stats[k]);
  });
});

describe('a chosen cloud mask: reasons, dilation, cloud cover', () => {
  let t: TestApp;
  let dir: string;
  let field: string;
  let dates: string[];
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'indices-mask-'));
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: dir } });
    const seeded = await seedSeason(t, dir, { step: 16 });
    [field, dates] = [seeded.fieldId, seeded.dates];
  }, 300_000);
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  const get = async (q: string) => {
    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices?index=NDVI${q}`,
      headers: t.auth(),
    });
    expect(res.statusCode, res.body).toBe(200);
    return res.json();
  };

  /**
   * What the mask should leave out, from the files read here: the field window's inside pixels and
   * DNs (window-reader), the SCL read whole with geotiff.js and sampled by pixel centre, and the
   * dilation by brute force over every excluded cloud pixel of the sampled grid, margin included.
   */
  async function expected(date: string, exclude: number[], d: number) {
    const capture = {
      bands: { B04: { href: path.join(dir, `${date}_B04.tif`) }, B08: { href: path.join(dir, `${date}_B08.tif`) } },
      scale: 0.0001,
      offset: -0.1,
    };
    const boundary = (await t.app.inject({ method: 'GET', url: `/v1/fields/${field}`, headers: t.auth() })).json()
      .boundary as Boundary;
    const win = await readFieldWindow(capture, boundary, ['B04', 'B08'], { roots: [dir] });
    const tiff = await fromFile(path.join(dir, `${date}_SCL.tif`));
    const img = await tiff.getImage();
    const scl = (await img.readRasters({ interleave: true })) as unknown as Uint8Array;
    const [sox, soy] = img.getOrigin() as [number, number];
    const [srx, sry] = img.getResolution() as [number, number];
    const classAt = (x: number, y: number) => {
      const c = Math.floor((x - sox) / srx);
      const r = Math.floor((y - soy) / sry);
      return c < 0 || r < 0 || c >= img.getWidth() || r >= img.getHeight() ? 0 : scl[r * img.getWidth() + c]!;
    };
    const centre = (i: number, j: number) =>
      [win.originX + (i + 0.5) * win.resX, win.originY + (j + 0.5) * win.resY] as const;
    // cloud pixel centres on the 10 m grid, within d of the window
    const m = Math.ceil(d / 10) + 1;
    const clouds: Array<readonly [number, number]> = [];
    for (let j = -m; j < win.height + m; j++)
      for (let i = -m; i < win.width + m; i++) {
        const [x, y] = centre(i, j);
        const c = classAt(x, y);
        if (exclude.includes(c) && [3, 8, 9, 10].includes(c)) clouds.push([x, y]);
      }
    const r = { no_data: 0, scl: Object.fromEntries(exclude.map((c) => [String(c), 0])), dilation: 0, valid: 0 };
    const excluded: boolean[] = [];
    for (let j = 0; j < win.height; j++)
      for (let i = 0; i < win.width; i++) {
        const k = j * win.width + i;
        if (!win.inside[k]) continue;
        const [x, y] = centre(i, j);
        const c = classAt(x, y);
        let out = true;
        if (win.bands.B04!.data[k] === 0 || win.bands.B08!.data[k] === 0) r.no_data++;
        else if (exclude.includes(c)) r.scl[String(c)]!++;
        else if (d > 0 && clouds.some(([cx, cy]) => (cx - x) ** 2 + (cy - y) ** 2 <= d * d)) r.dilation++;
        else {
          r.valid++;
          out = false;
        }
        excluded.push(out);
      }
    return { ...r, pixels: win.fieldPixels, excluded };
  }

  it('excluding only class 9 against the default: each reason as counted from the files, adding up to the field', async () => {
    // a capture with clouds and shadow over the field
    let date = '';
    for (const d of dates) {
      const body = await get(`&date=${d}&zonal_stats=true&geojson=false`);
      const z = body.zonal_stats;
      if (body.date === d && z.mask_reasons.scl['9'] > 0 && z.mask_reasons.scl['3'] > 0) {
        date = d;
        break;
      }
    }
    expect(date, 'a capture with class 9 and 3 over the field').not.toBe('');
    for (const exclude of [[0, 1, 3, 8, 9, 10, 11], [9]]) {
      const q = exclude.length === 1 ? '&scl_exclude=9' : '';
      const body = await get(`&date=${date}&zonal_stats=true&geojson=false${q}`);
      expect(body.date).toBe(date);
      const z = body.zonal_stats;
      const e = await expected(date, exclude, 0);
      expect(z.pixels).toBe(e.pixels);
      expect(z.count).toBe(e.valid);
      expect(z.mask_reasons).toEqual({ no_data: e.no_data, scl: e.scl, dilation: 0, non_finite: 0 });
      const sum =
        z.count +
        z.mask_reasons.no_data +
        z.mask_reasons.dilation +
        z.mask_reasons.non_finite +
        Object.values(z.mask_reasons.scl as Record<string, number>).reduce((a, b) => a + b, 0);
      expect(sum).toBe(z.pixels);
    }
  });

  it('dilation: the excluded set grows with the distance, pixel by pixel as a brute-force disc gives', async () => {
    // a capture with shadow and cloud over the field
    let date = '';
    for (const d of dates) {
      const body = await get(`&date=${d}&zonal_stats=true&geojson=false`);
      if (body.date === d && body.zonal_stats.mask_reasons.scl['9'] > 0 && body.zonal_stats.mask_reasons.scl['3'] > 0) {
        date = d;
        break;
      }
    }
    expect(date).not.toBe('');
    let before: boolean[] | null = null;
    for (const d of [0, 10, 15, 20, 45, 100]) {
      const body = await get(
        `&date=${date}&zonal_stats=true&imagery_id=${await imageryOn(date)}&scl_exclude=3,8,9&cloud_dilation_m=${d}`,
      );
      const e = await expected(date, [3, 8, 9], d);
      const nulls = (body.geojson.features as Array<{ properties: { value: number | null } }>).map(
        (f) => f.properties.value === null,
      );
      expect(nulls, `d = ${d}`).toEqual(e.excluded);
      expect(body.zonal_stats.mask_reasons.dilation, `d = ${d}`).toBe(e.dilation);
      if (before) for (const [k, was] of before.entries()) if (was) expect(nulls[k], `d = ${d}, pixel ${k}`).toBe(true);
      before = nulls;
    }
    expect(before!.filter(Boolean).length).toBeGreaterThan(
      (await expected(date, [3, 8, 9], 0)).excluded.filter(Boolean).length,
    );
  });

  it('POST custom takes the same options in its body: stored statistics equal GET indices with them', async () => {
    const formula = '(B08 - B04) / (B08 + B04)';
    const date = dates[Math.floor(dates.length / 2)]!;
    const body = {
      percentiles: [5, 50, 95],
      histogram: 4,
      weighting: 'coverage',
      scl_exclude: [9],
      cloud_dilation_m: 20,
    };
    const res = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${field}/indices/custom`,
      headers: t.auth(),
      payload: { name: 'ndvi masked', formula, date, ...body },
    });
    expect(res.statusCode, res.body).toBe(201);
    const c = res.json();
    const gr = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices?index=custom&formula=${encodeURIComponent(formula)}&date=${date}&zonal_stats=true&geojson=false&percentiles=5,50,95&histogram=4&weighting=coverage&scl_exclude=9&cloud_dilation_m=20`,
      headers: t.auth(),
    });
    expect(gr.statusCode, gr.body).toBe(200);
    const g = gr.json();
    expect(c.imagery_id).toBe(g.imagery_id);
    const [a, b] = [c.zonal_stats, g.zonal_stats];
    expect(a.percentiles.map((x: { percentile: number }) => x.percentile)).toEqual([5, 50, 95]);
    for (const k of ['count', 'min', 'max', 'pixels'] as const) expect(a[k], k).toBe(b[k]);
    for (const k of ['mean', 'std'] as const) expect(Math.abs(a[k] - b[k]), k).toBeLessThan(1e-9);
    for (const [i, p] of a.percentiles.entries())
      expect(Math.abs(p.value - b.percentiles[i].value), `p${p.percentile}`).toBeLessThan(1e-9);
    expect(a.histogram).toEqual(b.histogram);
    expect(a.mask_reasons).toEqual(b.mask_reasons);
    expect(Object.keys(a.mask_reasons.scl)).toEqual(['9']);
    // the default mask gives other reasons; stored and read back as stored
    const plain = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${field}/indices/custom`,
      headers: t.auth(),
      payload: { name: 'ndvi', formula, date, imagery_id: c.imagery_id },
    });
    expect(plain.statusCode, plain.body).toBe(201);
    expect(Object.keys(plain.json().zonal_stats.mask_reasons.scl)).toEqual(['0', '1', '3', '8', '9', '10', '11']);
    expect(plain.json().zonal_stats.percentiles).toBeUndefined();
    const back = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${field}/indices/custom/${c.id}`,
      headers: t.auth(),
    });
    expect(back.json().zonal_stats).toEqual(a);
    for (const [extra, code, at] of [
      [{ percentiles: [101] }, 'percentile_out_of_range', '/body/percentiles'],
      [{ histogram: 1001 }, 'too_many_bins', '/body/histogram'],
      [{ histogram: [0.5, 0.2] }, 'invalid_histogram', '/body/histogram'],
      // an array is edges: one edge is not a count of bins
      [{ histogram: [10] }, 'invalid_histogram', '/body/histogram'],
      [{ scl_exclude: [3, 12] }, 'unknown_scl_class', '/body/scl_exclude'],
      [{ cloud_dilation_m: -5 }, 'negative_dilation', '/body/cloud_dilation_m'],
      [{ weighting: 'area' }, undefined, undefined],
      [{ percentiles: '5,50' }, undefined, undefined],
    ] as const) {
      const bad = await t.app.inject({
        method: 'POST',
        url: `/v1/fields/${field}/indices/custom`,
        headers: t.auth(),
        payload: { name: 'x', formula, date, ...extra },
      });
      const label = JSON.stringify(extra);
      expect(bad.statusCode, label).toBe(400);
      expect(bad.headers['content-type'], label).toMatch(/^application\/problem\+json/);
      if (code) expect(bad.json().errors[0], label).toMatchObject({ code, path: at });
    }
  });

  async function imageryOn(date: string): Promise<string> {
    return (await get(`&date=${date}&zonal_stats=false&geojson=false`)).imagery_id;
  }

  it('cloud cover and the choice follow the mask; the series too; negative dilation, unknown classes: 400', async () => {
    const start = dates[0]!;
    const end = dates.at(-1)!;
    const series = async (q: string) => {
      const res = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=${start}&end_date=${end}&interval=biweekly&max_cloud_cover=100${q}`,
        headers: t.auth(),
      });
      expect(res.statusCode, res.body).toBe(200);
      return res.json() as Array<{ imagery_id: string | null; cloud_cover: number | null; date: string }>;
    };
    const plain = await series('');
    const none = await series('&scl_exclude=');
    const wide = await series('&cloud_dilation_m=60');
    let cloudier = 0;
    for (const [i, p] of plain.entries()) {
      if (p.cloud_cover === null) continue;
      // excluding nothing: only no-data is unusable; a dilation only adds
      expect(none[i]!.cloud_cover!).toBeLessThanOrEqual(p.cloud_cover);
      if (wide[i]!.imagery_id === p.imagery_id) {
        expect(wide[i]!.cloud_cover!).toBeGreaterThanOrEqual(p.cloud_cover);
        if (wide[i]!.cloud_cover! > p.cloud_cover) cloudier++;
      }
    }
    expect(cloudier).toBeGreaterThan(0);
    for (const [q, code] of [
      ['&cloud_dilation_m=-5', 'negative_dilation'],
      ['&scl_exclude=3,12', 'unknown_scl_class'],
      ['&scl_exclude=x', 'unknown_scl_class'],
      ['&cloud_dilation_m=5000', 'dilation_too_large'],
      ['&cloud_dilation_m=1e309', 'dilation_too_large'],
    ]) {
      for (const url of [
        `/v1/fields/${field}/indices?index=NDVI&date=${start}${q}`,
        `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=${start}&end_date=${end}${q}`,
      ]) {
        const res = await t.app.inject({ method: 'GET', url, headers: t.auth() });
        expect(res.statusCode, url).toBe(400);
        expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
        expect(res.json().errors[0].code, url).toBe(code);
      }
    }
  });
});
