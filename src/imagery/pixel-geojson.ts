/**
 * The per-pixel GeoJSON of an index result, written by hand: one Polygon feature per field pixel
 * (the pixel's square, reprojected to WGS84), property `value` (a number, or null where masked).
 * It loops over pixels, so it runs in the compute threads (src/threads/compute-worker.ts), next
 * to the values, never on the API thread: a 100 ha field is 2 MB of text, tens of ms of CPU that
 * would stall every other request. JSON.stringify of nested coordinate arrays is several times slower and allocates
 * per pixel; this writes bytes straight into one buffer:
 * - the grid's corner nodes are projected and formatted once per grid (every capture on the same
 *   tiling over a field shares it) and kept as bytes, so a ring is five byte copies;
 * - values are written as fixed-point decimals (6 places) digit by digit.
 */
import type { Room, WindowGrid } from '../compute/tasks.js';
import { LRUCache } from 'lru-cache';
import { toWgs84 } from './crs.js';

export type { Room };

export type PixelGrid = WindowGrid;

const coord = (x: number) => (Math.round(x * 1e7) / 1e7).toString();

interface GridNodes {
  /** `[lon,lat]` of every node, row-major over (width + 1) × (height + 1), back to back. */
  bytes: Buffer;
  /** Start of node k in `bytes`; node k ends where k + 1 starts. */
  start: Uint32Array;
  /** The longest node text. */
  longest: number;
}

const grids = new LRUCache<string, GridNodes>({
  maxSize: 32 * 1_048_576,
  sizeCalculation: (g) => g.bytes.byteLength + g.start.byteLength,
});

function gridNodes(grid: PixelGrid): GridNodes {
  const key = `${grid.epsg}|${grid.originX}|${grid.originY}|${grid.resX}|${grid.resY}|${grid.width}|${grid.height}`;
  const hit = grids.get(key);
  if (hit) return hit;
  const inv = toWgs84(grid.epsg);
  const cols = grid.width + 1;
  const rows = grid.height + 1;
  const start = new Uint32Array(cols * rows + 1);
  const texts: string[] = new Array(cols * rows);
  let at = 0;
  let longest = 0;
  for (let j = 0; j < rows; j++) {
    for (let i = 0; i < cols; i++) {
      const [lon, lat] = inv([grid.originX + i * grid.resX, grid.originY + j * grid.resY]);
      const s = `[${coord(lon)},${coord(lat)}]`;
      const k = j * cols + i;
      texts[k] = s;
      start[k] = at;
      at += s.length;
      if (s.length > longest) longest = s.length;
    }
  }
  start[cols * rows] = at;
  const nodes = { bytes: Buffer.from(texts.join(''), 'latin1'), start, longest };
  grids.set(key, nodes);
  return nodes;
}

const ascii = (s: string) => Buffer.from(s, 'latin1');
const OPEN = ascii('{"type":"FeatureCollection","features":[');
const FEATURE = ascii('{"type":"Feature","geometry":{"type":"Polygon","coordinates":[[');
const PROPS = ascii(']]},"properties":{"value":');
const NULL = ascii('null');
const CLOSE = ascii(']}');
/** Longest value text: sign, 9 integer digits, point, 6 decimals (larger magnitudes use toString, ≤ 24). */
const VALUE_MAX = 24;

function put(out: Buffer, at: number, src: Uint8Array, from = 0, to = src.length): number {
  for (let i = from; i < to; i++) out[at++] = src[i]!;
  return at;
}

/** `v` rounded to 6 decimals, as JSON; null when not finite. */
function putValue(out: Buffer, at: number, v: number): number {
  if (!Number.isFinite(v)) return put(out, at, NULL);
  if (Math.abs(v) >= 1e9) return at + out.write((Math.round(v * 1e6) / 1e6).toString(), at, 'latin1');
  let m = Math.round(v * 1e6);
  if (m < 0) {
    out[at++] = 45; // '-'
    m = -m;
  }
  const ip = Math.floor(m / 1e6);
  let frac = m - ip * 1e6;
  if (ip === 0) out[at++] = 48;
  else {
    const s = at;
    for (let x = ip; x > 0; x = Math.floor(x / 10)) out[at++] = 48 + (x % 10);
    out.subarray(s, at).reverse();
  }
  if (frac > 0) {
    out[at++] = 46; // '.'
    let digits = 6;
    while (frac % 10 === 0) {
      frac /= 10;
      digits--;
    }
    for (let d = digits - 1; d >= 0; d--) {
      out[at + d] = 48 + (frac % 10);
      frac = Math.floor(frac / 10);
    }
    at += digits;
  }
  return at;
}

/**
 * The FeatureCollection as bytes, counter-clockwise rings in lon/lat (RFC 7946), from byte
 * `room.before` to `room.after` bytes before the end: the API thread writes the response's head
 * and tail there instead of copying megabytes into a new buffer. The result owns its whole
 * ArrayBuffer (exactly its length), so that a worker can transfer it.
 */
export function pixelGeoJson(
  grid: PixelGrid,
  values: Float32Array,
  inside: Uint8Array,
  room: Room = { before: 0, after: 0 },
): Buffer {
  const nodes = gridNodes(grid);
  const cols = grid.width + 1;
  let features = 0;
  for (let k = 0; k < inside.length; k++) features += inside[k] ? 1 : 0;
  const perFeature = FEATURE.length + 5 * nodes.longest + 4 + PROPS.length + VALUE_MAX + 3;
  const out = Buffer.allocUnsafe(room.before + OPEN.length + features * perFeature + CLOSE.length + room.after);
  let at = put(out, room.before, OPEN);
  const { bytes, start } = nodes;
  const node = (k: number) => {
    at = put(out, at, bytes, start[k]!, start[k + 1]!);
  };
  let first = true;
  for (let j = 0; j < grid.height; j++) {
    for (let i = 0; i < grid.width; i++) {
      const k = j * grid.width + i;
      if (!inside[k]) continue;
      if (!first) out[at++] = 44; // ','
      first = false;
      at = put(out, at, FEATURE);
      // resY < 0: row j + 1 is south of row j. SW, SE, NE, NW, SW.
      const sw = (j + 1) * cols + i;
      const nw = j * cols + i;
      node(sw);
      out[at++] = 44;
      node(sw + 1);
      out[at++] = 44;
      node(nw + 1);
      out[at++] = 44;
      node(nw);
      out[at++] = 44;
      node(sw);
      at = put(out, at, PROPS);
      at = putValue(out, at, values[k]!);
      out[at++] = 125; // '}'
      out[at++] = 125;
    }
  }
  at = put(out, at, CLOSE);
  // An exact copy in an ArrayBuffer of its own (a small Buffer would sit in Node's shared pool):
  // the slack of the estimate is not kept alive, and the buffer can be transferred.
  return Buffer.from(out.buffer.slice(out.byteOffset, out.byteOffset + at + room.after));
}
