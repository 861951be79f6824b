/**
 * Map tiles of a raster window: the OGC WebMercatorQuad tile matrix set (EPSG:3857, 256 px tiles,
 * tile (0, 0) of zoom z at the north-west, 2^z × 2^z tiles), and the nearest-neighbour mapping of
 * a tile's pixels onto a window of a capture's grid (its UTM zone, or any CRS proj4 knows).
 *
 * A tile's mapping is computed once per (window grid, z, x, y) and kept (an LRU of 64 MB per thread), so a warm tile is a gather and an encode, not a warp. The mapping covers only the part
 * of the tile over the window (plus one pixel): there the transform is projected exactly with
 * proj4 at nodes every 16 px and interpolated bilinearly in between (as GDAL's approximate
 * transformer does; over 16 px of a tile at the field's scale the error is far below a
 * thousandth of a source pixel), or exactly at every pixel when that part is small. A pixel takes
 * the source pixel its centre falls in.
 */
import { LRUCache } from 'lru-cache';
import type { TileMapping, WindowGrid } from '../compute/tasks.js';
import { fromWgs84, toWgs84 } from './crs.js';

export const TILE_SIZE = 256;
/** The deepest zoom served (z ≥ 22 is refused). */
export const MAX_ZOOM = 21;

const R = 6378137;
const HALF = Math.PI * R;

/** Longitude/latitude (degrees) of a global pixel position (x, y) at zoom z (fractional: px edges). */
export function pixelToLonLat(px: number, py: number, z: number): [number, number] {
  const size = TILE_SIZE * 2 ** z;
  const mx = (px / size) * 2 * HALF - HALF;
  const my = HALF - (py / size) * 2 * HALF;
  return [(mx / R) * (180 / Math.PI), Math.atan(Math.sinh(my / R)) * (180 / Math.PI)];
}

/** Global pixel position of a longitude/latitude at zoom z. */
export function lonLatToPixel(lon: number, lat: number, z: number): [number, number] {
  const size = TILE_SIZE * 2 ** z;
  const phi = (Math.max(-85.0511287798, Math.min(85.0511287798, lat)) * Math.PI) / 180;
  const mx = (lon * Math.PI * R) / 180;
  const my = R * Math.log(Math.tan(Math.PI / 4 + phi / 2));
  return [((mx + HALF) / (2 * HALF)) * size, ((HALF - my) / (2 * HALF)) * size];
}

/** West, south, east, north (degrees) of a tile. */
export function tileBounds(z: number, x: number, y: number): [number, number, number, number] {
  const [w, n] = pixelToLonLat(x * TILE_SIZE, y * TILE_SIZE, z);
  const [e, s] = pixelToLonLat((x + 1) * TILE_SIZE, (y + 1) * TILE_SIZE, z);
  return [w, s, e, n];
}

export const gridKey = (g: WindowGrid) =>
  `${g.epsg}|${g.originX}|${g.originY}|${g.resX}|${g.resY}|${g.width}|${g.height}`;

/** The window's extent in longitude/latitude: its outline sampled at 16 points a side. */
export function windowLonLatBounds(g: WindowGrid): [number, number, number, number] {
  const inv = toWgs84(g.epsg);
  let w = Infinity;
  let s = Infinity;
  let e = -Infinity;
  let n = -Infinity;
  const add = (i: number, j: number) => {
    const [lon, lat] = inv([g.originX + i * g.resX, g.originY + j * g.resY]);
    if (lon < w) w = lon;
    if (lon > e) e = lon;
    if (lat < s) s = lat;
    if (lat > n) n = lat;
  };
  for (let k = 0; k <= 16; k++) {
    const f = k / 16;
    add(f * g.width, 0);
    add(f * g.width, g.height);
    add(0, f * g.height);
    add(g.width, f * g.height);
  }
  return [w, s, e, n];
}

export type TileMap = TileMapping;

const bounds = new LRUCache<string, [number, number, number, number]>({ max: 1024 });
const maps = new LRUCache<string, TileMap | false>({
  maxSize: 64 * 1_048_576,
  sizeCalculation: (m) => (m ? m.idx.byteLength + 64 : 64),
});

/** The tile's mapping onto the window (cached); false when the tile does not touch the window. */
export function tileMap(g: WindowGrid, z: number, x: number, y: number): TileMap | false {
  const gk = gridKey(g);
  const key = `${gk}|${z}|${x}|${y}`;
  const hit = maps.get(key);
  if (hit !== undefined) return hit;
  let b = bounds.get(gk);
  if (!b) {
    b = windowLonLatBounds(g);
    bounds.set(gk, b);
  }
  const m = computeTileMap(g, b, z, x, y);
  maps.set(key, m);
  return m;
}

function computeTileMap(g: WindowGrid, b: [number, number, number, number], z: number, x: number, y: number) {
  const [pw, pn] = lonLatToPixel(b[0], b[3], z);
  const [pe, ps] = lonLatToPixel(b[2], b[1], z);
  const x0 = Math.max(x * TILE_SIZE, Math.floor(pw) - 1);
  const x1 = Math.min((x + 1) * TILE_SIZE, Math.ceil(pe) + 1);
  const y0 = Math.max(y * TILE_SIZE, Math.floor(pn) - 1);
  const y1 = Math.min((y + 1) * TILE_SIZE, Math.ceil(ps) + 1);
  if (x1 <= x0 || y1 <= y0) return false as const;
  const width = x1 - x0;
  const height = y1 - y0;
  const fwd = fromWgs84(g.epsg);
  /** Fractional window column and row of a global pixel position. */
  const source = (px: number, py: number): [number, number] => {
    const [sx, sy] = fwd(pixelToLonLat(px, py, z));
    return [(sx - g.originX) / g.resX, (sy - g.originY) / g.resY];
  };
  // Shared memory: the API thread keeps the mapping and hands it to whichever thread draws the
  // tile next without a copy (a structured clone of shared memory shares it).
  const idx = new Int32Array(new SharedArrayBuffer(width * height * 4)).fill(-1);
  const put = (k: number, c: number, r: number) => {
    const ci = Math.floor(c);
    const ri = Math.floor(r);
    if (ci >= 0 && ci < g.width && ri >= 0 && ri < g.height) idx[k] = ri * g.width + ci;
  };
  if (width * height <= 1024) {
    for (let j = 0; j < height; j++)
      for (let i = 0; i < width; i++) {
        const [c, r] = source(x0 + i + 0.5, y0 + j + 0.5);
        put(j * width + i, c, r);
      }
    return { x0: x0 - x * TILE_SIZE, y0: y0 - y * TILE_SIZE, width, height, idx };
  }
  // Nodes every STEP px over the rectangle (and on its far edges), exact; pixel centres between.
  const STEP = 16;
  const nx = Math.ceil(width / STEP) + 1;
  const ny = Math.ceil(height / STEP) + 1;
  const at = (k: number, size: number) => Math.min(k * STEP, size);
  const cols = new Float64Array(nx * ny);
  const rows = new Float64Array(nx * ny);
  for (let j = 0; j < ny; j++)
    for (let i = 0; i < nx; i++) {
      const [c, r] = source(x0 + at(i, width), y0 + at(j, height));
      cols[j * nx + i] = c;
      rows[j * nx + i] = r;
    }
  for (let j = 0; j < height; j++) {
    const py = j + 0.5;
    const nj = Math.min(Math.floor(py / STEP), ny - 2);
    const ya = at(nj, height);
    const fy = (py - ya) / (at(nj + 1, height) - ya);
    for (let i = 0; i < width; i++) {
      const px = i + 0.5;
      const ni = Math.min(Math.floor(px / STEP), nx - 2);
      const xa = at(ni, width);
      const fx = (px - xa) / (at(ni + 1, width) - xa);
      const a = nj * nx + ni;
      const c =
        (cols[a]! * (1 - fx) + cols[a + 1]! * fx) * (1 - fy) + (cols[a + nx]! * (1 - fx) + cols[a + nx + 1]! * fx) * fy;
      const r =
        (rows[a]! * (1 - fx) + rows[a + 1]! * fx) * (1 - fy) + (rows[a + nx]! * (1 - fx) + rows[a + nx + 1]! * fx) * fy;
      put(j * width + i, c, r);
    }
  }
  return { x0: x0 - x * TILE_SIZE, y0: y0 - y * TILE_SIZE, width, height, idx };
}
