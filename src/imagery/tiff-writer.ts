/**
 * A small GeoTIFF writer: single band, tiled, DEFLATE (optionally with the horizontal predictor),
 * georeferenced with ModelPixelScale/ModelTiepoint and an EPSG code. geotiff.js's own writer can
 * neither tile nor compress; this is what the synthetic scenes, the demo and the benchmarks use.
 */
import { deflateSync } from 'node:zlib';

export interface GeoTiffSpec {
  width: number;
  height: number;
  data: Uint16Array | Uint8Array;
  epsg: number;
  /** Top-left corner in CRS units and the pixel size (positive). */
  originX: number;
  originY: number;
  resolution: number;
  tileSize?: number;
  predictor?: boolean;
  nodata?: number;
}

const SHORT = 3;
const LONG = 4;
const DOUBLE = 12;
const ASCII = 2;

export function writeGeoTiff(spec: GeoTiffSpec): Buffer {
  const { width, height, data } = spec;
  const tile = spec.tileSize ?? 256;
  const bits = data instanceof Uint16Array ? 16 : 8;
  const bps = bits / 8;
  const tilesX = Math.ceil(width / tile);
  const tilesY = Math.ceil(height / tile);
  const tiles: Buffer[] = [];
  for (let ty = 0; ty < tilesY; ty++) {
    for (let tx = 0; tx < tilesX; tx++) {
      // Edge tiles are full size, padded with zeros (TIFF tiles all have the same shape).
      const t = bits === 16 ? new Uint16Array(tile * tile) : new Uint8Array(tile * tile);
      for (let y = 0; y < tile; y++) {
        const sy = ty * tile + y;
        if (sy >= height) break;
        const x1 = Math.min(tile, width - tx * tile);
        t.set(data.subarray(sy * width + tx * tile, sy * width + tx * tile + x1), y * tile);
        if (spec.predictor) {
          for (let x = tile - 1; x > 0; x--) t[y * tile + x] = (t[y * tile + x]! - t[y * tile + x - 1]!) & (bits === 16 ? 0xffff : 0xff);
        }
      }
      tiles.push(deflateSync(Buffer.from(t.buffer, t.byteOffset, t.byteLength), { level: 6 }));
    }
  }
  const geoKeys = [1, 1, 0, 3, 1024, 0, 1, spec.epsg === 4326 ? 2 : 1, 1025, 0, 1, 1, spec.epsg === 4326 ? 2048 : 3072, 0, 1, spec.epsg];
  const entries: Array<{ tag: number; type: number; values: number[] | string }> = [
    { tag: 256, type: LONG, values: [width] },
    { tag: 257, type: LONG, values: [height] },
    { tag: 258, type: SHORT, values: [bits] },
    { tag: 259, type: SHORT, values: [8] },
    { tag: 262, type: SHORT, values: [1] },
    { tag: 277, type: SHORT, values: [1] },
    { tag: 284, type: SHORT, values: [1] },
    { tag: 317, type: SHORT, values: [spec.predictor ? 2 : 1] },
    { tag: 322, type: LONG, values: [tile] },
    { tag: 323, type: LONG, values: [tile] },
    { tag: 324, type: LONG, values: tiles.map(() => 0) },
    { tag: 325, type: LONG, values: tiles.map((t) => t.length) },
    { tag: 339, type: SHORT, values: [1] },
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
