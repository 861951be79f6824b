/**
 * The statistics options of GET /v1/fields/{id}/indices (issue 23) through HTTP: percentiles and
 * histograms on the real Sentinel-2 scenes against a float64 reference computed here from the
 * field window's digital numbers (reference.ts's evaluator, a sort, numpy's rules); bad input on
 * a synthetic scene.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findIndex } from '../../src/compute/catalog.js';
import { referenceValues } from '../../src/compute/reference.js';
import type { Boundary } from '../../src/fields/boundary.js';
import { readFieldWindow, type CaptureBand } from '../../src/imagery/window-reader.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { hasRealData, polygonOf, realDataDir, referenceResults, REF_INDEX, scenes } from '../helpers/real-data.js';
import { seedSeason } from '../helpers/reports.js';

/** numpy.percentile (linear) of sorted float64 values. */
function npPercentile(sorted: Float64Array, p: number): number {
  const rank = (sorted.length - 1) * (p / 100);
  const lo = Math.floor(rank);
  const t = rank - lo;
  const a = sorted[lo]!;
  const b = sorted[Math.min(lo + 1, sorted.length - 1)]!;
  return t >= 0.5 ? b - (b - a) * (1 - t) : a + (b - a) * t;
}

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
  });
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
  });
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
