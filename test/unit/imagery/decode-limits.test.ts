/**
 * The decompression-bomb bounds, piece by piece: the block decoder (DEFLATE, LZW) never decodes
 * past a block's declared size and refuses data that goes on; the structure check refuses looping
 * IFD chains, too many strips or tiles and oversized dimensions before geotiff.js parses the file;
 * the decoders registered with geotiff.js (the readRasters fallback) are bounded for every codec,
 * and still decode real data (PackBits and ZSTD exactly, and files GDAL compressed when
 * gdal_translate is installed); IMAGERY_MAX_DECODED_BYTES caps one budget.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { deflateSync } from 'node:zlib';
import { fromArrayBuffer, fromFile, type GeoTIFFImage } from 'geotiff';
import { afterAll, afterEach, describe, expect, it } from 'vitest';
import { COMPRESSION, decodeBlock } from '../../../src/imagery/block-decoder.js';
import { ImageryLimitError, withDecodeBudget } from '../../../src/imagery/decode-limits.js';
import { registerFastDecoders } from '../../../src/imagery/decoders.js';
import { hostileTiffs, lzwBomb, sentinelSizedBand, tiled, zlibBomb } from '../../../src/imagery/hostile-tiffs.js';
import { LocalFileSource } from '../../../src/imagery/local-source.js';
import { firstImage, openRaster, type RasterImage } from '../../../src/imagery/raster.js';
import { memorySource } from '../../../src/imagery/raster-source.js';
import { readWindowRaw } from '../../../src/imagery/raw-window.js';
import { checkTiffStructure } from '../../../src/imagery/tiff-structure.js';
import { lzwEncode, writeGeoTiff } from '../../../src/imagery/tiff-writer.js';

registerFastDecoders();

const dir = mkdtempSync(path.join(os.tmpdir(), 'limits-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));
const saved = { ...process.env };
afterEach(() => {
  for (const k of ['IMAGERY_MAX_BLOCK_BYTES', 'IMAGERY_MAX_DECODED_BYTES']) {
    if (saved[k] === undefined) delete process.env[k];
    else process.env[k] = saved[k];
  }
});

const bufferOf = (b: Buffer) => b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer;
const imageOf = async (b: Buffer): Promise<GeoTIFFImage> => (await fromArrayBuffer(bufferOf(b))).getImage();
const rasterOf = async (b: Uint8Array): Promise<RasterImage> => firstImage(await openRaster(memorySource(b)));

/** The refusal's code, or 'accepted'. */
async function refusal(fn: () => unknown): Promise<string> {
  try {
    await fn();
    return 'accepted';
  } catch (err) {
    return err instanceof ImageryLimitError ? err.code : `other: ${(err as Error).message}`;
  }
}

const byte = (n: number) => ({
  compression: COMPRESSION.deflate,
  predictor: 1,
  width: n,
  rows: 1,
  samples: 1,
  bytesPerSample: 1 as const,
});

describe('block decoder: nothing decodes past the declared size', () => {
  it.each([
    ['DEFLATE', COMPRESSION.deflate, (b: Uint8Array) => deflateSync(b)],
    ['LZW', COMPRESSION.lzw, (b: Uint8Array) => lzwEncode(b)],
  ])(
    '%s: exactly the declared size decodes, one byte more is a bomb, and a bomb stops at the bound',
    async (_name, compression, encode) => {
      const data = Uint8Array.from({ length: 4096 }, (_, i) => (i * 31) % 251);
      const layout = { ...byte(4096), compression };
      expect(Buffer.from(decodeBlock(encode(data), layout)).equals(Buffer.from(data))).toBe(true);
      expect(await refusal(() => decodeBlock(encode(new Uint8Array(4097)), layout))).toBe('decompression_bomb');
      const bomb = compression === COMPRESSION.lzw ? lzwBomb(512 * 1_048_576) : zlibBomb(512 * 1_048_576);
      const rss = process.memoryUsage().rss;
      expect(await refusal(() => decodeBlock(bomb, { ...layout, width: 131_072 }))).toBe('decompression_bomb');
      // Not a speed or memory assertion, a sanity check that the bomb was not decoded (512 MiB).
      expect(process.memoryUsage().rss - rss).toBeLessThan(256 * 1_048_576);
    },
  );

  it.each([
    ['DEFLATE', COMPRESSION.deflate, (b: Uint8Array) => deflateSync(b)],
    ['LZW', COMPRESSION.lzw, (b: Uint8Array) => lzwEncode(b)],
  ])(
    '%s: the last strip may hold more rows than are left, up to what RowsPerStrip declares',
    async (_name, compression, encode) => {
      const rows = 10;
      const full = Uint8Array.from({ length: 100 * rows }, (_, i) => i % 256);
      const layout = { ...byte(100), compression, rows: 3 };
      expect(Array.from(decodeBlock(encode(full), layout, { declaredRows: rows }))).toEqual(
        Array.from(full.subarray(0, 300)),
      );
      expect(await refusal(() => decodeBlock(encode(full), layout, { declaredRows: rows - 1 }))).toBe(
        'decompression_bomb',
      );
    },
  );

  it('refuses a block declared larger than IMAGERY_MAX_BLOCK_BYTES before decoding it', async () => {
    process.env.IMAGERY_MAX_BLOCK_BYTES = '65536';
    expect(await refusal(() => decodeBlock(deflateSync(new Uint8Array(65_537)), byte(65_537)))).toBe('block_too_large');
    expect(decodeBlock(deflateSync(new Uint8Array(65_536)), byte(65_536))).toHaveLength(65_536);
  });
});

describe('structure check, before geotiff.js parses anything', () => {
  const files = hostileTiffs(64 * 1_048_576);
  const structural = files.filter((h) => !['decompression_bomb', 'unsupported_compression'].includes(h.code));

  it.each(structural.map((h) => [h.name, h.code, h.file] as const))('%s: %s', async (_name, code, file) => {
    expect(await refusal(async () => checkTiffStructure(memorySource(file)))).toBe(code);
  });

  it('passes the bombs whose structure is sound (their blocks are refused when decoded), a Sentinel-2-sized band and a normal file', async () => {
    const sound = [
      ...files.filter((h) => !structural.includes(h)).map((h) => h.file),
      sentinelSizedBand(),
      writeGeoTiff({
        width: 300,
        height: 200,
        data: new Uint16Array(60_000).fill(3),
        epsg: 32631,
        originX: 0,
        originY: 0,
        resolution: 10,
      }),
    ];
    for (const file of sound)
      expect(await refusal(async () => checkTiffStructure(memorySource(file)))).toBe('accepted');
  });

  it('finds a local file whose blocks end past its end truncated', async () => {
    const ok = writeGeoTiff({
      width: 300,
      height: 200,
      data: new Uint16Array(60_000).fill(3),
      epsg: 32631,
      originX: 0,
      originY: 0,
      resolution: 10,
      compression: 'none',
    });
    const file = path.join(dir, 'cut.tif');
    writeFileSync(file, ok.subarray(0, ok.length - 100));
    await expect(checkTiffStructure(await LocalFileSource.open(file))).rejects.toThrow(/truncated/);
  });
});

describe('geotiff.js fallback (readRasters with the registered decoders)', () => {
  it.each(
    hostileTiffs(256 * 1_048_576)
      .filter((h) => ['decompression_bomb', 'unsupported_compression'].includes(h.code))
      .map((h) => [h.name, h.code, h.file] as const),
  )('%s: %s', async (_name, code, file) => {
    const image = await imageOf(file);
    expect(await refusal(() => image.readRasters({ window: [0, 0, 16, 16] }))).toBe(code);
  });

  const side = 64;
  const pixels = Uint16Array.from({ length: side * side }, (_, i) => (i % 97 < 40 ? 1234 : (i * 2654435761) >>> 20));
  const raw = Buffer.from(pixels.buffer);

  /** PackBits as TIFF 6.0 writes it: runs of 3+ equal bytes as repeats, the rest literally. */
  function packBits(b: Uint8Array): Buffer {
    const out: number[] = [];
    for (let i = 0; i < b.length; ) {
      let run = 1;
      while (i + run < b.length && run < 128 && b[i + run] === b[i]) run++;
      if (run >= 3) {
        out.push(257 - run, b[i]!);
        i += run;
        continue;
      }
      const start = i;
      while (i < b.length && i - start < 128 && !(b[i] === b[i + 1] && b[i] === b[i + 2])) i++;
      out.push(i - start - 1, ...b.subarray(start, i));
    }
    return Buffer.from(out);
  }

  /** A Zstandard frame of raw (stored) blocks. */
  function zstdStored(b: Uint8Array): Buffer {
    const header = Buffer.from([0x28, 0xb5, 0x2f, 0xfd, 0x00, 7 << 3]);
    const blocks: Buffer[] = [];
    for (let o = 0; o < b.length; o += 131_072) {
      const part = b.subarray(o, o + 131_072);
      const h = Buffer.alloc(3);
      h.writeUIntLE((part.length << 3) | (o + 131_072 >= b.length ? 1 : 0), 0, 3);
      blocks.push(h, Buffer.from(part));
    }
    return Buffer.concat([header, ...blocks]);
  }

  it.each([
    ['PackBits', 32773, packBits(raw)],
    ['ZSTD', 50000, zstdStored(raw)],
  ])('%s still decodes real data exactly', async (_name, compression, blob) => {
    const image = await imageOf(tiled({ width: side, height: side, tile: side, bits: 16, compression, blob }));
    const [band] = (await image.readRasters()) as unknown as Uint16Array[];
    expect(Buffer.from(band!.buffer, band!.byteOffset, band!.byteLength).equals(raw)).toBe(true);
  });

  let gdal = false;
  try {
    execFileSync('gdal_translate', ['--version'], { stdio: 'ignore' });
    gdal = true;
  } catch {
    console.warn(
      '[test] gdal_translate not found: the fallback checks on GDAL-compressed files are SKIPPED (apt-get install gdal-bin)',
    );
  }

  it.runIf(gdal).each([
    [
      'JPEG, 8-bit, 64² tiles',
      3,
      ['-ot', 'Byte', '-co', 'COMPRESS=JPEG', '-co', 'TILED=YES', '-co', 'BLOCKXSIZE=64', '-co', 'BLOCKYSIZE=64'],
    ],
    ['JPEG, 8-bit, strips of 16 rows', 3, ['-ot', 'Byte', '-co', 'COMPRESS=JPEG', '-co', 'BLOCKYSIZE=16']],
    ['ZSTD, predictor 2, strips', 0, ['-co', 'COMPRESS=ZSTD', '-co', 'PREDICTOR=2', '-co', 'BLOCKYSIZE=16']],
    [
      'PackBits, 64² tiles',
      0,
      ['-co', 'COMPRESS=PACKBITS', '-co', 'TILED=YES', '-co', 'BLOCKXSIZE=64', '-co', 'BLOCKYSIZE=64'],
    ],
  ] as Array<[string, number, string[]]>)(
    'GDAL %s decodes as GDAL does (within %i)',
    async (name, tolerance, options) => {
      const w = 150,
        h = 90;
      const data = Uint16Array.from(
        { length: w * h },
        (_, i) => 128 + Math.round(60 * Math.sin(i / 40) + 50 * Math.cos(i / 333)),
      );
      const src = path.join(dir, 'src.tif');
      writeFileSync(
        src,
        writeGeoTiff({
          width: w,
          height: h,
          data,
          epsg: 32631,
          originX: 0,
          originY: 0,
          resolution: 10,
          compression: 'none',
        }),
      );
      const out = path.join(dir, `${name.replace(/\W+/g, '_')}.tif`);
      const back = `${out}.plain.tif`;
      try {
        execFileSync('gdal_translate', ['-q', ...options, src, out], { stdio: 'pipe' });
      } catch (err) {
        console.warn(
          `[test] this GDAL cannot write ${name}: SKIPPED (${String((err as { stderr?: Buffer }).stderr ?? err).trim()})`,
        );
        return;
      }
      execFileSync('gdal_translate', ['-q', '-co', 'COMPRESS=NONE', out, back]);
      const ours = (
        (await (await (await fromFile(out)).getImage()).readRasters()) as unknown as ArrayLike<number>[]
      )[0]!;
      const gdalPixels = (await readWindowRaw(await rasterOf(readFileSync(back)), [0, 0, w, h], 0))!;
      let worst = 0;
      for (let i = 0; i < w * h; i++) worst = Math.max(worst, Math.abs(ours[i]! - gdalPixels[i]!));
      expect(worst).toBeLessThanOrEqual(tolerance);
    },
  );
});

describe('IMAGERY_MAX_DECODED_BYTES', () => {
  // 1024² uint16 in 256² tiles: 16 tiles of 128 KiB.
  const file = writeGeoTiff({
    width: 1024,
    height: 1024,
    data: Uint16Array.from({ length: 1024 * 1024 }, (_, i) => i % 5000),
    epsg: 32631,
    originX: 0,
    originY: 0,
    resolution: 10,
  });

  it('one budget per withDecodeBudget: a window past it is refused, one within it read, and nothing is counted outside', async () => {
    process.env.IMAGERY_MAX_DECODED_BYTES = String(1_048_576);
    const raster = await rasterOf(file);
    const image = raster.image;
    expect(await refusal(() => withDecodeBudget(() => readWindowRaw(raster, [0, 0, 1024, 1024], 0)))).toBe(
      'decode_limit',
    );
    expect(await refusal(() => withDecodeBudget(() => readWindowRaw(raster, [0, 0, 1024, 512], 0)))).toBe('accepted');
    // Two reads in one budget add up: 8 tiles, then one more.
    expect(
      await refusal(() =>
        withDecodeBudget(async () => {
          await readWindowRaw(raster, [0, 0, 1024, 512], 0);
          await readWindowRaw(raster, [0, 512, 10, 513], 0);
        }),
      ),
    ).toBe('decode_limit');
    // geotiff.js's readRasters (the registered decoders) is charged as well.
    expect(await refusal(() => withDecodeBudget(() => image.readRasters({ window: [0, 0, 1024, 1024] })))).toBe(
      'decode_limit',
    );
    expect(await refusal(() => readWindowRaw(raster, [0, 0, 1024, 1024], 0))).toBe('accepted');
  });
});
