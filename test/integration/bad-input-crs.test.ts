/**
 * Hostile or unusable coordinate reference systems, registered by path and uploaded: each answers
 * 400 application/problem+json (code invalid_imagery, errors[0].code unsupported_crs) naming the
 * CRS, never a 5xx, and leaves no record, no event and no uploaded file behind.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeGeoTiff, type GeoTiffSpec } from '../../src/imagery/tiff-writer.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { dbBackends } from '../helpers/backends.js';
import { storedUploads } from '../helpers/uploads.js';

type Geo = Pick<GeoTiffSpec, 'epsg' | 'geoKeys' | 'originX' | 'originY'>;

// [what, the file's CRS, what the answer must say]
const CASES: Array<[string, Geo, RegExp]> = [
  [
    'an EPSG code that is no CRS of the registry',
    { epsg: 29999, originX: 500_000, originY: 5_600_000 },
    /EPSG:29999 is not a CRS of the EPSG registry/,
  ],
  [
    'a vertical CRS as the projected CRS',
    { epsg: 5703, originX: 500_000, originY: 5_600_000 },
    /EPSG:5703 \(NAVD88 height\) is not a horizontal coordinate system/,
  ],
  [
    'NAD27, whose datum shift needs grids the service lacks',
    { epsg: 26718, originX: 500_000, originY: 4_500_000 },
    /EPSG:26718 \(NAD27 \/ UTM zone 18N\): its definition gives no transformation from its datum to WGS84/,
  ],
  [
    'a user-defined projection the service does not implement',
    { epsg: 32767, geoKeys: { 3074: 32767, 3075: 4, 2048: 4326 }, originX: 0, originY: 0 },
    /CT_ObliqueMercator_Laborde \(ProjCoordTransGeoKey 4\)/,
  ],
  [
    'a user-defined CRS in an unknown linear unit',
    { epsg: 32767, geoKeys: { 3074: 32767, 3075: 1, 2048: 4326, 3076: 9999 }, originX: 0, originY: 0 },
    /linear unit EPSG:9999/,
  ],
  [
    'an EPSG conversion other than a UTM zone',
    { epsg: 32767, geoKeys: { 3074: 19914, 2048: 4326 }, originX: 0, originY: 0 },
    /EPSG projection 19914/,
  ],
  [
    'a user-defined datum without an ellipsoid',
    { epsg: 32767, geoKeys: { 3074: 32767, 3075: 11, 2048: 32767, 2050: 32767 }, originX: 0, originY: 0 },
    /gives no ellipsoid/,
  ],
  [
    'a raster whose extent lies outside its CRS (UTM 31N, northing 10^9 m)',
    { epsg: 32631, originX: 500_000, originY: 1e9 },
    /extent cannot be expressed in WGS84 from its EPSG:32631/,
  ],
];

describe.each(dbBackends.slice(-1))('unusable CRSs ($name)', (backend) => {
  let t: TestApp;
  let scratch: string;
  let base: string;

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'bad-crs-'));
    t = await buildTestApp(backend, { env: { DATA_DIR: path.join(scratch, 'data'), IMAGERY_ROOTS: scratch } });
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  });
  afterAll(async () => {
    await t.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const tiff = (g: Geo) =>
    writeGeoTiff({ width: 32, height: 32, data: new Uint16Array(1024).fill(1200), resolution: 10, tileSize: 32, ...g });

  async function expectRefused(
    res: { status: number; type: string | null; body: Record<string, unknown> },
    message: RegExp,
    what: string,
  ) {
    expect(res.status, `${what}: ${JSON.stringify(res.body)}`).toBe(400);
    expect(res.type).toMatch(/^application\/problem\+json/);
    expect(res.body.code).toBe('invalid_imagery');
    const [issue] = res.body.errors as Array<{ path: string; code: string; message: string }>;
    expect(issue!.path).toBe('/body/bands/B04');
    expect(issue!.code, what).toBe('unsupported_crs');
    expect(issue!.message, what).toMatch(message);
    expect((await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM imagery'))[0]!.n).toBe(0);
    expect(
      (await t.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM outbox WHERE type = 'imagery.available'`))[0]!.n,
    ).toBe(0);
  }

  it.each(CASES)('registered by path: %s is a 400 naming it', async (what, geo, message) => {
    const file = path.join(scratch, `${what.replace(/\W+/g, '-')}.tif`);
    writeFileSync(file, tiff(geo));
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: t.auth(),
      payload: { source: 'drone', capture_date: '2025-06-14', bands: { B04: file } },
    });
    await expectRefused(
      { status: res.statusCode, type: String(res.headers['content-type']), body: res.json() },
      message,
      what,
    );
  });

  it.each(CASES)('uploaded: %s is a 400 naming it, and no file is kept', async (what, geo, message) => {
    const form = new FormData();
    form.append('metadata', JSON.stringify({ source: 'drone', capture_date: '2025-06-14', bands: { B04: 'red' } }));
    form.append('red', new Blob([tiff(geo)], { type: 'image/tiff' }), 'red.tif');
    const res = await fetch(`${base}/v1/imagery/upload`, { method: 'POST', headers: t.auth(), body: form });
    await expectRefused(
      {
        status: res.status,
        type: res.headers.get('content-type'),
        body: (await res.json()) as Record<string, unknown>,
      },
      message,
      what,
    );
    expect(await storedUploads(t.db)).toEqual([]);
  });
});
