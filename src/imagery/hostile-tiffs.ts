/**
 * Hostile GeoTIFFs built in code, for the bad-input tests and `npm run bench -- bombs`: strips and
 * tiles whose data decodes far past their declared size in every codec geotiff.js knows, IFD
 * chains that loop, more strips or tiles than IMAGERY_MAX_BLOCKS, dimensions and blocks beyond the
 * limits. Each is small (about 1 MB for a 1 GiB bomb) and georeferenced, so that nothing but its
 * hostility stops it. Also a control that must pass: a Sentinel-2-sized (10980²) band.
 */
import { constants, deflateRawSync, deflateSync } from 'node:zlib';
import { assembleTiff, codeWriter, geoTags, LONG, SHORT, writeGeoTiff, type TiffEntry } from './tiff-writer.js';

const GRID = { epsg: 32631, originX: 600_000, originY: 5_700_000, resolution: 10 };

/** A zlib stream of `bytes` zeros (about 1 KB per MiB), built without compressing them. */
export function zlibBomb(bytes: number): Buffer {
  const seg = 1 << 20;
  const n = Math.ceil(bytes / seg);
  // Full flushes end each segment on a byte boundary with a fresh window: segments concatenate.
  const piece = (len: number) => deflateRawSync(Buffer.alloc(len), { level: 9, finishFlush: constants.Z_FULL_FLUSH });
  const whole = piece(seg);
  const tail = Buffer.alloc(6);
  tail[0] = 3; // a final, empty block with fixed codes
  tail.writeUInt32BE((((bytes % 65_521) << 16) | 1) >>> 0, 2); // Adler-32 of zeros: a = 1, b = n mod 65521
  return Buffer.concat([
    Buffer.from([0x78, 0xda]),
    ...Array<Buffer>(n - 1).fill(whole),
    piece(bytes - (n - 1) * seg),
    tail,
  ]);
}

/**
 * TIFF LZW for `bytes` zeros: codes that each add one zero to the previous string until the table
 * is full, then the longest string (3839 bytes in 12 bits) over and over.
 */
export function lzwBomb(bytes: number): Buffer {
  const codes = codeWriter();
  let width = 9;
  let next = 258;
  const put = (code: number) => codes.put(code, width);
  // The decoder's table grows by one entry per code after the first, the width one code early.
  const grew = () => {
    if (next >= 4096) return;
    next++;
    if (next >= (1 << width) - 1 && width < 12) width++;
  };
  put(256);
  put(0);
  let made = 1;
  let len = 1;
  while (next < 4096 && made + len + 1 <= bytes) {
    put(next);
    made += ++len;
    grew();
  }
  const longest = len > 1 ? next - 1 : 0;
  for (; made + len <= bytes; made += len) {
    put(longest);
    grew();
  }
  for (; made < bytes; made++) {
    put(0);
    grew();
  }
  put(257);
  return codes.end();
}

/** PackBits for `bytes` zeros: runs of 128 in two bytes each (64:1, so kept to 16 MiB in hostileTiffs). */
export function packbitsBomb(bytes: number): Buffer {
  return Buffer.alloc(2 * Math.ceil(bytes / 128), Buffer.from([0x81, 0x00]));
}

/** A Zstandard frame of `bytes` zeros in RLE blocks of 128 KiB (4 bytes each), no content size. */
export function zstdBomb(bytes: number): Buffer {
  const block = 128 * 1024;
  const n = Math.ceil(bytes / block);
  const out = Buffer.alloc(6 + 4 * n);
  out.writeUInt32LE(0xfd2fb528, 0);
  out[4] = 0x00; // no content size, no checksum, not single-segment
  out[5] = 7 << 3; // window 2^17
  for (let k = 0; k < n; k++) {
    const size = k < n - 1 ? block : bytes - (n - 1) * block;
    out.writeUIntLE((size << 3) | (1 << 1) | (k === n - 1 ? 1 : 0), 6 + 4 * k, 3); // RLE block
  }
  return out;
}

/** A JPEG stream whose frame header declares side × side pixels and holds no image data. */
export function jpegFrameBomb(side: number): Buffer {
  const sof = Buffer.from([0xff, 0xc0, 0, 11, 8, side >> 8, side & 0xff, side >> 8, side & 0xff, 1, 1, 0x11, 0]);
  return Buffer.concat([Buffer.from([0xff, 0xd8]), sof, Buffer.from([0xff, 0xd9])]);
}

export interface TiledSpec {
  width: number;
  height: number;
  tile: number;
  bits: 8 | 16;
  compression: number;
  /** The one data blob every tile points at. */
  blob: Buffer;
  tiles?: number;
  extra?: TiffEntry[];
  byteCount?: number;
}

/** A georeferenced, tiled, single-band image whose tiles all share one blob. */
export function tiled(s: TiledSpec): Buffer {
  const tiles = s.tiles ?? Math.ceil(s.width / s.tile) * Math.ceil(s.height / s.tile);
  const entries: TiffEntry[] = [
    { tag: 256, type: LONG, values: [s.width] },
    { tag: 257, type: LONG, values: [s.height] },
    { tag: 258, type: SHORT, values: [s.bits] },
    { tag: 259, type: SHORT, values: [s.compression] },
    { tag: 262, type: SHORT, values: [1] },
    { tag: 277, type: SHORT, values: [1] },
    { tag: 284, type: SHORT, values: [1] },
    { tag: 322, type: LONG, values: [s.tile] },
    { tag: 323, type: LONG, values: [s.tile] },
    { tag: 324, type: LONG, values: new Array<number>(tiles).fill(0) },
    { tag: 325, type: LONG, values: new Array<number>(tiles).fill(s.byteCount ?? s.blob.length) },
    { tag: 339, type: SHORT, values: [1] },
    ...geoTags(GRID),
    ...(s.extra ?? []),
  ];
  return assembleTiff(entries, [s.blob], new Array<number>(tiles).fill(0)).buffer;
}

/** A valid little GeoTIFF whose IFD chain loops: onto itself, or through a copy of itself. */
function ifdLoop(length: 1 | 2): Buffer {
  const ok = writeGeoTiff({ width: 64, height: 64, data: new Uint16Array(64 * 64).fill(1000), ...GRID });
  // writeGeoTiff puts its one IFD at byte 8; its next pointer follows the entries.
  const entries = ok.readUInt16LE(8);
  const nextAt = 8 + 2 + entries * 12;
  if (length === 1) {
    ok.writeUInt32LE(8, nextAt);
    return ok;
  }
  const copy = Buffer.from(ok.subarray(8, nextAt + 4));
  const second = ok.length + (ok.length % 2);
  copy.writeUInt32LE(8, copy.length - 4);
  const out = Buffer.concat([ok, Buffer.alloc(second - ok.length), copy]);
  out.writeUInt32LE(second, nextAt);
  return out;
}

/** More strips or tiles than blocks allows, declared only: the tables are not in the file. */
function tooManyBlocks(blocks: number, kind: 'tiles' | 'strips'): Buffer {
  const side = 16;
  const across = kind === 'tiles' ? Math.ceil(Math.sqrt(blocks)) : 1;
  const down = Math.ceil(blocks / across);
  const [offsetsTag, countsTag] = kind === 'tiles' ? [324, 325] : [273, 279];
  const entries: TiffEntry[] = [
    { tag: 256, type: LONG, values: [across * side] },
    { tag: 257, type: LONG, values: [down * side] },
    { tag: 258, type: SHORT, values: [8] },
    { tag: 259, type: SHORT, values: [8] },
    { tag: 262, type: SHORT, values: [1] },
    { tag: 277, type: SHORT, values: [1] },
    ...(kind === 'tiles'
      ? [
          { tag: 322, type: LONG, values: [side] },
          { tag: 323, type: LONG, values: [side] },
        ]
      : [{ tag: 278, type: LONG, values: [side] }]),
    { tag: offsetsTag, type: LONG, count: across * down, offset: 8 },
    { tag: countsTag, type: LONG, count: across * down, offset: 8 },
    ...geoTags(GRID),
  ];
  return assembleTiff(entries, []).buffer;
}

export interface HostileTiff {
  name: string;
  /** The errors[].code a registration answers with (decode-limits.ts). */
  code: string;
  file: Buffer;
}

/**
 * The hostile files; `inflateTo` is what each bomb block decodes to (1 GiB in the issue's
 * example; smaller in tests so that the code before the bounds survives them too).
 */
export function hostileTiffs(inflateTo: number, maxBlocks = 2 ** 20): HostileTiff[] {
  const bomb = (compression: number, blob: Buffer, extra?: TiffEntry[]) =>
    tiled({ width: 1024, height: 1024, tile: 256, bits: 16, compression, blob, extra });
  return [
    { name: 'DEFLATE tiles', code: 'decompression_bomb', file: bomb(8, zlibBomb(inflateTo)) },
    { name: 'LZW tiles', code: 'decompression_bomb', file: bomb(5, lzwBomb(inflateTo)) },
    {
      name: 'PackBits tiles',
      code: 'decompression_bomb',
      file: bomb(32773, packbitsBomb(Math.min(inflateTo, 16 * 1_048_576))),
    },
    { name: 'ZSTD tiles', code: 'decompression_bomb', file: bomb(50000, zstdBomb(inflateTo)) },
    {
      name: 'JPEG frame of 8192²',
      code: 'decompression_bomb',
      file: tiled({ width: 1024, height: 1024, tile: 256, bits: 8, compression: 7, blob: jpegFrameBomb(8192) }),
    },
    {
      name: 'LERC with DEFLATE',
      code: 'unsupported_compression',
      file: bomb(34887, zlibBomb(inflateTo), [{ tag: 50674, type: LONG, values: [4, 1] }]),
    },
    { name: 'self-pointing IFD', code: 'ifd_loop', file: ifdLoop(1) },
    { name: 'IFD loop of two', code: 'ifd_loop', file: ifdLoop(2) },
    { name: 'too many tiles', code: 'too_many_blocks', file: tooManyBlocks(maxBlocks + 1, 'tiles') },
    { name: 'too many strips', code: 'too_many_blocks', file: tooManyBlocks(maxBlocks + 1, 'strips') },
    {
      name: '2^31 × 2^31 pixels',
      code: 'image_too_large',
      file: tiled({
        width: 2 ** 31,
        height: 2 ** 31,
        tile: 256,
        bits: 16,
        compression: 8,
        blob: deflateSync(Buffer.alloc(131_072)),
        tiles: 1,
      }),
    },
    {
      name: 'one 16384² tile (512 MiB)',
      code: 'block_too_large',
      file: tiled({
        width: 16_384,
        height: 16_384,
        tile: 16_384,
        bits: 16,
        compression: 8,
        blob: zlibBomb(512 * 1_048_576),
      }),
    },
    {
      name: 'a tile of 4 GB compressed',
      code: 'block_too_large',
      file: tiled({
        width: 1024,
        height: 1024,
        tile: 256,
        bits: 16,
        compression: 8,
        blob: deflateSync(Buffer.alloc(131_072)),
        byteCount: 0xfffffff0,
      }),
    },
  ];
}

/** A 10980² uint16 band tiled 1024² with DEFLATE, as Sentinel-2 COGs are (every tile the same). */
export function sentinelSizedBand(): Buffer {
  const tile = Uint16Array.from({ length: 1024 * 1024 }, (_, i) => 1000 + ((i * 7) % 3000));
  return tiled({
    width: 10_980,
    height: 10_980,
    tile: 1024,
    bits: 16,
    compression: 8,
    blob: deflateSync(Buffer.from(tile.buffer), { level: 1 }),
  });
}
