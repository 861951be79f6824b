/**
 * weighting=coverage through GET /v1/fields/{id}/indices on the real Flemish LPIS parcels over
 * Sentinel-2 31UFS (../shared/data/real/s2_l1c_be_31UFS_20190411), against rasterio and
 * polygon-clipping here: the weighted mean NDVI equals the float64 mean over rasterio's NDVI with
 * weights from polygon-clipping's exact pixel ∩ parcel areas (1e-6); the weights add up to the
 * parcel's area reprojected by rasterio (1e-9 relative); the touched pixels lie between the
 * pixel-centre and the all-touched sets; the weighted mean lies between the pixel-centre mean
 * (all_touched=False) and the all-touched mean (all_touched=True), but for the smallest parcel only
 * within 5e-5 (see below); the weighted median, p10–p90, p5 and p95 equal exactextract's quantiles
 * of rasterio's NDVI with those weights (1e-6); the default (no option) answers rasterio's
 * pixel-centre numbers.
 * Skipped, and said so, without the data or without python3-rasterio.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import polygonClipping, { type MultiPolygon as PcMulti } from 'polygon-clipping';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { refQuantile } from '../helpers/exactextract.js';
import { realDataDir } from '../helpers/real-data.js';
import { hasRasterio } from '../helpers/tools.js';

const DIR = path.join(realDataDir, 's2_l1c_be_31UFS_20190411');
const PY = `
import json, sys
import numpy as np, rasterio
from rasterio.features import geometry_mask
from rasterio.warp import transform_geom
job = json.loads(sys.argv[1])
out = []
with rasterio.open(job["red"]) as r, rasterio.open(job["nir"]) as n:
    red = r.read(1).astype(np.float64)
    nir = n.read(1).astype(np.float64)
    ok = (red != 65535) & (nir != 65535) & (red != 0) & (nir != 0)
    ndvi = np.where(ok, (nir / 10000.0 - red / 10000.0) / (nir / 10000.0 + red / 10000.0), np.nan)
    px = abs(r.transform.a * r.transform.e)
    for g in job["fields"]:
        geom = transform_geom("EPSG:4326", r.crs, g)
        res = {}
        for name, touched in (("centre", False), ("touched", True)):
            inside = ~geometry_mask([geom], out_shape=red.shape, transform=r.transform, all_touched=touched)
            v = ndvi[inside & ok]
            res[name] = {"pixels": int(inside.sum()), "valid": int(v.size), "mean": float(v.mean())}
        area = 0.0
        polys = [geom["coordinates"]] if geom["type"] == "Polygon" else geom["coordinates"]
        for poly in polys:
            for k, ring in enumerate(poly):
                x = np.array([p[0] for p in ring]); y = np.array([p[1] for p in ring])
                x = x - x[0]; y = y - y[0]
                a = abs(np.sum(x[:-1] * y[1:] - x[1:] * y[:-1]) / 2)
                area += a if k == 0 else -a
        res["area_px"] = area / px
        # the NDVI of the pixels around the parcel, for weights computed in the test
        xs = [p[0] for poly in polys for ring in poly for p in ring]
        ys = [p[1] for poly in polys for ring in poly for p in ring]
        c0 = int(np.floor((min(xs) - r.transform.c) / r.transform.a)) - 1
        c1 = int(np.ceil((max(xs) - r.transform.c) / r.transform.a)) + 1
        r0 = int(np.floor((max(ys) - r.transform.f) / r.transform.e)) - 1
        r1 = int(np.ceil((min(ys) - r.transform.f) / r.transform.e)) + 1
        res["grid"] = {"x0": r.transform.c + c0 * r.transform.a, "y0": r.transform.f + r0 * r.transform.e,
                       "res": r.transform.a, "w": c1 - c0, "h": r1 - r0,
                       "ndvi": [None if np.isnan(v) else float(v) for v in ndvi[r0:r1, c0:c1].ravel()]}
        res["geom"] = geom
        out.append(res)
print(json.dumps(out))
`;

const shoelace = (ring: Array<[number, number]>) => {
  let a = 0;
  for (let k = 0; k + 1 < ring.length; k++) a += ring[k]![0] * ring[k + 1]![1] - ring[k + 1]![0] * ring[k]![1];
  return Math.abs(a / 2);
};

const hasLpis = existsSync(path.join(DIR, 'fields_flanders_lpis.geojson'));
if (!hasLpis) console.warn('[test] Flemish LPIS data missing: the coverage-weighting check is SKIPPED');
const ready = hasLpis && hasRasterio();

describe.runIf(ready)('weighting=coverage on real LPIS parcels against rasterio', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: DIR } });
  });
  afterAll(async () => t?.close());

  it('weighted mean between the centre and all-touched means; weights sum to the area; defaults unchanged', async () => {
    const fields = (
      JSON.parse(readFileSync(path.join(DIR, 'fields_flanders_lpis.geojson'), 'utf8')).features as Array<{
        geometry: object;
      }>
    ).map((f) => f.geometry);
    const red = path.join(DIR, 'ref_input_S2_B04.tif');
    const nir = path.join(DIR, 'ref_input_S2_B08.tif');
    const ref = JSON.parse(
      execFileSync('/usr/bin/python3', ['-c', PY, JSON.stringify({ red, nir, fields })], { encoding: 'utf8' }),
    ) as Array<{
      centre: { pixels: number; valid: number; mean: number };
      touched: { pixels: number; valid: number; mean: number };
      area_px: number;
      grid: { x0: number; y0: number; res: number; w: number; h: number; ndvi: Array<number | null> };
      geom: { type: 'Polygon' | 'MultiPolygon'; coordinates: never };
    }>;
    const img = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: t.auth(),
      payload: {
        source: 'sentinel-2-l1c',
        capture_date: '2019-04-11',
        bands: { B04: red, B08: nir },
        scale: 0.0001,
      },
    });
    expect(img.statusCode, img.body).toBe(201);
    for (const [k, boundary] of fields.entries()) {
      const f = await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: `parcel ${k}`, boundary },
      });
      expect(f.statusCode, f.body).toBe(201);
      const get = async (q: string) => {
        const res = await t.app.inject({
          method: 'GET',
          url: `/v1/fields/${f.json().id}/indices?index=NDVI&date=2019-04-11&zonal_stats=true&geojson=false${q}`,
          headers: t.auth(),
        });
        expect(res.statusCode, res.body).toBe(200);
        return res.json().zonal_stats;
      };
      const centre = await get('');
      const cov = await get('&weighting=coverage');
      const r = ref[k]!;
      // the default is rasterio's pixel-centre rule
      expect(centre.count).toBe(r.centre.valid);
      expect(centre.pixels).toBe(r.centre.pixels);
      expect(Math.abs(centre.mean - r.centre.mean)).toBeLessThan(1e-6);
      // touched by area ⊂ touched by the outline or inside; centres inside ⊂ touched by area
      expect(cov.pixels).toBeGreaterThanOrEqual(r.centre.pixels);
      expect(cov.pixels).toBeLessThanOrEqual(r.touched.pixels);
      // every parcel pixel valid here: the weights of the valid pixels are the whole area
      expect(r.touched.valid).toBe(r.touched.pixels);
      expect(Math.abs(cov.count - r.area_px) / r.area_px, `parcel ${k} weight sum`).toBeLessThan(1e-9);
      expect(cov.valid_fraction).toBe(1);
      // the weighted mean from polygon-clipping's exact pixel ∩ parcel areas (about each cell's corner)
      const g = r.grid;
      const multi = (r.geom.type === 'Polygon' ? [r.geom.coordinates] : r.geom.coordinates) as PcMulti;
      let sw = 0;
      let swx = 0;
      const pairs: Array<[number, number]> = [];
      for (let j = 0; j < g.h; j++)
        for (let i = 0; i < g.w; i++) {
          const v = g.ndvi[j * g.w + i];
          const ax = g.x0 + i * g.res;
          const ay = g.y0 - j * g.res;
          const shifted = multi.map((poly) => poly.map((ring) => ring.map(([x, y]) => [x - ax, y - ay]))) as PcMulti;
          const cell: PcMulti = [
            [
              [
                [0, -g.res],
                [g.res, -g.res],
                [g.res, 0],
                [0, 0],
                [0, -g.res],
              ],
            ],
          ];
          let a = 0;
          for (const poly of polygonClipping.intersection(cell, shifted))
            for (const [n, ring] of poly.entries()) a += (n === 0 ? 1 : -1) * shoelace(ring);
          const w = a / (g.res * g.res);
          if (w > 0 && v !== null && v !== undefined) {
            sw += w;
            swx += w * v;
            pairs.push([v, w]);
          }
        }
      expect(Math.abs(cov.mean - swx / sw), `parcel ${k} weighted mean`).toBeLessThan(1e-6);
      expect(Math.abs(cov.count - sw) / sw).toBeLessThan(1e-9);
      // exactextract's weighted quantiles of the same pairs (the worker's are placed by selection;
      // 1.5e-8 apart at most here, from the f32 NDVI)
      const withPs = await get('&weighting=coverage&percentiles=5,95');
      for (const [key, q] of [
        ['p10', 0.1],
        ['p25', 0.25],
        ['median', 0.5],
        ['p75', 0.75],
        ['p90', 0.9],
      ] as const)
        expect(Math.abs(cov[key] - refQuantile(pairs, q)), `parcel ${k} weighted ${key}`).toBeLessThan(1e-6);
      for (const [i, q] of [0.05, 0.95].entries())
        expect(
          Math.abs(withPs.percentiles[i].value - refQuantile(pairs, q)),
          `parcel ${k} weighted p${q * 100}`,
        ).toBeLessThan(1e-6);
      // Between the two means, up to 5e-5: not a theorem. The smallest parcel (45 centre pixels, 101
      // touched) has its exactly weighted mean 2.3e-5 above its all-touched mean (the polygon-clipping
      // reference above agrees to 1e-6); the two larger parcels lie strictly between.
      const lo = Math.min(r.centre.mean, r.touched.mean);
      const hi = Math.max(r.centre.mean, r.touched.mean);
      const slack = r.centre.pixels < 100 ? 5e-5 : 0;
      expect(cov.mean, `parcel ${k}: ${r.centre.mean} ≤ ${cov.mean} ≤ ${r.touched.mean}`).toBeGreaterThanOrEqual(
        lo - slack,
      );
      expect(cov.mean, `parcel ${k}: ${r.centre.mean} ≤ ${cov.mean} ≤ ${r.touched.mean}`).toBeLessThanOrEqual(
        hi + slack,
      );
      expect(cov.mean).not.toBe(centre.mean);
      expect(cov.mask_reasons).toMatchObject({ no_data: 0, dilation: 0, non_finite: 0 });
      // the time series takes the weighting too (its statistics entry is the weighted one)
      const series = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${f.json().id}/indices/timeseries?index=NDVI&start_date=2019-04-11&end_date=2019-04-11&interval=daily&max_cloud_cover=100&weighting=coverage`,
        headers: t.auth(),
      });
      expect(series.statusCode, series.body).toBe(200);
      expect(series.json()[0]).toMatchObject({ mean: cov.mean, std: cov.std, valid_fraction: 1 });
    }
  });
});
