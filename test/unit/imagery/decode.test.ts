/**
 * Block decoding: the WebAssembly LZW decoder and predictor, and the raw-window reader, checked
 * pixel for pixel against independent decoders: geotiff.js's own JavaScript decoders (registered
 * by default, before this file registers ours at the end) on files written by our writer, and the
 * source pixels of files GDAL compressed (when gdal_translate is installed; skipped, and said so,
 * when it is not).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { GeoTIFFImage } from 'geotiff';
import { afterAll, describe, expect, it } from 'vitest';
import { BlockDecodeError, COMPRESSION, decodeBlock } from '../../../src/imagery/block-decoder.js';
import { registerFastDecoders } from '../../../src/imagery/decoders.js';
import { LocalFileSource } from '../../../src/imagery/local-source.js';
import { firstImage, openRaster, type RasterImage } from '../../../src/imagery/raster.js';
import { memorySource } from '../../../src/imagery/raster-source.js';
import { readWindow, readWindowRaw, rawLayout } from '../../../src/imagery/raw-window.js';
import { lzwEncode, writeGeoTiff, type TiffCompression } from '../../../src/imagery/tiff-writer.js';
import { hasGdal } from '../../helpers/tools.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'decode-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

const gdal = hasGdal();

function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/** Imagery-like samples: a smooth surface, a little noise, a few saturated and zero pixels. */
function pixels(n: number, bits: 8 | 16, seed: number): Uint16Array | Uint8Array {
  const r = rng(seed);
  const out = bits === 16 ? new Uint16Array(n) : new Uint8Array(n);
  const max = bits === 16 ? 65535 : 255;
  for (let i = 0; i < n; i++) {
    const v = (max / 3) * (1 + Math.sin(i / 97) * Math.cos(i / 1301)) + (r() - 0.5) * (max / 40);
    const u = r();
    out[i] = u < 0.002 ? 0 : u > 0.998 ? max : Math.max(0, Math.min(max, Math.round(v)));
  }
  return out;
}

async function imageOf(buf: Buffer): Promise<RasterImage> {
  return firstImage(await openRaster(memorySource(buf)));
}

async function fileImage(file: string): Promise<RasterImage> {
  return firstImage(await openRaster(await LocalFileSource.open(file)));
}

/** geotiff.js's own decode of one sample of a window. */
async function independent(
  { image }: { image: GeoTIFFImage },
  window: [number, number, number, number],
  sample: number,
): Promise<ArrayLike<number>> {
  return (
    (await image.readRasters({ window, samples: [sample], interleave: false })) as unknown as ArrayLike<number>[]
  )[0]!;
}

function firstDifference(a: ArrayLike<number>, b: ArrayLike<number>): string | null {
  if (a.length !== b.length) return `lengths ${a.length} and ${b.length}`;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return `at ${i}: ${a[i]} vs ${b[i]}`;
  return null;
}

describe('WebAssembly LZW decoder', () => {
  it.each([
    ['empty-ish, one byte', Uint8Array.of(7)],
    ['one repeated byte (every new code is the one being defined: KwKwK)', new Uint8Array(100_000).fill(42)],
    [
      'random bytes (the table fills and is cleared many times)',
      Uint8Array.from({ length: 300_000 }, rng(3)).map((x) => Math.floor(x * 256)),
    ],
    ['low-entropy bytes', Uint8Array.from({ length: 300_000 }, (_, i) => (i % 7) * 3 + ((i >> 11) & 3))],
    ['16-bit imagery', new Uint8Array(pixels(120_000, 16, 5).buffer)],
  ])('round-trips %s', (_name, input) => {
    const compressed = lzwEncode(input);
    const out = decodeBlock(compressed, {
      compression: COMPRESSION.lzw,
      predictor: 1,
      width: input.length,
      rows: 1,
      samples: 1,
      bytesPerSample: 1,
    });
    expect(firstDifference(out, input)).toBeNull();
  });

  it('rejects corrupt and truncated data', () => {
    const input = new Uint8Array(pixels(50_000, 16, 9).buffer);
    const good = lzwEncode(input);
    const layout = {
      compression: COMPRESSION.lzw,
      predictor: 1,
      width: 50_000,
      rows: 1,
      samples: 1,
      bytesPerSample: 2 as const,
    };
    expect(() => decodeBlock(good.subarray(0, good.length >> 1), layout)).toThrow(BlockDecodeError);
    const bad = Buffer.from(good);
    bad[1] = 0xff; // a first code past the table: cannot occur
    bad[2] = 0xff;
    expect(() => decodeBlock(bad, layout)).toThrow(/corrupt/);
    expect(() => decodeBlock(Buffer.from([1, 2, 3, 4, 5]), { ...layout, compression: COMPRESSION.deflate })).toThrow(
      /cannot be inflated/,
    );
  });
});

describe("raw-window reader against geotiff.js's own decoders", () => {
  const cases: Array<[TiffCompression, boolean, 8 | 16, number, number, number]> = [];
  for (const c of ['lzw', 'deflate', 'none'] as const) {
    for (const predictor of [false, true]) {
      for (const bits of [8, 16] as const) {
        for (const samples of [1, 3]) cases.push([c, predictor, bits, samples, 80, 48]);
      }
    }
  }
  // Odd sizes: partial edge tiles on both axes; tiles wider than tall and not multiples of 16.
  it.each(cases)(
    '%s, predictor %s, %i-bit, %i sample(s), %ix%i tiles',
    async (compression, predictor, bits, samples, tile, tileHeight) => {
      const w = 203,
        h = 157;
      const data = pixels(w * h * samples, bits, w + bits + samples);
      const buf = writeGeoTiff({
        width: w,
        height: h,
        data,
        epsg: 32632,
        originX: 500000,
        originY: 5600000,
        resolution: 10,
        tileSize: tile,
        tileHeight,
        predictor,
        compression,
        samples,
      });
      const image = await imageOf(buf);
      expect(rawLayout(image), 'the fast path reads this file').not.toBeNull();
      const windows: Array<[number, number, number, number]> = [
        [0, 0, w, h],
        [79, 47, 81, 49],
        [150, 100, w, h],
        [3, 140, 200, 157],
        [0, 0, 1, 1],
      ];
      for (let s = 0; s < samples; s++) {
        for (const win of windows) {
          const ours = await readWindowRaw(image, win, s);
          const ref = await independent(image, win, s);
          expect(firstDifference(ours!, ref), `sample ${s} window ${win}`).toBeNull();
        }
      }
      // And against the pixels written, for the whole image.
      const full = await readWindowRaw(image, [0, 0, w, h], samples - 1);
      const expected = data.filter((_, i) => i % samples === samples - 1);
      expect(firstDifference(full!, expected)).toBeNull();
    },
  );

  it('leaves files it does not handle to geotiff.js (the floating-point predictor)', async () => {
    const buf = writeGeoTiff({
      width: 16,
      height: 16,
      data: new Uint16Array(256),
      epsg: 32632,
      originX: 0,
      originY: 0,
      resolution: 10,
      tileSize: 16,
    });
    const bytes = Buffer.from(buf);
    // Rewrite the Predictor entry to 3 (floating point).
    for (let o = 10; o < 10 + bytes.readUInt16LE(8) * 12; o += 12)
      if (bytes.readUInt16LE(o) === 317) bytes.writeUInt16LE(3, o + 8);
    expect(rawLayout(await imageOf(bytes))).toBeNull();
  });
});

describe.runIf(gdal)('files compressed by GDAL', () => {
  const w = 301,
    h = 223;
  it.each([
    [
      'LZW, predictor 2, 16-bit, 1 band, 128² tiles',
      16,
      1,
      [
        '-co',
        'COMPRESS=LZW',
        '-co',
        'PREDICTOR=2',
        '-co',
        'TILED=YES',
        '-co',
        'BLOCKXSIZE=128',
        '-co',
        'BLOCKYSIZE=128',
      ],
    ],
    [
      'LZW, predictor 2, 16-bit, 3 bands pixel-interleaved, 64×32 tiles',
      16,
      3,
      [
        '-co',
        'COMPRESS=LZW',
        '-co',
        'PREDICTOR=2',
        '-co',
        'TILED=YES',
        '-co',
        'BLOCKXSIZE=64',
        '-co',
        'BLOCKYSIZE=32',
        '-co',
        'INTERLEAVE=PIXEL',
      ],
    ],
    ['LZW, 8-bit, strips of 10 rows (short last strip)', 8, 1, ['-co', 'COMPRESS=LZW', '-co', 'BLOCKYSIZE=10']],
    [
      'LZW, predictor 2, 8-bit, 2 bands band-interleaved, 256² tiles',
      8,
      2,
      ['-co', 'COMPRESS=LZW', '-co', 'PREDICTOR=2', '-co', 'TILED=YES', '-co', 'INTERLEAVE=BAND'],
    ],
    [
      'DEFLATE, predictor 2, 16-bit, strips',
      16,
      1,
      ['-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=2', '-co', 'BLOCKYSIZE=16'],
    ],
    [
      'DEFLATE, 16-bit, 3 bands, 128² tiles',
      16,
      3,
      ['-co', 'COMPRESS=DEFLATE', '-co', 'TILED=YES', '-co', 'BLOCKXSIZE=128', '-co', 'BLOCKYSIZE=128'],
    ],
  ] as const)('%s', async (name, bits, samples, opts) => {
    const data = pixels(w * h * samples, bits, name.length);
    const src = path.join(dir, `src-${name.length}-${bits}-${samples}.tif`);
    writeFileSync(
      src,
      writeGeoTiff({
        width: w,
        height: h,
        data,
        epsg: 32632,
        originX: 500000,
        originY: 5600000,
        resolution: 10,
        tileSize: 64,
        compression: 'none',
        samples,
      }),
    );
    const out = path.join(dir, `gdal-${name.length}-${bits}-${samples}.tif`);
    execFileSync('gdal_translate', ['-q', ...opts, src, out]);
    const image = await fileImage(out);
    expect(rawLayout(image), 'the fast path reads this file').not.toBeNull();
    for (let s = 0; s < samples; s++) {
      const full = await readWindowRaw(image, [0, 0, w, h], s);
      expect(
        firstDifference(
          full!,
          data.filter((_, i) => i % samples === s),
        ),
        `band ${s + 1}`,
      ).toBeNull();
      const win = await readWindowRaw(image, [60, 9, 250, 222], s);
      expect(firstDifference(win!, await independent(image, [60, 9, 250, 222], s)), `band ${s + 1} window`).toBeNull();
    }
  });
});

it('reads the real Sentinel-2 files (when present) identically through both paths', async () => {
  const f = path.resolve(__dirname, '../../../../shared/data/real/s2_l2a_29RKH_20200219_riotilerpds/B04.tif');
  let bytes: Buffer;
  try {
    bytes = readFileSync(f);
  } catch {
    console.warn('[test] real data not found: skipped');
    return;
  }
  const image = await imageOf(bytes);
  expect(rawLayout(image)).not.toBeNull();
  const win: [number, number, number, number] = [0, 0, image.image.getWidth(), image.image.getHeight()];
  expect(firstDifference((await readWindowRaw(image, win, 0))!, await independent(image, win, 0))).toBeNull();
});

describe('decoders registered with geotiff.js', () => {
  it("decode LZW and DEFLATE files with the predictor exactly as geotiff.js's own decoders did", async () => {
    const files: Array<[Buffer, ArrayLike<number>]> = [];
    for (const compression of ['lzw', 'deflate'] as const) {
      for (const samples of [1, 2]) {
        const data = pixels(111 * 97 * samples, 16, samples * 31);
        const buf = writeGeoTiff({
          width: 111,
          height: 97,
          data,
          epsg: 32632,
          originX: 0,
          originY: 0,
          resolution: 10,
          tileSize: 32,
          predictor: true,
          compression,
          samples,
        });
        files.push([buf, await independent(await imageOf(buf), [5, 7, 111, 90], samples - 1)]);
      }
    }
    registerFastDecoders();
    for (const [buf, ref] of files) {
      const image = await imageOf(buf);
      const got = await independent(image, [5, 7, 111, 90], image.image.getSamplesPerPixel() - 1);
      expect(firstDifference(got, ref)).toBeNull();
    }
  });

  it.runIf(gdal)(
    'leave the floating-point predictor to geotiff.js (float32, LZW, predictor 3 by GDAL) and still read it right',
    async () => {
      const w = 97,
        h = 61;
      const data = pixels(w * h, 16, 77);
      const src = path.join(dir, 'float-src.tif');
      writeFileSync(
        src,
        writeGeoTiff({
          width: w,
          height: h,
          data,
          epsg: 32632,
          originX: 500000,
          originY: 5600000,
          resolution: 10,
          tileSize: 32,
          compression: 'none',
        }),
      );
      const out = path.join(dir, 'float-p3.tif');
      execFileSync('gdal_translate', [
        '-q',
        '-ot',
        'Float32',
        '-co',
        'COMPRESS=LZW',
        '-co',
        'PREDICTOR=3',
        '-co',
        'TILED=YES',
        '-co',
        'BLOCKXSIZE=32',
        '-co',
        'BLOCKYSIZE=32',
        src,
        out,
      ]);
      const image = await fileImage(out);
      expect(rawLayout(image)).toBeNull();
      const got = await readWindow(image, [0, 0, w, h], 0);
      expect(firstDifference(got, data)).toBeNull();
    },
  );
});
