/**
 * A read-only STAC API over a list of Items, independent of the HTTP server: STAC API v1.0.0 Core,
 * Collections, OGC API Features' item listing and Item Search
 * (https://github.com/radiantearth/stac-api-spec, core/ and item-search/README.md). It serves the
 * demo season's catalogue (demo-catalogue.ts) and, wrapped in a node:http server with fault
 * controls, the tests' and the bench's STAC API (test/helpers/stac-api-server.ts).
 *
 * - `GET /` landing page (`conformsTo`; links self, root, conformance, data, and `search` with
 *   `method: GET` and, unless POST is switched off, `method: POST`), `GET /conformance`,
 *   `GET /collections`, `GET /collections/{id}`, `GET /collections/{id}/items[/{itemId}]`.
 * - `GET /search` and `POST /search` (JSON body) with `bbox` (2D or 3D, antimeridian-crossing),
 *   `intersects` (every GeoJSON geometry type; an exact planar test, not bounding boxes),
 *   `datetime` (an instant, closed and open intervals with `..` or empty ends; a date-only value is
 *   its whole day), `collections`, `ids`, `limit` (default 10; larger than the maximum, 1000, acts
 *   as the maximum), the Query extension (`query: {"eo:cloud_cover": {"lte": 20}}`; operators eq
 *   neq lt lte gt gte startsWith endsWith contains in) and, when enabled, CQL2 `filter` (cql2-json,
 *   and cql2-text conjunctions of comparisons). `bbox` with `intersects` → 400, as the spec requires.
 * - Results sorted by datetime then id, paged by a continuation token naming the last Item of the
 *   page (Items published between pages are neither repeated nor skipped): GET answers a `next`
 *   link whose href repeats the query with `token=`; POST answers
 *   `{ method: 'POST', body: { token }, merge: true }`.
 * - Errors as `{ code, description }` JSON (the spec's exception shape).
 */
import { isCalendarDate } from '../platform/dates.js';

export const CONFORMANCE = {
  core: 'https://api.stacspec.org/v1.0.0/core',
  collections: 'https://api.stacspec.org/v1.0.0/collections',
  features: 'https://api.stacspec.org/v1.0.0/ogcapi-features',
  itemSearch: 'https://api.stacspec.org/v1.0.0/item-search',
  query: 'https://api.stacspec.org/v1.0.0-rc.1/item-search#query',
  filter: 'https://api.stacspec.org/v1.0.0-rc.2/item-search#filter',
  ogcCore: 'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/core',
  ogcGeojson: 'http://www.opengis.net/spec/ogcapi-features-1/1.0/conf/geojson',
  ogcFilter: 'http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/filter',
  cql2Json: 'http://www.opengis.net/spec/cql2/1.0/conf/cql2-json',
  cql2Text: 'http://www.opengis.net/spec/cql2/1.0/conf/cql2-text',
  cql2Basic: 'http://www.opengis.net/spec/cql2/1.0/conf/basic-cql2',
} as const;

export type StacItem = Record<string, unknown> & { id: string; collection?: string };

export type RequestKind =
  | 'landing'
  | 'conformance'
  | 'collections'
  | 'collection'
  | 'items'
  | 'item'
  | 'search-get'
  | 'search-post'
  | 'other';

// ---------------------------------------------------------------------------------------------
// Item Search: parameters, matching, ordering, paging
// ---------------------------------------------------------------------------------------------

class BadRequest extends Error {
  constructor(
    message: string,
    readonly status = 400,
    readonly code = 'BadRequest',
  ) {
    super(message);
  }
}

type Pos = [number, number];
interface Shape {
  /** One position of each part (point, line, polygon): with no boundaries meeting, a part lies wholly inside or outside. */
  parts: Pos[];
  /** Segments of lines and rings; a point is a segment from itself to itself. */
  segments: Array<[Pos, Pos]>;
  /** Polygons as rings (outer first). */
  polygons: Pos[][][];
  bbox: [number, number, number, number];
}

interface SearchParams {
  bbox?: number[];
  intersects?: { type: string; coordinates?: unknown; geometries?: unknown };
  datetime?: string;
  collections?: string[];
  ids?: string[];
  limit?: number;
  query?: Record<string, Record<string, unknown>>;
  filter?: unknown;
  'filter-lang'?: string;
  token?: string;
}

function num(v: unknown, what: string): number {
  const n = typeof v === 'number' ? v : typeof v === 'string' && v.trim() !== '' ? Number(v) : NaN;
  if (!Number.isFinite(n)) throw new BadRequest(`${what} must be a number`);
  return n;
}

const list = (v: string) => v.split(',').filter((s) => s !== '');

function jsonParam(v: string, what: string): unknown {
  try {
    return JSON.parse(v);
  } catch {
    throw new BadRequest(`${what} is not valid JSON`);
  }
}

/** GET query string → the same parameters a POST body carries. */
function paramsFromQuery(q: URLSearchParams): SearchParams {
  const p: SearchParams = {};
  const get = (k: string) => q.get(k) ?? undefined;
  const bbox = get('bbox');
  if (bbox !== undefined) p.bbox = list(bbox).map((x) => num(x, 'bbox'));
  const inter = get('intersects');
  if (inter !== undefined) p.intersects = jsonParam(inter, 'intersects') as SearchParams['intersects'];
  const dt = get('datetime');
  if (dt !== undefined) p.datetime = dt;
  const c = get('collections');
  if (c !== undefined) p.collections = list(c);
  const ids = get('ids');
  if (ids !== undefined) p.ids = list(ids);
  const limit = get('limit');
  if (limit !== undefined) p.limit = num(limit, 'limit');
  const query = get('query');
  if (query !== undefined) p.query = jsonParam(query, 'query') as SearchParams['query'];
  const filter = get('filter');
  const lang = get('filter-lang');
  if (lang !== undefined) p['filter-lang'] = lang;
  if (filter !== undefined) p.filter = lang === 'cql2-json' ? jsonParam(filter, 'filter') : filter;
  const token = get('token');
  if (token !== undefined) p.token = token;
  return p;
}

function shapeOf(g: unknown): Shape {
  const s: Shape = { parts: [], segments: [], polygons: [], bbox: [Infinity, Infinity, -Infinity, -Infinity] };
  const pos = (c: unknown): Pos => {
    if (!Array.isArray(c) || c.length < 2 || !Number.isFinite(c[0]) || !Number.isFinite(c[1]))
      throw new BadRequest('intersects: a position must be an array of at least two numbers');
    const p: Pos = [c[0], c[1]];
    s.bbox[0] = Math.min(s.bbox[0], p[0]);
    s.bbox[1] = Math.min(s.bbox[1], p[1]);
    s.bbox[2] = Math.max(s.bbox[2], p[0]);
    s.bbox[3] = Math.max(s.bbox[3], p[1]);
    return p;
  };
  const arr = (c: unknown, what: string): unknown[] => {
    if (!Array.isArray(c)) throw new BadRequest(`intersects: ${what} must be an array`);
    return c;
  };
  const line = (c: unknown, min: number) => {
    const ps = arr(c, 'a line').map(pos);
    if (ps.length < min) throw new BadRequest(`intersects: a line or ring needs at least ${min} positions`);
    for (let i = 1; i < ps.length; i++) s.segments.push([ps[i - 1]!, ps[i]!]);
    s.parts.push(ps[0]!);
    return ps;
  };
  const polygon = (c: unknown) => {
    const rings = arr(c, 'a polygon').map((r) => line(r, 4));
    if (!rings.length) throw new BadRequest('intersects: a polygon needs a ring');
    s.polygons.push(rings);
  };
  const point = (c: unknown) => {
    const p = pos(c);
    s.segments.push([p, p]);
    s.parts.push(p);
  };
  const walk = (geom: unknown, depth: number) => {
    if (!geom || typeof geom !== 'object') throw new BadRequest('intersects must be a GeoJSON geometry');
    const { type, coordinates, geometries } = geom as { type?: unknown; coordinates?: unknown; geometries?: unknown };
    switch (type) {
      case 'Point':
        return point(coordinates);
      case 'MultiPoint':
        for (const c of arr(coordinates, 'MultiPoint coordinates')) point(c);
        return;
      case 'LineString':
        line(coordinates, 2);
        return;
      case 'MultiLineString':
        for (const l of arr(coordinates, 'MultiLineString coordinates')) line(l, 2);
        return;
      case 'Polygon':
        return polygon(coordinates);
      case 'MultiPolygon':
        for (const c of arr(coordinates, 'MultiPolygon coordinates')) polygon(c);
        return;
      case 'GeometryCollection':
        if (depth > 4) throw new BadRequest('intersects: GeometryCollection nested too deep');
        for (const x of arr(geometries, 'geometries')) walk(x, depth + 1);
        return;
      default:
        throw new BadRequest(`intersects: unknown geometry type ${JSON.stringify(type)}`);
    }
  };
  walk(g, 0);
  return s;
}

function bboxShape(b: number[]): Shape[] {
  if (b.length !== 4 && b.length !== 6) throw new BadRequest('bbox must have 4 or 6 numbers');
  const [w, s, e, n] = b.length === 4 ? b : [b[0]!, b[1]!, b[3]!, b[4]!];
  if (s! > n!) throw new BadRequest('bbox: the southern edge is north of the northern edge');
  const rect = (x0: number, x1: number) =>
    shapeOf({
      type: 'Polygon',
      coordinates: [
        [
          [x0, s],
          [x1, s],
          [x1, n],
          [x0, n],
          [x0, s],
        ],
      ],
    });
  // West greater than east crosses the antimeridian: two boxes.
  return w! <= e! ? [rect(w!, e!)] : [rect(w!, 180), rect(-180, e!)];
}

const cross = (o: Pos, a: Pos, b: Pos) => (a[0] - o[0]) * (b[1] - o[1]) - (a[1] - o[1]) * (b[0] - o[0]);
const onSegment = (p: Pos, a: Pos, b: Pos) =>
  Math.min(a[0], b[0]) <= p[0] &&
  p[0] <= Math.max(a[0], b[0]) &&
  Math.min(a[1], b[1]) <= p[1] &&
  p[1] <= Math.max(a[1], b[1]);

/** Closed segments (a point is a zero-length segment) share at least one point. */
function segmentsMeet([a, b]: [Pos, Pos], [c, d]: [Pos, Pos]): boolean {
  const d1 = cross(c, d, a);
  const d2 = cross(c, d, b);
  const d3 = cross(a, b, c);
  const d4 = cross(a, b, d);
  if (((d1 > 0 && d2 < 0) || (d1 < 0 && d2 > 0)) && ((d3 > 0 && d4 < 0) || (d3 < 0 && d4 > 0))) return true;
  return (
    (d1 === 0 && onSegment(a, c, d)) ||
    (d2 === 0 && onSegment(b, c, d)) ||
    (d3 === 0 && onSegment(c, a, b)) ||
    (d4 === 0 && onSegment(d, a, b))
  );
}

/** Point strictly inside a polygon (inside the outer ring, outside its holes); boundaries are found by segmentsMeet. */
function inPolygon(p: Pos, rings: Pos[][]): boolean {
  const inRing = (ring: Pos[]) => {
    let inside = false;
    for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
      const [xi, yi] = ring[i]!;
      const [xj, yj] = ring[j]!;
      if (yi > p[1] !== yj > p[1] && p[0] < ((xj - xi) * (p[1] - yi)) / (yj - yi) + xi) inside = !inside;
    }
    return inside;
  };
  return inRing(rings[0]!) && !rings.slice(1).some(inRing);
}

const boxesMeet = (a: Shape['bbox'], b: Shape['bbox']) => a[0] <= b[2] && b[0] <= a[2] && a[1] <= b[3] && b[1] <= a[3];

/** Whether two geometries share at least one point (GeoJSON intersects, planar in lon/lat). */
function shapesIntersect(a: Shape, b: Shape): boolean {
  if (!boxesMeet(a.bbox, b.bbox)) return false;
  for (const sa of a.segments) {
    const box: Shape['bbox'] = [
      Math.min(sa[0][0], sa[1][0]),
      Math.min(sa[0][1], sa[1][1]),
      Math.max(sa[0][0], sa[1][0]),
      Math.max(sa[0][1], sa[1][1]),
    ];
    if (!boxesMeet(box, b.bbox)) continue;
    for (const sb of b.segments) if (segmentsMeet(sa, sb)) return true;
  }
  // No boundaries meet: one lies wholly inside the other, or they are apart.
  const inside = (x: Shape, y: Shape) =>
    y.polygons.length > 0 && x.parts.some((p) => y.polygons.some((rings) => inPolygon(p, rings)));
  return inside(a, b) || inside(b, a);
}

function parseInstant(v: string, end: boolean): number {
  // V8's Date.parse rolls 2025-02-30 over to 2 March and takes an hour of 24: the day must be a
  // calendar day (as everywhere in the service) and the hour below 24, as RFC 3339 has them.
  if (!isCalendarDate(v.slice(0, 10))) throw new BadRequest(`datetime: "${v}" does not name a calendar day`);
  if (v.length === 10) {
    const t = Date.parse(`${v}T00:00:00Z`);
    return end ? t + 86_400_000 - 1 : t;
  }
  const m = /^\d{4}-\d{2}-\d{2}[Tt ]([01]\d|2[0-3]):[0-5]\d:[0-5]\d(\.\d+)?([Zz]|[+-]([01]\d|2[0-3]):[0-5]\d)$/.exec(v);
  const t = m ? Date.parse(v.replace(' ', 'T')) : NaN;
  if (!Number.isFinite(t)) throw new BadRequest(`datetime: "${v}" is not an RFC 3339 date-time`);
  return t;
}

/** The interval [from, to] (ms, inclusive) a `datetime` parameter names. */
function parseDatetime(v: string): [number, number] {
  const parts = v.split('/');
  if (parts.length === 1) {
    if (parts[0] === '..' || parts[0] === '') throw new BadRequest('datetime: an instant cannot be open');
    return [parseInstant(parts[0]!, false), parseInstant(parts[0]!, true)];
  }
  if (parts.length !== 2) throw new BadRequest(`datetime: "${v}" is neither an instant nor an interval`);
  const open = (s: string) => s === '..' || s === '';
  if (open(parts[0]!) && open(parts[1]!)) throw new BadRequest('datetime: both ends of the interval are open');
  const from = open(parts[0]!) ? -Infinity : parseInstant(parts[0]!, false);
  const to = open(parts[1]!) ? Infinity : parseInstant(parts[1]!, true);
  if (from > to) throw new BadRequest('datetime: the interval ends before it starts');
  return [from, to];
}

/** An Item's time: its datetime, or start_datetime/end_datetime when datetime is null. */
function itemTime(item: StacItem): [number, number] | undefined {
  const p = (item.properties ?? {}) as Record<string, unknown>;
  const t = typeof p.datetime === 'string' ? Date.parse(p.datetime) : NaN;
  if (Number.isFinite(t)) return [t, t];
  const a = typeof p.start_datetime === 'string' ? Date.parse(p.start_datetime) : NaN;
  const b = typeof p.end_datetime === 'string' ? Date.parse(p.end_datetime) : NaN;
  return Number.isFinite(a) && Number.isFinite(b) ? [a, b] : undefined;
}

function propertyOf(item: StacItem, name: string): unknown {
  if (name === 'id') return item.id;
  if (name === 'collection') return item.collection;
  return ((item.properties ?? {}) as Record<string, unknown>)[name.replace(/^properties\./, '')];
}

const QUERY_OPS = ['eq', 'neq', 'lt', 'lte', 'gt', 'gte', 'startsWith', 'endsWith', 'contains', 'in'];

function compare(op: string, v: unknown, x: unknown): boolean {
  switch (op) {
    case 'eq':
      return v === x;
    case 'neq':
      return v !== x;
    case 'in':
      return Array.isArray(x) && x.includes(v);
    case 'startsWith':
      return typeof v === 'string' && typeof x === 'string' && v.startsWith(x);
    case 'endsWith':
      return typeof v === 'string' && typeof x === 'string' && v.endsWith(x);
    case 'contains':
      return typeof v === 'string' && typeof x === 'string' && v.includes(x);
  }
  if (v === undefined || v === null || typeof v !== typeof x || (typeof v !== 'number' && typeof v !== 'string'))
    return false;
  const a = v as number | string;
  const b = x as number | string;
  return op === 'lt' ? a < b : op === 'lte' ? a <= b : op === 'gt' ? a > b : a >= b;
}

function checkQuery(q: unknown): Record<string, Record<string, unknown>> {
  if (!q || typeof q !== 'object' || Array.isArray(q)) throw new BadRequest('query must be an object');
  for (const [prop, ops] of Object.entries(q)) {
    if (!ops || typeof ops !== 'object' || Array.isArray(ops))
      throw new BadRequest(`query.${prop} must be an object of operators`);
    for (const op of Object.keys(ops))
      if (!QUERY_OPS.includes(op)) throw new BadRequest(`query.${prop}: unknown operator "${op}"`);
  }
  return q as Record<string, Record<string, unknown>>;
}

const CQL_OPS: Record<string, string> = { '=': 'eq', '<>': 'neq', '<': 'lt', '<=': 'lte', '>': 'gt', '>=': 'gte' };

/** cql2-text: comparisons of a property with a number or a 'string', joined by AND. */
function cql2TextToJson(text: string): unknown {
  const args = text.split(/\s+AND\s+/i).map((part) => {
    const m =
      /^\s*"?([A-Za-z_][\w:.-]*)"?\s*(<=|>=|<>|=|<|>)\s*('(?:[^']|'')*'|-?\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)\s*$/.exec(
        part,
      );
    if (!m) throw new BadRequest(`filter: cannot read "${part.trim()}" (this server reads comparisons joined by AND)`);
    const value = m[3]!.startsWith("'") ? m[3]!.slice(1, -1).replace(/''/g, "'") : Number(m[3]);
    return { op: m[2], args: [{ property: m[1] }, value] };
  });
  return args.length === 1 ? args[0] : { op: 'and', args };
}

function cql2(expr: unknown, item: StacItem): boolean {
  if (!expr || typeof expr !== 'object') throw new BadRequest('filter: an expression must be an object');
  const { op, args } = expr as { op?: unknown; args?: unknown };
  if (!Array.isArray(args)) throw new BadRequest('filter: args must be an array');
  const value = (a: unknown) =>
    a && typeof a === 'object' && 'property' in a ? propertyOf(item, String((a as { property: unknown }).property)) : a;
  switch (op) {
    case 'and':
      return args.every((a) => cql2(a, item));
    case 'or':
      return args.some((a) => cql2(a, item));
    case 'not':
      return !cql2(args[0], item);
    case 'isNull':
      return value(args[0]) === undefined || value(args[0]) === null;
    case 'in':
      return Array.isArray(args[1]) && args[1].includes(value(args[0]));
  }
  const q = CQL_OPS[String(op)];
  if (!q || args.length !== 2) throw new BadRequest(`filter: operator ${JSON.stringify(op)} is not supported`);
  return compare(q, value(args[0]), value(args[1]));
}

interface Cursor {
  t: number;
  id: string;
}

const byTime = (a: StacItem, b: StacItem) => {
  const ta = itemTime(a)?.[0] ?? -Infinity;
  const tb = itemTime(b)?.[0] ?? -Infinity;
  return ta !== tb ? ta - tb : a.id < b.id ? -1 : a.id > b.id ? 1 : 0;
};
const after = (item: StacItem, c: Cursor) => {
  const t = itemTime(item)?.[0] ?? -Infinity;
  return t > c.t || (t === c.t && item.id > c.id);
};

function encodeToken(c: Cursor): string {
  return Buffer.from(JSON.stringify([c.t, c.id])).toString('base64url');
}
function decodeToken(token: string): Cursor {
  try {
    const [t, id] = JSON.parse(Buffer.from(token, 'base64url').toString('utf8'));
    // An Item without a time sorts first; its cursor time is written as null.
    if ((typeof t === 'number' || t === null) && typeof id === 'string') return { t: t ?? -Infinity, id };
  } catch {}
  throw new BadRequest('token: not a token this server issued');
}

interface SearchOutcome {
  features: StacItem[];
  matched: number;
  next?: string;
}

/** Item Search over `items` (sorted by datetime then id). */
function search(
  items: StacItem[],
  p: SearchParams,
  opts: { query: boolean; filter: boolean; defaultLimit: number; maxLimit: number },
): SearchOutcome {
  if (p.bbox !== undefined && p.intersects !== undefined)
    throw new BadRequest('bbox and intersects cannot both be given');
  const areas = p.bbox !== undefined ? bboxShape(p.bbox.map((x) => num(x, 'bbox'))) : undefined;
  const geom = p.intersects !== undefined ? shapeOf(p.intersects) : undefined;
  const when = p.datetime !== undefined ? parseDatetime(String(p.datetime)) : undefined;
  const strings = (v: unknown, what: string) => {
    if (!Array.isArray(v) || v.some((x) => typeof x !== 'string'))
      throw new BadRequest(`${what} must be an array of strings`);
    return new Set(v as string[]);
  };
  const collections = p.collections !== undefined ? strings(p.collections, 'collections') : undefined;
  const ids = p.ids !== undefined ? strings(p.ids, 'ids') : undefined;
  let limit = p.limit === undefined ? opts.defaultLimit : num(p.limit, 'limit');
  if (!Number.isInteger(limit) || limit < 1) throw new BadRequest('limit must be an integer of at least 1');
  limit = Math.min(limit, opts.maxLimit);
  const query = opts.query && p.query !== undefined ? checkQuery(p.query) : undefined;
  let filter: unknown;
  if (opts.filter && p.filter !== undefined) {
    const lang = p['filter-lang'] ?? (typeof p.filter === 'string' ? 'cql2-text' : 'cql2-json');
    if (lang !== 'cql2-json' && lang !== 'cql2-text') throw new BadRequest(`filter-lang "${lang}" is not supported`);
    filter = lang === 'cql2-text' ? cql2TextToJson(String(p.filter)) : p.filter;
  }
  const cursor = p.token !== undefined ? decodeToken(String(p.token)) : undefined;

  const matches = items.filter((item) => {
    if (collections && !collections.has(String(item.collection))) return false;
    if (ids && !ids.has(item.id)) return false;
    if (when) {
      const t = itemTime(item);
      if (!t || t[1] < when[0] || t[0] > when[1]) return false;
    }
    if (areas || geom) {
      let shape: Shape;
      try {
        shape = shapeOf(item.geometry);
      } catch {
        return false; // an Item without a geometry matches no spatial filter
      }
      if (geom && !shapesIntersect(shape, geom)) return false;
      if (areas && !areas.some((a) => shapesIntersect(shape, a))) return false;
    }
    if (query)
      for (const [prop, ops] of Object.entries(query))
        for (const [op, x] of Object.entries(ops)) if (!compare(op, propertyOf(item, prop), x)) return false;
    if (filter !== undefined && !cql2(filter, item)) return false;
    return true;
  });
  const rest = cursor ? matches.filter((i) => after(i, cursor)) : matches;
  const page = rest.slice(0, limit);
  const last = page.at(-1);
  return {
    features: page,
    matched: matches.length,
    ...(rest.length > limit && last ? { next: encodeToken({ t: itemTime(last)?.[0] ?? -Infinity, id: last.id }) } : {}),
  };
}

export interface StacApiOptions {
  /** Accept and advertise POST /search (default true); when false, POST answers 405. */
  post?: boolean;
  /** Advertise and apply the Query extension (default true); when false, `query` is ignored. */
  query?: boolean;
  /** Advertise and apply CQL2 `filter` (default false); when false, `filter` is ignored. */
  filter?: boolean;
  /** Page size when `limit` is absent (default 10) and the maximum (default 1000). */
  defaultLimit?: number;
  maxLimit?: number;
  /** Collections served besides those named by Items (id → title). */
  collections?: Record<string, string>;
  /** The landing page's id, title and description. */
  id?: string;
  title?: string;
  description?: string;
}

/** What a request is, by method and path (relative to the API root). */
export function kindOf(method: string, parts: string[]): RequestKind {
  if (parts.length === 0) return 'landing';
  if (parts[0] === 'conformance' && parts.length === 1) return 'conformance';
  if (parts[0] === 'search' && parts.length === 1) return method === 'POST' ? 'search-post' : 'search-get';
  if (parts[0] === 'collections')
    return parts.length === 1
      ? 'collections'
      : parts.length === 2
        ? 'collection'
        : parts[2] === 'items'
          ? parts.length === 3
            ? 'items'
            : parts.length === 4
              ? 'item'
              : 'other'
          : 'other';
  return 'other';
}

export interface StacApiRequest {
  method: string;
  /** Path segments below the API root, decoded. */
  parts: string[];
  query: URLSearchParams;
  /** The parsed JSON body of a POST. */
  body: unknown;
}

export interface StacApiAnswer {
  status: number;
  json: unknown;
  headers?: Record<string, string>;
  /** Items answered (search and item listing). */
  returned?: number;
}

/** Items in search order: datetime, then id. */
export function sortItems(items: StacItem[]): StacItem[] {
  return [...items].sort(byTime);
}

const GEOJSON = 'application/geo+json';

/**
 * Answers one request to the API rooted at `url` (no trailing slash) over `items` (in search order,
 * see sortItems).
 */
export function answerStacApi(
  items: StacItem[],
  url: string,
  options: StacApiOptions,
  req: StacApiRequest,
): StacApiAnswer {
  const opts = {
    post: options.post ?? true,
    query: options.query ?? true,
    filter: options.filter ?? false,
    defaultLimit: options.defaultLimit ?? 10,
    maxLimit: options.maxLimit ?? 1000,
  };
  try {
    return answer(items, url, options, opts, req);
  } catch (err) {
    if (err instanceof BadRequest) return { status: err.status, json: { code: err.code, description: err.message } };
    throw err;
  }
}

function answer(
  items: StacItem[],
  url: string,
  options: StacApiOptions,
  opts: { post: boolean; query: boolean; filter: boolean; defaultLimit: number; maxLimit: number },
  req: StacApiRequest,
): StacApiAnswer {
  const { method, parts, query: q, body } = req;
  const kind = kindOf(method, parts);
  const conformsTo = [
    CONFORMANCE.core,
    CONFORMANCE.collections,
    CONFORMANCE.features,
    CONFORMANCE.itemSearch,
    CONFORMANCE.ogcCore,
    CONFORMANCE.ogcGeojson,
    ...(opts.query ? [CONFORMANCE.query] : []),
    ...(opts.filter
      ? [CONFORMANCE.filter, CONFORMANCE.ogcFilter, CONFORMANCE.cql2Json, CONFORMANCE.cql2Text, CONFORMANCE.cql2Basic]
      : []),
  ];
  const collectionIds = () =>
    [...new Set([...Object.keys(options.collections ?? {}), ...items.map((i) => String(i.collection))])].sort();
  const collectionJson = (id: string) => {
    const own = items.filter((i) => i.collection === id);
    const times = own.map((i) => itemTime(i)?.[0]).filter((t): t is number => t !== undefined);
    return {
      type: 'Collection',
      stac_version: '1.0.0',
      id,
      title: options.collections?.[id] ?? id,
      description: `Items of ${id}`,
      license: 'proprietary',
      extent: {
        spatial: { bbox: [[-180, -90, 180, 90]] },
        temporal: {
          interval: [
            times.length
              ? [
                  new Date(times.reduce((a, b) => Math.min(a, b))).toISOString(),
                  new Date(times.reduce((a, b) => Math.max(a, b))).toISOString(),
                ]
              : [null, null],
          ],
        },
      },
      links: [
        { rel: 'self', type: 'application/json', href: `${url}/collections/${id}` },
        { rel: 'root', type: 'application/json', href: `${url}/` },
        { rel: 'parent', type: 'application/json', href: `${url}/` },
        { rel: 'items', type: GEOJSON, href: `${url}/collections/${id}/items` },
      ],
    };
  };
  /** An Item as served: links to itself, its collection and the root. */
  const served = (item: StacItem) => ({
    ...item,
    links: [
      ...((item.links as Array<{ rel?: string }> | undefined) ?? []).filter(
        (l) => !['self', 'root', 'parent', 'collection'].includes(String(l.rel)),
      ),
      { rel: 'self', type: GEOJSON, href: `${url}/collections/${item.collection}/items/${item.id}` },
      { rel: 'parent', type: 'application/json', href: `${url}/collections/${item.collection}` },
      { rel: 'collection', type: 'application/json', href: `${url}/collections/${item.collection}` },
      { rel: 'root', type: 'application/json', href: `${url}/` },
    ],
  });

  if (method !== 'GET' && !(method === 'POST' && kind === 'search-post'))
    return { status: 405, json: { code: 'MethodNotAllowed', description: `${method} is not allowed here` } };
  switch (kind) {
    case 'landing':
      return {
        status: 200,
        json: {
          type: 'Catalog',
          stac_version: '1.0.0',
          id: 'test-stac-api',
          title: 'Test STAC API',
          description: 'A STAC API on loopback serving fixture Items',
          conformsTo,
          links: [
            { rel: 'self', type: 'application/json', href: `${url}/` },
            { rel: 'root', type: 'application/json', href: `${url}/` },
            { rel: 'conformance', type: 'application/json', href: `${url}/conformance` },
            { rel: 'data', type: 'application/json', href: `${url}/collections` },
            { rel: 'search', type: GEOJSON, href: `${url}/search`, method: 'GET' },
            ...(opts.post ? [{ rel: 'search', type: GEOJSON, href: `${url}/search`, method: 'POST' }] : []),
            ...collectionIds().map((id) => ({
              rel: 'child',
              type: 'application/json',
              href: `${url}/collections/${id}`,
            })),
          ],
        },
      };
    case 'conformance':
      return { status: 200, json: { conformsTo } };
    case 'collections':
      return {
        status: 200,
        json: {
          collections: collectionIds().map(collectionJson),
          links: [
            { rel: 'self', type: 'application/json', href: `${url}/collections` },
            { rel: 'root', type: 'application/json', href: `${url}/` },
          ],
        },
      };
    case 'collection':
      if (!collectionIds().includes(parts[1]!)) throw new BadRequest(`no collection ${parts[1]}`, 404, 'NotFound');
      return { status: 200, json: collectionJson(parts[1]!) };
    case 'item': {
      const item = items.find((i) => i.collection === parts[1] && i.id === parts[3]);
      if (!item) throw new BadRequest(`no item ${parts[3]} in ${parts[1]}`, 404, 'NotFound');
      return { status: 200, json: served(item), headers: { 'content-type': GEOJSON } };
    }
    case 'items':
    case 'search-get':
    case 'search-post': {
      if (kind === 'search-post' && !opts.post)
        return { status: 405, json: { code: 'MethodNotAllowed', description: 'POST /search is not supported' } };
      if (kind === 'items' && !collectionIds().includes(parts[1]!))
        throw new BadRequest(`no collection ${parts[1]}`, 404, 'NotFound');
      let p: SearchParams;
      if (kind === 'search-post') {
        if (!body || typeof body !== 'object' || Array.isArray(body))
          throw new BadRequest('the body must be a JSON object');
        p = body as SearchParams;
      } else p = paramsFromQuery(q);
      if (kind === 'items') p = { ...p, collections: [parts[1]!], ids: undefined };
      const out = search(items, p, opts);
      const self = kind === 'items' ? `${url}/collections/${parts[1]}/items` : `${url}/search`;
      const links: Array<Record<string, unknown>> = [
        { rel: 'root', type: 'application/json', href: `${url}/` },
        {
          rel: 'self',
          type: GEOJSON,
          href: kind === 'search-post' ? self : `${self}${q.size ? `?${q}` : ''}`,
        },
      ];
      if (out.next) {
        if (kind === 'search-post')
          links.push({
            rel: 'next',
            type: GEOJSON,
            href: self,
            method: 'POST',
            body: { token: out.next },
            merge: true,
          });
        else {
          const nq = new URLSearchParams(q);
          nq.set('token', out.next);
          links.push({ rel: 'next', type: GEOJSON, href: `${self}?${nq}`, method: 'GET' });
        }
      }
      return {
        status: 200,
        headers: { 'content-type': GEOJSON },
        returned: out.features.length,
        json: {
          type: 'FeatureCollection',
          features: out.features.map(served),
          links,
          numberMatched: out.matched,
          numberReturned: out.features.length,
        },
      };
    }
    default:
      throw new BadRequest(`no resource at /${parts.join('/')}`, 404, 'NotFound');
  }
}
