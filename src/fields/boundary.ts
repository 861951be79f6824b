/**
 * Validation of field boundaries (domain code: no HTTP, no database).
 *
 * Accepted: a GeoJSON Polygon or MultiPolygon in WGS84 lon/lat (RFC 7946), or a Feature wrapping
 * one (unwrapped). Decisions, also in docs/api.md:
 * - positions have 2 or 3 finite numbers (a third, altitude, is dropped); lon in [-180, 180],
 *   lat in [-90, 90];
 * - consecutive duplicate positions are removed (common in digitised boundaries, harmless);
 * - rings are closed and keep at least 4 positions after that; rings must be simple (OGC Simple
 *   Features: no crossing and no touching, not even at a single vertex); holes lie inside their
 *   shell without touching it or each other; MultiPolygon parts do not overlap or touch;
 * - a ring spanning more than 180° of longitude is refused: fields never cross the antimeridian
 *   in practice, and such a ring is almost always a mistake;
 * - at most `maxVertices` positions in all (default 20,000): enormous polygons are refused;
 * - geodesic area (Karney, WGS84) above 0 and at most `maxAreaHa`;
 * - output rings in RFC 7946 orientation: exteriors counter-clockwise, holes clockwise.
 */
import geographiclib from 'geographiclib-geodesic';

export type Position = [number, number];
export interface Polygon {
  type: 'Polygon';
  coordinates: Position[][];
}
export interface MultiPolygon {
  type: 'MultiPolygon';
  coordinates: Position[][][];
}
export type Boundary = Polygon | MultiPolygon;

export interface BoundaryIssue {
  path: string;
  code: string;
  message: string;
}

export class BoundaryError extends Error {
  constructor(readonly issues: BoundaryIssue[]) {
    super(issues.map((i) => `${i.path}: ${i.message}`).join('; '));
    this.name = 'BoundaryError';
  }
}

export interface ValidBoundary {
  geometry: Boundary;
  areaHa: number;
  bbox: [number, number, number, number];
  vertexCount: number;
}

export interface BoundaryOptions {
  maxAreaHa?: number;
  maxVertices?: number;
  basePath?: string;
}

const geod = geographiclib.Geodesic.WGS84;

function fail(path: string, code: string, message: string): never {
  throw new BoundaryError([{ path, code, message }]);
}

function isObject(v: unknown): v is Record<string, unknown> {
  return typeof v === 'object' && v !== null && !Array.isArray(v);
}

function readPosition(v: unknown, path: string): Position {
  if (!Array.isArray(v)) fail(path, 'invalid_position', 'a position must be an array [longitude, latitude]');
  if (v.length < 2 || v.length > 3)
    fail(path, 'invalid_position', `a position has 2 or 3 numbers, this one has ${v.length}`);
  for (let i = 0; i < v.length; i++) {
    if (typeof v[i] !== 'number' || !Number.isFinite(v[i]))
      fail(`${path}/${i}`, 'invalid_number', 'must be a finite number');
  }
  const [lon, lat] = v as number[];
  if (lon! < -180 || lon! > 180) fail(`${path}/0`, 'longitude_out_of_range', `longitude ${lon} is outside [-180, 180]`);
  if (lat! < -90 || lat! > 90) fail(`${path}/1`, 'latitude_out_of_range', `latitude ${lat} is outside [-90, 90]`);
  return [lon!, lat!];
}

function readRing(v: unknown, path: string, counter: { n: number; max: number }): Position[] {
  if (!Array.isArray(v)) fail(path, 'invalid_ring', 'a linear ring must be an array of positions');
  counter.n += v.length;
  if (counter.n > counter.max) fail(path, 'too_many_vertices', `the boundary has more than ${counter.max} positions`);
  const ring: Position[] = [];
  v.forEach((p, i) => {
    const pos = readPosition(p, `${path}/${i}`);
    const last = ring[ring.length - 1];
    if (!last || last[0] !== pos[0] || last[1] !== pos[1]) ring.push(pos);
  });
  if (v.length >= 2) {
    const a = readPosition(v[0], `${path}/0`);
    const b = readPosition(v[v.length - 1], `${path}/${v.length - 1}`);
    if (a[0] !== b[0] || a[1] !== b[1])
      fail(path, 'ring_not_closed', 'the first and last positions of a ring must be identical');
  }
  if (ring.length < 4)
    fail(path, 'too_few_positions', 'a ring needs at least 4 positions (3 distinct corners and the closing one)');
  let minLon = Infinity;
  let maxLon = -Infinity;
  for (const [lon] of ring) {
    minLon = Math.min(minLon, lon);
    maxLon = Math.max(maxLon, lon);
  }
  if (maxLon - minLon > 180)
    fail(
      path,
      'crosses_antimeridian',
      'rings spanning more than 180° of longitude (antimeridian crossings) are not supported',
    );
  return ring;
}

function readPolygon(v: unknown, path: string, counter: { n: number; max: number }): Position[][] {
  if (!Array.isArray(v)) fail(path, 'invalid_polygon', 'polygon coordinates must be an array of linear rings');
  if (v.length === 0) fail(path, 'invalid_polygon', 'a polygon needs an exterior ring');
  return v.map((r, i) => readRing(r, `${path}/${i}`, counter));
}

/** Twice the signed planar area in lon/lat degrees (only its sign and zero-ness are used). */
function signedArea2(ring: Position[]): number {
  let s = 0;
  for (let i = 0; i < ring.length - 1; i++) s += ring[i]![0] * ring[i + 1]![1] - ring[i + 1]![0] * ring[i]![1];
  return s;
}

interface Segment {
  ax: number;
  ay: number;
  bx: number;
  by: number;
  minx: number;
  maxx: number;
  ring: number;
  index: number;
  ringLength: number; // segments in the ring
}

function orient(ax: number, ay: number, bx: number, by: number, cx: number, cy: number): number {
  const v = (bx - ax) * (cy - ay) - (by - ay) * (cx - ax);
  return v > 0 ? 1 : v < 0 ? -1 : 0;
}

function onSegment(ax: number, ay: number, bx: number, by: number, cx: number, cy: number): boolean {
  return Math.min(ax, bx) <= cx && cx <= Math.max(ax, bx) && Math.min(ay, by) <= cy && cy <= Math.max(ay, by);
}

/** Closed-segment intersection (touching counts). */
function intersects(s: Segment, t: Segment): boolean {
  const o1 = orient(s.ax, s.ay, s.bx, s.by, t.ax, t.ay);
  const o2 = orient(s.ax, s.ay, s.bx, s.by, t.bx, t.by);
  const o3 = orient(t.ax, t.ay, t.bx, t.by, s.ax, s.ay);
  const o4 = orient(t.ax, t.ay, t.bx, t.by, s.bx, s.by);
  if (o1 !== o2 && o3 !== o4) return true;
  if (o1 === 0 && onSegment(s.ax, s.ay, s.bx, s.by, t.ax, t.ay)) return true;
  if (o2 === 0 && onSegment(s.ax, s.ay, s.bx, s.by, t.bx, t.by)) return true;
  if (o3 === 0 && onSegment(t.ax, t.ay, t.bx, t.by, s.ax, s.ay)) return true;
  if (o4 === 0 && onSegment(t.ax, t.ay, t.bx, t.by, s.bx, s.by)) return true;
  return false;
}

/** Adjacent segments of one ring legitimately share exactly their common vertex. */
function adjacentOnly(s: Segment, t: Segment): boolean {
  if (s.ring !== t.ring) return false;
  const n = s.ringLength;
  const d = Math.abs(s.index - t.index);
  if (d !== 1 && d !== n - 1) return false;
  // They must not overlap collinearly beyond the shared vertex.
  const shared = s.index + 1 === t.index || (s.index === n - 1 && t.index === 0) ? [s.bx, s.by] : [s.ax, s.ay];
  const sOther = shared[0] === s.ax && shared[1] === s.ay ? [s.bx, s.by] : [s.ax, s.ay];
  const tOther = shared[0] === t.ax && shared[1] === t.ay ? [t.bx, t.by] : [t.ax, t.ay];
  const collinear = orient(shared[0]!, shared[1]!, sOther[0]!, sOther[1]!, tOther[0]!, tOther[1]!) === 0;
  if (!collinear) return true;
  // Collinear: fine only if they point in opposite directions from the shared vertex (a straight run).
  const dot =
    (sOther[0]! - shared[0]!) * (tOther[0]! - shared[0]!) + (sOther[1]! - shared[1]!) * (tOther[1]! - shared[1]!);
  return dot < 0;
}

/**
 * First pair of intersecting segments among the rings (sweep over x: near-linear for real field
 * boundaries), ignoring the shared vertex of neighbours in a ring.
 */
function firstIntersection(rings: Position[][]): [Segment, Segment] | null {
  const segs: Segment[] = [];
  rings.forEach((ring, r) => {
    const n = ring.length - 1;
    for (let i = 0; i < n; i++) {
      const [ax, ay] = ring[i]!;
      const [bx, by] = ring[i + 1]!;
      segs.push({ ax, ay, bx, by, minx: Math.min(ax, bx), maxx: Math.max(ax, bx), ring: r, index: i, ringLength: n });
    }
  });
  segs.sort((a, b) => a.minx - b.minx);
  for (let i = 0; i < segs.length; i++) {
    const s = segs[i]!;
    const sminy = Math.min(s.ay, s.by);
    const smaxy = Math.max(s.ay, s.by);
    for (let j = i + 1; j < segs.length && segs[j]!.minx <= s.maxx; j++) {
      const t = segs[j]!;
      if (Math.max(t.ay, t.by) < sminy || Math.min(t.ay, t.by) > smaxy) continue;
      if (adjacentOnly(s, t) || adjacentOnly(t, s)) continue;
      if (intersects(s, t)) return [s, t];
    }
  }
  return null;
}

/** Even-odd point in ring. */
function pointInRing(x: number, y: number, ring: Position[]): boolean {
  let inside = false;
  for (let i = 0, j = ring.length - 2; i < ring.length - 1; j = i++) {
    const [xi, yi] = ring[i]!;
    const [xj, yj] = ring[j]!;
    if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
  }
  return inside;
}

function ringAreaM2(ring: Position[]): number {
  const p = geod.Polygon(false);
  for (let i = 0; i < ring.length - 1; i++) p.AddPoint(ring[i]![1], ring[i]![0]);
  return Math.abs(p.Compute(false, true).area ?? 0);
}

/** Geodesic area of a (valid) polygon or multipolygon in hectares, holes subtracted. */
export function geodesicAreaHa(g: Boundary): number {
  const polys = g.type === 'Polygon' ? [g.coordinates] : g.coordinates;
  let m2 = 0;
  for (const rings of polys) {
    m2 += ringAreaM2(rings[0]!);
    for (const hole of rings.slice(1)) m2 -= ringAreaM2(hole);
  }
  return m2 / 10_000;
}

function orientRing(ring: Position[], ccw: boolean): Position[] {
  const isCcw = signedArea2(ring) > 0;
  return isCcw === ccw ? ring : [...ring].reverse();
}

function checkPolygon(rings: Position[][], path: string): void {
  rings.forEach((ring, i) => {
    const [a, b] = ring;
    const flat = ring.every((p) => orient(a![0], a![1], b![0], b![1], p[0], p[1]) === 0);
    if (flat) fail(`${path}/${i}`, 'zero_area', 'the ring encloses no area (all its positions are on one line)');
  });
  const hit = firstIntersection(rings);
  if (hit) {
    const [s, t] = hit;
    if (s.ring === t.ring) {
      fail(
        `${path}/${s.ring}`,
        'self_intersection',
        `the ring crosses or touches itself (edges ${Math.min(s.index, t.index)} and ${Math.max(s.index, t.index)})`,
      );
    }
    fail(
      `${path}/${Math.max(s.ring, t.ring)}`,
      'ring_intersection',
      `ring ${Math.max(s.ring, t.ring)} crosses or touches ring ${Math.min(s.ring, t.ring)}`,
    );
  }
  rings.forEach((ring, i) => {
    if (signedArea2(ring) === 0)
      fail(`${path}/${i}`, 'zero_area', 'the ring encloses no area (all its positions are on one line)');
  });
  const shell = rings[0]!;
  for (let h = 1; h < rings.length; h++) {
    const [x, y] = rings[h]![0]!;
    if (!pointInRing(x, y, shell))
      fail(`${path}/${h}`, 'hole_outside_shell', 'a hole must lie inside the exterior ring');
    for (let k = 1; k < h; k++) {
      const [ox, oy] = rings[k]![0]!;
      if (pointInRing(x, y, rings[k]!) || pointInRing(ox, oy, rings[h]!))
        fail(`${path}/${h}`, 'nested_holes', `hole ${h} overlaps hole ${k}`);
    }
  }
}

function checkParts(parts: Position[][][], path: string): void {
  const shells = parts.map((p) => p[0]!);
  const hit = firstIntersection(shells);
  if (hit)
    fail(
      `${path}/${Math.max(hit[0].ring, hit[1].ring)}`,
      'overlapping_parts',
      `parts ${Math.min(hit[0].ring, hit[1].ring)} and ${Math.max(hit[0].ring, hit[1].ring)} cross or touch`,
    );
  for (let i = 0; i < shells.length; i++) {
    for (let j = 0; j < shells.length; j++) {
      if (i === j) continue;
      const [x, y] = shells[i]![0]!;
      if (!pointInRing(x, y, shells[j]!)) continue;
      // Inside j's shell is allowed only inside one of j's holes (an island in a lake).
      const inHole = parts[j]!.slice(1).some((hole) => pointInRing(x, y, hole));
      if (!inHole) fail(`${path}/${i}`, 'overlapping_parts', `part ${i} lies inside part ${j}`);
    }
  }
}

export function validateBoundary(input: unknown, opts: BoundaryOptions = {}): ValidBoundary {
  const base = opts.basePath ?? '';
  const maxAreaHa = opts.maxAreaHa ?? 10_000;
  const counter = { n: 0, max: opts.maxVertices ?? 20_000 };
  let g: unknown = input;
  let path = base;
  if (isObject(g) && g.type === 'Feature') {
    g = g.geometry;
    path = `${base}/geometry`;
  }
  if (!isObject(g)) fail(path, 'invalid_geometry', 'must be a GeoJSON Polygon or MultiPolygon object');
  if (g.type !== 'Polygon' && g.type !== 'MultiPolygon') {
    fail(
      `${path}/type`,
      'unsupported_geometry_type',
      `must be Polygon or MultiPolygon, got ${typeof g.type === 'string' ? g.type : typeof g.type}`,
    );
  }
  if (!('coordinates' in g)) fail(`${path}/coordinates`, 'missing_coordinates', 'coordinates are required');
  const cpath = `${path}/coordinates`;
  let geometry: Boundary;
  if (g.type === 'Polygon') {
    const rings = readPolygon(g.coordinates, cpath, counter);
    checkPolygon(rings, cpath);
    geometry = { type: 'Polygon', coordinates: rings.map((r, i) => orientRing(r, i === 0)) };
  } else {
    if (!Array.isArray(g.coordinates) || g.coordinates.length === 0)
      fail(cpath, 'invalid_multipolygon', 'a MultiPolygon needs at least one polygon');
    const parts = (g.coordinates as unknown[]).map((p, i) => readPolygon(p, `${cpath}/${i}`, counter));
    for (const [i, rings] of parts.entries()) checkPolygon(rings, `${cpath}/${i}`);
    checkParts(parts, cpath);
    geometry = { type: 'MultiPolygon', coordinates: parts.map((rings) => rings.map((r, i) => orientRing(r, i === 0))) };
  }
  const areaHa = geodesicAreaHa(geometry);
  if (!(areaHa > 0)) fail(cpath, 'zero_area', 'the boundary encloses no area');
  if (areaHa > maxAreaHa)
    fail(cpath, 'area_too_large', `the field is ${areaHa.toFixed(1)} ha; at most ${maxAreaHa} ha is accepted`);
  const bbox: [number, number, number, number] = [Infinity, Infinity, -Infinity, -Infinity];
  const all = geometry.type === 'Polygon' ? [geometry.coordinates] : geometry.coordinates;
  for (const rings of all) {
    for (const [lon, lat] of rings[0]!) {
      bbox[0] = Math.min(bbox[0], lon);
      bbox[1] = Math.min(bbox[1], lat);
      bbox[2] = Math.max(bbox[2], lon);
      bbox[3] = Math.max(bbox[3], lat);
    }
  }
  return { geometry, areaHa, bbox, vertexCount: counter.n };
}
