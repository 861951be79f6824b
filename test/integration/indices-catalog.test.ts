import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { metricSum, parseMetrics } from '../helpers/processes.js';

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
    expect(data.filter((e: { spec_index: boolean }) => e.spec_index).map((e: { name: string }) => e.name)).toEqual([
      'NDVI',
      'NDRE',
      'NDWI',
      'EVI',
      'SAVI',
      'MSAVI2',
    ]);
    const ndwi = data.find((e: { name: string }) => e.name === 'NDWI');
    expect(ndwi).toMatchObject({ formula: '(B08 - B11) / (B08 + B11)', bands: ['B08', 'B11'] });
    expect(ndwi.long_name).toMatch(/Gao/);
    expect(bands).toContain('B8A');
    expect((await t.app.inject({ method: 'GET', url: '/v1/indices/catalog' })).statusCode).toBe(401);
  });

  it('validates a formula: bands read, or 400 with message and position', async () => {
    const ok = await t.app.inject({
      method: 'POST',
      url: '/v1/indices/validate',
      headers: t.auth(),
      payload: { formula: '(B08 - B11) / (B08 + B11) * 2' },
    });
    expect(ok.json()).toMatchObject({ bands: ['B08', 'B11'] });
    const bad = await t.app.inject({
      method: 'POST',
      url: '/v1/indices/validate',
      headers: t.auth(),
      payload: { formula: 'B08 + B13' },
    });
    expect(bad.statusCode).toBe(400);
    expect(bad.json()).toMatchObject({
      code: 'invalid_formula',
      position: 6,
      errors: [{ path: '/body/formula', code: 'unknown_band' }],
    });
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).json().checks).toMatchObject({
      database: 'ok',
      queue: 'ok',
      compute: 'ok',
    });
  });
});

describe('metrics', () => {
  it('serves Prometheus metrics with HTTP durations by route pattern (no ids), compute and queue families', async () => {
    const t = await buildTestApp({ name: 'pglite' });
    try {
      const f = (
        await t.app.inject({
          method: 'POST',
          url: '/v1/fields',
          headers: t.auth(),
          payload: {
            name: 'm',
            boundary: {
              type: 'Polygon',
              coordinates: [
                [
                  [5, 51],
                  [5.01, 51],
                  [5.01, 51.01],
                  [5, 51.01],
                  [5, 51],
                ],
              ],
            },
          },
        })
      ).json();
      // The registry is the process's: other apps of this process (other test files) count too.
      const gets = async () => {
        const res = await t.app.inject({ method: 'GET', url: '/metrics' });
        expect(res.statusCode).toBe(200);
        expect(res.headers['content-type']).toMatch(/text\/plain/);
        const byRoute = { method: 'GET', route: '/v1/fields/:id', status_code: '200', route_class: 'read' };
        return { text: res.body, n: metricSum(parseMetrics(res.body), 'http_request_duration_seconds_count', byRoute) };
      };
      const before = (await gets()).n;
      await t.app.inject({ method: 'GET', url: `/v1/fields/${f.id}`, headers: t.auth() });
      const { text, n } = await gets();
      expect(n).toBe(before + 1);
      expect(text).toMatch(
        /http_request_duration_seconds_count\{method="GET",route="\/v1\/fields\/:id",status_code="200",route_class="read"\} \d+/,
      );
      expect(text).not.toContain(f.id);
      expect(text).toContain('compute_task_duration_seconds');
      expect(text).toContain('jobs_queue_depth');
      expect(text).toContain('process_cpu_user_seconds_total');
    } finally {
      await t.close();
    }
  });
});
