/**
 * The index endpoints on the demo season (src/imagery/demo.ts, the field a first start creates),
 * on every database backend: formulas that read no band.
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
    const demo = await createDemo({ db: t.db, compute: t.runtime.compute, roots: t.config.imageryRoots, maxAreaHa: t.config.maxFieldAreaHa }, t.accountId);
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

  describe('formulas that read no band: a value on the capture\'s usable field pixels, null when not finite', () => {
    // 2025-07-06 is partly under cloud: the usable pixels are fewer than the field's.
    const date = '2025-07-06';
    it.each(CONSTANT_FORMULAS)('GET indices with formula %s', async (formula, value) => {
      const c = byDate(date);
      expect(c.valid_pixels).toBeLessThan(c.field_pixels);
      const res = await get(`/v1/fields/${fieldId}/indices?index=custom&date=${date}&zonal_stats=true&formula=${encodeURIComponent(formula)}`);
      expect(res.statusCode, res.body).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({ imagery_id: c.id, date, formula });
      const count = value === null ? 0 : c.valid_pixels;
      expect(body.zonal_stats).toMatchObject({ count, min: value, max: value, mean: value, median: value, std: value === null ? null : 0 });
      expect(body.zonal_stats.valid_fraction).toBeCloseTo(count / c.field_pixels, 6);
      const values = body.geojson.features.map((f: { properties: { value: number | null } }) => f.properties.value);
      expect(values.length).toBe(c.field_pixels);
      expect(values.filter((v: number | null) => v !== null).length).toBe(count);
      expect(values.every((v: number | null) => v === null || v === value)).toBe(true);
    });

    it.each(CONSTANT_FORMULAS)('POST indices/custom with formula %s', async (formula, value) => {
      const res = await t.app.inject({ method: 'POST', url: `/v1/fields/${fieldId}/indices/custom`, headers: t.auth(), payload: { name: `constant ${formula}`, formula, date } });
      expect(res.statusCode, res.body).toBe(201);
      const body = res.json();
      expect(body.zonal_stats).toMatchObject({ count: value === null ? 0 : byDate(date).valid_pixels, mean: value });
      const again = await get(`/v1/fields/${fieldId}/indices/custom/${body.id}`);
      expect(again.statusCode).toBe(200);
      expect(again.json().zonal_stats).toEqual(body.zonal_stats);
    });

    it.each(CONSTANT_FORMULAS)('time series with formula %s', async (formula, value) => {
      const res = await get(`/v1/fields/${fieldId}/indices/timeseries?index=custom&formula=${encodeURIComponent(formula)}&start_date=2025-06-01&end_date=2025-07-31&interval=weekly&max_cloud_cover=30`);
      expect(res.statusCode, res.body).toBe(200);
      const used = res.json().filter((e: { imagery_id: string | null }) => e.imagery_id !== null);
      expect(used.length).toBeGreaterThan(3);
      for (const e of used) {
        expect(e).toMatchObject({ mean: value, min: value, max: value, std: value === null ? null : 0 });
        expect(e.valid_fraction).toBeCloseTo(value === null ? 0 : 1 - e.cloud_cover / 100, 3);
      }
    });
  });
});
