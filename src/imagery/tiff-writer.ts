/**
 * A small GeoTIFF writer: tiled, DEFLATE, LZW or uncompressed (optionally with the horizontal
 * predictor), one or more interleaved samples per pixel, georeferenced with
 * ModelPixelScale/ModelTiepoint and an EPSG code. geotiff.js's own writer can neither tile nor
 * compress; this is what the synthetic scenes, the demo, the decode tests and the benchmarks use.
 */
import { deflateSync } from 'node:zlib';

export type TiffCompression = 'deflate' | 'lzw' | 'none';

export interface GeoTiffSpec {
  width: number;
  height: number;
  /** Row-major pixels; with several samples per pixel, interleaved (s0 s1 … of a pixel together). */
  data: Uint16Array | Uint8Array;
  epsg: number;
  /** Top-left corner in CRS units and the pixel size (positive). */
  originX: number;
  originY: number;
  resolution: number;
  tileSize?: number;
  /** Tile height when tiles are not square (default tileSize). Both must be multiples of 16 for GDAL. */
  tileHeight?: number;
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
  const out: number[] = [];
  let acc = 0;
  let nbits = 0;
  let width = 9;
  const put = (code: number) => {
    acc = (acc << width) | code;
    nbits += width;
    while (nbits >= 8) {
      out.push((acc >>> (nbits - 8)) & 0xff);
      nbits -= 8;
    }
    acc &= (1 << nbits) - 1;
  };
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
  if (nbits > 0) out.push((acc << (8 - nbits)) & 0xff);
  return Buffer.from(out);
}

const SHORT = 3;
const LONG = 4;
const DOUBLE = 12;
const ASCII = 2;

export function writeGeoTiff(spec: GeoTiffSpec): Buffer {
  const { width, height, data } = spec;
  const tile = spec.tileSize ?? 256;
  const tileH = spec.tileHeight ?? tile;
  const spp = spec.samples ?? 1;
  const bits = data instanceof Uint16Array ? 16 : 8;
  const compression = spec.compression ?? 'deflate';
  const tilesX = Math.ceil(width / tile);
  const tilesY = Math.ceil(height / tileH);
  const row = tile * spp;
  const tiles: Buffer[] = [];
  for (let ty = 0; ty < tilesY; ty++) {
    for (let tx = 0; tx < tilesX; tx++) {
      // Edge tiles are full size, padded with zeros (TIFF tiles all have the same shape).
      const t = bits === 16 ? new Uint16Array(row * tileH) : new Uint8Array(row * tileH);
      for (let y = 0; y < tileH; y++) {
        const sy = ty * tileH + y;
        if (sy >= height) break;
        const x1 = Math.min(tile, width - tx * tile);
        t.set(data.subarray((sy * width + tx * tile) * spp, (sy * width + tx * tile + x1) * spp), y * row);
        if (spec.predictor) {
          for (let x = row - 1; x >= spp; x--) t[y * row + x] = (t[y * row + x]! - t[y * row + x - spp]!) & (bits === 16 ? 0xffff : 0xff);
        }
      }
      const raw = Buffer.from(t.buffer, t.byteOffset, t.byteLength);
      tiles.push(compression === 'deflate' ? deflateSync(raw, { level: spec.deflateLevel ?? 6 }) : compression === 'lzw' ? lzwEncode(raw) : Buffer.from(raw));
    }
  }
  const geoKeys = [1, 1, 0, 3, 1024, 0, 1, spec.epsg === 4326 ? 2 : 1, 1025, 0, 1, 1, spec.epsg === 4326 ? 2048 : 3072, 0, 1, spec.epsg];
  const entries: Array<{ tag: number; type: number; values: number[] | string }> = [
    { tag: 256, type: LONG, values: [width] },
    { tag: 257, type: LONG, values: [height] },
    { tag: 258, type: SHORT, values: new Array<number>(spp).fill(bits) },
    { tag: 259, type: SHORT, values: [compression === 'deflate' ? 8 : compression === 'lzw' ? 5 : 1] },
    { tag: 262, type: SHORT, values: [1] },
    { tag: 277, type: SHORT, values: [spp] },
    { tag: 284, type: SHORT, values: [1] },
    { tag: 317, type: SHORT, values: [spec.predictor ? 2 : 1] },
    { tag: 322, type: LONG, values: [tile] },
    { tag: 323, type: LONG, values: [tileH] },
    { tag: 324, type: LONG, values: tiles.map(() => 0) },
    { tag: 325, type: LONG, values: tiles.map((t) => t.length) },
    ...(spp > 1 ? [{ tag: 338, type: SHORT, values: new Array<number>(spp - 1).fill(0) }] : []),
    { tag: 339, type: SHORT, values: new Array<number>(spp).fill(1) },
    { tag: 33550, type: DOUBLE, values: [spec.resolution, spec.resolution, 0] },
    { tag: 33922, type: DOUBLE, values: [0, 0, 0, spec.originX, spec.originY, 0] },
    { tag: 34735, type: SHORT, values: geoKeys },
    ...(spec.nodata !== undefined ? [{ tag: 42113, type: ASCII, values: `${spec.nodata}\0` }] : []),
  ];
  const size = (e: (typeof entries)[number]) => (typeof e.values === 'string' ? e.values.length : e.values.length * (e.type === DOUBLE ? 8 : e.type === LONG ? 4 : 2));
  const ifdOffset = 8;
  const ifdSize = 2 + entries.length * 12 + 4;
  let extra = ifdOffset + ifdSize;
  const extraOffsets = entries.map((e) => {
    if (size(e) <= 4) return 0;
    const o = extra;
    extra += size(e) + (size(e) % 2);
    return o;
  });
  const dataStart = extra;
  const tileOffsets: number[] = [];
  let p = dataStart;
  for (const t of tiles) {
    tileOffsets.push(p);
    p += t.length;
  }
  entries.find((e) => e.tag === 324)!.values = tileOffsets;
  const buf = Buffer.alloc(p);
  buf.write('II', 0, 'latin1');
  buf.writeUInt16LE(42, 2);
  buf.writeUInt32LE(ifdOffset, 4);
  buf.writeUInt16LE(entries.length, ifdOffset);
  entries.forEach((e, i) => {
    const o = ifdOffset + 2 + i * 12;
    const count = typeof e.values === 'string' ? e.values.length : e.values.length;
    buf.writeUInt16LE(e.tag, o);
    buf.writeUInt16LE(e.type, o + 2);
    buf.writeUInt32LE(count, o + 4);
    const target = size(e) <= 4 ? o + 8 : extraOffsets[i]!;
    if (size(e) > 4) buf.writeUInt32LE(target, o + 8);
    if (typeof e.values === 'string') buf.write(e.values, target, 'latin1');
    else
      e.values.forEach((v, k) => {
        if (e.type === SHORT) buf.writeUInt16LE(v, target + k * 2);
        else if (e.type === LONG) buf.writeUInt32LE(v, target + k * 4);
        else buf.writeDoubleLE(v, target + k * 8);
      });
  });
  buf.writeUInt32LE(0, ifdOffset + 2 + entries.length * 12);
  tiles.forEach((t, i) => t.copy(buf, tileOffsets[i]!));
  return buf;
}
