/**
 * Checks what a TIFF declares before geotiff.js parses it (geotiff.js allocates its value arrays
 * from the counts an IFD states, and reads every strip or tile whole): the IFD chain ends without
 * looping and within MAX_IFDS, and the first image (the one read) keeps within the limits of
 * decode-limits.ts: width × height, the number of strips or tiles, the decoded size of one and the
 * compressed size each declares, and the size of every other tag's values. Reads the IFDs and the
 * byte-count and offset tables only: a few kilobytes for a real file. Reads through a RasterSource,
 * and answers what the raw-tile reader needs of the first image: its byte order and where its
 * blocks are.
 */
import { checkBlockBytes, decodeLimits, ImageryLimitError } from './decode-limits.js';
import type { RasterSource } from './raster-source.js';

export interface TiffStructure {
  littleEndian: boolean;
  bigTiff: boolean;
  /** How the first image's blocks are stored (absent when it declares no dimensions or no block tables). */
  blocks?: BlockTable;
}

export interface BlockTable {
  /** TIFF Compression and Predictor tags (1 when absent). */
  compression: number;
  predictor: number;
  /** PlanarConfiguration: 1 samples interleaved in each block, 2 one set of blocks per sample. */
  planar: number;
  /** Tiles, else strips: as geotiff.js decides, an image without StripOffsets is tiled. */
  tiled: boolean;
  /** File offset and byte count of every strip or tile. */
  offsets: number[];
  counts: number[];
}

/** Images (IFDs) one file may chain; only the first is read. */
export const MAX_IFDS = 1024;
/** Values of one tag other than the strip/tile tables. */
const MAX_TAG_BYTES = 16 * 1_048_576;

const TYPE_BYTES: Record<number, number> = {
  1: 1,
  2: 1,
  3: 2,
  4: 4,
  5: 8,
  6: 1,
  7: 1,
  8: 2,
  9: 4,
  10: 8,
  11: 4,
  12: 8,
  13: 4,
  16: 8,
  17: 8,
  18: 8,
};
const TAG = {
  width: 256,
  height: 257,
  bits: 258,
  spp: 277,
  rowsPerStrip: 278,
  planar: 284,
  tileWidth: 322,
  tileHeight: 323,
} as const;
const OFFSETS = [273, 324];
const COUNTS = [279, 325];

interface Entry {
  type: number;
  count: number;
  /** File offset of the values, or null when they sit in the entry (then `inline` holds them). */
  at: number | null;
  inline: DataView;
}

/** The file's structure, once its declarations are found within the limits (else ImageryLimitError, or Error for a corrupt file). */
export async function checkTiffStructure(source: RasterSource, signal?: AbortSignal): Promise<TiffStructure> {
  // Zeros past the end of the file, as geotiff.js's sources answer: what is cut short is judged below.
  const read = async (offset: number, length: number) => {
    const [bytes] = await source.read([{ offset, length }], signal);
    const v = new Uint8Array(length);
    v.set(bytes!);
    return new DataView(v.buffer);
  };
  const header = await read(0, 8);
  const order = header.getUint16(0, true);
  if (order !== 0x4949 && order !== 0x4d4d) throw new Error('Invalid byte order value.');
  const le = order === 0x4949;
  const magic = header.getUint16(2, le);
  if (magic !== 42 && magic !== 43) throw new Error('Invalid magic number.');
  const big = magic === 43;
  const firstIFDOffset = big ? Number((await read(8, 8)).getBigUint64(0, le)) : header.getUint32(4, le);
  const word = (v: DataView, at: number) => (big ? Number(v.getBigUint64(at, le)) : v.getUint32(at, le));
  const fileSize = source.size;

  const entrySize = big ? 20 : 12;
  const head = big ? 8 : 2;
  const seen = new Set<number>();
  let first: Map<number, Entry> | undefined;
  for (let offset = firstIFDOffset, k = 0; offset !== 0; k++) {
    if (seen.has(offset))
      throw new ImageryLimitError(
        'ifd_loop',
        `the chain of images (IFDs) loops: after ${k} IFD(s) it points back to the one at byte ${offset}`,
      );
    if (k >= MAX_IFDS)
      throw new ImageryLimitError('too_many_ifds', `the file chains more than ${MAX_IFDS} images (IFDs)`);
    seen.add(offset);
    if (fileSize !== undefined && offset + head > fileSize) {
      if (k === 0)
        throw new Error(
          `the first IFD at byte ${offset} lies past the end of the file (${fileSize} bytes): the file is corrupt or truncated`,
        );
      break; // a dangling pointer after the image that is read: ignored, as libtiff does
    }
    let n: number;
    let next: number;
    try {
      const c = await read(offset, head);
      n = big ? Number(c.getBigUint64(0, le)) : c.getUint16(0, le);
      if (n > 65_535) throw new ImageryLimitError('header_too_large', `IFD ${k} declares ${n} entries`);
      if (k === 0) {
        const v = await read(offset + head, n * entrySize + (big ? 8 : 4));
        first = entriesOf(v, n, entrySize, big, le);
        next = word(v, n * entrySize);
      } else {
        next = word(await read(offset + head + n * entrySize, big ? 8 : 4), 0);
      }
    } catch (err) {
      if (k === 0 || err instanceof ImageryLimitError) throw err;
      break; // an unreadable IFD after the first: geotiff.js never goes there
    }
    offset = next;
  }
  return {
    littleEndian: le,
    bigTiff: big,
    blocks: first ? await checkImage(first, { read, big, le, fileSize }) : undefined,
  };
}

function entriesOf(v: DataView, n: number, entrySize: number, big: boolean, le: boolean): Map<number, Entry> {
  const out = new Map<number, Entry>();
  for (let e = 0; e < n; e++) {
    const o = e * entrySize;
    const tag = v.getUint16(o, le);
    const type = v.getUint16(o + 2, le);
    const count = big ? Number(v.getBigUint64(o + 4, le)) : v.getUint32(o + 4, le);
    const valueAt = o + (big ? 12 : 8);
    const bytes = (TYPE_BYTES[type] ?? 0) * count;
    const inlineBytes = big ? 8 : 4;
    out.set(tag, {
      type,
      count,
      at: bytes <= inlineBytes ? null : big ? Number(v.getBigUint64(valueAt, le)) : v.getUint32(valueAt, le),
      inline: new DataView(v.buffer, v.byteOffset + valueAt, inlineBytes),
    });
  }
  return out;
}

async function checkImage(
  entries: Map<number, Entry>,
  io: { read: (offset: number, length: number) => Promise<DataView>; big: boolean; le: boolean; fileSize?: number },
): Promise<TiffStructure['blocks']> {
  const limits = decodeLimits();
  for (const [tag, e] of entries) {
    const bytes = (TYPE_BYTES[e.type] ?? 0) * e.count;
    if (OFFSETS.includes(tag) || COUNTS.includes(tag)) {
      if (e.count > limits.maxBlocks)
        throw new ImageryLimitError(
          'too_many_blocks',
          `the image declares ${e.count} strips or tiles, more than IMAGERY_MAX_BLOCKS (${limits.maxBlocks})`,
        );
    } else if (bytes > MAX_TAG_BYTES) {
      throw new ImageryLimitError(
        'header_too_large',
        `tag ${tag} declares ${bytes} bytes of values, more than ${MAX_TAG_BYTES}`,
      );
    }
  }
  const values = async (tag: number): Promise<number[] | undefined> => {
    const e = entries.get(tag);
    const size = e && TYPE_BYTES[e.type];
    if (!e || !size || ![3, 4, 16].includes(e.type)) return undefined;
    const v = e.at === null ? e.inline : await io.read(e.at, e.count * size);
    return Array.from({ length: e.count }, (_, i) =>
      size === 2
        ? v.getUint16(i * 2, io.le)
        : size === 4
          ? v.getUint32(i * 4, io.le)
          : Number(v.getBigUint64(i * 8, io.le)),
    );
  };
  const one = async (tag: number) => (await values(tag))?.[0];
  const width = await one(TAG.width);
  const height = await one(TAG.height);
  // Missing or zero dimensions: geotiff.js refuses the file on its own terms.
  if (!width || !height) return;
  if (width * height > limits.maxPixels)
    throw new ImageryLimitError(
      'image_too_large',
      `the image declares ${width} × ${height} pixels, more than IMAGERY_MAX_PIXELS (${limits.maxPixels})`,
    );
  const tiled = entries.has(TAG.tileWidth) || entries.has(324);
  const tw = tiled ? await one(TAG.tileWidth) : width;
  const th = tiled ? await one(TAG.tileHeight) : Math.min(height, (await one(TAG.rowsPerStrip)) ?? height);
  if (!tw || !th) return;
  const spp = (await one(TAG.spp)) ?? 1;
  const bits = (await values(TAG.bits)) ?? [1];
  const planar = (await one(TAG.planar)) ?? 1;
  const pixelBits = planar === 2 ? bits[0]! : bits.length === spp ? bits.reduce((a, b) => a + b, 0) : bits[0]! * spp;
  const what = tiled ? 'a tile' : 'a strip';
  const blockBytes = Math.ceil((tw * pixelBits) / 8) * th;
  checkBlockBytes(blockBytes, what);
  const blocks = Math.ceil(width / tw) * Math.ceil(height / th) * (planar === 2 ? spp : 1);
  if (blocks > limits.maxBlocks)
    throw new ImageryLimitError(
      'too_many_blocks',
      `the image declares ${blocks} ${tiled ? 'tiles' : 'strips'}, more than IMAGERY_MAX_BLOCKS (${limits.maxBlocks})`,
    );
  // geotiff.js and the raw reader fetch a block's compressed bytes whole: no codec needs twice the
  // decoded size (LZW's worst case is 1.5 times), plus room for headers and tables.
  const counts = await values(tiled ? 325 : 279);
  const offsets = await values(tiled ? 324 : 273);
  const maxCompressed = 2 * blockBytes + 1_048_576;
  counts?.forEach((c, i) => {
    if (c > maxCompressed)
      throw new ImageryLimitError(
        'block_too_large',
        `${what} (${i}) declares ${c} compressed bytes for ${blockBytes} decoded ones`,
      );
    const end = (offsets?.[i] ?? 0) + c;
    if (c > 0 && io.fileSize !== undefined && end > io.fileSize)
      throw new Error(
        `${what} (${i}) ends at byte ${end}, past the end of the file (${io.fileSize} bytes): the file is truncated`,
      );
  });
  if (!offsets || !counts) return undefined;
  return {
    compression: (await one(259)) ?? 1,
    predictor: (await one(317)) ?? 1,
    planar,
    tiled: !entries.has(273),
    offsets,
    counts,
  };
}
