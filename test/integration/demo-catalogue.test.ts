/**
 * The demo catalogue (src/imagery/demo-catalogue.ts): the service's own read-only STAC API under
 * /demo/stac, without an API key, over the Items the demo wrote; 404 before it has; absent with
 * DEMO=false. The Items are Earth Search-shaped with local file hrefs that registration reads.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { demoCatalogueFile, demoStacUrl, writeDemoCatalogue } from '../../src/imagery/demo-catalogue.js';
import { DEMO_SCENE, DEMO_SEASON } from '../../src/imagery/demo.js';
import { CONFORMANCE } from '../../src/imagery/stac-api.js';
import { sceneField, syntheticItem, writeSyntheticSeason } from '../../src/imagery/synthetic.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';

describe('demo catalogue', () => {
  let t: TestApp;
  let scratch: string;
  const dates = ['2025-09-16', '2025-09-22', '2025-09-28', '2025-10-04'];

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'demo-catalogue-'));
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: scratch, DEMO: 'true' } });
  });
  afterAll(async () => {
    await t?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const get = (url: string) => t.app.inject({ method: 'GET', url, headers: { host: '127.0.0.1:3000' } });

  it('answers 404 until the demo has written its Items, then serves them as a STAC API without a key', async () => {
    expect((await get('/demo/stac')).statusCode).toBe(404);
    const dir = path.join(scratch, 'demo');
    const items = writeSyntheticSeason(dir, DEMO_SCENE, dates, DEMO_SEASON.planting, DEMO_SEASON.harvest, {
      deflateLevel: 1,
    }).map((c, k) => syntheticItem(c, DEMO_SCENE, k));
    await writeDemoCatalogue(demoCatalogueFile(t.config.imageryRoots), items);

    const landing = await get('/demo/stac');
    expect(landing.statusCode).toBe(200);
    expect(landing.json().conformsTo).toEqual(expect.arrayContaining([CONFORMANCE.itemSearch, CONFORMANCE.query]));
    expect(
      (landing.json().links as Array<{ rel: string; method?: string; href: string }>)
        .filter((l) => l.rel === 'search')
        .map((l) => `${l.method} ${l.href}`),
    ).toEqual(['GET http://127.0.0.1:3000/demo/stac/search', 'POST http://127.0.0.1:3000/demo/stac/search']);
    expect((await get('/demo/stac/collections/sentinel-2-l2a')).json().id).toBe('sentinel-2-l2a');

    const search = await t.app.inject({
      method: 'POST',
      url: '/demo/stac/search',
      headers: { host: '127.0.0.1:3000' },
      payload: {
        collections: ['sentinel-2-l2a'],
        intersects: sceneField(DEMO_SCENE),
        datetime: '2025-09-20T00:00:00Z/..',
        limit: 2,
      },
    });
    expect(search.statusCode).toBe(200);
    expect(search.headers['content-type']).toMatch(/^application\/geo\+json/);
    const fc = search.json();
    expect(fc.features.map((f: { id: string }) => f.id)).toEqual([items[1]!.id, items[2]!.id]);
    expect(fc.links.find((l: { rel: string }) => l.rel === 'next')).toMatchObject({ method: 'POST', merge: true });
    // Hrefs are the files the demo wrote, under IMAGERY_ROOTS.
    expect(fc.features[0].assets.red.href).toBe(path.join(dir, `${dates[1]}_B04.tif`));
    // The spec's errors: bbox with intersects is a 400.
    const bad = await t.app.inject({
      method: 'POST',
      url: '/demo/stac/search',
      payload: { bbox: [4, 50, 5, 51], intersects: sceneField(DEMO_SCENE) },
    });
    expect(bad.statusCode).toBe(400);
  });

  it('the demo catalogue URL is the API listener on loopback', () => {
    expect(demoStacUrl({ host: '0.0.0.0', port: 3000 })).toBe('http://127.0.0.1:3000/demo/stac');
    expect(demoStacUrl({ host: '::', port: 8080 })).toBe('http://[::1]:8080/demo/stac');
    expect(demoStacUrl({ host: '10.0.0.5', port: 3000 })).toBe('http://10.0.0.5:3000/demo/stac');
  });

  it('is not served with DEMO=false', async () => {
    const off = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: scratch, DEMO: 'false' } });
    try {
      const r = await off.app.inject({ method: 'GET', url: '/demo/stac' });
      expect(r.statusCode).toBe(404);
      expect(r.headers['content-type']).toMatch(/problem\+json/);
    } finally {
      await off.close();
    }
  });
});
