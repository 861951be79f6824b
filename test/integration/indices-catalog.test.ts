import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';

describe('index catalogue and formula check', () => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp({ name: 'pglite' });
  });
  afterAll(async () => t.close());

  it('lists the six spec indices and at least fifteen more, each with formula, bands, range, use and source', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/indices/catalog', headers: t.auth() });
    expect(res.statusCode).toBe(200);
    const { data, bands } = res.json();
    expect(data.length).toBeGreaterThanOrEqual(21);
    expect(data.filter((e: { spec_index: boolean }) => e.spec_index).map((e: { name: string }) => e.name)).toEqual(['NDVI', 'NDRE', 'NDWI', 'EVI', 'SAVI', 'MSAVI2']);
    const ndwi = data.find((e: { name: string }) => e.name === 'NDWI');
    expect(ndwi).toMatchObject({ formula: '(B08 - B11) / (B08 + B11)', bands: ['B08', 'B11'] });
    expect(ndwi.long_name).toMatch(/Gao/);
    expect(bands).toContain('B8A');
    expect((await t.app.inject({ method: 'GET', url: '/v1/indices/catalog' })).statusCode).toBe(401);
  });

  it('validates a formula: bands read, or 400 with message and position', async () => {
    const ok = await t.app.inject({ method: 'POST', url: '/v1/indices/validate', headers: t.auth(), payload: { formula: '(B08 - B11) / (B08 + B11) * 2' } });
    expect(ok.json()).toMatchObject({ bands: ['B08', 'B11'] });
    const bad = await t.app.inject({ method: 'POST', url: '/v1/indices/validate', headers: t.auth(), payload: { formula: 'B08 + B13' } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({ code: 'invalid_formula', position: 6, errors: [{ path: '/body/formula', code: 'unknown_band' }] });
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).json().checks).toMatchObject({ database: 'ok', queue: 'ok', compute: 'ok' });
  });
});
