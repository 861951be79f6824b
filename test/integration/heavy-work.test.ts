/**
 * Heavy requests cannot starve cheap ones: uncached per-pixel GeoJSON runs under a bound of its
 * own (HEAVY_CONCURRENCY at once, HEAVY_QUEUE waiting, then 503 problem+json with Retry-After),
 * and a cheap request (warm zonal statistics) is answered while heavy ones are running and queued.
 * The heavy requests' own compute thread is kept busy by the test (big index tasks) so that they
 * stay in flight for as long as the test looks: ordering, not timing.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { compileFormula } from '../../src/compute/formula.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../../src/imagery/synthetic.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { registerCapture } from '../helpers/captures.js';

describe('heavy work bound', () => {
  const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 100, seed: 3 };
  let scratch: string;
  let t: TestApp;
  let field: string;
  const imagery: Array<{ id: string; date: string }> = [];

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'heavy-work-'));
    const caps = writeSyntheticSeason(
      scratch,
      spec,
      datesEvery('2025-06-02', '2025-06-23', 7),
      '2025-04-01',
      '2025-09-30',
    );
    t = await buildTestApp(
      { name: 'pglite' },
      {
        env: {
          IMAGERY_ROOTS: scratch,
          COMPUTE_THREADS: '1',
          HEAVY_CONCURRENCY: '1',
          HEAVY_QUEUE: '1',
          SHED_RETRY_AFTER_S: '7',
        },
      },
    );
    field = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'heavy', boundary: sceneField(spec, 0.6) },
      })
    ).json().id;
    for (const c of caps) imagery.push({ id: await registerCapture(t, c), date: c.date });
  }, 120_000);
  afterAll(async () => {
    await t?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const url = (k: number, geojson: boolean) =>
    `/v1/fields/${field}/indices?index=NDVI&date=${imagery[k]!.date}&imagery_id=${imagery[k]!.id}&zonal_stats=true&geojson=${geojson}`;

  it('sheds heavy requests past the queue with 503 problem+json; cheap ones are answered meanwhile', async () => {
    const cheap = url(0, false);
    expect((await t.app.inject({ method: 'GET', url: cheap, headers: t.auth() })).statusCode).toBe(200); // warm: no compute task

    // Occupy the heavy requests' thread: their tasks wait behind these.
    const program = compileFormula('(B08 - B04) / (B08 + B04)');
    const n = 1 << 22;
    const band = () => ({ dtype: 'u16' as const, scale: 0.0001, data: new Uint16Array(n).fill(1234) });
    let busy = true;
    const blockers = Promise.all(
      Array.from({ length: 8 }, () =>
        t.runtime.heavyCompute!.runIndex({ program, bands: [band(), band()], orderStats: true }),
      ),
    ).finally(() => (busy = false));

    const settled = new Set<number>();
    const heavy = [1, 2].map((k) =>
      t.app.inject({ method: 'GET', url: url(k, true), headers: t.auth() }).finally(() => settled.add(k)),
    );
    // One running, one waiting: the third is refused at once, while the other two are still in flight.
    const refused = await t.app.inject({ method: 'GET', url: url(3, true), headers: t.auth() });
    expect(refused.statusCode).toBe(503);
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.headers['retry-after']).toBe('7');
    expect(refused.json()).toMatchObject({ status: 503, code: 'service_unavailable' });
    expect(refused.json().detail).toMatch(/heavy queue/);
    expect(settled.size).toBe(0);

    const answered = await t.app.inject({ method: 'GET', url: cheap, headers: t.auth() });
    expect(answered.statusCode).toBe(200);
    expect(answered.json().zonal_stats.count).toBeGreaterThan(0);
    expect(settled.size).toBe(0); // the heavy requests are still running or queued
    expect(busy).toBe(true);

    await blockers;
    for (const r of await Promise.all(heavy)) {
      expect(r.statusCode, r.body).toBe(200);
      expect(r.json().geojson.type).toBe('FeatureCollection');
      expect(r.json().geojson.features.length).toBeGreaterThan(0);
    }
    const metrics = await t.app.inject({ method: 'GET', url: '/metrics' });
    expect(metrics.body).toMatch(/^http_requests_shed_total\{reason="heavy_queue"\} [1-9]/m);
    // The refused one is answered once there is room.
    expect((await t.app.inject({ method: 'GET', url: url(3, true), headers: t.auth() })).statusCode).toBe(200);
  }, 120_000);
});
