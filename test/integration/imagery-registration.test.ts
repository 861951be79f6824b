/**
 * POST /v1/imagery with real Sentinel-2 files: local paths, multi-band files, a STAC Item, an
 * HTTP server with range requests; and, on a synthetic scene, every kind of broken input answering
 * 400 with nothing stored.
 */
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync, createReadStream } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { sceneField, writeSyntheticSeason } from '../../src/imagery/synthetic.js';
import { writeGeoTiff } from '../../src/imagery/tiff-writer.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { hasRealData, polygonOf, realDataDir, referenceResults } from '../helpers/real-data.js';

const RKH = path.join(realDataDir, 's2_l2a_29RKH_20200219_riotilerpds');
const FTW = path.join(realDataDir, 's2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif');

/** A valid 16-bit TIFF without any georeferencing tags. */
function plainTiff(w: number, h: number): Buffer {
  const tags: Array<[number, number, number, number]> = [
    [256, 3, 1, w],
    [257, 3, 1, h],
    [258, 3, 1, 16],
    [259, 3, 1, 1],
    [262, 3, 1, 1],
    [273, 4, 1, 0],
    [277, 3, 1, 1],
    [278, 3, 1, h],
    [279, 4, 1, w * h * 2],
    [339, 3, 1, 1],
  ];
  const ifdSize = 2 + tags.length * 12 + 4;
  const dataOffset = 8 + ifdSize;
  const buf = Buffer.alloc(dataOffset + w * h * 2);
  buf.write('II', 0, 'latin1');
  buf.writeUInt16LE(42, 2);
  buf.writeUInt32LE(8, 4);
  buf.writeUInt16LE(tags.length, 8);
  tags.forEach(([tag, type, count, value], i) => {
    const o = 10 + i * 12;
    buf.writeUInt16LE(tag, o);
    buf.writeUInt16LE(type, o + 2);
    buf.writeUInt32LE(count, o + 4);
    if (type === 3) buf.writeUInt16LE(tag === 273 ? 0 : value, o + 8);
    else buf.writeUInt32LE(tag === 273 ? dataOffset : value, o + 8);
  });
  for (let i = 0; i < w * h; i++) buf.writeUInt16LE(1000 + i, dataOffset + i * 2);
  return buf;
}

/** A static file server over `dir` with Range support, as COG hosts have; Range headers go to `ranges`. */
async function rangeServer(dir: string, ranges: string[]): Promise<{ server: http.Server; base: string }> {
  const server = http.createServer((req, res) => {
    const file = path.join(dir, path.basename(req.url ?? ''));
    let size: number;
    try {
      size = statSync(file).size;
    } catch {
      res.writeHead(404).end();
      return;
    }
    const m = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? '');
    if (m) {
      ranges.push(req.headers.range!);
      const start = Number(m[1]);
      const end = m[2] ? Math.min(Number(m[2]), size - 1) : size - 1;
      res.writeHead(206, {
        'content-range': `bytes ${start}-${end}/${size}`,
        'content-length': end - start + 1,
        'accept-ranges': 'bytes',
      });
      createReadStream(file, { start, end }).pipe(res);
    } else {
      res.writeHead(200, { 'content-length': size });
      createReadStream(file).pipe(res);
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

async function closeAll(t: TestApp, server: http.Server, scratch: string): Promise<void> {
  await new Promise<void>((r) => server.close(() => r()));
  await t.close();
  rmSync(scratch, { recursive: true, force: true });
}

const postImagery = (t: TestApp, payload: unknown) =>
  t.app.inject({ method: 'POST', url: '/v1/imagery', headers: t.auth(), payload: payload as object });
const imageryCount = async (t: TestApp) =>
  (await t.db.query<{ n: number }>('SELECT count(*)::int AS n FROM imagery'))[0]!.n;

// The test's COG server is on 127.0.0.1: remote imagery may read private addresses here (the
// compute threads take the environment when the pool starts). The refusal itself is tested in
// test/unit/imagery/http-client.test.ts.
process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS = 'true';

describe.runIf(hasRealData)('imagery registration', () => {
  let t: TestApp;
  let scratch: string;
  let server: http.Server;
  let base: string;
  const ranges: string[] = [];
  let fieldId: string;
  let ftwFieldId: string;

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'imagery-'));
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: `${realDataDir},${scratch}` } });
    const refs = referenceResults();
    const rkh = refs.find((r) => r.scene.startsWith('EH_29RKH'))!;
    const ftw = refs.find((r) => r.scene.startsWith('AT_T33UUP'))!;
    fieldId = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'Sahara test', boundary: polygonOf(rkh) },
      })
    ).json().id;
    ftwFieldId = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'Austria test', boundary: polygonOf(ftw) },
      })
    ).json().id;
    ({ server, base } = await rangeServer(RKH, ranges));
  });
  afterAll(() => closeAll(t, server, scratch));

  const post = (payload: unknown) => postImagery(t, payload);
  const rkhBands = () =>
    Object.fromEntries(['B02', 'B03', 'B04', 'B05', 'B08', 'B11'].map((b) => [b, path.join(RKH, `${b}.tif`)]));

  it("registers local files with an SCL mask: footprint, CRS, resolution, the field's own cloud cover, imagery.available", async () => {
    const res = await post({
      source: 'sentinel-2-l2a',
      capture_date: '2020-02-19',
      cloud_cover: 4.05,
      bands: rkhBands(),
      mask: { href: path.join(RKH, 'SCL.tif'), kind: 'scl' },
      scale: 0.0001,
      offset: 0,
    });
    expect(res.statusCode, res.body).toBe(201);
    const img = res.json();
    expect(img.id).toMatch(/^img_/);
    expect(img).toMatchObject({
      crs: 'EPSG:32629',
      resolution: 100,
      capture_date: '2020-02-19',
      bands: ['B02', 'B03', 'B04', 'B05', 'B08', 'B11'],
    });
    expect(img.footprint.type).toBe('Polygon');
    // 1380 field pixels, 943 clear (SCL 5), 437 cloud/cirrus (8, 10): 31.67 % unusable.
    expect(img.fields).toEqual([{ field_id: fieldId, field_pixels: 1380, valid_pixels: 943, cloud_cover: 31.67 }]);
    const events = await listOutbox(t.db, t.accountId, 'imagery.available');
    expect(events.at(-1)!.data).toEqual({
      field_id: fieldId,
      imagery_id: img.id,
      source: 'sentinel-2-l2a',
      capture_date: '2020-02-19',
      cloud_cover: 31.67,
    });
    const list = (
      await t.app.inject({ method: 'GET', url: `/v1/fields/${fieldId}/imagery`, headers: t.auth() })
    ).json();
    expect(list.data[0]).toMatchObject({ id: img.id, cloud_cover: 31.67, scene_cloud_cover: 4.05 });
    const filtered = (
      await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${fieldId}/imagery?start_date=2020-03-01`,
        headers: t.auth(),
      })
    ).json();
    expect(filtered.total).toBe(0);
    expect((await t.app.inject({ method: 'GET', url: `/v1/imagery/${img.id}`, headers: t.auth() })).json().id).toBe(
      img.id,
    );
    const other = await t.otherAccount();
    expect(
      (await t.app.inject({ method: 'GET', url: `/v1/imagery/${img.id}`, headers: t.auth(other.key) })).statusCode,
    ).toBe(404);
  });

  it('registers bands sharing one multi-band file through `index`', async () => {
    const res = await post({
      source: 'sentinel-2-l2a',
      capture_date: '2021-09-25',
      bands: {
        B04: { href: FTW, index: 5 },
        B03: { href: FTW, index: 6 },
        B02: { href: FTW, index: 7 },
        B08: { href: FTW, index: 8 },
      },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().fields).toEqual([
      { field_id: ftwFieldId, field_pixels: 2365, valid_pixels: 2365, cloud_cover: 0 },
    ]);
  });

  it('registers a STAC Item (assets by common name, SCL mask, date and cloud cover from the item)', async () => {
    const item = JSON.parse(readFileSync(path.join(RKH, 'S2A_29RKH_20200219_0_L2A.json'), 'utf8'));
    const local: Record<string, string> = {
      blue: 'B02',
      green: 'B03',
      red: 'B04',
      rededge1: 'B05',
      nir: 'B08',
      swir16: 'B11',
      scl: 'SCL',
    };
    item.assets = Object.fromEntries(
      Object.entries(local).map(([k, f]) => [k, { ...item.assets[k], href: path.join(RKH, `${f}.tif`) }]),
    );
    const res = await post({ stac_item: item });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json()).toMatchObject({
      source: 'sentinel-2-l2a',
      capture_date: '2020-02-19',
      cloud_cover: 4.051854,
      offset: 0,
    });
    expect(res.json().fields[0].cloud_cover).toBe(31.67);
    item.properties['s2:processing_baseline'] = '04.00';
    const n400 = await post({ stac_item: item });
    expect(n400.json().offset).toBe(-0.1); // baseline 04.00: the offset is set without the client knowing
  });

  it('reads COGs over HTTP with range requests', async () => {
    ranges.length = 0;
    const res = await post({
      source: 'sentinel-2-l2a',
      capture_date: '2020-02-20',
      bands: { B04: `${base}/B04.tif`, B08: `${base}/B08.tif` },
      mask: { href: `${base}/SCL.tif`, kind: 'scl' },
    });
    expect(res.statusCode, res.body).toBe(201);
    expect(res.json().fields[0]).toMatchObject({ field_id: fieldId, valid_pixels: 943 });
    expect(ranges.length).toBeGreaterThan(0);
  });
});

describe('imagery registration: broken input, on a synthetic scene', () => {
  let t: TestApp;
  let scratch: string;
  let server: http.Server;
  let base: string;
  let scene: Record<string, string>;

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'imagery-broken-'));
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: scratch } });
    const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 100, seed: 3 };
    scene = writeSyntheticSeason(path.join(scratch, 'scene'), spec, ['2020-02-19'], '2020-01-01', '2020-06-30')[0]!
      .files;
    // A field over the scene, so that registering reads its pixels.
    const field = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: t.auth(),
      payload: { name: 'synthetic', boundary: sceneField(spec) },
    });
    expect(field.statusCode, field.body).toBe(201);
    ({ server, base } = await rangeServer(scratch, []));
  });
  afterAll(() => closeAll(t, server, scratch));

  const post = (payload: unknown) => postImagery(t, payload);
  const count = () => imageryCount(t);

  it('every broken input answers 400 naming the band and the reason, and stores nothing', async () => {
    const corrupt = path.join(scratch, 'corrupt.tif');
    writeFileSync(corrupt, Buffer.from(Array.from({ length: 4096 }, (_, i) => (i * 7919) % 256)));
    const truncated = path.join(scratch, 'truncated.tif');
    const full = readFileSync(scene.B04!);
    writeFileSync(truncated, full.subarray(0, Math.floor(full.length * 0.6)));
    const plain = path.join(scratch, 'plain.tif');
    writeFileSync(plain, plainTiff(8, 8));
    // Four bands in UTM zone 33N; the scene is in zone 31N.
    const zone33 = path.join(scratch, 'zone33.tif');
    writeFileSync(
      zone33,
      writeGeoTiff({
        width: 32,
        height: 32,
        samples: 4,
        data: new Uint16Array(32 * 32 * 4).fill(1200),
        epsg: 32633,
        originX: 500_000,
        originY: 5_300_000,
        resolution: 10,
        tileSize: 32,
      }),
    );
    const before = await count();
    const eventsBefore = (await listOutbox(t.db, t.accountId)).length;
    const cases: Array<[string, Record<string, unknown>, string, RegExp]> = [
      ['corrupt bytes', { B04: corrupt }, '/body/bands/B04', /not a readable GeoTIFF|cannot be decoded/],
      ['truncated file', { B04: truncated, B08: scene.B08 }, '/body/bands/B04', /corrupt or truncated|not a readable/],
      ['missing georeference', { B04: plain }, '/body/bands/B04', /GeoKeys|georeferenced/],
      [
        'CRS mismatch',
        { B04: scene.B04, B08: { href: zone33, index: 4 } },
        '/body/bands/B08',
        /CRS EPSG:32633 differs/,
      ],
      ['path outside IMAGERY_ROOTS', { B04: '/etc/passwd' }, '/body/bands/B04', /outside the allowed/],
      ['missing file', { B04: path.join(scratch, 'nope.tif') }, '/body/bands/B04', /not found/],
      ['unreachable URL', { B04: 'http://127.0.0.1:1/B04.tif' }, '/body/bands/B04', /cannot be read|not a readable/],
      ['404 URL', { B04: `${base}/missing.tif` }, '/body/bands/B04', /cannot be read|not a readable/],
    ];
    for (const [why, bands, p, msg] of cases) {
      const res = await post({ source: 'sentinel-2-l2a', capture_date: '2020-02-19', bands });
      expect(res.statusCode, `${why}: ${res.body}`).toBe(400);
      const body = res.json();
      expect(body.code, why).toBe('invalid_imagery');
      expect(body.errors[0].path, why).toBe(p);
      expect(body.detail, why).toMatch(msg);
    }
    for (const [why, payload, p] of [
      ['unknown band', { source: 's', capture_date: '2020-02-19', bands: { B13: scene.B04! } }, '/body/bands/B13'],
      ['bad date', { source: 's', capture_date: '2020-02-30', bands: { B04: scene.B04! } }, '/body/capture_date'],
      ['no bands', { source: 's', capture_date: '2020-02-19', bands: {} }, '/body/bands'],
      [
        's3 href',
        { source: 's', capture_date: '2020-02-19', bands: { B04: 's3://bucket/B04.tif' } },
        '/body/bands/B04',
      ],
    ] as const) {
      const res = await post(payload);
      expect(res.statusCode, why).toBe(400);
      expect(res.json().errors[0].path, why).toBe(p);
    }
    const bad = await post({ source: 'x', capture_date: '2021-09-25', bands: { B04: { href: zone33, index: 9 } } });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().errors[0]).toMatchObject({ path: '/body/bands/B04', code: 'unreadable_file' });
    expect(bad.json().detail).toMatch(/index 9 does not exist/);
    expect(await count()).toBe(before);
    expect((await listOutbox(t.db, t.accountId)).length).toBe(eventsBefore);
  });
  it('a scale or offset the float32 kernel cannot use is a 400 at its place; stored nothing', async () => {
    // Accepted before: 1e400 (Infinity in JSON.parse) stored as Infinity and answered as null, 0 and
    // 1e-320 made every pixel non-finite, a negative scale turned reflectance over.
    const before = await count();
    const bands = { B04: scene.B04!, B08: scene.B08! };
    const BIG = 'the number 1e400';
    const cases: Array<[string, Record<string, unknown>, string]> = [
      ['scale 0', { scale: 0 }, '/body/scale'],
      ['a negative scale', { scale: -0.0001 }, '/body/scale'],
      ['scale 1e400 (Infinity)', { scale: BIG }, '/body/scale'],
      ['a subnormal scale', { scale: 1e-320 }, '/body/scale'],
      ['offset 1e400', { offset: BIG }, '/body/offset'],
      ['offset -1e308', { offset: -1e308 }, '/body/offset'],
      ["a band's scale 0", { bands: { ...bands, B08: { href: scene.B08!, scale: 0 } } }, '/body/bands/B08/scale'],
      [
        "a band's offset 1e9",
        { bands: { ...bands, B04: { href: scene.B04!, offset: 1e9 } } },
        '/body/bands/B04/offset',
      ],
    ];
    for (const [why, member, p] of cases) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/imagery',
        headers: { ...t.auth(), 'content-type': 'application/json' },
        // a raw body: 1e400 is JSON, which JSON.parse reads as Infinity (JSON.stringify would write null)
        payload: JSON.stringify({ source: 's', capture_date: '2020-02-19', bands, ...member }).replaceAll(
          `"${BIG}"`,
          '1e400',
        ),
      });
      expect(res.statusCode, `${why}: ${res.body}`).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(
        res.json().errors.map((e: { path: string }) => e.path),
        why,
      ).toContain(p);
    }
    // A STAC Item's raster:bands scale is checked as well (it skips the body's schema).
    const item = {
      type: 'Feature',
      stac_version: '1.0.0',
      id: 'x',
      properties: { datetime: '2020-02-19T10:00:00Z', platform: 'sentinel-2a' },
      assets: {
        red: { href: scene.B04!, 'raster:bands': [{ scale: 0, offset: 0 }] },
        nir: { href: scene.B08! },
      },
    };
    const stac = await post({ stac_item: item });
    expect(stac.statusCode, stac.body).toBe(400);
    expect(stac.json().errors).toContainEqual(
      expect.objectContaining({ path: '/body/bands/B04/scale', code: 'out_of_range' }),
    );
    // the edges of the range and the usual values register
    for (const radiometry of [
      { scale: 1e-12, offset: -1e6 },
      { scale: 2.75e-5, offset: -0.2 },
      { scale: 1e6, offset: 1e6 },
    ]) {
      const ok = await post({ source: 's', capture_date: '2020-02-19', bands, ...radiometry });
      expect(ok.statusCode, ok.body).toBe(201);
      expect(ok.json()).toMatchObject(radiometry);
    }
    expect(await count()).toBe(before + 3);
  });
});
