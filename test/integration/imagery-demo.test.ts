/**
 * The demo season as the first start creates it (src/imagery/demo.ts), through the API: its
 * captures carry every band a formula may read, so that every catalogue index (and custom formulas
 * on B01 and B09, which no catalogue entry reads) evaluates on a clear mid-season capture to finite
 * statistics within the range the catalogue documents for real surfaces. On PGlite only: the demo
 * is created on the embedded database alone (DEV_BOOTSTRAP is off with DATABASE_URL).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexCatalog } from '../../src/compute/catalog.js';
import { BANDS } from '../../src/compute/formula.js';
import { createDemo, type DemoResult } from '../../src/imagery/demo.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';

/** Sentinel-2 L2A native resolutions (m). An index is computed on the grid of its finest band. */
const NATIVE: Record<string, number> = {
  B01: 60,
  B02: 10,
  B03: 10,
  B04: 10,
  B05: 20,
  B06: 20,
  B07: 20,
  B08: 10,
  B8A: 20,
  B09: 60,
  B11: 20,
  B12: 20,
};
/** Pixels of the 800 m square field (all clear) on the grid of the finest of `bands`, at least. */
const fieldPixels = (bands: string[]) => Math.floor(800 / Math.min(...bands.map((b) => NATIVE[b]!))) ** 2;

describe('demo season', () => {
  let t: TestApp;
  let scratch: string;
  let demo: DemoResult;
  let clear: string;
  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: t.auth() });

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'demo-season-'));
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: scratch } });
    demo = await createDemo(
      { db: t.db, compute: t.runtime.compute, roots: t.config.imageryRoots, maxAreaHa: t.config.maxFieldAreaHa },
      t.accountId,
    );
    // The capture without a cloud over the field nearest to mid-July (full canopy).
    const list = (await get(`/v1/fields/${demo.fieldId}/imagery?per_page=100`)).json().data as Array<{
      capture_date: string;
      cloud_cover: number;
    }>;
    const mid = Date.parse('2025-07-10');
    clear = list
      .filter((c) => c.cloud_cover === 0)
      .sort(
        (a, b) => Math.abs(Date.parse(a.capture_date) - mid) - Math.abs(Date.parse(b.capture_date) - mid),
      )[0]!.capture_date;
  }, 240_000);
  afterAll(async () => {
    await t?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('registers 33 captures with every band formulas accept, on the 10 m grid of the finest', async () => {
    expect(demo).toMatchObject({ captures: 33, bands: BANDS.length });
    const list = (await get(`/v1/fields/${demo.fieldId}/imagery?per_page=100`)).json().data as Array<{ id: string }>;
    expect(list).toHaveLength(33);
    const one = (await get(`/v1/imagery/${list[0]!.id}`)).json();
    expect([...one.bands].sort()).toEqual([...BANDS].sort());
    expect(one.resolution).toBe(10);
  });

  it.each(indexCatalog.map((e) => [e.name, e] as const))(
    '%s has finite statistics within its range on a clear capture',
    async (_name, e) => {
      const res = await get(
        `/v1/fields/${demo.fieldId}/indices?index=${e.name}&date=${clear}&zonal_stats=true&geojson=false`,
      );
      expect(res.statusCode, res.body).toBe(200);
      const s = res.json().zonal_stats as Record<string, number>;
      expect(s.count).toBeGreaterThanOrEqual(fieldPixels(e.bands));
      for (const k of ['min', 'max', 'mean', 'std'])
        expect(Number.isFinite(s[k]), `${k} of ${e.name}: ${s[k]}`).toBe(true);
      expect(s.mean, `${e.name} mean`).toBeGreaterThanOrEqual(e.range[0]);
      expect(s.mean, `${e.name} mean`).toBeLessThanOrEqual(e.range[1]);
    },
  );

  it.each([['B01'], ['B09']])('a custom formula on %s (60 m) reads reflectance', async (band) => {
    const res = await get(
      `/v1/fields/${demo.fieldId}/indices?index=custom&formula=${band}&date=${clear}&zonal_stats=true&geojson=false`,
    );
    expect(res.statusCode, res.body).toBe(200);
    const s = res.json().zonal_stats as Record<string, number>;
    expect(s.count).toBeGreaterThanOrEqual(fieldPixels([band]));
    expect(s.mean).toBeGreaterThan(0);
    expect(s.mean).toBeLessThan(0.6);
  });
});
