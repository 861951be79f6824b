/**
 * The index map of a field on its pixel grid (domain code) and the small raster operations the
 * reports share: robust statistics, connected regions, pixel boundaries traced into polygons,
 * grid to lon/lat. Grid nodes are (i, j) with j growing southwards (row order of the raster).
 */
import { toWgs84, type CrsRef } from '../../imagery/index.js';
import { geodesicAreaHa } from '../../fields/index.js';

export interface IndexRaster {
  width: number;
  height: number;
  /** The raster's CRS: an EPSG code, or the proj4 definition of a user-defined one. */
  epsg: CrsRef;
  originX: number;
  originY: number;
  resX: number;
  resY: number;
  /** Index value per pixel; NaN where masked (cloud, no data) or outside the field. */
  values: Float32Array;
  /** 1 where the pixel centre lies inside the field. */
  inside: Uint8Array;
}

/**
 * Ground area of one pixel in hectares, whatever the CRS and its unit (metres, feet, degrees): the
 * geodesic area of the grid's extent on the WGS84 ellipsoid, edges densified, over its pixel count.
 */
export function pixelAreaHa(
  g: Pick<IndexRaster, 'epsg' | 'resX' | 'resY' | 'originY' | 'height' | 'originX' | 'width'>,
): number {
  const node = gridToLonLat(g);
  const ring: Array<[number, number]> = [];
  const steps = 8;
  for (let s = 0; s < steps; s++) ring.push(node((g.width * s) / steps, 0));
  for (let s = 0; s < steps; s++) ring.push(node(g.width, (g.height * s) / steps));
  for (let s = steps; s > 0; s--) ring.push(node((g.width * s) / steps, g.height));
  for (let s = steps; s > 0; s--) ring.push(node(0, (g.height * s) / steps));
  ring.push(ring[0]!);
  return geodesicAreaHa({ type: 'Polygon', coordinates: [ring] }) / (g.width * g.height);
}

/** Grid node (i, j) or pixel centre (i + 0.5, j + 0.5) to lon/lat. */
export function gridToLonLat(
  g: Pick<IndexRaster, 'epsg' | 'originX' | 'originY' | 'resX' | 'resY'>,
): (i: number, j: number) => [number, number] {
  const inv = toWgs84(g.epsg);
  return (i, j) => inv([g.originX + i * g.resX, g.originY + j * g.resY]);
}

export function validValues(r: IndexRaster): Float64Array {
  let n = 0;
  for (let k = 0; k < r.values.length; k++) if (r.inside[k] && !Number.isNaN(r.values[k]!)) n++;
  const out = new Float64Array(n);
  n = 0;
  for (let k = 0; k < r.values.length; k++) if (r.inside[k] && !Number.isNaN(r.values[k]!)) out[n++] = r.values[k]!;
  return out.sort();
}

/** Quantile of sorted values, linear between order statistics (numpy's default). */
export function quantile(sorted: ArrayLike<number>, q: number): number {
  if (!sorted.length) return NaN;
  const pos = (sorted.length - 1) * q;
  const lo = Math.floor(pos);
  const hi = Math.min(sorted.length - 1, lo + 1);
  return sorted[lo]! + (sorted[hi]! - sorted[lo]!) * (pos - lo);
}

export function medianAbsDeviation(sorted: ArrayLike<number>, median: number): number {
  const dev = Float64Array.from(sorted as ArrayLike<number>, (v) => Math.abs(v - median)).sort();
  return quantile(dev, 0.5);
}

export interface Region {
  label: number;
  pixels: number[];
}

/**
 * Connected regions of equal, non-negative labels (-1 = ignore), with 4- or 8-connectivity.
 * Returns the region id of every pixel (-1 for ignored ones) and the regions.
 */
export function connectedRegions(
  labels: Int32Array,
  width: number,
  height: number,
  eight: boolean,
): { ids: Int32Array; regions: Region[] } {
  const ids = new Int32Array(labels.length).fill(-1);
  const regions: Region[] = [];
  const stack: number[] = [];
  for (let start = 0; start < labels.length; start++) {
    const lab = labels[start]!;
    if (lab < 0 || ids[start] !== -1) continue;
    const id = regions.length;
    const pixels: number[] = [];
    ids[start] = id;
    stack.push(start);
    while (stack.length) {
      const k = stack.pop()!;
      pixels.push(k);
      const i = k % width;
      const j = (k - i) / width;
      for (let dj = -1; dj <= 1; dj++) {
        for (let di = -1; di <= 1; di++) {
          if ((di === 0 && dj === 0) || (!eight && di !== 0 && dj !== 0)) continue;
          const ni = i + di;
          const nj = j + dj;
          if (ni < 0 || nj < 0 || ni >= width || nj >= height) continue;
          const nk = nj * width + ni;
          if (ids[nk] === -1 && labels[nk] === lab) {
            ids[nk] = id;
            stack.push(nk);
          }
        }
      }
    }
    regions.push({ label: lab, pixels });
  }
  return { ids, regions };
}

export type Ring = Array<[number, number]>;
/** Polygons in grid node coordinates: [outer, ...holes]; outers counter-clockwise on the map. */
export type GridPolygon = Ring[];

const signedArea = (ring: Ring) => {
  // Map orientation: x = i, y = -j.
  let s = 0;
  for (let k = 0; k < ring.length - 1; k++) s += ring[k]![0] * -ring[k + 1]![1] - ring[k + 1]![0] * -ring[k]![1];
  return s / 2;
};

function insideRing(x: number, y: number, ring: Ring): boolean {
  let c = false;
  for (let a = 0, b = ring.length - 1; a < ring.length; b = a++) {
    const [xa, ya] = ring[a]!;
    const [xb, yb] = ring[b]!;
    if (ya > y !== yb > y && x < ((xb - xa) * (y - ya)) / (yb - ya) + xa) c = !c;
  }
  return c;
}

/**
 * Traces the outline of the pixels where `member(k)` holds: every pixel side between a member and
 * a non-member becomes an edge with the member on its left, edges are chained into rings (at a
 * corner shared by two diagonal members the left turn is taken, so they stay apart), collinear
 * nodes are dropped, and holes are attached to the smallest outer ring around them. The result
 * covers exactly the member pixels' squares.
 */
export function tracePixels(width: number, height: number, member: (k: number) => boolean): GridPolygon[] {
  const is = (i: number, j: number) => i >= 0 && j >= 0 && i < width && j < height && member(j * width + i);
  const W = width + 1;
  // Outgoing edges per start node: direction codes 0 E, 1 S, 2 W, 3 N.
  const out = new Map<number, number[]>();
  const add = (i: number, j: number, dir: number) => {
    const key = j * W + i;
    const list = out.get(key);
    if (list) list.push(dir);
    else out.set(key, [dir]);
  };
  for (let j = 0; j < height; j++) {
    for (let i = 0; i < width; i++) {
      if (!member(j * width + i)) continue;
      if (!is(i, j - 1)) add(i + 1, j, 2); // top: TR -> TL (west)
      if (!is(i - 1, j)) add(i, j, 1); // left: TL -> BL (south)
      if (!is(i, j + 1)) add(i, j + 1, 0); // bottom: BL -> BR (east)
      if (!is(i + 1, j)) add(i + 1, j + 1, 3); // right: BR -> TR (north)
    }
  }
  const DI = [1, 0, -1, 0];
  const DJ = [0, 1, 0, -1];
  const rings: Ring[] = [];
  for (const [startKey, startDirs] of out) {
    while (startDirs.length) {
      let dir = startDirs.pop()!;
      let i = startKey % W;
      let j = (startKey - i) / W;
      const ring: Ring = [[i, j]];
      for (let guard = 0; guard < 4 * (width + 1) * (height + 1) + 4; guard++) {
        i += DI[dir]!;
        j += DJ[dir]!;
        const key = j * W + i;
        const dirs = out.get(key);
        if (!dirs?.length) break;
        // Preference on the map: left turn, straight, right turn (left of heading E is N = 3).
        const prefs = [(dir + 3) % 4, dir, (dir + 1) % 4];
        let pick = -1;
        for (const p of prefs) {
          const at = dirs.indexOf(p);
          if (at >= 0) {
            pick = p;
            dirs.splice(at, 1);
            break;
          }
        }
        if (pick < 0) break;
        if (pick !== dir) ring.push([i, j]);
        dir = pick;
        if (i === ring[0]![0] && j === ring[0]![1]) break;
      }
      if (ring[0]![0] !== ring.at(-1)![0] || ring[0]![1] !== ring.at(-1)![1]) ring.push([ring[0]![0], ring[0]![1]]);
      if (ring.length >= 4) rings.push(dropCollinear(ring));
    }
  }
  const outers = rings
    .filter((r) => signedArea(r) > 0)
    .map((r) => ({ ring: r, area: signedArea(r), holes: [] as Ring[] }));
  outers.sort((a, b) => a.area - b.area);
  for (const hole of rings.filter((r) => signedArea(r) < 0)) {
    // A point just on the non-member side of the hole's first edge lies in the hole.
    const [x0, y0] = hole[0]!;
    const [x1, y1] = hole[1]!;
    const len = Math.hypot(x1 - x0, y1 - y0);
    const di = (x1 - x0) / len;
    const dj = (y1 - y0) / len;
    // Members are on the left of each edge; right of the heading is (-dj, di) in grid terms.
    const px = (x0 + x1) / 2 - dj * 0.5;
    const py = (y0 + y1) / 2 + di * 0.5;
    const host = outers.find((o) => insideRing(px, py, o.ring));
    if (host) host.holes.push(hole);
  }
  return outers.map((o) => [o.ring, ...o.holes]);
}

function dropCollinear(ring: Ring): Ring {
  const pts = ring.slice(0, -1);
  const keep: Ring = [];
  for (let k = 0; k < pts.length; k++) {
    const a = pts[(k - 1 + pts.length) % pts.length]!;
    const b = pts[k]!;
    const c = pts[(k + 1) % pts.length]!;
    if ((b[0] - a[0]) * (c[1] - b[1]) - (b[1] - a[1]) * (c[0] - b[0]) !== 0) keep.push(b);
  }
  keep.push([keep[0]![0], keep[0]![1]]);
  return keep;
}
