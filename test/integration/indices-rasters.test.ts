/**
 * Index rasters on the demo season (docs/rasters.md), read back with independent readers: GDAL's
 * gdalinfo, GDAL's Python API and its COG validator (Debian python3-gdal), gdalwarp for the
 * reference of the map tiles. The colours are checked against a float64 ramp written here from
 * the documented stops.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PNG } from 'pngjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDemo } from '../../src/imagery/demo.js';
import { writeGeoTiff } from '../../src/imagery/tiff-writer.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { dbBackends } from '../helpers/backends.js';
import { gdalRaster, hasGdal, hasPythonGdal } from '../helpers/tools.js';
import { ALBERS_CONUS_KEYS } from '../helpers/geokeys.js';

const gdal = hasGdal() && hasPythonGdal();

/** The documented ramps (docs/rasters.md), evaluated in float64. */
const STOPS: Record<string, string[]> = {
  rdylgn: [
    '#a50026',
    '#d73027',
    '#f46d43',
    '#fdae61',
    '#fee08b',
    '#ffffbf',
    '#d9ef8b',
    '#a6d96a',
    '#66bd63',
    '#1a9850',
    '#006837',
  ],
  viridis: ['#440154', '#472d7b', '#3b528b', '#2c728e', '#21918c', '#28ae80', '#5ec962', '#addc30', '#fde725'],
};
function expectedColour(ramp: string, v: number, min: number, max: number): number[] {
  const stops = STOPS[ramp]!.map((h) => [1, 3, 5].map((i) => Number.parseInt(h.slice(i, i + 2), 16)));
  const t = Math.round(Math.min(1, Math.max(0, (v - min) / (max - min))) * 255) / 255;
  const pos = t * (stops.length - 1);
  const k = Math.min(Math.floor(pos), stops.length - 2);
  const f = pos - k;
  return [0, 1, 2].map((c) => stops[k]![c]! * (1 - f) + stops[k + 1]![c]! * f);
}

interface Read {
  width: number;
  height: number;
  geotransform: number[];
  bands: Array<Array<number | null>>;
}

/** Global pixel of a lon/lat at zoom z (Web Mercator), for choosing tiles. */
function lonLatToTile(lon: number, lat: number, z: number): [number, number] {
  const n = 2 ** z;
  const phi = (lat * Math.PI) / 180;
  return [
    Math.floor(((lon + 180) / 360) * n),
    Math.floor(((1 - Math.log(Math.tan(phi) + 1 / Math.cos(phi)) / Math.PI) / 2) * n),
  ];
}

/** Pixels of a PNG (decoded by pngjs) whose alpha is not 0. */
function opaque(png: Buffer): number {
  const img = PNG.sync.read(png);
  let n = 0;
  for (let k = 3; k < img.data.length; k += 4) if (img.data[k] !== 0) n++;
  return n;
}

// A CRS the GeoTIFF defines by its own GeoKeys, with no EPSG code: Albers Equal Area for the
// conterminous US on NAD83 (ProjectedCSTypeGeoKey 32767 and the parameters: test/helpers/geokeys.ts).
// (−93.62, 41.98) in that CRS, by gdaltransform.
const ALBERS_CENTRE = [195_829.22, 2_111_127.4];

describe.each(dbBackends)('index rasters on the demo season ($name)', (backend) => {
  let t: TestApp;
  let dir: string;
  let fieldId: string;
  const get = (url: string, headers: Record<string, string> = {}) =>
    t.app.inject({ method: 'GET', url, headers: { ...t.auth(), ...headers } });
  const q = 'index=NDVI&date=2025-07-06';
  const file = (name: string, body: Buffer) => {
    const p = path.join(dir, name);
    writeFileSync(p, body);
    return p;
  };

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

  describe.skipIf(!gdal)('read back with GDAL', () => {
    let tif: string;
    let info: {
      size: number[];
      geoTransform: number[];
      coordinateSystem: { wkt: string };
      metadata: Record<string, Record<string, string>>;
      bands: Array<{ noDataValue: unknown; block: number[]; description?: string }>;
    };
    let read: Read;
    let geojsonPath: string;
    let etag: string;

    // biome-ignore lint/suspicious/noDuplicateTestHooks: the setup of this nested describe (Biome misses describe.skipIf)
    beforeAll(async () => {
      const res = await get(`/v1/fields/${fieldId}/indices/raster?${q}`);
      expect(res.statusCode, res.body).toBe(200);
      expect(res.headers['content-type']).toBe('image/tiff; application=geotiff; profile=cloud-optimized');
      etag = res.headers.etag as string;
      tif = file('ndvi.tif', res.rawPayload);
      info = JSON.parse(execFileSync('gdalinfo', ['-json', '-mdd', 'all', tif], { encoding: 'utf8' }));
      read = gdalRaster<Read>('read', tif);
      const geo = await get(`/v1/fields/${fieldId}/indices?${q}`);
      expect(geo.statusCode).toBe(200);
      geojsonPath = file('ndvi.geojson', Buffer.from(JSON.stringify(geo.json().geojson)));
    });

    it("is a valid COG by GDAL's validator (full check: IFDs before data, block order)", () => {
      const v = gdalRaster<{ errors: string[]; warnings: string[] }>('validate', tif);
      expect(v.errors).toEqual([]);
      expect(v.warnings).toEqual([]);
      expect(info.metadata.IMAGE_STRUCTURE).toMatchObject({ COMPRESSION: 'DEFLATE', PREDICTOR: '3', LAYOUT: 'COG' });
      expect(info.bands[0]!.block).toEqual([
        info.size[0]! <= 256 ? Math.ceil(Math.max(...info.size) / 16) * 16 : 256,
        info.size[0]! <= 256 ? Math.ceil(Math.max(...info.size) / 16) * 16 : 256,
      ]);
      expect(info.bands).toHaveLength(1);
      expect(info.bands[0]!.noDataValue).toBe('NaN');
      expect(info.bands[0]!.description).toBe('NDVI');
      expect(info.metadata['']).toMatchObject({
        INDEX: 'NDVI',
        CAPTURE_DATE: '2025-07-06',
        FORMULA: '(B08 - B04) / (B08 + B04)',
        FIELD_ID: fieldId,
      });
    });

    it("has the source capture's CRS and pixel grid (GDAL reads both files)", () => {
      const b04 = path.join(dir, 'demo');
      const src = execFileSync('bash', ['-c', `ls ${dir}/*/*B04*.tif ${dir}/*B04*.tif 2>/dev/null | head -1`], {
        encoding: 'utf8',
      }).trim();
      expect(src, `no B04 file under ${b04}`).not.toBe('');
      const s = JSON.parse(execFileSync('gdalinfo', ['-json', src], { encoding: 'utf8' }));
      expect(info.coordinateSystem.wkt).toBe(s.coordinateSystem.wkt);
      const [ox, rx, , oy, , ry] = info.geoTransform as [number, number, number, number, number, number];
      const [sox, srx, , soy, , sry] = s.geoTransform as [number, number, number, number, number, number];
      expect([rx, ry]).toEqual([srx, sry]);
      expect(info.geoTransform[2]).toBe(0);
      expect(info.geoTransform[4]).toBe(0);
      // The window lies on the source grid: a whole number of pixels from its origin.
      const cols = (ox - sox) / srx;
      const rows = (oy - soy) / sry;
      expect(Math.abs(cols - Math.round(cols))).toBeLessThan(1e-9);
      expect(Math.abs(rows - Math.round(rows))).toBeLessThan(1e-9);
      expect(cols).toBeGreaterThanOrEqual(0);
      expect(rows).toBeGreaterThanOrEqual(0);
      expect(ox + info.size[0]! * rx).toBeLessThanOrEqual(sox + s.size[0] * srx);
    });

    it('every pixel equals the per-pixel GeoJSON value of the same request (float32 rounding); no value elsewhere', () => {
      const pairs = gdalRaster<Array<[number, number, number | null, number | null | 'outside']>>(
        'field-values',
        tif,
        geojsonPath,
      );
      expect(pairs.length).toBeGreaterThan(1000);
      const nulls = pairs.filter((p) => p[2] === null).length;
      expect(nulls, 'the capture of 2025-07-06 is partly under cloud').toBeGreaterThan(0);
      expect(nulls).toBeLessThan(pairs.length);
      const covered = new Set<number>();
      for (const [col, row, geo, px] of pairs) {
        expect(px).not.toBe('outside');
        covered.add(row * read.width + col);
        if (geo === null) expect(px).toBeNull();
        else {
          expect(px).not.toBeNull();
          // GeoJSON has 6 decimals; the COG the float32 itself.
          expect(Math.abs((px as number) - geo)).toBeLessThanOrEqual(5e-7 + 1e-7);
          expect(Math.fround(px as number)).toBe(px);
        }
      }
      expect(covered.size, 'one feature per pixel').toBe(pairs.length);
      const band = read.bands[0]!;
      let elsewhere = 0;
      for (let k = 0; k < band.length; k++) if (!covered.has(k) && band[k] !== null) elsewhere++;
      expect(elsewhere).toBe(0);
    });

    it('answers 304 to If-None-Match with its ETag, and another ETag for another query', async () => {
      expect(etag).toMatch(/^"[\w-]+"$/);
      const again = await get(`/v1/fields/${fieldId}/indices/raster?${q}`, { 'if-none-match': etag });
      expect(again.statusCode).toBe(304);
      expect(again.rawPayload.length).toBe(0);
      expect(again.headers.etag).toBe(etag);
      const weak = await get(`/v1/fields/${fieldId}/indices/raster?${q}`, { 'if-none-match': `"x", W/${etag}` });
      expect(weak.statusCode).toBe(304);
      const png = await get(`/v1/fields/${fieldId}/indices/raster?${q}&format=png`, { 'if-none-match': etag });
      expect(png.statusCode).toBe(200);
      expect(png.headers.etag).not.toBe(etag);
      const other = await get(`/v1/fields/${fieldId}/indices/raster?index=NDRE&date=2025-07-06`);
      expect(other.headers.etag).not.toBe(etag);
    });

    it.each([
      ['default range −1..1', '', -1, 1],
      ['rescale=0,1', '&rescale=0,1', 0, 1],
    ])(
      'the PNG (%s): the size of the COG, transparent exactly where it has no value, colours of the ramp',
      async (_n, extra, lo, hi) => {
        const res = await get(`/v1/fields/${fieldId}/indices/raster?${q}&format=png${extra}`);
        expect(res.statusCode, res.body).toBe(200);
        expect(res.headers['content-type']).toBe('image/png');
        expect(res.headers['x-rescale']).toBe(`${lo},${hi}`);
        const png = gdalRaster<Read>('read', file(`ndvi${extra}.png`, res.rawPayload));
        expect([png.width, png.height]).toEqual([read.width, read.height]);
        expect(png.bands).toHaveLength(4);
        const values = read.bands[0]!;
        let worst = 0;
        for (let k = 0; k < values.length; k++) {
          const v = values[k];
          const alpha = png.bands[3]![k];
          if (v === null) {
            expect(alpha).toBe(0);
            continue;
          }
          expect(alpha).toBe(255);
          const want = expectedColour('rdylgn', v, lo, hi);
          for (let c = 0; c < 3; c++) worst = Math.max(worst, Math.abs(png.bands[c]![k]! - want[c]!));
        }
        expect(worst).toBeLessThanOrEqual(1);
      },
    );

    it('the PNG has its WGS84 bounds and world file; format=pgw is the world file of the COG grid', async () => {
      const res = await get(`/v1/fields/${fieldId}/indices/raster?${q}&format=png`);
      const bounds = (res.headers['x-bounds-wgs84'] as string).split(',').map(Number);
      const pts = gdalRaster<Array<[number, number]>>('corners', tif);
      const want = [
        Math.min(...pts.map((p) => p[0])),
        Math.min(...pts.map((p) => p[1])),
        Math.max(...pts.map((p) => p[0])),
        Math.max(...pts.map((p) => p[1])),
      ];
      for (let i = 0; i < 4; i++) expect(Math.abs(bounds[i]! - want[i]!)).toBeLessThan(1e-7);
      const pgw = await get(`/v1/fields/${fieldId}/indices/raster?${q}&format=pgw`);
      expect(pgw.statusCode).toBe(200);
      const [ox, rx, , oy, , ry] = info.geoTransform as [number, number, number, number, number, number];
      const lines = pgw.body.trim().split('\n').map(Number);
      expect(lines).toEqual([rx, 0, 0, ry, ox + rx / 2, oy + ry / 2]);
      expect(res.headers['x-world-file']).toBe(lines.join(','));
      expect(pgw.headers['x-crs']).toMatch(/^EPSG:\d+$/);
    });

    it("a zoom's tiles mosaic to the field: gdalwarp of the COG to Web Mercator (nearest, exact transform), coloured by the ramp", async () => {
      const z = 17;
      const tj = (await get(`/v1/fields/${fieldId}/indices/tilejson.json?${q}`)).json();
      const [w, s, e, n] = tj.bounds as number[];
      const [x0, y0] = lonLatToTile(w!, n!, z);
      const [x1, y1] = lonLatToTile(e!, s!, z);
      const W = (x1 - x0 + 1) * 256;
      const H = (y1 - y0 + 1) * 256;
      const mosaic = new Uint8Array(W * H * 4);
      const files: Array<[number, number, string]> = [];
      for (let ty = y0; ty <= y1; ty++)
        for (let tx = x0; tx <= x1; tx++) {
          const res = await get(`/v1/fields/${fieldId}/indices/tiles/${z}/${tx}/${ty}.png?${q}`);
          expect(res.statusCode).toBe(200);
          files.push([tx, ty, file(`t${tx}_${ty}.png`, res.rawPayload)]);
        }
      const tiles = gdalRaster<Read[]>('read-many', ...files.map((f) => f[2]));
      for (const [i, [tx, ty]] of files.entries()) {
        const tile = tiles[i]!;
        expect([tile.width, tile.height]).toEqual([256, 256]);
        for (let j = 0; j < 256; j++)
          for (let i = 0; i < 256; i++)
            for (let c = 0; c < 4; c++)
              mosaic[(((ty - y0) * 256 + j) * W + (tx - x0) * 256 + i) * 4 + c] = tile.bands[c]![j * 256 + i]!;
      }
      // The mosaic's extent in EPSG:3857 metres.
      const R = 6378137;
      const size = (2 * Math.PI * R) / 2 ** z;
      const minX = -Math.PI * R + x0 * size;
      const maxY = Math.PI * R - y0 * size;
      const warped = path.join(dir, 'warped.tif');
      execFileSync('gdalwarp', [
        '-q',
        '-overwrite',
        '-t_srs',
        'EPSG:3857',
        '-te',
        String(minX),
        String(maxY - (y1 - y0 + 1) * size),
        String(minX + (x1 - x0 + 1) * size),
        String(maxY),
        '-ts',
        String(W),
        String(H),
        '-r',
        'near',
        '-et',
        '0',
        '-dstnodata',
        'nan',
        tif,
        warped,
      ]);
      const ref = gdalRaster<Read>('read', warped).bands[0]!;
      let valued = 0;
      let mismatched = 0;
      let worst = 0;
      for (let k = 0; k < W * H; k++) {
        const v = ref[k];
        const alpha = mosaic[k * 4 + 3];
        if (v === null || v === undefined) {
          if (alpha !== 0) mismatched++;
          continue;
        }
        valued++;
        if (alpha !== 255) {
          mismatched++;
          continue;
        }
        const want = expectedColour('rdylgn', v, -1, 1);
        const diff = Math.max(...[0, 1, 2].map((c) => Math.abs(mosaic[k * 4 + c]! - want[c]!)));
        if (diff > 1) mismatched++;
        worst = Math.max(worst, diff);
      }
      expect(valued).toBeGreaterThan(100_000);
      // Only pixels whose centre lies on a source pixel's edge (to rounding) may fall either side:
      // none of the 918,711 did when this was written.
      expect(mismatched / valued, `${mismatched} of ${valued} pixels differ`).toBeLessThan(1e-4);
      expect(worst).toBeLessThanOrEqual(1);
    }, 120_000);
  });

  it('a tile away from the field is a transparent 256 × 256 PNG', async () => {
    const tile = await get(`/v1/fields/${fieldId}/indices/tiles/16/0/0.png?${q}`);
    expect(tile.statusCode).toBe(200);
    expect(tile.headers['content-type']).toBe('image/png');
    if (!gdal) return;
    const png = gdalRaster<Read>('read', file('far.png', tile.rawPayload));
    expect([png.width, png.height, png.bands.length]).toEqual([256, 256, 4]);
    expect(png.bands[3]!.every((a) => a === 0)).toBe(true);
  });

  it.each([
    ['z = 22', `tiles/22/0/0.png?${'index=NDVI&date=2025-07-06'}`, '/path/z'],
    ['x outside the zoom', 'tiles/3/8/0.png?index=NDVI&date=2025-07-06', '/path/x'],
    ['y outside the zoom', 'tiles/0/0/1.png?index=NDVI&date=2025-07-06', '/path/y'],
    ['x not a number', 'tiles/3/a/0.png?index=NDVI&date=2025-07-06', '/path/x'],
    ['a negative y', 'tiles/3/0/-1.png?index=NDVI&date=2025-07-06', '/path/y'],
    ['an unknown format', 'raster?index=NDVI&date=2025-07-06&format=jpg', '/query/format'],
    ['rescale with min = max', 'raster?index=NDVI&date=2025-07-06&format=png&rescale=1,1', '/query/rescale'],
    ['rescale with min > max', 'tiles/3/0/0.png?index=NDVI&date=2025-07-06&rescale=1,0', '/query/rescale'],
    ['rescale not two numbers', 'tilejson.json?index=NDVI&date=2025-07-06&rescale=0;1', '/query/rescale'],
    ['an unknown index', 'raster?index=NOPE&date=2025-07-06', '/query/index'],
    ['a formula error', 'tiles/3/0/0.png?index=custom&formula=B08%2B&date=2025-07-06', '/query/formula'],
    ['a date that is not one', 'raster?index=NDVI&date=2025-02-30', '/query/date'],
  ])('bad input: %s is a 400 problem', async (_name, tail, pointer) => {
    const res = await get(`/v1/fields/${fieldId}/indices/${tail}`);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    const body = res.json();
    expect(['validation_failed', 'invalid_formula']).toContain(body.code);
    expect(JSON.stringify(body)).toContain(pointer);
  });

  it.each([
    ['the COG', 'raster?'],
    ['the PNG', 'raster?format=png&'],
    ['the world file', 'raster?format=pgw&'],
    ['a tile over the field', 'tiles/CENTRE.png?'],
    ['a tile away from the field', 'tiles/16/0/0.png?'],
  ])('%s has an ETag, and If-None-Match with it answers 304 with no body', async (_name, tail) => {
    const tj = (await get(`/v1/fields/${fieldId}/indices/tilejson.json?${q}`)).json();
    const [x, y] = lonLatToTile(tj.center[0], tj.center[1], 16);
    const url = `/v1/fields/${fieldId}/indices/${tail.replace('CENTRE', `16/${x}/${y}`)}${q}`;
    const first = await get(url);
    expect(first.statusCode, first.body).toBe(200);
    const etag = first.headers.etag as string;
    expect(etag).toMatch(/^"[\w-]{27}"$/);
    const again = await get(url);
    expect(again.headers.etag).toBe(etag);
    expect(again.rawPayload.equals(first.rawPayload), 'the same bytes the second time').toBe(true);
    const cached = await get(url, { 'if-none-match': etag });
    expect(cached.statusCode).toBe(304);
    expect(cached.rawPayload.length).toBe(0);
    expect(cached.headers.etag).toBe(etag);
    expect(cached.headers['x-imagery-id']).toBe(first.headers['x-imagery-id']);
    const stale = await get(url, { 'if-none-match': '"not-it"' });
    expect(stale.statusCode).toBe(200);
  });

  it('a capture in a user-defined CRS (no EPSG code): the COG is a 422 problem; the PNG, world file and tiles are drawn', async () => {
    const sub = path.join(dir, 'albers');
    execFileSync('mkdir', ['-p', sub]);
    const SIZE = 120;
    const red = new Uint16Array(SIZE * SIZE);
    const nir = new Uint16Array(SIZE * SIZE);
    for (let k = 0; k < red.length; k++) {
      red[k] = 400 + ((k * 37) % 700);
      nir[k] = 2200 + ((k * 13) % 2100);
    }
    const files = { B04: path.join(sub, 'red.tif'), B08: path.join(sub, 'nir.tif') };
    for (const [f, data] of [
      [files.B04, red],
      [files.B08, nir],
    ] as const)
      writeFileSync(
        f,
        writeGeoTiff({
          width: SIZE,
          height: SIZE,
          data,
          epsg: 32767,
          geoKeys: ALBERS_CONUS_KEYS,
          originX: Math.round(ALBERS_CENTRE[0]! - (SIZE / 2) * 10),
          originY: Math.round(ALBERS_CENTRE[1]! + (SIZE / 2) * 10),
          resolution: 10,
          tileSize: 64,
        }),
      );
    // A square of about 300 m around the centre, in WGS84.
    const [lon, lat] = [-93.62, 41.98];
    const dl = 150 / (111_320 * Math.cos((lat * Math.PI) / 180));
    const dp = 150 / 110_574;
    const boundary = {
      type: 'Polygon',
      coordinates: [
        [
          [lon - dl, lat - dp],
          [lon + dl, lat - dp],
          [lon + dl, lat + dp],
          [lon - dl, lat + dp],
          [lon - dl, lat - dp],
        ],
      ],
    };
    const field = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: t.auth(),
      payload: { name: 'Albers', boundary },
    });
    expect(field.statusCode, field.body).toBe(201);
    const id = field.json().id as string;
    const reg = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: t.auth(),
      payload: { source: 'drone', capture_date: '2025-06-14', bands: files },
    });
    expect(reg.statusCode, reg.body).toBe(201);
    expect(reg.json().crs).toMatch(/^\+proj=aea /);
    const aq = 'index=NDVI&date=2025-06-14';

    const tif = await get(`/v1/fields/${id}/indices/raster?${aq}`);
    expect(tif.statusCode, tif.body).toBe(422);
    expect(tif.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(tif.json().code).toBe('unprocessable');
    expect(tif.json().detail).toMatch(/user-defined.*format=png/);

    const png = await get(`/v1/fields/${id}/indices/raster?${aq}&format=png`);
    expect(png.statusCode, png.body).toBe(200);
    expect(png.headers['x-crs']).toMatch(/^\+proj=aea /);
    expect((png.headers['x-world-file'] as string).split(',').map(Number)).toHaveLength(6);
    const fieldPx = opaque(png.rawPayload);
    expect(fieldPx, 'about 900 pixels of 10 m').toBeGreaterThan(700);
    expect(fieldPx).toBeLessThan(1100);
    const pgw = await get(`/v1/fields/${id}/indices/raster?${aq}&format=pgw`);
    expect(pgw.statusCode).toBe(200);
    expect(pgw.body.trim().split('\n').map(Number).slice(0, 4)).toEqual([10, 0, 0, -10]);

    const tj = await get(`/v1/fields/${id}/indices/tilejson.json?${aq}`);
    expect(tj.statusCode, tj.body).toBe(200);
    const [x, y] = lonLatToTile(lon, lat, 17);
    const tile = await get(`/v1/fields/${id}/indices/tiles/17/${x}/${y}.png?${aq}`);
    expect(tile.statusCode, tile.body).toBe(200);
    expect(opaque(tile.rawPayload)).toBeGreaterThan(0);
  });

  it("another account's field is a 404", async () => {
    const other = await t.otherAccount();
    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${fieldId}/indices/tiles/3/0/0.png?${q}`,
      headers: t.auth(other.key),
    });
    expect(res.statusCode).toBe(404);
  });

  // These change the demo field and its imagery: last in the block.
  it('a boundary change makes new ETags and new images (no kept image is sent)', async () => {
    const tj = (await get(`/v1/fields/${fieldId}/indices/tilejson.json?${q}`)).json();
    const [w, s, e, n] = tj.bounds as number[];
    const [x, y] = lonLatToTile((w! + e!) / 2, (s! + n!) / 2, 15);
    const urls = [
      `/v1/fields/${fieldId}/indices/tiles/15/${x}/${y}.png?${q}`,
      `/v1/fields/${fieldId}/indices/raster?${q}&format=png`,
      `/v1/fields/${fieldId}/indices/raster?${q}`,
    ];
    const before = await Promise.all(urls.map((u) => get(u)));
    for (const r of before) expect(r.statusCode).toBe(200);
    const tileBefore = opaque(before[0]!.rawPayload);
    expect(tileBefore).toBeGreaterThan(1000);
    // The west half of the field's bounding box.
    const mid = (w! + e!) / 2;
    const half = {
      type: 'Polygon',
      coordinates: [
        [
          [w!, s!],
          [mid, s!],
          [mid, n!],
          [w!, n!],
          [w!, s!],
        ],
      ],
    };
    const patch = await t.app.inject({
      method: 'PATCH',
      url: `/v1/fields/${fieldId}`,
      headers: t.auth(),
      payload: { boundary: half },
    });
    expect(patch.statusCode, patch.body).toBe(200);
    const after = await Promise.all(urls.map((u, i) => get(u, { 'if-none-match': before[i]!.headers.etag as string })));
    for (const [i, r] of after.entries()) {
      expect(r.statusCode, `${urls[i]} after the PATCH`).toBe(200);
      expect(r.headers.etag).not.toBe(before[i]!.headers.etag);
      expect(r.rawPayload.equals(before[i]!.rawPayload)).toBe(false);
    }
    const tileAfter = opaque(after[0]!.rawPayload);
    expect(tileAfter).toBeGreaterThan(0);
    expect(tileAfter, 'about half the field is left').toBeLessThan(tileBefore * 0.7);
  });

  it('new imagery that becomes the best available makes new ETags and images from it', async () => {
    const date = '2025-12-01';
    const tj = (await get(`/v1/fields/${fieldId}/indices/tilejson.json?index=NDVI&date=${date}`)).json();
    const [x, y] = lonLatToTile(tj.center[0], tj.center[1], 16);
    const tileUrl = `/v1/fields/${fieldId}/indices/tiles/16/${x}/${y}.png?index=NDVI&date=${date}`;
    const before = await get(tileUrl);
    expect(before.statusCode, before.body).toBe(200);
    expect(before.headers['x-imagery-date']).not.toBe(date);
    // The capture of 2025-07-06 again, as one of 2025-12-01: the nearest to the date asked for.
    const demoDir = path.join(dir, 'demo');
    const bands = Object.fromEntries(
      readdirSync(demoDir)
        .filter((f) => /^2025-07-06_B\w+\.tif$/.test(f))
        .map((f) => [f.slice(11, -4), path.join(demoDir, f)]),
    );
    expect(Object.keys(bands)).toContain('B08');
    const reg = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: t.auth(),
      payload: {
        source: 'sentinel-2-l2a',
        capture_date: date,
        bands,
        mask: { href: path.join(demoDir, '2025-07-06_SCL.tif'), kind: 'scl' },
        scale: 0.0001,
        offset: -0.1,
      },
    });
    expect(reg.statusCode, reg.body).toBe(201);
    const after = await get(tileUrl, { 'if-none-match': before.headers.etag as string });
    expect(after.statusCode).toBe(200);
    expect(after.headers['x-imagery-id']).toBe(reg.json().id);
    expect(after.headers.etag).not.toBe(before.headers.etag);
    expect(after.headers['x-imagery-date']).toBe(date);
  });
});
