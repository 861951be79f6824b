/**
 * A Cloud Optimized GeoTIFF writer for one float32 band (index rasters), built on the project's
 * TIFF writer (tiff-writer.ts: its tag constants and GeoKey directory). The layout is the one
 * GDAL's COG driver writes and its validator (validate_cloud_optimized_geotiff.py) checks:
 * - GDAL's "ghost" structural metadata right after the header (LAYOUT=IFDS_BEFORE_DATA,
 *   BLOCK_ORDER=ROW_MAJOR, BLOCK_LEADER=SIZE_AS_UINT4, BLOCK_TRAILER=LAST_4_BYTES_REPEATED: each
 *   tile preceded by its size and followed by a copy of its last 4 bytes), then every IFD — full resolution first, then the overviews from the
 *   largest to the smallest — with their out-of-line values, before any pixel data;
 * - the tiles of the smallest overview first and of the full resolution last, each image's tiles
 *   row by row;
 * - square tiles: 256 px, or one tile of the image's size rounded up to 16 px when it fits in 256, DEFLATE with the floating-point predictor (TIFF Technical
 *   Note 3, predictor 3: each row's bytes split into planes, most significant first, then
 *   differenced), nodata declared (GDAL_NODATA, `nan` by default);
 * - overviews halving the size (rounded up) while the image is larger than one tile, each pixel
 *   the mean of the values among the 2 × 2 it covers (no value when none has one);
 * - metadata items in GDAL_METADATA (gdalinfo lists them; a `description` sets the band's).
 */
import { deflateSync } from 'node:zlib';
import { ASCII, DOUBLE, geoTags, LONG, SHORT, type TiffEntry } from './tiff-writer.js';

export interface CogSpec {
  width: number;
  height: number;
  /** Row-major values; NaN where there is none (with the default nodata). */
  data: Float32Array;
  epsg: number;
  /** Top-left corner in CRS units, pixel width and height (resY negative: north up). */
  originX: number;
  originY: number;
  resX: number;
  resY: number;
  /** Dataset metadata items (GDAL_METADATA), in order. */
  metadata?: Record<string, string>;
  /** The band's description. */
  description?: string;
  tileSize?: number;
  /** DEFLATE level; default 6. */
  deflateLevel?: number;
}

const GHOST =
  'LAYOUT=IFDS_BEFORE_DATA\nBLOCK_ORDER=ROW_MAJOR\nBLOCK_LEADER=SIZE_AS_UINT4\nBLOCK_TRAILER=LAST_4_BYTES_REPEATED\nKNOWN_INCOMPATIBLE_EDITION=NO\n';

const xml = (s: string) => s.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;').replace(/"/g, '&quot;');

/**
 * GDAL escapes item values twice (CPLEscapeString, then the XML serialiser) and unescapes them
 * twice on reading: a value escaped once loses everything after its first `&`.
 */
function gdalMetadata(items: Record<string, string>, description?: string): string {
  const lines = Object.entries(items).map(([k, v]) => `  <Item name="${xml(k)}">${xml(xml(v))}</Item>`);
  if (description !== undefined)
    lines.push(`  <Item name="DESCRIPTION" sample="0" role="description">${xml(xml(description))}</Item>`);
  return `<GDALMetadata>\n${lines.join('\n')}\n</GDALMetadata>\0`;
}

/** Each overview level: half the previous (rounded up), mean of the values among the 2 × 2. */
function halve(src: Float32Array, w: number, h: number): { data: Float32Array; width: number; height: number } {
  const width = Math.ceil(w / 2);
  const height = Math.ceil(h / 2);
  const data = new Float32Array(width * height);
  for (let y = 0; y < height; y++) {
    for (let x = 0; x < width; x++) {
      let sum = 0;
      let n = 0;
      for (let dy = 0; dy < 2; dy++) {
        const sy = 2 * y + dy;
        if (sy >= h) break;
        for (let dx = 0; dx < 2; dx++) {
          const sx = 2 * x + dx;
          if (sx >= w) break;
          const v = src[sy * w + sx]!;
          if (!Number.isNaN(v)) {
            sum += v;
            n++;
          }
        }
      }
      data[y * width + x] = n ? sum / n : Number.NaN;
    }
  }
  return { data, width, height };
}

/**
 * The tiles of one image, row by row: each padded to the full tile size (no value in the padding),
 * bytes reordered and differenced by the floating-point predictor, then DEFLATE-compressed.
 */
function tilesOf(data: Float32Array, w: number, h: number, tile: number, level: number): Buffer[] {
  const out: Buffer[] = [];
  const rowBytes = tile * 4;
  const block = new Float32Array(tile * tile);
  const raw = new Uint8Array(block.buffer);
  const enc = Buffer.allocUnsafe(tile * tile * 4);
  for (let ty = 0; ty < Math.ceil(h / tile); ty++) {
    for (let tx = 0; tx < Math.ceil(w / tile); tx++) {
      block.fill(Number.NaN);
      const x0 = tx * tile;
      const x1 = Math.min(w, x0 + tile);
      for (let y = 0; y < tile; y++) {
        const sy = ty * tile + y;
        if (sy >= h) break;
        block.set(data.subarray(sy * w + x0, sy * w + x1), y * tile);
      }
      for (let y = 0; y < tile; y++) {
        const r = y * rowBytes;
        // Planes: the most significant byte of every sample first (little-endian floats: byte 3).
        for (let i = 0; i < tile; i++) {
          const s = r + i * 4;
          enc[r + i] = raw[s + 3]!;
          enc[r + tile + i] = raw[s + 2]!;
          enc[r + 2 * tile + i] = raw[s + 1]!;
          enc[r + 3 * tile + i] = raw[s]!;
        }
        // Horizontal differencing over the row's bytes (one sample per pixel: stride 1).
        for (let i = rowBytes - 1; i > 0; i--) enc[r + i] = (enc[r + i]! - enc[r + i - 1]!) & 0xff;
      }
      out.push(deflateSync(enc, { level }));
    }
  }
  return out;
}

const sizeOf = (type: number) => (type === DOUBLE ? 8 : type === LONG ? 4 : type === SHORT ? 2 : 1);
const valuesOf = (e: TiffEntry) => ('values' in e ? e.values : []);
const byteSize = (e: TiffEntry) => {
  const v = valuesOf(e);
  return typeof v === 'string' ? v.length : v.length * sizeOf(e.type);
};

/** Writes one IFD at `at` with its out-of-line values after it; returns the end. */
function writeIfd(buf: Buffer, at: number, entries: TiffEntry[], next: number): number {
  buf.writeUInt16LE(entries.length, at);
  let extra = at + 2 + entries.length * 12 + 4;
  entries.forEach((e, i) => {
    const o = at + 2 + i * 12;
    const v = valuesOf(e);
    buf.writeUInt16LE(e.tag, o);
    buf.writeUInt16LE(e.type, o + 2);
    buf.writeUInt32LE(v.length, o + 4);
    const size = byteSize(e);
    let target = o + 8;
    if (size > 4) {
      target = extra;
      buf.writeUInt32LE(target, o + 8);
      extra += size + (size % 2);
    }
    if (typeof v === 'string') buf.write(v, target, 'latin1');
    else
      v.forEach((x, k) => {
        if (e.type === SHORT) buf.writeUInt16LE(x, target + k * 2);
        else if (e.type === LONG) buf.writeUInt32LE(x, target + k * 4);
        else if (e.type === DOUBLE) buf.writeDoubleLE(x, target + k * 8);
        else buf.writeUInt8(x, target + k);
      });
  });
  buf.writeUInt32LE(next, at + 2 + entries.length * 12);
  return extra;
}

const ifdSize = (entries: TiffEntry[]) =>
  2 +
  entries.length * 12 +
  4 +
  entries.reduce((s, e) => s + (byteSize(e) > 4 ? byteSize(e) + (byteSize(e) % 2) : 0), 0);

export function writeCog(spec: CogSpec): Buffer {
  // An image within one tile gets a tile just its size (rounded up to 16, as GDAL requires), not
  // 256 px of padding to compress.
  const tile = spec.tileSize ?? Math.min(256, Math.max(16, Math.ceil(Math.max(spec.width, spec.height) / 16) * 16));
  const level = spec.deflateLevel ?? 6;
  const images = [{ data: spec.data, width: spec.width, height: spec.height }];
  while (images.at(-1)!.width > tile || images.at(-1)!.height > tile) {
    const last = images.at(-1)!;
    images.push(halve(last.data, last.width, last.height));
  }
  const tiles = images.map((im) => tilesOf(im.data, im.width, im.height, tile, level));
  const ifds: TiffEntry[][] = images.map((im, i) => {
    const entries: TiffEntry[] = [
      ...(i > 0 ? [{ tag: 254, type: LONG, values: [1] }] : []),
      { tag: 256, type: LONG, values: [im.width] },
      { tag: 257, type: LONG, values: [im.height] },
      { tag: 258, type: SHORT, values: [32] },
      { tag: 259, type: SHORT, values: [8] },
      { tag: 262, type: SHORT, values: [1] },
      { tag: 277, type: SHORT, values: [1] },
      { tag: 284, type: SHORT, values: [1] },
      { tag: 317, type: SHORT, values: [3] },
      { tag: 322, type: SHORT, values: [tile] },
      { tag: 323, type: SHORT, values: [tile] },
      { tag: 324, type: LONG, values: tiles[i]!.map(() => 0) },
      { tag: 325, type: LONG, values: tiles[i]!.map((t) => t.length) },
      { tag: 339, type: SHORT, values: [3] },
    ];
    if (i === 0) {
      const geo = geoTags({ epsg: spec.epsg, originX: spec.originX, originY: spec.originY, resolution: spec.resX });
      // geoTags assumes square pixels: the scale is written from the grid itself.
      geo[0] = { tag: 33550, type: DOUBLE, values: [spec.resX, -spec.resY, 0] };
      entries.push(...geo);
      if (spec.metadata || spec.description !== undefined)
        entries.push({ tag: 42112, type: ASCII, values: gdalMetadata(spec.metadata ?? {}, spec.description) });
    }
    entries.push({ tag: 42113, type: ASCII, values: 'nan\0' });
    return entries.sort((a, b) => a.tag - b.tag);
  });
  const ghost = `GDAL_STRUCTURAL_METADATA_SIZE=${String(GHOST.length).padStart(6, '0')} bytes\n${GHOST}`;
  let pos = 8 + ghost.length;
  pos += pos % 2;
  const ifdAt = ifds.map((e) => {
    const at = pos;
    pos = at + ifdSize(e);
    return at;
  });
  // Pixel data: the smallest overview first, the full resolution last.
  for (let i = images.length - 1; i >= 0; i--) {
    const offsets = valuesOf(ifds[i]!.find((e) => e.tag === 324)!) as number[];
    tiles[i]!.forEach((t, k) => {
      offsets[k] = pos + 4;
      pos += 4 + t.length + 4;
    });
  }
  const buf = Buffer.alloc(pos);
  buf.write('II', 0, 'latin1');
  buf.writeUInt16LE(42, 2);
  buf.writeUInt32LE(ifdAt[0]!, 4);
  buf.write(ghost, 8, 'latin1');
  for (const [i, e] of ifds.entries()) writeIfd(buf, ifdAt[i]!, e, ifdAt[i + 1] ?? 0);
  for (let i = images.length - 1; i >= 0; i--) {
    const offsets = valuesOf(ifds[i]!.find((e) => e.tag === 324)!) as number[];
    for (const [k, t] of tiles[i]!.entries()) {
      const at = offsets[k]!;
      buf.writeUInt32LE(t.length, at - 4);
      t.copy(buf, at);
      t.copy(buf, at + t.length, t.length - 4);
    }
  }
  return buf;
}
