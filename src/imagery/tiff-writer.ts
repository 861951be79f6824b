/**
 * A small GeoTIFF writer: tiled (or in strips), DEFLATE, LZW or uncompressed (optionally with the
 * horizontal predictor), uint8, uint16, int16 or float32, one or more interleaved samples per
 * pixel, georeferenced with
 * ModelPixelScale/ModelTiepoint and an EPSG code. geotiff.js's own writer can neither tile nor
 * compress; this is what the synthetic scenes, the demo, the decode tests and the benchmarks use.
 */
import { deflateSync } from 'node:zlib';

export type TiffCompression = 'deflate' | 'lzw' | 'none';

export interface GeoTiffSpec {
  width: number;
  height: number;
  /** Row-major pixels; with several samples per pixel, interleaved (s0 s1 … of a pixel together). */
  data: Uint16Array | Uint8Array | Int16Array | Float32Array;
  epsg: number;
  /**
   * GeoKeys added to (or replacing) the ones `epsg` implies, by key id: a user-defined CRS is
   * `epsg: 32767` plus its keys. Keys 2053–2062 and 3077–3096 are doubles (GeoDoubleParamsTag),
   * the others SHORT values.
   */
  geoKeys?: Record<number, number | number[]>;
  /** Top-left corner in CRS units and the pixel size (positive). */
  originX: number;
  originY: number;
  resolution: number;
  tileSize?: number;
  /** Tile height when tiles are not square (default tileSize). Both must be multiples of 16 for GDAL. */
  tileHeight?: number;
  /** Strips of this many rows (the last one holds only the rows left) instead of tiles. */
  rowsPerStrip?: number;
  /** The horizontal predictor (integer samples only). */
  predictor?: boolean;
  /** DEFLATE level, 1 (fastest) to 9 (smallest); default 6. */
  deflateLevel?: number;
  nodata?: number;
  compression?: TiffCompression;
  samples?: number;
}

/**
 * TIFF LZW (MSB-first codes, 9 to 12 bits, the code width growing one code early as TIFF 6.0
 * requires, a Clear code when the table is full), as libtiff writes it.
 */
export function lzwEncode(input: Uint8Array): Buffer {
  const codes = codeWriter();
  let width = 9;
  const put = (code: number) => codes.put(code, width);
  let dict = new Map<number, number>();
  let next = 258;
  const grow = () => {
    if (next > (1 << width) - 1 && width < 12) width++;
  };
  put(256);
  if (input.length) {
    let w = input[0]!;
    for (let i = 1; i < input.length; i++) {
      const c = input[i]!;
      const key = w * 256 + c;
      const hit = dict.get(key);
      if (hit !== undefined) {
        w = hit;
        continue;
      }
      put(w);
      dict.set(key, next++);
      grow();
      if (next >= 4094) {
        put(256);
        dict = new Map();
        next = 258;
        width = 9;
      }
      w = c;
    }
    put(w);
    // The decoder adds one more entry on reading the last code: the EOI is written at its width.
    next++;
    grow();
  }
  put(257);
  return codes.end();
}

/** Codes of varying width packed most significant bit first, as TIFF LZW stores them. */
export function codeWriter(): { put(code: number, width: number): void; end(): Buffer } {
  const out: number[] = [];
  let acc = 0;
  let nbits = 0;
  return {
    put(code, width) {
      acc = (acc << width) | code;
      nbits += width;
      while (nbits >= 8) {
        out.push((acc >>> (nbits - 8)) & 0xff);
        nbits -= 8;
      }
      acc &= (1 << nbits) - 1;
    },
    end() {
      if (nbits > 0) out.push((acc << (8 - nbits)) & 0xff);
      return Buffer.from(out);
    },
  };
}

export const SHORT = 3;
export const LONG = 4;
export const DOUBLE = 12;
export const ASCII = 2;

const isDoubleKey = (key: number) =>
  (key >= 2053 && key <= 2062 && key !== 2054 && key !== 2056 && key !== 2060) || (key >= 3077 && key <= 3096);

/** The GeoKeyDirectory (version 1.1.0, keys ascending) and the GeoDoubleParams it points into. */
function geoKeyDirectory(spec: Pick<GeoTiffSpec, 'epsg' | 'geoKeys'>): { geoKeys: number[]; geoDoubles: number[] } {
  const geographic = spec.epsg === 4326 || spec.geoKeys?.[1024] === 2;
  const keys: Record<number, number | number[]> = {
    1024: geographic ? 2 : 1,
    1025: 1,
    [geographic ? 2048 : 3072]: spec.epsg,
    ...spec.geoKeys,
  };
  const ids = Object.keys(keys)
    .map(Number)
    .sort((a, b) => a - b);
  const geoKeys = [1, 1, 0, ids.length];
  const geoDoubles: number[] = [];
  for (const id of ids) {
    const v = keys[id]!;
    if (isDoubleKey(id)) {
      const list = typeof v === 'number' ? [v] : v;
      geoKeys.push(id, 34736, list.length, geoDoubles.length);
      geoDoubles.push(...list);
    } else {
      geoKeys.push(id, 0, 1, v as number);
    }
  }
  return { geoKeys, geoDoubles };
}

export function writeGeoTiff(spec: GeoTiffSpec): Buffer {
  const { width, height, data } = spec;
  const strips = spec.rowsPerStrip !== undefined;
  const tile = strips ? width : (spec.tileSize ?? 256);
  const tileH = strips ? Math.min(spec.rowsPerStrip!, height) : (spec.tileHeight ?? tile);
  const spp = spec.samples ?? 1;
  const bits = data.BYTES_PER_ELEMENT * 8;
  const format = data instanceof Float32Array ? 3 : data instanceof Int16Array ? 2 : 1;
  if (spec.predictor && format === 3) throw new Error('the horizontal predictor is for integer samples');
  const mask = bits === 8 ? 0xff : 0xffff;
  const compression = spec.compression ?? 'deflate';
  const tilesX = Math.ceil(width / tile);
  const tilesY = Math.ceil(height / tileH);
  const row = tile * spp;
  const tiles: Buffer[] = [];
  for (let ty = 0; ty < tilesY; ty++) {
    for (let tx = 0; tx < tilesX; tx++) {
      // Edge tiles are full size, padded with zeros (TIFF tiles all have the same shape); the last
      // strip holds only the rows left.
      const rows = strips ? Math.min(tileH, height - ty * tileH) : tileH;
      const t = new (data.constructor as new (n: number) => typeof data)(row * rows);
      for (let y = 0; y < rows; y++) {
        const sy = ty * tileH + y;
        if (sy >= height) break;
        const x1 = Math.min(tile, width - tx * tile);
        t.set(data.subarray((sy * width + tx * tile) * spp, (sy * width + tx * tile + x1) * spp), y * row);
        if (spec.predictor) {
          for (let x = row - 1; x >= spp; x--) t[y * row + x] = (t[y * row + x]! - t[y * row + x - spp]!) & mask;
        }
      }
      const raw = Buffer.from(t.buffer, t.byteOffset, t.byteLength);
      tiles.push(
        compression === 'deflate'
          ? deflateSync(raw, { level: spec.deflateLevel ?? 6 })
          : compression === 'lzw'
            ? lzwEncode(raw)
            : Buffer.from(raw),
      );
    }
  }
  const entries: TiffEntry[] = [
    { tag: 256, type: LONG, values: [width] },
    { tag: 257, type: LONG, values: [height] },
    { tag: 258, type: SHORT, values: new Array<number>(spp).fill(bits) },
    { tag: 259, type: SHORT, values: [compression === 'deflate' ? 8 : compression === 'lzw' ? 5 : 1] },
    { tag: 262, type: SHORT, values: [1] },
    { tag: 277, type: SHORT, values: [spp] },
    { tag: 284, type: SHORT, values: [1] },
    { tag: 317, type: SHORT, values: [spec.predictor ? 2 : 1] },
    ...(strips
      ? [
          { tag: 273, type: LONG, values: tiles.map(() => 0) },
          { tag: 278, type: LONG, values: [tileH] },
          { tag: 279, type: LONG, values: tiles.map((t) => t.length) },
        ]
      : [
          { tag: 322, type: LONG, values: [tile] },
          { tag: 323, type: LONG, values: [tileH] },
          { tag: 324, type: LONG, values: tiles.map(() => 0) },
          { tag: 325, type: LONG, values: tiles.map((t) => t.length) },
        ]),
    ...(spp > 1 ? [{ tag: 338, type: SHORT, values: new Array<number>(spp - 1).fill(0) }] : []),
    { tag: 339, type: SHORT, values: new Array<number>(spp).fill(format) },
    ...geoTags(spec),
    ...(spec.nodata !== undefined ? [{ tag: 42113, type: ASCII, values: `${spec.nodata}\0` }] : []),
  ];
  return assembleTiff(entries, tiles).buffer;
}

/**
 * The georeferencing tags of a north-up grid: ModelPixelScale, ModelTiepoint, GeoKeyDirectory
 * and, when keys need them, GeoDoubleParams.
 */
export function geoTags(
  spec: Pick<GeoTiffSpec, 'epsg' | 'geoKeys' | 'originX' | 'originY' | 'resolution'>,
): TiffEntry[] {
  const { geoKeys, geoDoubles } = geoKeyDirectory(spec);
  return [
    { tag: 33550, type: DOUBLE, values: [spec.resolution, spec.resolution, 0] },
    { tag: 33922, type: DOUBLE, values: [0, 0, 0, spec.originX, spec.originY, 0] },
    { tag: 34735, type: SHORT, values: geoKeys },
    ...(geoDoubles.length ? [{ tag: 34736, type: DOUBLE, values: geoDoubles }] : []),
  ];
}

/**
 * One IFD entry: its values, or (for hand-made hostile files) only a declared count and an
 * offset that the file need not back with data.
 */
export type TiffEntry =
  | { tag: number; type: number; values: number[] | string }
  | { tag: number; type: number; count: number; offset: number };

/**
 * A little-endian classic TIFF with one IFD (at byte 8) followed by its out-of-line values and the
 * blobs. The StripOffsets/TileOffsets entry (whichever is present) is filled in with the blobs'
 * positions: block i is blob `blockOf[i]` (default: blob i), so blocks may share their bytes.
 * Returns the file and where the IFD's next-IFD pointer sits.
 */
export function assembleTiff(
  entries: TiffEntry[],
  blobs: Buffer[],
  blockOf?: number[],
): { buffer: Buffer; ifdOffset: number; ifdSize: number; nextPointerAt: number } {
  const sizeOf = (type: number) => (type === DOUBLE ? 8 : type === LONG ? 4 : type === SHORT ? 2 : 1);
  const size = (e: TiffEntry) =>
    'values' in e ? (typeof e.values === 'string' ? e.values.length : e.values.length * sizeOf(e.type)) : 0;
  entries = [...entries].sort((a, b) => a.tag - b.tag);
  const ifdOffset = 8;
  const ifdSize = 2 + entries.length * 12 + 4;
  let extra = ifdOffset + ifdSize;
  const extraOffsets = entries.map((e) => {
    if (size(e) <= 4) return 0;
    const o = extra;
    extra += size(e) + (size(e) % 2);
    return o;
  });
  const blobOffsets: number[] = [];
  let p = extra;
  for (const b of blobs) {
    blobOffsets.push(p);
    p += b.length;
  }
  const offsetsEntry = entries.find((e) => (e.tag === 273 || e.tag === 324) && 'values' in e) as
    | { values: number[] }
    | undefined;
  if (offsetsEntry) offsetsEntry.values = offsetsEntry.values.map((_, i) => blobOffsets[blockOf ? blockOf[i]! : i]!);
  const buf = Buffer.alloc(p);
  buf.write('II', 0, 'latin1');
  buf.writeUInt16LE(42, 2);
  buf.writeUInt32LE(ifdOffset, 4);
  buf.writeUInt16LE(entries.length, ifdOffset);
  entries.forEach((e, i) => {
    const o = ifdOffset + 2 + i * 12;
    buf.writeUInt16LE(e.tag, o);
    buf.writeUInt16LE(e.type, o + 2);
    if (!('values' in e)) {
      buf.writeUInt32LE(e.count, o + 4);
      buf.writeUInt32LE(e.offset, o + 8);
      return;
    }
    buf.writeUInt32LE(e.values.length, o + 4);
    const target = size(e) <= 4 ? o + 8 : extraOffsets[i]!;
    if (size(e) > 4) buf.writeUInt32LE(target, o + 8);
    if (typeof e.values === 'string') buf.write(e.values, target, 'latin1');
    else
      e.values.forEach((v, k) => {
        if (e.type === SHORT) buf.writeUInt16LE(v, target + k * 2);
        else if (e.type === LONG) buf.writeUInt32LE(v, target + k * 4);
        else if (e.type === DOUBLE) buf.writeDoubleLE(v, target + k * 8);
        else buf.writeUInt8(v, target + k);
      });
  });
  const nextPointerAt = ifdOffset + 2 + entries.length * 12;
  buf.writeUInt32LE(0, nextPointerAt);
  for (const [i, b] of blobs.entries()) b.copy(buf, blobOffsets[i]!);
  return { buffer: buf, ifdOffset, ifdSize, nextPointerAt };
}
