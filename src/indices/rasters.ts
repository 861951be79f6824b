/**
 * An index of a field as an image (docs/rasters.md): the Cloud Optimized GeoTIFF or coloured PNG
 * of the field's window, WebMercatorQuad map tiles and their TileJSON. The capture is chosen as
 * for GET indices (service.ts); every image is drawn in the compute pool (threads/field-raster.ts).
 * Each image's ETag is a hash of everything it is made of (capture, boundary, formula, style,
 * tile), known before any pixel work, so a matching If-None-Match answers 304 with no pool work,
 * and the encoded images are kept by it (ImageCache), so a repeated image is a lookup.
 */
import { createHash } from 'node:crypto';
import { LRUCache } from 'lru-cache';
import { Counter, Gauge } from 'prom-client';
import type { FieldRasterResult, RasterLayer, RasterOutput, TileMapping, WindowGrid } from '../compute/tasks.js';
import { gridKey } from '../imagery/index.js';
import { AppError } from '../platform/errors.js';
import { registry } from '../platform/metrics.js';
import { findIndex } from '../compute/catalog.js';
import { choose, type Chosen, type IndexQuery } from './service.js';
import { formulaHash } from './stats-store.js';
import { defaultStyle, type RampStyle } from './ramps.js';
import type { IndexDeps } from './types.js';

/** Bumped whenever the bytes of an image would change for the same inputs (writer, ramps, encoder). */
const RENDER_VERSION = 1;
export const MAX_ZOOM = 21;

export interface RasterQuery {
  index: string;
  date: string;
  formula?: string;
  imagery_id?: string;
  rescale?: string;
}

/** `min,max` → the numbers; 400 unless both are finite and min < max. */
export function parseRescale(text: string | undefined): [number, number] | undefined {
  if (text === undefined) return undefined;
  const parts = text.split(',');
  const nums = parts.map((p) => (p.trim() === '' ? Number.NaN : Number(p)));
  const bad = (message: string) =>
    new AppError('validation_failed', `rescale ${message}`, {
      errors: [{ path: '/query/rescale', code: 'invalid_rescale', message }],
    });
  if (parts.length !== 2 || !nums.every(Number.isFinite)) throw bad('must be two numbers, min,max (e.g. 0,1)');
  if (nums[0]! >= nums[1]!) throw bad(`must have min < max (got ${nums[0]} ≥ ${nums[1]})`);
  return [nums[0]!, nums[1]!];
}

/** What an image of the query is made of: the chosen capture, its layer key and the style. */
export interface Prepared {
  chosen: Chosen;
  layer: string;
  style: RampStyle;
}

export async function prepareRaster(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  q: RasterQuery,
): Promise<Prepared> {
  const rescale = parseRescale(q.rescale);
  const chosen = await choose(deps, accountId, fieldId, q as IndexQuery, '/query/date', '/query/formula');
  const layer = `${chosen.capture.id}|${chosen.state.boundaryHash}|${formulaHash(chosen.program)}`;
  return { chosen, layer, style: defaultStyle(chosen.name, rescale) };
}

/** A strong ETag over everything the image is made of. */
export function etagOf(p: Prepared, what: string): string {
  const h = createHash('sha256')
    .update(
      JSON.stringify([
        RENDER_VERSION,
        what,
        p.layer,
        p.chosen.head.field_id,
        p.chosen.name,
        p.chosen.head.formula ?? '',
        p.chosen.head.date,
        p.style,
      ]),
    )
    .digest('base64url')
    .slice(0, 27);
  return `"${h}"`;
}

/** If-None-Match (a list, weak or strong, or *) matches the ETag. */
export function notModified(ifNoneMatch: string | undefined, etag: string): boolean {
  if (!ifNoneMatch) return false;
  if (ifNoneMatch.trim() === '*') return true;
  return ifNoneMatch.split(',').some((t) => t.trim().replace(/^W\//, '') === etag);
}

/**
 * What the compute threads computed for images, kept in this process and sent with the next task
 * (in shared memory, so not copied: a 100 ha layer is 40 kB, a tile mapping up to 256 kB), so that
 * whichever thread draws a tile already has the values and the reprojection: the layers by
 * (capture, boundary, formula), the tile mappings by (window grid, tile), each an LRU of 64 MB.
 */
const layers = new LRUCache<string, RasterLayer>({
  maxSize: 64 * 1_048_576,
  sizeCalculation: (l) => l.values.byteLength + 256,
});
const tileMaps = new LRUCache<string, TileMapping | false>({
  maxSize: 64 * 1_048_576,
  sizeCalculation: (m) => (m ? m.idx.byteLength : 0) + 64,
});

export async function renderRaster(deps: IndexDeps, p: Prepared, output: RasterOutput): Promise<FieldRasterResult> {
  const { chosen } = p;
  const layerData = layers.get(p.layer);
  // The window of a layer held here needs no thread (the world file, TileJSON).
  if (output.kind === 'grid' && layerData) return { window: layerData.grid };
  const tile = output.kind === 'tile' ? `|${output.z}/${output.x}/${output.y}` : undefined;
  const tileMap = layerData && tile ? tileMaps.get(gridKey(layerData.grid) + tile) : undefined;
  const r = await deps.compute.runFieldRaster({
    layer: p.layer,
    capture: chosen.state.sources.get(chosen.capture.id)!,
    boundary: chosen.state.boundary,
    program: chosen.program,
    roots: deps.roots,
    output,
    ...(layerData ? { layerData } : {}),
    ...(tileMap !== undefined ? { tileMap } : {}),
  });
  if (r.layerData) layers.set(p.layer, r.layerData);
  if (tile && r.tileMap !== undefined) tileMaps.set(gridKey(r.window) + tile, r.tileMap);
  if (r.refused) throw new AppError('unprocessable', r.refused);
  return r;
}

/** An encoded image as sent: its bytes and what its headers tell. */
export interface Image {
  bytes: Buffer;
  window: WindowGrid;
  range?: [number, number];
}

/**
 * Encoded images (tiles, PNGs, COGs) by ETag, an LRU bounded in bytes (IMAGE_CACHE_MB; an image
 * larger than an eighth of it is not kept). The ETag names everything an image is made of, so an
 * entry is never stale: a new boundary, formula, capture or choice of capture makes another
 * ETag, which misses, and the old entry ages out. A repeated image is a lookup and a write, no
 * thread hop; requests for an image being drawn wait for that drawing instead of starting another.
 */
const imageRequests = new Counter({
  name: 'image_cache_requests_total',
  help: 'Index images (tiles, PNGs, COGs) asked for past the ETag check, by result: hit (sent kept bytes, or joined a drawing under way) or miss (drawn in the compute pool)',
  labelNames: ['result'] as const,
  registers: [registry],
});
for (const result of ['hit', 'miss']) imageRequests.inc({ result }, 0);

/** The caches of this process (one per app), for the gauge; dropped with their app. */
const caches = new Set<WeakRef<ImageCache>>();
new Gauge({
  name: 'image_cache_bytes',
  help: 'Bytes of encoded index images kept by ETag (bounded by IMAGE_CACHE_MB)',
  registers: [registry],
  collect() {
    let sum = 0;
    for (const ref of caches) {
      const c = ref.deref();
      if (c) sum += c.size;
      else caches.delete(ref);
    }
    this.set(sum);
  },
});

export class ImageCache {
  private readonly lru: LRUCache<string, Image> | undefined;
  private readonly drawing = new Map<string, Promise<Image>>();
  hits = 0;
  misses = 0;

  constructor(maxBytes: number) {
    this.lru =
      maxBytes > 0
        ? new LRUCache<string, Image>({
            maxSize: maxBytes,
            maxEntrySize: Math.max(1, Math.floor(maxBytes / 8)),
            sizeCalculation: (i) => i.bytes.byteLength + 512,
          })
        : undefined;
    caches.add(new WeakRef(this));
  }

  /** The image of `etag`, kept or drawn by `draw` (then kept). */
  async get(etag: string, draw: () => Promise<Image>): Promise<Image> {
    const kept = this.lru?.get(etag);
    const pending = kept ? undefined : this.drawing.get(etag);
    if (kept || pending) {
      this.hits++;
      imageRequests.inc({ result: 'hit' });
      return kept ?? pending!;
    }
    this.misses++;
    imageRequests.inc({ result: 'miss' });
    const made = draw().then((image) => {
      this.lru?.set(etag, image);
      return image;
    });
    this.drawing.set(etag, made);
    try {
      return await made;
    } finally {
      this.drawing.delete(etag);
    }
  }

  get size(): number {
    return this.lru?.calculatedSize ?? 0;
  }
}

/** The drawn image of `output`, as a Buffer over the bytes the thread transferred. */
export async function drawImage(deps: IndexDeps, p: Prepared, output: RasterOutput): Promise<Image> {
  const r = await renderRaster(deps, p, output);
  return {
    bytes: Buffer.from(r.bytes!.buffer, r.bytes!.byteOffset, r.bytes!.byteLength),
    window: r.window,
    ...(r.range ? { range: r.range } : {}),
  };
}

/** What the COG carries in its metadata. */
export function cogMetadata(p: Prepared): Extract<RasterOutput, { kind: 'tif' }> {
  const h = p.chosen.head;
  return {
    kind: 'tif',
    description: h.index === 'custom' ? (h.formula ?? 'custom') : h.index,
    metadata: {
      INDEX: h.index,
      FORMULA: h.formula ?? findIndex(h.index)?.formula ?? '',
      CAPTURE_DATE: h.date,
      IMAGERY_ID: h.imagery_id,
      FIELD_ID: h.field_id,
    },
  };
}

/** The world file of a window (its CRS's units): pixel width, rotations, height, top-left pixel centre. */
export function worldFile(g: WindowGrid): number[] {
  return [g.resX, 0, 0, g.resY, g.originX + g.resX / 2, g.originY + g.resY / 2];
}

export const crsName = (g: WindowGrid) => (typeof g.epsg === 'number' ? `EPSG:${g.epsg}` : g.epsg);

/** The field boundary's bounding box (degrees). */
export function boundaryBounds(p: Prepared): [number, number, number, number] {
  const b: [number, number, number, number] = [Infinity, Infinity, -Infinity, -Infinity];
  const g = p.chosen.state.boundary;
  const polys = g.type === 'Polygon' ? [g.coordinates] : g.coordinates;
  for (const poly of polys)
    for (const ring of poly)
      for (const [lon, lat] of ring) {
        b[0] = Math.min(b[0], lon!);
        b[1] = Math.min(b[1], lat!);
        b[2] = Math.max(b[2], lon!);
        b[3] = Math.max(b[3], lat!);
      }
  return b;
}

export interface TileJson {
  tilejson: '3.0.0';
  name: string;
  description: string;
  version: string;
  scheme: 'xyz';
  tiles: string[];
  minzoom: number;
  maxzoom: number;
  bounds: number[];
  center: number[];
  imagery_id: string;
  date: string;
}

/**
 * The TileJSON 3.0.0 document: the tile URL template carrying the same query, the field's bounds,
 * minzoom two levels above the deepest zoom at which the field fits in one tile, maxzoom three
 * levels below the zoom whose pixels are the capture's (nearest neighbour beyond it), at most 21.
 */
export function tileJson(p: Prepared, grid: WindowGrid, baseUrl: string, fieldId: string, query: string): TileJson {
  const bounds = boundaryBounds(p);
  const lat = (bounds[1] + bounds[3]) / 2;
  const lonSpan = Math.max(bounds[2] - bounds[0], 1e-9);
  const mercY = (l: number) => Math.log(Math.tan(Math.PI / 4 + (l * Math.PI) / 360));
  const ySpan = Math.max(((mercY(bounds[3]) - mercY(bounds[1])) * 180) / Math.PI, 1e-9);
  const fits = Math.floor(Math.log2(360 / Math.max(lonSpan, ySpan)));
  // Ground size of a Web Mercator pixel at zoom z: 2πR·cos(lat) / (256·2^z).
  const native = Math.ceil(
    Math.log2((2 * Math.PI * 6378137 * Math.cos((lat * Math.PI) / 180)) / (256 * Math.abs(grid.resX))),
  );
  const maxzoom = Math.max(0, Math.min(MAX_ZOOM, native + 3));
  const minzoom = Math.max(0, Math.min(maxzoom, fits - 2));
  const h = p.chosen.head;
  return {
    tilejson: '3.0.0',
    name: `${h.index === 'custom' ? `custom (${h.formula})` : h.index} of field ${fieldId} on ${h.date}`,
    description: `Index ${h.index} of field ${fieldId} from capture ${h.imagery_id} of ${h.date}, coloured by the ${p.style.ramp} ramp${p.style.range ? ` over ${p.style.range.join('..')}` : " over the field's range"}; transparent where there is no value.`,
    version: '1.0.0',
    scheme: 'xyz',
    tiles: [
      `${baseUrl}/v1/fields/${encodeURIComponent(fieldId)}/indices/tiles/{z}/{x}/{y}.png${query ? `?${query}` : ''}`,
    ],
    minzoom,
    maxzoom,
    bounds,
    center: [(bounds[0] + bounds[2]) / 2, lat, Math.min(maxzoom, Math.max(minzoom, fits))],
    imagery_id: h.imagery_id,
    date: h.date,
  };
}
