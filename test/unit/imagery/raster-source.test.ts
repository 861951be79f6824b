/**
 * The RasterSource contract, run over every implementation (a local file, HTTP range requests
 * against a local node:http server with Range support, memory):
 * - bytes: any ranges, in any order, overlapping, past the end, answer the file's bytes; merged
 *   reads stay correct; a closed source refuses to read;
 * - pixels: every GeoTIFF under ../shared/data/real (when present) and synthetic files of each
 *   codec × predictor × sample type, tiled and in strips, read window by window through the source
 *   (the raw-tile path where it applies, else geotiff.js over the source) give exactly what
 *   geotiff.js's own readRasters gives on the file through its own file source, with its own
 *   decoders. Files our writer cannot make (PackBits, ZSTD, JPEG, the floating-point predictor,
 *   big-endian, BigTIFF) are made by gdal_translate, and skipped with a message without it.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { fromFile } from 'geotiff';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TimedFetchClient } from '../../../src/imagery/http-client.js';
import { HttpRangeSource } from '../../../src/imagery/http-source.js';
import { LocalFileSource } from '../../../src/imagery/local-source.js';
import { firstImage, openRaster } from '../../../src/imagery/raster.js';
import { coalesce, memorySource, type RasterSource } from '../../../src/imagery/raster-source.js';
import { rawLayout, readWindow } from '../../../src/imagery/raw-window.js';
import { writeGeoTiff, type TiffCompression } from '../../../src/imagery/tiff-writer.js';
import { realDataDir } from '../../helpers/real-data.js';
import { hasGdal } from '../../helpers/tools.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'raster-source-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

// ---- the files ----------------------------------------------------------------------------

interface Case {
  name: string;
  file: string;
  /** Whether the raw-tile path must read it (null: not asserted, real files). */
  fast: boolean | null;
}

function tiffsUnder(root: string): string[] {
  let names: string[];
  try {
    names = readdirSync(root);
  } catch {
    return [];
  }
  return names.flatMap((n) => {
    const p = path.join(root, n);
    return statSync(p).isDirectory() ? tiffsUnder(p) : /\.tiff?$/i.test(n) ? [p] : [];
  });
}

const real: Case[] = tiffsUnder(realDataDir)
  .sort()
  .map((file) => ({ name: `real ${path.relative(realDataDir, file)}`, file, fast: null }));
if (!real.length) console.warn(`[test] no GeoTIFF under ${realDataDir}: the real-data contract checks are SKIPPED`);

const W = 203;
const H = 157;
type Dtype = 'uint8' | 'uint16' | 'int16' | 'float32';
const DTYPES: Dtype[] = ['uint8', 'uint16', 'int16', 'float32'];

/** Imagery-like samples of each type: a smooth surface and noise; negative values, NaN and infinities where the type has them. */
function samples(dtype: Dtype, n: number, seed: number): Uint8Array | Uint16Array | Int16Array | Float32Array {
  let s = seed;
  const rand = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
  const wave = (i: number) => Math.sin(i / 97) * Math.cos(i / 1301);
  if (dtype === 'uint8')
    return Uint8Array.from({ length: n }, (_, i) => Math.round(127 + 100 * wave(i) + (rand() - 0.5) * 20));
  if (dtype === 'uint16')
    return Uint16Array.from({ length: n }, (_, i) => Math.round(30_000 + 25_000 * wave(i) + (rand() - 0.5) * 800));
  if (dtype === 'int16')
    return Int16Array.from({ length: n }, (_, i) => Math.round(12_000 * wave(i) + (rand() - 0.5) * 400));
  const f = Float32Array.from({ length: n }, (_, i) => 0.3 * wave(i) + (rand() - 0.5) * 0.01);
  f[5] = NaN;
  f[77] = -Infinity;
  f[n - 1] = -0;
  return f;
}

const synthetic: Case[] = [];
const base = { width: W, height: H, epsg: 32632, originX: 500_000, originY: 5_600_000, resolution: 10 };
for (const compression of ['none', 'lzw', 'deflate'] as TiffCompression[]) {
  for (const dtype of DTYPES) {
    for (const predictor of dtype === 'float32' ? [false] : [false, true]) {
      for (const layout of ['tiles', 'strips'] as const) {
        for (const spp of dtype === 'uint16' && compression === 'deflate' ? [1, 3] : [1]) {
          const name = `writer ${compression} predictor ${predictor ? 2 : 1} ${dtype} ${layout}${spp > 1 ? ` ${spp} samples` : ''}`;
          const file = path.join(dir, `${name.replace(/\W+/g, '_')}.tif`);
          const data = samples(dtype, W * H * spp, synthetic.length + 1);
          writeFileSync(
            file,
            writeGeoTiff({
              ...base,
              data,
              compression,
              predictor,
              samples: spp,
              ...(layout === 'tiles' ? { tileSize: 64, tileHeight: 32 } : { rowsPerStrip: 10 }),
            }),
          );
          synthetic.push({ name, file, fast: true });
        }
      }
    }
  }
}

const gdal = hasGdal();
if (gdal) {
  const plain = Object.fromEntries(
    DTYPES.map((dtype) => {
      const file = path.join(dir, `plain-${dtype}.tif`);
      writeFileSync(
        file,
        writeGeoTiff({ ...base, data: samples(dtype, W * H, 99), compression: 'none', tileSize: 64 }),
      );
      return [dtype, file];
    }),
  ) as Record<Dtype, string>;
  const variants: Array<[string, Dtype[], string[], boolean]> = [
    ['PACKBITS', DTYPES, ['-co', 'COMPRESS=PACKBITS'], false],
    ['ZSTD', DTYPES, ['-co', 'COMPRESS=ZSTD'], false],
    ['ZSTD predictor 2', ['uint8', 'uint16', 'int16'], ['-co', 'COMPRESS=ZSTD', '-co', 'PREDICTOR=2'], false],
    ['ZSTD predictor 3', ['float32'], ['-co', 'COMPRESS=ZSTD', '-co', 'PREDICTOR=3'], false],
    ['LZW predictor 3', ['float32'], ['-co', 'COMPRESS=LZW', '-co', 'PREDICTOR=3'], false],
    ['DEFLATE predictor 3', ['float32'], ['-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=3'], false],
    ['JPEG', ['uint8'], ['-co', 'COMPRESS=JPEG'], false],
    ['DEFLATE predictor 2 (GDAL)', ['uint16', 'int16'], ['-co', 'COMPRESS=DEFLATE', '-co', 'PREDICTOR=2'], true],
    ['LZW predictor 2 BigTIFF', ['uint16'], ['-co', 'COMPRESS=LZW', '-co', 'PREDICTOR=2', '-co', 'BIGTIFF=YES'], true],
    ['DEFLATE big-endian', ['uint16', 'float32'], ['-co', 'COMPRESS=DEFLATE', '-co', 'ENDIANNESS=BIG'], false],
  ];
  for (const [codec, dtypes, options, fast] of variants) {
    for (const dtype of dtypes) {
      for (const layout of ['tiles', 'strips'] as const) {
        const name = `gdal ${codec} ${dtype} ${layout}`;
        const file = path.join(dir, `${name.replace(/\W+/g, '_')}.tif`);
        const blocks =
          layout === 'tiles'
            ? ['-co', 'TILED=YES', '-co', 'BLOCKXSIZE=64', '-co', 'BLOCKYSIZE=32']
            : ['-co', 'BLOCKYSIZE=16'];
        try {
          execFileSync('gdal_translate', ['-q', ...options, ...blocks, plain[dtype], file], { stdio: 'pipe' });
        } catch (err) {
          console.warn(
            `[test] this GDAL cannot write ${name}: SKIPPED (${String((err as { stderr?: Buffer }).stderr ?? err).trim()})`,
          );
          continue;
        }
        synthetic.push({ name, file, fast });
      }
    }
  }
}

// ---- the sources --------------------------------------------------------------------------

const served = new Map<string, Buffer>();
let server: http.Server;
let baseUrl = '';
const requests: string[] = [];
beforeAll(async () => {
  server = http.createServer((req, res) => {
    const body = served.get(decodeURIComponent(req.url!.slice(1)));
    if (!body) return void res.writeHead(404).end();
    const m = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range ?? '');
    if (!m) return void res.writeHead(200, { 'content-length': body.length }).end(body);
    requests.push(req.headers.range!);
    const start = Number(m[1]);
    if (start >= body.length) return void res.writeHead(416, { 'content-range': `bytes */${body.length}` }).end();
    const end = Math.min(Number(m[2]), body.length - 1);
    res.writeHead(206, { 'content-range': `bytes ${start}-${end}/${body.length}`, 'content-length': end - start + 1 });
    res.end(body.subarray(start, end + 1));
  });
  // Longer than any test: a kept-alive socket the server closes while a request goes out resets it.
  server.keepAliveTimeout = 120_000;
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  baseUrl = `http://127.0.0.1:${(server.address() as AddressInfo).port}/`;
});
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())));

function urlOf(file: string): string {
  if (!served.has(file)) served.set(file, readFileSync(file));
  return baseUrl + encodeURIComponent(file);
}

const implementations: Array<[string, (file: string) => Promise<RasterSource>]> = [
  ['local file', (file) => LocalFileSource.open(file)],
  [
    'HTTP range requests',
    async (file) => new HttpRangeSource(urlOf(file), new TimedFetchClient(urlOf(file), 10_000, true)),
  ],
  ['memory', async (file) => memorySource(readFileSync(file), file)],
];

// ---- the contract -------------------------------------------------------------------------

/** geotiff.js on the file through its own file source and decoders: the reference. */
const reference = new Map<string, Promise<Map<string, ArrayLike<number>>>>();
function windowsOf(w: number, h: number): Array<[number, number, number, number]> {
  const x = Math.floor(w / 3);
  const y = Math.floor(h / 4);
  return [
    [0, 0, w, h],
    [x, y, Math.min(w, x + 157), Math.min(h, y + 101)],
    [Math.max(0, w - 37), Math.max(0, h - 23), w, h],
    [w - 1, 0, w, 1],
  ];
}
function referenceOf(file: string): Promise<Map<string, ArrayLike<number>>> {
  let r = reference.get(file);
  if (!r) {
    r = (async () => {
      const tiff = await fromFile(file);
      try {
        const image = await tiff.getImage(0);
        const out = new Map<string, ArrayLike<number>>();
        for (let s = 0; s < image.getSamplesPerPixel(); s++) {
          for (const win of windowsOf(image.getWidth(), image.getHeight())) {
            out.set(
              `${s} ${win}`,
              (
                (await image.readRasters({
                  window: win,
                  samples: [s],
                  interleave: false,
                })) as unknown as ArrayLike<number>[]
              )[0]!,
            );
          }
        }
        return out;
      } finally {
        await tiff.close();
      }
    })();
    reference.set(file, r);
  }
  return r;
}

/** Null when the two arrays hold the same values of the same type, bit for bit (NaN payloads and -0 included); else where they differ. */
function difference(ours: ArrayLike<number>, ref: ArrayLike<number>): string | null {
  const a = ours as unknown as ArrayBufferView;
  const b = ref as unknown as ArrayBufferView;
  if (a.constructor !== b.constructor) return `types ${a.constructor.name} and ${b.constructor.name}`;
  if (ours.length !== ref.length) return `lengths ${ours.length} and ${ref.length}`;
  const x = Buffer.from(a.buffer, a.byteOffset, a.byteLength);
  const y = Buffer.from(b.buffer, b.byteOffset, b.byteLength);
  if (x.equals(y)) return null;
  for (let i = 0; i < ours.length; i++) if (!Object.is(ours[i], ref[i])) return `at ${i}: ${ours[i]} vs ${ref[i]}`;
  return 'different bytes';
}

describe.each(implementations)('RasterSource: %s', (_kind, open) => {
  const file = path.join(dir, 'bytes.bin');
  const bytes = Buffer.from(Array.from({ length: 200_000 }, (_, i) => (i * 7919) % 251));
  writeFileSync(file, bytes);

  it("answers any ranges, in any order, overlapping, merged or not, with the file's bytes", async () => {
    const source = await open(file);
    try {
      const ranges = [
        { offset: 150_000, length: 1000 },
        { offset: 0, length: 8 },
        { offset: 151_000, length: 500 }, // adjacent to the first
        { offset: 100, length: 70_000 }, // across the end of an HTTP prefix
        { offset: 150_500, length: 1000 }, // overlaps the first two
        { offset: 120_000, length: 0 },
        { offset: 199_990, length: 100 }, // runs past the end
        { offset: 250_000, length: 10 }, // starts past the end
      ];
      const got = await source.read(ranges);
      expect(got).toHaveLength(ranges.length);
      ranges.forEach(({ offset, length }, i) => {
        expect(Buffer.from(got[i]!).equals(bytes.subarray(offset, offset + length)), `range ${i}`).toBe(true);
      });
      expect(source.size === undefined || source.size === bytes.length).toBe(true);
      expect(source.id).toContain(path.basename(file));
    } finally {
      await source.close();
    }
  });

  it('refuses to read once closed, and when the signal is aborted', async () => {
    const source = await open(file);
    await expect(source.read([{ offset: 0, length: 4 }], AbortSignal.abort())).rejects.toThrow();
    await source.close();
    await expect(source.read([{ offset: 0, length: 4 }])).rejects.toThrow(/closed/);
  });

  it.each([...real, ...synthetic].map((c) => [c.name, c] as const))(
    '%s: windows read as geotiff.js reads them',
    async (_name, c) => {
      const raster = await firstImage(await openRaster(await open(c.file)));
      try {
        if (c.fast !== null) expect(rawLayout(raster) !== null, 'read by the raw-tile path').toBe(c.fast);
        const ref = await referenceOf(c.file);
        const { image } = raster;
        for (let s = 0; s < image.getSamplesPerPixel(); s++) {
          for (const win of windowsOf(image.getWidth(), image.getHeight())) {
            expect(
              difference(await readWindow(raster, win, s), ref.get(`${s} ${win}`)!),
              `sample ${s} window ${win}`,
            ).toBeNull();
          }
        }
      } finally {
        await raster.source.close();
      }
    },
  );
});

describe('HTTP range source', () => {
  it('fetches the header once and neighbouring blocks by one request', async () => {
    const big = path.join(dir, 'big.tif');
    // Uncompressed 1024² uint16 in 64² tiles: 2 MiB, most of it past the kept prefix.
    writeFileSync(
      big,
      writeGeoTiff({
        ...base,
        width: 1024,
        height: 1024,
        data: samples('uint16', 1024 * 1024, 3),
        compression: 'none',
        tileSize: 64,
      }),
    );
    requests.length = 0;
    const raster = await firstImage(
      await openRaster(new HttpRangeSource(urlOf(big), new TimedFetchClient(urlOf(big), 10_000, true))),
    );
    expect(requests, 'header, IFD and tables from one prefix request').toEqual(['bytes=0-65535']);
    requests.length = 0;
    // One row of 4 tiles, stored one after the other: one request.
    await readWindow(raster, [128, 512, 384, 576], 0);
    expect(requests).toHaveLength(1);
    await raster.source.close();
  });

  it('says what went wrong with a server that does not answer ranges', async () => {
    const url = `${baseUrl}missing.tif`;
    await expect(
      new HttpRangeSource(url, new TimedFetchClient(url, 10_000, true)).read([{ offset: 0, length: 8 }]),
    ).rejects.toThrow(/HTTP 404/);
  });
});

describe('coalesce', () => {
  it('groups ranges by offset within the gap and the run size, skipping empty ones', () => {
    const runs = coalesce(
      [
        { offset: 100, length: 10 },
        { offset: 0, length: 10 },
        { offset: 15, length: 5 },
        { offset: 50, length: 0 },
        { offset: 1000, length: 10 },
      ],
      10,
      100,
    );
    expect(runs).toEqual([
      { offset: 0, end: 20, members: [1, 2] },
      { offset: 100, end: 110, members: [0] },
      { offset: 1000, end: 1010, members: [4] },
    ]);
  });
});
