/**
 * Field windows on rasters whose every pixel value encodes its position, so that each window
 * pixel can be checked against the pixel it must come from: a field crossing tile edges (DEFLATE
 * with the predictor and LZW), 20 m bands on the 10 m grid, holes and multipolygons, a field
 * across the UTM zone 31/32 boundary read from a zone-32 and from a zone-31 raster (checked
 * against an independent point-in-polygon on absolute raster coordinates, and the geodesic
 * area), and the masks: declared nodata, DN 0 and the SCL classes.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import geodesic from 'geographiclib-geodesic';
import proj4 from 'proj4';
import { afterAll, describe, expect, it } from 'vitest';
import { startRangeServer } from '../../helpers/range-server.js';
import { proj4Definition, toWgs84 } from '../../../src/imagery/crs.js';
import { writeGeoTiff, type TiffCompression } from '../../../src/imagery/tiff-writer.js';
import {
  readFieldCoverages,
  readFieldWindow,
  SCL_MASKED,
  type CaptureBand,
  type CaptureSource,
  type FieldWindow,
} from '../../../src/imagery/window-reader.js';
import { rng } from '../../helpers/random.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'window-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const roots = [dir];

interface Raster {
  file: string;
  epsg: number;
  ox: number;
  oy: number;
  res: number;
  width: number;
  height: number;
}

let n = 0;
function raster(
  spec: Omit<Raster, 'file'>,
  value: (c: number, r: number) => number,
  opts: {
    compression?: TiffCompression;
    predictor?: boolean;
    nodata?: number;
    bits?: 8 | 16 | 'i16' | 'f32';
    tile?: number;
  } = {},
): Raster {
  const size = spec.width * spec.height;
  const data =
    opts.bits === 8
      ? new Uint8Array(size)
      : opts.bits === 'i16'
        ? new Int16Array(size)
        : opts.bits === 'f32'
          ? new Float32Array(size)
          : new Uint16Array(size);
  for (let r = 0; r < spec.height; r++) for (let c = 0; c < spec.width; c++) data[r * spec.width + c] = value(c, r);
  const file = path.join(dir, `r${++n}.tif`);
  writeFileSync(
    file,
    writeGeoTiff({
      width: spec.width,
      height: spec.height,
      data,
      epsg: spec.epsg,
      originX: spec.ox,
      originY: spec.oy,
      resolution: spec.res,
      tileSize: opts.tile ?? 256,
      compression: opts.compression ?? 'deflate',
      predictor: opts.predictor ?? true,
      ...(opts.nodata !== undefined ? { nodata: opts.nodata } : {}),
    }),
  );
  return { file, ...spec };
}

/** A ring of pixel-grid corners (col, row) of `r` as WGS84 lon/lat. */
function ringOf(r: Raster, corners: Array<[number, number]>): Array<[number, number]> {
  const inv = toWgs84(r.epsg);
  const ring = corners.map(([c, row]) => inv([r.ox + c * r.res, r.oy - row * r.res]));
  return [...ring, ring[0]!];
}
const rect = (r: Raster, c0: number, r0: number, c1: number, r1: number) =>
  ringOf(r, [
    [c0, r0],
    [c1, r0],
    [c1, r1],
    [c0, r1],
  ]);

/** The window's top-left pixel in the raster's grid. */
function originOf(win: FieldWindow, r: Raster): [number, number] {
  return [Math.round((win.originX - r.ox) / r.res), Math.round((r.oy - win.originY) / r.res)];
}

/** Every window pixel: inside exactly where `expected(col, row)` says, for raster grid coordinates. */
function expectInside(win: FieldWindow, r: Raster, expected: (c: number, row: number) => boolean): void {
  const [c0, r0] = originOf(win, r);
  let wrong = 0;
  let first = '';
  for (let j = 0; j < win.height; j++) {
    for (let i = 0; i < win.width; i++) {
      if ((win.inside[j * win.width + i] === 1) !== expected(c0 + i, r0 + j)) {
        if (!wrong++) first = `pixel (${c0 + i}, ${r0 + j})`;
      }
    }
  }
  expect(wrong, `${wrong} pixels wrong, first ${first}`).toBe(0);
}

const pos = (w: number) => (c: number, r: number) => 1 + ((r * w + c) % 65521);
const band = (href: string): CaptureSource['bands'][CaptureBand] => ({ href });
const capture = (bands: Partial<Record<CaptureBand, string>>, mask?: string): CaptureSource => ({
  bands: Object.fromEntries(Object.entries(bands).map(([b, f]) => [b, band(f!)])),
  ...(mask ? { mask: { href: mask, kind: 'scl' as const } } : {}),
  scale: 0.0001,
  offset: 0,
});

describe('field windows', () => {
  const grid = { epsg: 32631, ox: 600_000, oy: 5_700_000, res: 10, width: 600, height: 600 };

  it.each([
    ['deflate', true],
    ['lzw', true],
    ['lzw', false],
  ] as const)(
    'a field crossing tile edges (%s, predictor %s): every pixel from the right place',
    async (compression, predictor) => {
      const r = raster(grid, pos(600), { compression, predictor });
      // Tiles are 256²: the field spans columns 240–279 and rows 250–269, across both tile edges.
      const win = await readFieldWindow(
        capture({ B04: r.file }),
        { type: 'Polygon', coordinates: [rect(r, 240, 250, 280, 270)] },
        ['B04'],
        { roots },
      );
      expect(win.fieldPixels).toBe(40 * 20);
      expectInside(win, r, (c, row) => c >= 240 && c < 280 && row >= 250 && row < 270);
      const [c0, r0] = originOf(win, r);
      const data = win.bands.B04!.data;
      let wrong = 0;
      for (let j = 0; j < win.height; j++)
        for (let i = 0; i < win.width; i++) if (data[j * win.width + i] !== pos(600)(c0 + i, r0 + j)) wrong++;
      expect(wrong).toBe(0);
      expect(c0 < 256 && c0 + win.width > 256 && r0 < 256 && r0 + win.height > 256).toBe(true);
    },
  );

  it('20 m bands on the 10 m grid: each 10 m pixel takes the 20 m pixel its centre falls in', async () => {
    const fine = raster(grid, pos(600));
    const coarse = raster({ ...grid, res: 20, width: 300, height: 300 }, pos(300));
    // Odd first column and row: the window starts in the middle of a 20 m pixel.
    const win = await readFieldWindow(
      capture({ B04: fine.file, B05: coarse.file }),
      { type: 'Polygon', coordinates: [rect(fine, 101, 77, 151, 113)] },
      ['B05', 'B04'],
      { roots },
    );
    expect(win.resX).toBe(10);
    expect(win.fieldPixels).toBe(50 * 36);
    const [c0, r0] = originOf(win, fine);
    let wrong = 0;
    for (let j = 0; j < win.height; j++) {
      for (let i = 0; i < win.width; i++) {
        const k = j * win.width + i;
        if (win.bands.B04!.data[k] !== pos(600)(c0 + i, r0 + j)) wrong++;
        if (win.bands.B05!.data[k] !== pos(300)(Math.floor((c0 + i) / 2), Math.floor((r0 + j) / 2))) wrong++;
      }
    }
    expect(wrong).toBe(0);
  });

  it('holes and multipolygons, by pixel centres with the even-odd rule', async () => {
    const r = raster(grid, () => 1000);
    const cap = capture({ B04: r.file });
    const outer = rect(r, 200, 300, 240, 340);
    const hole = rect(r, 210, 310, 220, 325).reverse();
    const inHoled = (c: number, row: number) =>
      c >= 200 && c < 240 && row >= 300 && row < 340 && !(c >= 210 && c < 220 && row >= 310 && row < 325);
    const holed = await readFieldWindow(cap, { type: 'Polygon', coordinates: [outer, hole] }, ['B04'], { roots });
    expect(holed.fieldPixels).toBe(1600 - 150);
    expectInside(holed, r, inHoled);

    const inSmall = (c: number, row: number) =>
      (c >= 250 && c < 260 && row >= 300 && row < 305) || (c >= 230 && c < 233 && row >= 350 && row < 354);
    const multi = await readFieldWindow(
      cap,
      {
        type: 'MultiPolygon',
        coordinates: [[outer, hole], [rect(r, 250, 300, 260, 305)], [rect(r, 230, 350, 233, 354)]],
      },
      ['B04'],
      { roots },
    );
    expect(multi.fieldPixels).toBe(1450 + 50 + 12);
    expectInside(multi, r, (c, row) => inHoled(c, row) || inSmall(c, row));
    expect(multi.validPixels).toBe(multi.fieldPixels);
  });

  it('a field across the UTM zone 31/32 boundary, read from a zone-32 raster and from a zone-31 raster', async () => {
    // A 1.4 km × 1.1 km field straddling 6°E at 51°N.
    const field = [
      [5.99, 50.995],
      [6.01, 50.995],
      [6.01, 51.005],
      [5.99, 51.005],
      [5.99, 50.995],
    ] as Array<[number, number]>;
    const { areaHa } = (() => {
      const poly = geodesic.Geodesic.WGS84.Polygon(false);
      for (const [lon, lat] of field.slice(0, -1)) poly.AddPoint(lat, lon);
      return { areaHa: Math.abs(poly.Compute(false, true).area!) / 10_000 };
    })();
    const counts: number[] = [];
    for (const epsg of [32632, 32631]) {
      const [X, Y] = proj4('EPSG:4326', proj4Definition(epsg), [6, 51]) as [number, number];
      const r = raster(
        {
          epsg,
          ox: Math.floor(X / 10) * 10 - 3000,
          oy: Math.floor(Y / 10) * 10 + 3000,
          res: 10,
          width: 600,
          height: 600,
        },
        pos(600),
      );
      const win = await readFieldWindow(capture({ B04: r.file }), { type: 'Polygon', coordinates: [field] }, ['B04'], {
        roots,
      });
      // Independent reference: the field's corners projected here, and a plain ray cast at each pixel centre.
      const poly = field.map((p) => proj4('EPSG:4326', proj4Definition(epsg), p) as [number, number]);
      const inPoly = (c: number, row: number) => {
        const x = r.ox + (c + 0.5) * 10;
        const y = r.oy - (row + 0.5) * 10;
        let inside = false;
        for (let k = 0, m = poly.length - 1; k < poly.length; m = k++) {
          const [xk, yk] = poly[k]!;
          const [xm, ym] = poly[m]!;
          if (yk > y !== ym > y && x < ((xm - xk) * (y - yk)) / (ym - yk) + xk) inside = !inside;
        }
        return inside;
      };
      let total = 0;
      for (let row = 0; row < r.height; row++) for (let c = 0; c < r.width; c++) if (inPoly(c, row)) total++;
      expect(win.epsg).toBe(epsg);
      expect(win.fieldPixels, `EPSG:${epsg}`).toBe(total);
      expectInside(win, r, inPoly);
      // The pixel data of the window is the raster's at those places.
      const [c0, r0] = originOf(win, r);
      expect(win.bands.B04!.data[0]).toBe(pos(600)(c0, r0));
      // 100 m² a pixel: the count is the geodesic area to within the pixel-edge effect (< 1 %).
      expect(
        Math.abs((total * 100) / 10_000 - areaHa) / areaHa,
        `EPSG:${epsg}: ${total} px vs ${areaHa.toFixed(2)} ha`,
      ).toBeLessThan(0.01);
      counts.push(total);
    }
    expect(Math.abs(counts[0]! - counts[1]!) / counts[0]!).toBeLessThan(0.01);
  });

  it('masks: the declared nodata value, DN 0 in any band, and SCL classes 0, 1, 3, 8, 9, 10, 11', async () => {
    const red = (c: number, r: number) =>
      (c * 7 + r * 3) % 50 === 0 ? 0 : (c * 11 + r) % 97 === 0 ? 65535 : 1000 + ((c + r) % 500);
    const nir = (c: number, r: number) => (c % 31 === 0 && r % 5 === 0 ? 0 : 3000);
    const scl = (c: number, r: number) => (c + 2 * r) % 12;
    const b04 = raster(grid, red, { nodata: 65535 });
    const b08 = raster(grid, nir);
    const mask = raster({ ...grid, res: 20, width: 300, height: 300 }, scl, { bits: 8, predictor: false });
    const win = await readFieldWindow(
      capture({ B04: b04.file, B08: b08.file }, mask.file),
      { type: 'Polygon', coordinates: [rect(b04, 100, 100, 140, 140)] },
      ['B04', 'B08'],
      { roots },
    );
    expect(win.bands.B04!.nodata).toBe(65535);
    const [c0, r0] = originOf(win, b04);
    let expected = 0;
    const seen = { nodata: 0, zero: 0, scl: 0 };
    for (let j = 0; j < win.height; j++) {
      for (let i = 0; i < win.width; i++) {
        const c = c0 + i;
        const r = r0 + j;
        const inside = c >= 100 && c < 140 && r >= 100 && r < 140;
        const byNodata = red(c, r) === 65535;
        const byZero = red(c, r) === 0 || nir(c, r) === 0;
        const byScl = SCL_MASKED.has(scl(Math.floor(c / 2), Math.floor(r / 2)));
        const ok = inside && !byNodata && !byZero && !byScl;
        if (inside) {
          seen.nodata += +byNodata;
          seen.zero += +byZero;
          seen.scl += +byScl;
        }
        expected += +ok;
        expect(win.valid[j * win.width + i], `pixel (${c}, ${r})`).toBe(+ok);
      }
    }
    // Each rule masks some field pixels on its own.
    expect(seen.nodata).toBeGreaterThan(0);
    expect(seen.zero).toBeGreaterThan(0);
    expect(seen.scl).toBeGreaterThan(0);
    expect(win.fieldPixels).toBe(1600);
    expect(win.validPixels).toBe(expected);
    expect(win.invalidShare).toBeCloseTo(1 - expected / 1600, 12);
  });

  it('refuses a path outside the allowed roots and names the band', async () => {
    const small = { ...grid, width: 64, height: 64 };
    const b04 = raster(small, pos(64));
    const b08 = raster(small, pos(64));
    await expect(
      readFieldWindow(
        capture({ B04: b04.file, B08: b08.file }),
        { type: 'Polygon', coordinates: [rect(b04, 10, 10, 30, 30)] },
        ['B04', 'B08'],
        { roots: [path.join(dir, 'reference')] },
      ),
    ).rejects.toMatchObject({
      name: 'ImageryError',
      band: 'B04',
      reason: expect.stringMatching(/outside the allowed/),
    });
  });
});

describe('coverage of a group of fields (one read of the union window)', () => {
  const grid = { epsg: 32631, ox: 600_000, oy: 5_700_000, res: 10, width: 300, height: 260 };
  const red = (c: number, r: number) =>
    (c * 7 + r * 3) % 50 === 0 ? 0 : (c * 11 + r) % 97 === 0 ? 65535 : 1000 + ((c + r) % 500);
  const scl = (c: number, r: number) => (c + 2 * r) % 12;

  it('counts exactly what readFieldWindow counts, field by field, edge and failing fields included', async () => {
    // Tiles of 64 px: the group's union crosses many; B08 at 20 m, SCL at 20 m with masked classes.
    const b04 = raster(grid, red, { nodata: 65535, tile: 64 });
    const b08 = raster(
      { ...grid, res: 20, width: 150, height: 130 },
      (c, r) => (c % 31 === 0 && r % 5 === 0 ? 0 : 3000),
      {
        tile: 64,
      },
    );
    const mask = raster({ ...grid, res: 20, width: 150, height: 130 }, scl, { bits: 8, predictor: false, tile: 64 });
    const cap = capture({ B04: b04.file, B08: b08.file }, mask.file);
    const poly = (ring: Array<[number, number]>) => ({ type: 'Polygon' as const, coordinates: [ring] });
    const inv = toWgs84(32631);
    const boundaries = [
      poly(rect(b04, 10, 10, 50, 40)), // inside, one tile
      poly(rect(b04, 60, 50, 140, 130)), // across tile edges
      poly(rect(b04, -20, 100, 30, 150)), // past the left edge
      poly(rect(b04, 270, 230, 330, 290)), // past the right and bottom edges
      poly(rect(b04, 400, 400, 420, 420)), // outside the raster: its own error
      poly(
        ringOf(b04, [
          [200.3, 20.7],
          [260.2, 35.1],
          [230.9, 90.4],
          [205.5, 70.2],
        ]),
      ), // a skewed quadrilateral
      {
        type: 'MultiPolygon' as const,
        coordinates: [
          [rect(b04, 150, 150, 200, 200), rect(b04, 165, 165, 185, 185).reverse()],
          [rect(b04, 210, 150, 230, 170)],
        ],
      },
      poly([
        inv([2_000_000, 5_700_000]),
        inv([2_000_100, 5_700_000]),
        inv([2_000_100, 5_699_900]),
        inv([2_000_000, 5_700_000]),
      ]),
    ];
    const one = await Promise.all(
      boundaries.map((b) =>
        readFieldWindow(cap, b, ['B04', 'B08'], { roots }).then(
          (w) => ({ fieldPixels: w.fieldPixels, validPixels: w.validPixels }),
          (err: Error) => ({ error: err.message }),
        ),
      ),
    );
    const group = await readFieldCoverages(cap, boundaries, ['B04', 'B08'], { roots });
    expect(group).toEqual(one);
    expect(one[4]).toEqual({ error: expect.stringMatching(/outside the raster/) });
    // Every other field has pixels, some of them masked
    for (const k of [0, 1, 2, 3, 5, 6]) {
      const c = one[k] as { fieldPixels: number; validPixels: number };
      expect(c.fieldPixels, `field ${k}`).toBeGreaterThan(0);
      expect(c.validPixels, `field ${k}`).toBeLessThan(c.fieldPixels);
    }
    // Pixels past the raster's edge are field pixels without a value (not usable)
    const [left, corner] = [one[2], one[3]] as Array<{ fieldPixels: number; validPixels: number }>;
    expect(left!.fieldPixels).toBe(50 * 50);
    expect(left!.validPixels).toBeLessThanOrEqual(30 * 50);
    expect(corner!.fieldPixels).toBe(60 * 60);
    expect(corner!.validPixels).toBeLessThanOrEqual(30 * 30);
  });

  it('counts what readFieldWindow counts for float32 and int16 bands, a 16-bit mask, and captures sharing a grid', async () => {
    // The field frames are kept per grid between calls: a second capture on the same grid, with
    // other values, must count its own pixels.
    const poly = (ring: Array<[number, number]>) => ({ type: 'Polygon' as const, coordinates: [ring] });
    const spec = { ...grid, width: 300, height: 260 };
    const ref = { ...spec, file: '' }; // the grid, for rect()
    const boundaries = [
      poly(rect(ref, 5, 5, 70, 60)),
      poly(rect(ref, 60, 40, 200, 120)),
      poly(rect(ref, 250, 200, 320, 280)), // past the raster's edges
      poly(
        ringOf(ref, [
          [120.4, 130.2],
          [190.7, 150.9],
          [170.1, 220.5],
        ]),
      ),
    ];
    for (const seed of [1, 2]) {
      const f32 = raster(
        spec,
        (c, r) =>
          (c * seed + r) % 41 === 0
            ? NaN
            : (c + r) % 37 === 0
              ? -9999
              : (c * 3 + r * seed) % 29 === 0
                ? 0
                : 0.25 + c / 1000,
        { bits: 'f32', predictor: false, nodata: -9999, tile: 64 },
      );
      const i16 = raster(
        { ...spec, res: 20, width: 150, height: 130 },
        (c, r) =>
          (c + r * seed) % 23 === 0 ? 0 : (c * r) % 19 === 0 ? -32768 : ((c * 131 + r * 7 * seed) % 6000) - 3000,
        { bits: 'i16', nodata: -32768, tile: 64 },
      );
      const mask = raster(
        { ...spec, res: 20, width: 140, height: 120 },
        (c, r) => ((c + r + seed) % 17 === 0 ? 300 + c : (c * 5 + r * seed) % 13),
        { tile: 64, predictor: false },
      );
      const cap = capture({ B04: f32.file, B08: i16.file }, mask.file);
      const one = await Promise.all(
        boundaries.map((b) =>
          readFieldWindow(cap, b, ['B04', 'B08'], { roots }).then(
            (w) => ({ fieldPixels: w.fieldPixels, validPixels: w.validPixels }),
            (err: Error) => ({ error: err.message }),
          ),
        ),
      );
      for (const c of one) expect(c).toHaveProperty('validPixels');
      // Some pixels of every field are masked, some are not
      for (const c of one as Array<{ fieldPixels: number; validPixels: number }>) {
        expect(c.validPixels).toBeGreaterThan(0);
        expect(c.validPixels).toBeLessThan(c.fieldPixels);
      }
      expect(await readFieldCoverages(cap, boundaries, ['B04', 'B08'], { roots }), `capture ${seed}`).toEqual(one);
      // Twice: the second call takes the frames from the cache
      expect(await readFieldCoverages(cap, boundaries, ['B04', 'B08'], { roots }), `capture ${seed} again`).toEqual(
        one,
      );
    }
  });

  it('skips the band blocks the mask has cleared, and counts what readFieldWindow counts', async () => {
    // SCL at 20 m: the top half cloud (class 9), the bottom half mixed; B04/B08 with DN 0 and
    // nodata. Read over HTTP, so that the bytes of B04 each path fetches are counted.
    // 1024² px of noisy values (tiles of 128 px that do not compress to nothing): the file is
    // far larger than the prefix the HTTP source keeps.
    const spec = { ...grid, width: 1024, height: 1024 };
    const noisy = (c: number, r: number) => ((c * 7919 + r * 104729) ^ (c * r)) % 4000;
    const b04 = raster(spec, (c, r) => ((c * 7 + r * 3) % 50 === 0 ? 65535 : 1 + noisy(c, r)), {
      nodata: 65535,
      tile: 128,
    });
    const b08 = raster(spec, (c, r) => ((c * 3 + r) % 41 === 0 ? 0 : 2500 + noisy(r, c)), { tile: 128 });
    const sclOf = (cloudy: boolean) =>
      raster({ ...spec, res: 20, width: 512, height: 512 }, (c, r) => (cloudy && r < 256 ? 9 : scl(c, r)), {
        bits: 8,
        predictor: false,
        tile: 128,
      });
    const cloudy = sclOf(true);
    const clear = sclOf(false);
    const poly = (ring: Array<[number, number]>) => ({ type: 'Polygon' as const, coordinates: [ring] });
    const boundaries = [
      poly(rect(b04, 0, 0, 1024, 1024)), // the whole raster
      poly(rect(b04, 20, 30, 400, 460)), // under the cloud
      poly(rect(b04, 100, 470, 180, 560)), // across the cloud's edge
      poly(rect(b04, 600, 600, 1000, 990)), // clear
    ];
    const previous = process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS;
    process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS = 'true';
    const server = await startRangeServer();
    try {
      const bytesOfB04 = async (mask: Raster, name: string) => {
        server.mount(name, dir);
        const href = (f: string) => server.href(name, path.basename(f));
        const remote = capture({ B04: href(b04.file), B08: href(b08.file) }, href(mask.file));
        const local = capture({ B04: b04.file, B08: b08.file }, mask.file);
        const one = await Promise.all(
          boundaries.map((b) =>
            readFieldWindow(local, b, ['B04', 'B08'], { roots }).then((w) => ({
              fieldPixels: w.fieldPixels,
              validPixels: w.validPixels,
            })),
          ),
        );
        server.resetCounters();
        expect(await readFieldCoverages(remote, boundaries, ['B04', 'B08'], { roots }), name).toEqual(one);
        return { bytes: server.files.get(b04.file)?.bytes ?? 0, one };
      };
      const withCloud = await bytesOfB04(cloudy, 'cloudy');
      const withoutCloud = await bytesOfB04(clear, 'clear');
      // Under the cloud no pixel is usable; the clear field keeps the same count either way
      expect(withCloud.one[1]!.validPixels).toBe(0);
      expect(withCloud.one[3]).toEqual(withoutCloud.one[3]);
      // The cloudy half's blocks of B04 were not fetched (one run of the file): about half the bytes
      expect(withCloud.bytes).toBeLessThan(0.6 * withoutCloud.bytes);
      expect(withoutCloud.bytes).toBeGreaterThan(0);
    } finally {
      if (previous === undefined) delete process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS;
      else process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS = previous;
      await server.close();
    }
  });

  it('a capture whose band cannot be opened rejects the group', async () => {
    const b04 = raster({ ...grid, width: 64, height: 64 }, pos(64));
    await expect(
      readFieldCoverages(
        capture({ B04: b04.file, B08: path.join(dir, 'missing.tif') }),
        [{ type: 'Polygon', coordinates: [rect(b04, 10, 10, 30, 30)] }],
        ['B04', 'B08'],
        { roots },
      ),
    ).rejects.toMatchObject({ name: 'ImageryError', band: 'B08' });
  });
});

describe('usable-pixel counts against a reference', () => {
  const W = 300;
  const H = 260;
  const spec = { epsg: 32631, ox: 600_000, oy: 5_700_000, res: 10, width: W, height: H };
  const ref = { ...spec, file: '' };

  /**
   * The straightforward reading: a field pixel (col c, row r of the 10 m grid) is usable when it
   * lies in the raster, neither band is 0 or its nodata, and the class of the 20 m pixel holding
   * its centre (col ⌊c/2⌋, row ⌊r/2⌋; 0 past the mask's edge) is not excluded.
   */
  function expected(
    b04: ArrayLike<number>,
    b08: ArrayLike<number>,
    nodata: [number | null, number | null],
    scl: { data: Uint8Array; width: number; height: number } | null,
    excluded: Set<number>,
    [c0, r0, c1, r1]: number[],
  ) {
    let validPixels = 0;
    for (let r = r0!; r < r1!; r++) {
      for (let c = c0!; c < c1!; c++) {
        if (c < 0 || r < 0 || c >= W || r >= H) continue;
        const v4 = b04[r * W + c]!;
        const v8 = b08[r * W + c]!;
        if (v4 === 0 || v4 === nodata[0] || v8 === 0 || v8 === nodata[1]) continue;
        if (scl) {
          const sc = Math.floor(c / 2);
          const sr = Math.floor(r / 2);
          const k = sc >= 0 && sr >= 0 && sc < scl.width && sr < scl.height ? scl.data[sr * scl.width + sc]! : 0;
          if (excluded.has(k)) continue;
        }
        validPixels++;
      }
    }
    return { fieldPixels: (c1! - c0!) * (r1! - r0!), validPixels };
  }

  // Fields on whole pixels: inside the raster, at odd columns and rows (half a 20 m pixel), one
  // pixel wide, across tile edges, and past each edge of the raster (and of the smaller mask).
  const fields = [
    [5, 7, 70, 61],
    [63, 63, 131, 130],
    [101, 3, 102, 90],
    [240, 200, 320, 280],
    [-20, 100, 15, 141],
    [150, -9, 211, 12],
    [271, 231, 300, 260],
  ];
  const boundaries = fields.map(([c0, r0, c1, r1]) => ({
    type: 'Polygon' as const,
    coordinates: [rect(ref, c0!, r0!, c1!, r1!)],
  }));

  it.each([
    ['uint16 bands with nodata, a mask of every class', 1, 16, 0.03, 1],
    ['int16 bands, a mask smaller than the bands', 2, 'i16', 0.03, 0.5],
    ['a cloudless capture (no pixel to clear but at the edges)', 3, 16, 0, 0],
  ] as const)('%s: every excluded class, edge windows', async (_name, seed, bits, holes, cloudy) => {
    const rnd = rng(seed); // the same pseudo-random rasters on every run
    const nd: [number | null, number | null] = bits === 'i16' ? [-32768, null] : [65535, 9999];
    const band = (nodata: number | null) => {
      const data = bits === 'i16' ? new Int16Array(W * H) : new Uint16Array(W * H);
      for (let k = 0; k < data.length; k++) {
        const u = rnd();
        data[k] =
          u < holes
            ? 0
            : u < 2 * holes && nodata !== null
              ? nodata
              : bits === 'i16'
                ? Math.floor(rnd() * 20000) - 10000
                : 1 + Math.floor(rnd() * 60000);
      }
      return data;
    };
    const b04 = band(nd[0]);
    const b08 = band(nd[1]);
    const [sw, sh] = seed === 2 ? [140, 120] : [150, 130];
    const scl = new Uint8Array(sw * sh);
    // clear land (4) or vegetation (5), else any of the twelve classes
    for (let k = 0; k < scl.length; k++) scl[k] = rnd() < cloudy ? Math.floor(rnd() * 12) : 4 + Math.floor(rnd() * 2);
    const opts = (nodata: number | null) => ({
      bits,
      tile: 64,
      ...(nodata !== null ? { nodata } : {}),
    });
    const f04 = raster(spec, (c, r) => b04[r * W + c]!, opts(nd[0]));
    const f08 = raster(spec, (c, r) => b08[r * W + c]!, opts(nd[1]));
    const fm = raster({ ...spec, res: 20, width: sw, height: sh }, (c, r) => scl[r * sw + c]!, { bits: 8, tile: 64 });
    const cap = capture({ B04: f04.file, B08: f08.file }, fm.file);
    const sets: Array<number[] | undefined> = [
      undefined,
      [],
      ...Array.from({ length: 12 }, (_, c) => [c]),
      [3, 8, 9, 10],
    ];
    for (const set of sets) {
      const excluded = new Set(set ?? SCL_MASKED);
      const want = fields.map((f) => expected(b04, b08, nd, { data: scl, width: sw, height: sh }, excluded, f));
      const got = await readFieldCoverages(cap, boundaries, ['B04', 'B08'], {
        roots,
        ...(set ? { mask: { scl_exclude: set } } : {}),
      });
      expect(got, `excluded ${set ? JSON.stringify(set) : 'default'}`).toEqual(want);
    }
    // With a dilation (the window copy path): what each field's own window counts
    const dil = { cloud_dilation_m: 30 };
    const own = await Promise.all(
      boundaries.map((b) =>
        readFieldWindow(cap, b, ['B04', 'B08'], { roots, mask: dil }).then((w) => ({
          fieldPixels: w.fieldPixels,
          validPixels: w.validPixels,
        })),
      ),
    );
    expect(await readFieldCoverages(cap, boundaries, ['B04', 'B08'], { roots, mask: dil })).toEqual(own);
    // Without the mask: the bands alone
    const bare = capture({ B04: f04.file, B08: f08.file });
    expect(await readFieldCoverages(bare, boundaries, ['B04', 'B08'], { roots })).toEqual(
      fields.map((f) => expected(b04, b08, nd, null, new Set(), f)),
    );
    // Some fields lose pixels to each cause, some keep some
    const all = fields.map((f) => expected(b04, b08, nd, { data: scl, width: sw, height: sh }, SCL_MASKED, f));
    for (const c of all) expect(c.validPixels).toBeGreaterThan(0);
  });
});
