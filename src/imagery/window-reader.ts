/**
 * Reads the window of a capture over a field: only the pixels around the field (plus a margin of
 * one pixel), every band on the grid of the finest band requested (nearest neighbour for coarser
 * bands), the boundary reprojected to the raster CRS and rasterised by pixel centres, and the
 * validity mask (inside the field, and for Sentinel-2 SCL not a masked class). Digital numbers stay
 * digital numbers: the kernel turns them into reflectance with each band's scale and offset, and
 * treats DN 0 and the declared no-data value as "no value".
 */
import type { GeoTIFFImage } from 'geotiff';
import type { Dtype } from '../compute/kernel-host.js';
import type { MaskReasons, MaskRequest, TouchedWeights } from '../compute/tasks.js';
import type { Boundary } from '../fields/index.js';
import { CrsError, crsLabel, fromWgs84, type CrsRef } from './crs.js';
import { crsFromGeoKeys } from './geokeys.js';
import { rasterizeRings, type Ring } from './rasterize.js';
import { coverageFractions } from './coverage-fraction.js';
import { readWindow, visitWindowRaw, type BlockPart, type SampleArray } from './raw-window.js';
import { resolveLocal } from './local-path.js';
import { cachedUploadPath, isUploadHref } from './upload-ref.js';
import { ImageryLimitError, withDecodeBudget } from './decode-limits.js';
import { firstImage, isRemote, openRaster, openSource, type Raster, type RasterImage } from './raster.js';

/** Band names accepted in captures: the spec's, plus B8A, B01 and B09. */
export const CAPTURE_BANDS = [
  'B01',
  'B02',
  'B03',
  'B04',
  'B05',
  'B06',
  'B07',
  'B08',
  'B8A',
  'B09',
  'B11',
  'B12',
] as const;
export type CaptureBand = (typeof CAPTURE_BANDS)[number];

/** Sentinel-2 scene classification classes that are not usable ground: no data, saturated, cloud shadow, clouds, cirrus, snow. */
export const SCL_MASKED = new Set([0, 1, 3, 8, 9, 10, 11]);
/** The classes a dilation grows from (those of them the mask excludes): cloud shadow, cloud medium and high probability, cirrus. */
export const SCL_CLOUDS = new Set([3, 8, 9, 10]);

export interface BandSource {
  href: string;
  /** 1-based band index inside a multi-band file. Default 1. */
  index?: number;
  scale?: number;
  offset?: number;
}

export interface CaptureSource {
  bands: Partial<Record<CaptureBand, BandSource>>;
  mask?: { href: string; index?: number; kind: 'scl' };
  /** reflectance = DN × scale + offset, unless a band overrides them. */
  scale: number;
  offset: number;
}

/**
 * The bands a coverage check reads: red and NIR when present (what most indices use), else the
 * first. A formula that reads no band is evaluated on their window and validity mask too, so its
 * valid pixels are the capture's usable field pixels.
 */
export function coverageBands(capture: CaptureSource): CaptureBand[] {
  const have = Object.keys(capture.bands) as CaptureBand[];
  const rn = (['B04', 'B08'] as CaptureBand[]).filter((b) => have.includes(b));
  return rn.length ? rn : [have[0]!];
}

export class ImageryError extends Error {
  constructor(
    readonly band: string,
    readonly reason: string,
  ) {
    super(`${band}: ${reason}`);
    this.name = 'ImageryError';
  }
}

export interface WindowBand {
  data: Uint16Array | Int16Array | Float32Array | Uint8Array;
  dtype: Dtype;
  scale: number;
  offset: number;
  nodata: number | null;
}

export interface FieldWindow {
  width: number;
  height: number;
  /** The raster's CRS: an EPSG code, or the proj4 definition of a CRS its GeoKeys define. */
  epsg: CrsRef;
  /** Raster CRS coordinates of the window's top-left corner and the pixel size (y negative). */
  originX: number;
  originY: number;
  resX: number;
  resY: number;
  bands: Partial<Record<CaptureBand, WindowBand>>;
  /** 1 where the pixel centre lies inside the field. */
  inside: Uint8Array;
  /** 1 where inside the field and usable (mask class and every band's DN valid). */
  valid: Uint8Array;
  fieldPixels: number;
  validPixels: number;
  /** Share of field pixels that are not usable, 0..1. */
  invalidShare: number;
  /** Why field pixels are not usable (all but the formula's ÷0 / non-finite, which the kernel finds). */
  reasons: Omit<MaskReasons, 'non_finite'>;
  /** weighting=coverage: per pixel, the share of its area inside the field (0 outside), and their sum. */
  weights?: Float64Array;
  fieldWeight?: number;
  /** The pixels with 0 < weight < 1 (the field's edge): those the weighting changes. */
  partial?: Int32Array;
}

export interface ReadOptions {
  /** Directories local hrefs must lie in (after resolving symlinks). */
  roots: string[];
  signal?: AbortSignal;
  /** The cloud mask (default: SCL_MASKED excluded, no dilation). */
  mask?: MaskRequest;
  /** coverage: `inside` is every pixel the field touches and `weights` its share of each (default: pixel centres). */
  weighting?: 'centre' | 'coverage';
}

interface Grid {
  raster: RasterImage;
  image: GeoTIFFImage;
  epsg: CrsRef;
  ox: number;
  oy: number;
  rx: number;
  ry: number;
  width: number;
  height: number;
  nodata: number | null;
  samples: number;
}

// Open files (and their parsed headers) per thread, least recently used first out: each holds a
// file descriptor, so the number kept open is bounded.
const MAX_OPEN = 256;
const rasters = new Map<string, Promise<Raster>>();

export async function openTiff(href: string, roots: string[], signal?: AbortSignal): Promise<Raster> {
  const remote = isRemote(href);
  // An uploaded file (upload://<id>) is read from this process's local read cache, where the
  // compute pool's prepare hook copied it before the task came to this thread (upload-ref.ts).
  const key = remote ? href : isUploadHref(href) ? cachedUploadPath(href) : await resolveLocal(href, roots);
  let t = rasters.get(key);
  if (t) {
    rasters.delete(key);
    rasters.set(key, t);
    return t;
  }
  // What the file declares is checked before geotiff.js parses it (decompression bombs).
  t = openSource(key).then((source) => openRaster(source, signal));
  rasters.set(key, t);
  t.catch(() => rasters.delete(key));
  while (rasters.size > MAX_OPEN) {
    const [oldKey, old] = rasters.entries().next().value as [string, Promise<Raster>];
    rasters.delete(oldKey);
    old.then((r) => r.source.close()).catch(() => {});
  }
  return t;
}

async function gridOf(band: string, href: string, opts: ReadOptions): Promise<Grid> {
  let opened: Raster;
  try {
    opened = await openTiff(href, opts.roots, opts.signal);
  } catch (err) {
    throw new ImageryError(band, (err as Error).message || 'cannot open the file');
  }
  let raster: RasterImage;
  try {
    raster = await firstImage(opened);
  } catch (err) {
    throw new ImageryError(band, `not a readable GeoTIFF (${(err as Error).message})`);
  }
  const { image } = raster;
  let epsg: CrsRef;
  try {
    epsg = crsFromGeoKeys(image.getGeoKeys() as Record<string, unknown> | null);
  } catch (err) {
    throw new ImageryError(band, err instanceof CrsError ? `unsupported CRS: ${err.message}` : (err as Error).message);
  }
  let origin: number[];
  let res: number[];
  try {
    origin = image.getOrigin();
    res = image.getResolution();
  } catch {
    throw new ImageryError(
      band,
      'the file has no georeferencing (ModelTiepoint/ModelPixelScale or ModelTransformation)',
    );
  }
  return {
    raster,
    image,
    epsg,
    ox: origin[0]!,
    oy: origin[1]!,
    rx: res[0]!,
    ry: res[1]!,
    width: image.getWidth(),
    height: image.getHeight(),
    nodata: image.getGDALNoData(),
    samples: image.getSamplesPerPixel(),
  };
}

function dtypeOf(image: GeoTIFFImage, band: string): Dtype {
  const bits = image.getBitsPerSample(0);
  const fmt = image.getSampleFormat(0);
  if (fmt === 1 && bits === 16) return 'u16';
  if (fmt === 2 && bits === 16) return 'i16';
  if (fmt === 1 && bits === 8) return 'u8';
  if (fmt === 3 && bits === 32) return 'f32';
  throw new ImageryError(
    band,
    `unsupported sample type (format ${fmt}, ${bits} bits): use uint16, int16, uint8 or float32`,
  );
}

function ringsOf(boundary: Boundary): Array<Array<[number, number]>> {
  return boundary.type === 'Polygon' ? boundary.coordinates : boundary.coordinates.flat();
}

/** Reads the pixels of `grid` that the fine pixels' centres fall in (nearest neighbour). */
async function sampleOnto(
  grid: Grid,
  index: number,
  band: string,
  fine: { ox: number; oy: number; rx: number; ry: number; x0: number; y0: number; w: number; h: number },
  signal?: AbortSignal,
) {
  const cols = new Int32Array(fine.w);
  const rows = new Int32Array(fine.h);
  for (let i = 0; i < fine.w; i++) cols[i] = Math.floor((fine.ox + (fine.x0 + i + 0.5) * fine.rx - grid.ox) / grid.rx);
  for (let j = 0; j < fine.h; j++) rows[j] = Math.floor((fine.oy + (fine.y0 + j + 0.5) * fine.ry - grid.oy) / grid.ry);
  const cx0 = Math.max(0, minOf(cols));
  const cx1 = Math.min(grid.width, maxOf(cols) + 1);
  const cy0 = Math.max(0, minOf(rows));
  const cy1 = Math.min(grid.height, maxOf(rows) + 1);
  const dtype = dtypeOf(grid.image, band);
  const n = fine.w * fine.h;
  const out =
    dtype === 'u16'
      ? new Uint16Array(n)
      : dtype === 'i16'
        ? new Int16Array(n)
        : dtype === 'u8'
          ? new Uint8Array(n)
          : new Float32Array(n).fill(NaN);
  if (cx1 <= cx0 || cy1 <= cy0) return { data: out, dtype }; // entirely outside the raster: all no-data
  if (index < 1 || index > grid.samples)
    throw new ImageryError(band, `band index ${index} does not exist (the file has ${grid.samples})`);
  let raster: ArrayLike<number>;
  try {
    raster = await readWindow(grid.raster, [cx0, cy0, cx1, cy1], index - 1, signal);
  } catch (err) {
    throw new ImageryError(band, undecodable(err as Error));
  }
  const cw = cx1 - cx0;
  // The same grid (or one whose columns map one to one): whole rows copied at once
  let oneToOne = ArrayBuffer.isView(raster) && raster.constructor === out.constructor;
  for (let i = 1; oneToOne && i < fine.w; i++) oneToOne = cols[i] === cols[i - 1]! + 1;
  if (oneToOne) {
    let i0 = 0;
    while (i0 < fine.w && cols[i0]! < cx0) i0++;
    let i1 = fine.w;
    while (i1 > i0 && cols[i1 - 1]! >= cx1) i1--;
    const src = raster as typeof out;
    for (let j = 0; i1 > i0 && j < fine.h; j++) {
      const r = rows[j]!;
      if (r < cy0 || r >= cy1) continue;
      const at = (r - cy0) * cw + (cols[i0]! - cx0);
      out.set(src.subarray(at, at + (i1 - i0)) as never, j * fine.w + i0);
    }
    return { data: out, dtype };
  }
  for (let j = 0; j < fine.h; j++) {
    const r = rows[j]!;
    if (r < cy0 || r >= cy1) continue;
    for (let i = 0; i < fine.w; i++) {
      const c = cols[i]!;
      if (c < cx0 || c >= cx1) continue;
      out[j * fine.w + i] = raster[(r - cy0) * cw + (c - cx0)]!;
    }
  }
  return { data: out, dtype };
}

/** Why a window could not be decoded: a refusal by the decode limits as it is, else corruption. */
export function undecodable(err: Error): string {
  return err instanceof ImageryLimitError
    ? err.message
    : `the pixel data cannot be decoded (${err.message}): the file is corrupt or truncated`;
}

/** The field window of a capture; its blocks decode within one IMAGERY_MAX_DECODED_BYTES budget. */
export function readFieldWindow(
  capture: CaptureSource,
  boundary: Boundary,
  needed: CaptureBand[],
  opts: ReadOptions,
): Promise<FieldWindow> {
  return withDecodeBudget(() => readFieldWindowIn(capture, boundary, needed, opts));
}

/** The bands of a capture opened for reading: their grids and the finest one, whose grid windows are on. */
interface OpenedBands {
  bands: CaptureBand[];
  grids: Map<CaptureBand, Grid>;
  fineBand: CaptureBand;
  g: Grid;
}

/** A window on the finest band's grid (pixels; it may extend past the raster). */
interface Rect {
  x0: number;
  y0: number;
  w: number;
  h: number;
}

/** A field's window and its pixels inside the field (pixel centres; with weights, every pixel touched). */
interface FieldFrame extends Rect {
  inside: Uint8Array;
  weights?: Float64Array;
  partial?: Int32Array;
}

/** Pixels of a window, every band (and the mask, when the capture has one) on the fine grid. */
interface WindowPixels {
  bands: Partial<Record<CaptureBand, WindowBand>>;
  mask?: ArrayLike<number> & { length: number };
  /** With a dilation: 1 within the distance of an excluded cloud or shadow pixel (those included). */
  dilated?: Uint8Array;
}

async function openBands(capture: CaptureSource, needed: CaptureBand[], opts: ReadOptions): Promise<OpenedBands> {
  const bands = [...new Set(needed)];
  if (!bands.length) throw new ImageryError('bands', 'no band requested');
  const grids = new Map<CaptureBand, Grid>();
  for (const b of bands) {
    const src = capture.bands[b];
    if (!src) throw new ImageryError(b, 'the capture has no such band');
    grids.set(b, await gridOf(b, src.href, opts));
  }
  const first = grids.get(bands[0]!)!;
  for (const [b, g] of grids) {
    if (g.epsg !== first.epsg)
      throw new ImageryError(b, `CRS ${crsLabel(g.epsg)} differs from ${bands[0]}'s ${crsLabel(first.epsg)}`);
  }
  // The finest band defines the grid of the window.
  const fineBand = bands.reduce((a, b) => (Math.abs(grids.get(b)!.rx) < Math.abs(grids.get(a)!.rx) ? b : a));
  return { bands, grids, fineBand, g: grids.get(fineBand)! };
}

/** The field's window on the fine grid (one pixel of margin) and its pixels inside the field. */
function frameOf(opened: OpenedBands, boundary: Boundary, weighting?: 'centre' | 'coverage'): FieldFrame {
  const { g, fineBand } = opened;
  const project = fromWgs84(g.epsg);
  const rings: Ring[] = ringsOf(boundary).map((ring) => ring.map((p) => project(p)));
  if (!rings.every((ring) => ring.every(([x, y]) => Number.isFinite(x) && Number.isFinite(y)))) {
    throw new ImageryError(
      fineBand,
      `the field cannot be projected to the raster's ${crsLabel(g.epsg)} (it lies outside the projection's domain)`,
    );
  }
  let minC = Infinity,
    maxC = -Infinity,
    minR = Infinity,
    maxR = -Infinity;
  for (const ring of rings) {
    for (const [x, y] of ring) {
      const c = (x - g.ox) / g.rx;
      const r = (y - g.oy) / g.ry;
      minC = Math.min(minC, c);
      maxC = Math.max(maxC, c);
      minR = Math.min(minR, r);
      maxR = Math.max(maxR, r);
    }
  }
  // One pixel of margin around the field; the window may extend past the raster (no-data there).
  const x0 = Math.floor(minC) - 1;
  const y0 = Math.floor(minR) - 1;
  const w = Math.ceil(maxC) + 1 - x0;
  const h = Math.ceil(maxR) + 1 - y0;
  if (x0 + w <= 0 || y0 + h <= 0 || x0 >= g.width || y0 >= g.height) {
    throw new ImageryError(fineBand, 'the field lies outside the raster');
  }
  if (w * h > 25_000_000) throw new ImageryError(fineBand, 'the field window is larger than 25 million pixels');
  const toPixels = (ring: Ring) =>
    ring.map(([x, y]) => [(x - g.ox) / g.rx - x0, (y - g.oy) / g.ry - y0] as [number, number]);
  if (weighting === 'coverage') {
    // exact area shares on the capture's grid, the boundary reprojected first (coverage-fraction.ts)
    const polygons = (boundary.type === 'Polygon' ? [boundary.coordinates] : boundary.coordinates).map((rs) =>
      rs.map((ring) => toPixels(ring.map((p) => project(p)))),
    );
    const weights = coverageFractions(polygons, w, h);
    const inside = new Uint8Array(w * h);
    const edge: number[] = [];
    for (let k = 0; k < inside.length; k++) {
      const v = weights[k]!;
      inside[k] = v > 0 ? 1 : 0;
      if (v > 0 && v < 1) edge.push(k);
    }
    return { x0, y0, w, h, inside, weights, partial: Int32Array.from(edge) };
  }
  return { x0, y0, w, h, inside: rasterizeRings(rings.map(toPixels), w, h) };
}

/** Every band's pixels (and the mask's) over `rect`, sampled onto the fine grid. */
async function readPixels(
  capture: CaptureSource,
  opened: OpenedBands,
  rect: Rect,
  opts: ReadOptions,
): Promise<WindowPixels> {
  const { g } = opened;
  const fine = { ox: g.ox, oy: g.oy, rx: g.rx, ry: g.ry, ...rect };
  const bands: Partial<Record<CaptureBand, WindowBand>> = {};
  await Promise.all(
    opened.bands.map(async (b) => {
      const src = capture.bands[b]!;
      const grid = opened.grids.get(b)!;
      const { data, dtype } = await sampleOnto(grid, src.index ?? 1, b, fine, opts.signal);
      bands[b] = {
        data,
        dtype,
        scale: src.scale ?? capture.scale,
        offset: src.offset ?? capture.offset,
        nodata: grid.nodata,
      };
    }),
  );
  if (!capture.mask) return { bands };
  const mg = await gridOf('mask', capture.mask.href, opts);
  if (mg.epsg !== g.epsg)
    throw new ImageryError('mask', `CRS ${crsLabel(mg.epsg)} differs from the bands' ${crsLabel(g.epsg)}`);
  const d = opts.mask?.cloud_dilation_m ?? 0;
  if (!(d > 0)) {
    const { data } = await sampleOnto(mg, capture.mask.index ?? 1, 'mask', fine, opts.signal);
    return { bands, mask: data };
  }
  // With a dilation the classes are read over the window grown by the distance, so that a cloud
  // just outside the window still masks the field pixels near it.
  const rx = Math.floor(d / Math.abs(g.rx));
  const ry = Math.floor(d / Math.abs(g.ry));
  const big = { ...fine, x0: rect.x0 - rx, y0: rect.y0 - ry, w: rect.w + 2 * rx, h: rect.h + 2 * ry };
  const { data } = await sampleOnto(mg, capture.mask.index ?? 1, 'mask', big, opts.signal);
  const clouds = classTable(opts.mask, true);
  const mask = new (data.constructor as new (n: number) => typeof data)(rect.w * rect.h);
  for (let j = 0; j < rect.h; j++)
    mask.set(data.subarray((j + ry) * big.w + rx, (j + ry) * big.w + rx + rect.w) as never, j * rect.w);
  const dilated = dilate(
    data,
    big.w,
    big.h,
    clouds,
    { rx, ry, px: Math.abs(g.rx), py: Math.abs(g.ry), d },
    rect.w,
    rect.h,
  );
  return { bands, mask, dilated };
}

/** 1 per excluded class value (of 256); `clouds`: only those a dilation grows from. */
function classTable(mask: MaskRequest | undefined, clouds = false): Uint8Array {
  const t = new Uint8Array(256);
  for (const c of mask?.scl_exclude ?? SCL_MASKED) if (!clouds || SCL_CLOUDS.has(c)) t[c] = 1;
  return t;
}

/**
 * The pixels of the inner w × h window (centred in the big one, rx and ry pixels in) whose centre
 * lies within d metres of the centre of a pixel of a `clouds` class, on the capture's grid (px, py
 * metres a pixel). Per row of the big window, the distance in columns to the nearest cloud; a pixel
 * is dilated when, for some row offset dj, that distance is at most ⌊√(d² − (dj·py)²) / px⌋.
 */
function dilate(
  cls: ArrayLike<number>,
  bw: number,
  bh: number,
  clouds: Uint8Array,
  g: { rx: number; ry: number; px: number; py: number; d: number },
  w: number,
  h: number,
): Uint8Array {
  const FAR = 1 << 30;
  const near = new Int32Array(bw * bh);
  const rows = new Uint8Array(bh); // rows with any cloud
  for (let j = 0; j < bh; j++) {
    let last = -FAR;
    const o = j * bw;
    for (let i = 0; i < bw; i++) {
      const c = cls[o + i]!;
      if (clouds[c] === 1) {
        last = i;
        rows[j] = 1;
      }
      near[o + i] = i - last;
    }
    last = FAR * 2;
    for (let i = bw - 1; i >= 0; i--) {
      if (clouds[cls[o + i]!] === 1) last = i;
      if (last - i < near[o + i]!) near[o + i] = last - i;
    }
  }
  const reach = new Int32Array(2 * g.ry + 1);
  for (let dj = -g.ry; dj <= g.ry; dj++) {
    const rest = g.d * g.d - dj * g.py * (dj * g.py);
    reach[dj + g.ry] = rest < 0 ? -1 : Math.floor(Math.sqrt(rest) / g.px + 1e-9);
  }
  const out = new Uint8Array(w * h);
  for (let j = 0; j < h; j++) {
    for (let dj = -g.ry; dj <= g.ry; dj++) {
      const bj = j + g.ry + dj;
      const r = reach[dj + g.ry]!;
      if (r < 0 || !rows[bj]) continue;
      const o = bj * bw + g.rx;
      const oo = j * w;
      for (let i = 0; i < w; i++) if (near[o + i]! <= r) out[oo + i] = 1;
    }
  }
  return out;
}

/** Why a pixel is not usable (0: usable; an excluded SCL class c is SCL_REASON + c). */
const NO_DATA = 1;
const DILATED = 2;
const SCL_REASON = 16;

/**
 * Per pixel of `px`, why it is not usable, first reason only: a band's DN 0 (integer bands), the
 * declared nodata value or NaN; else its mask class is excluded; else it is within the dilation of
 * a cloud or shadow; 0 when usable.
 */
function whyUnusable(opened: OpenedBands, px: WindowPixels, n: number, mask?: MaskRequest): Uint8Array {
  const why = new Uint8Array(n);
  for (const b of opened.bands) {
    const { data, dtype, nodata } = px.bands[b]!;
    const zero = dtype !== 'f32';
    for (let k = 0; k < n; k++) {
      const v = data[k]!;
      if ((zero && v === 0) || (nodata !== null && v === nodata) || Number.isNaN(v)) why[k] = NO_DATA;
    }
  }
  const cls = px.mask;
  if (cls) {
    // an index that is not a class (not an integer, or past 255) reads undefined: not excluded
    const excluded = classTable(mask);
    for (let k = 0; k < n; k++) if (why[k] === 0 && excluded[cls[k]!] === 1) why[k] = SCL_REASON + cls[k]!;
  }
  const dil = px.dilated;
  if (dil) for (let k = 0; k < n; k++) if (why[k] === 0 && dil[k] === 1) why[k] = DILATED;
  return why;
}

/** 1 where a pixel of `px` is usable (see whyUnusable). */
function usablePixels(opened: OpenedBands, px: WindowPixels, n: number, mask?: MaskRequest): Uint8Array {
  // the same tests as whyUnusable, without the reasons
  const ok = new Uint8Array(n).fill(1);
  for (const b of opened.bands) {
    const { data, dtype, nodata } = px.bands[b]!;
    const zero = dtype !== 'f32';
    for (let k = 0; k < n; k++) {
      const v = data[k]!;
      if ((zero && v === 0) || (nodata !== null && v === nodata) || Number.isNaN(v)) ok[k] = 0;
    }
  }
  const cls = px.mask;
  if (cls) {
    const excluded = classTable(mask);
    for (let k = 0; k < n; k++) if (excluded[cls[k]!] === 1) ok[k] = 0;
  }
  const dil = px.dilated;
  if (dil) for (let k = 0; k < n; k++) if (dil[k] === 1) ok[k] = 0;
  return ok;
}

/** The reasons of the pixels `inside` marks, every excluded class listed (zero or not). */
function reasonsOf(why: Uint8Array, inside: Uint8Array, mask?: MaskRequest): FieldWindow['reasons'] {
  const per = new Float64Array(256);
  for (let k = 0; k < why.length; k++) if (inside[k]) per[why[k]!]++;
  const scl: Record<string, number> = {};
  for (const c of [...(mask?.scl_exclude ?? SCL_MASKED)].sort((a, b) => a - b)) scl[String(c)] = per[SCL_REASON + c]!;
  return { no_data: per[NO_DATA]!, scl, dilation: per[DILATED]! };
}

/** The field window from its frame and pixels: the validity mask and the counts. */
function fieldWindow(
  opened: OpenedBands,
  frame: FieldFrame,
  px: WindowPixels,
  mask?: MaskRequest,
  /** whyUnusable of `px`, when the caller has it (cut from a larger window's). */
  known?: Uint8Array,
): FieldWindow {
  const { g } = opened;
  const { inside, w, h } = frame;
  const why = known ?? whyUnusable(opened, px, inside.length, mask);
  const valid = new Uint8Array(inside.length);
  for (let k = 0; k < valid.length; k++) valid[k] = inside[k]! & (why[k] === 0 ? 1 : 0);
  let fieldPixels = 0;
  let validPixels = 0;
  for (let k = 0; k < inside.length; k++) {
    fieldPixels += inside[k]!;
    validPixels += valid[k]!;
  }
  return {
    width: w,
    height: h,
    epsg: g.epsg,
    originX: g.ox + frame.x0 * g.rx,
    originY: g.oy + frame.y0 * g.ry,
    resX: g.rx,
    resY: g.ry,
    bands: px.bands,
    inside,
    valid,
    fieldPixels,
    validPixels,
    invalidShare: fieldPixels ? 1 - validPixels / fieldPixels : 1,
    reasons: reasonsOf(why, inside, mask),
    ...(frame.weights
      ? { weights: frame.weights, partial: frame.partial!, fieldWeight: frame.weights.reduce((a, b) => a + b, 0) }
      : {}),
  };
}

async function readFieldWindowIn(
  capture: CaptureSource,
  boundary: Boundary,
  needed: CaptureBand[],
  opts: ReadOptions,
): Promise<FieldWindow> {
  const opened = await openBands(capture, needed, opts);
  const frame = frameOf(opened, boundary, opts.weighting);
  return fieldWindow(opened, frame, await readPixels(capture, opened, frame, opts), opts.mask);
}

/**
 * A field's usable pixels: those `ok` (a mask over `from`) marks among its inside pixels. Where
 * `dirty` says no pixel of the field's part of a row was cleared, its inside pixels on that row
 * count without a look at the mask.
 */
function validIn(f: CachedFrame, usable: Usable, from: Rect): number {
  let validPixels = 0;
  const { inside, w, h, rowPixels } = f;
  const { ok, dirty, chunks } = usable;
  const uw = from.w;
  const c0 = (f.x0 - from.x0) >> CHUNK_BITS;
  const c1 = (f.x0 - from.x0 + w - 1) >> CHUNK_BITS;
  for (let j = 0; j < h; j++) {
    const y = f.y0 - from.y0 + j;
    let clean = true;
    for (let c = y * chunks + c0, e = y * chunks + c1; clean && c <= e; c++) clean = dirty[c] === 0;
    if (clean) {
      validPixels += rowPixels[j]!;
      continue;
    }
    const at = y * uw + (f.x0 - from.x0);
    const row = j * w;
    for (let i = 0; i < w; i++) validPixels += inside[row + i]! & ok[at + i]!;
  }
  return validPixels;
}

/**
 * A usable-pixel mask over a window (1 usable), with per row and run of 2^CHUNK_BITS columns
 * whether any pixel of it may be 0 (`dirty[row * chunks + (column >> CHUNK_BITS)]`: 0 only when
 * every pixel of the run is 1; a 1 may be conservative).
 */
export interface Usable {
  ok: Uint8Array;
  dirty: Uint8Array;
  chunks: number;
}

const CHUNK_BITS = 6;

function usableMask(w: number, h: number, dirty: boolean): Usable {
  const chunks = ((w - 1) >> CHUNK_BITS) + 1;
  const d = new Uint8Array(chunks * h);
  if (dirty) d.fill(1);
  return { ok: new Uint8Array(w * h).fill(1), dirty: d, chunks };
}

/** Marks columns [i0, i1) of row j as possibly cleared. */
function markDirty(dirty: Uint8Array, chunks: number, j: number, i0: number, i1: number): void {
  if (i1 <= i0) return;
  for (let c = j * chunks + (i0 >> CHUNK_BITS), e = j * chunks + ((i1 - 1) >> CHUNK_BITS); c <= e; c++) dirty[c] = 1;
}

/** A field's frame, its count of inside pixels and its inside pixels per row, kept per thread across captures on one grid. */
interface CachedFrame extends FieldFrame {
  fieldPixels: number;
  rowPixels: Int32Array;
}

/**
 * Frames depend only on the fine grid and the boundary, not on the capture: the captures of one
 * tile (every Item of a subscription's MGRS tile) share them, and so do the 30-odd captures a
 * batch chunk's fields are read from. Least recently used first out, bounded by FRAME_CACHE_MB per
 * thread (default 16) of their masks, weights, key and the objects around them. A batch job
 * passes every one of its fields through it: at 32 MB counting the masks only, each thread's
 * cache filled towards that bound with frames of chunks long done (10,000 parcels of 1-50 ha:
 * ~3 KB each, 30 MB; 1,000 parcels never came near), while what a chunk needs is ~3 KB × its
 * fields (1,000) × the chunks in flight (2).
 */
const FRAME_CACHE_BYTES = Math.max(0, Number(process.env.FRAME_CACHE_MB ?? 16)) * 1_048_576;
/** A frame's bytes beyond its arrays and key: the objects, typed-array headers and map entry. */
const FRAME_OVERHEAD = 320;
const frames = new Map<string, CachedFrame>();
let frameBytes = 0;

const frameSize = (f: CachedFrame, key: string) =>
  f.inside.byteLength +
  f.rowPixels.byteLength +
  (f.weights?.byteLength ?? 0) +
  (f.partial?.byteLength ?? 0) +
  key.length +
  FRAME_OVERHEAD;

function cachedFrame(opened: OpenedBands, boundary: Boundary): CachedFrame {
  const { g } = opened;
  const key = `${String(g.epsg)}|${g.ox}|${g.oy}|${g.rx}|${g.ry}|${g.width}|${g.height}|${JSON.stringify(boundary)}`;
  const hit = frames.get(key);
  if (hit) {
    frames.delete(key);
    frames.set(key, hit);
    return hit;
  }
  const f = frameOf(opened, boundary);
  let fieldPixels = 0;
  const rowPixels = new Int32Array(f.h);
  for (let j = 0; j < f.h; j++) {
    let n = 0;
    for (let i = 0, o = j * f.w; i < f.w; i++) n += f.inside[o + i]!;
    rowPixels[j] = n;
    fieldPixels += n;
  }
  const frame: CachedFrame = { ...f, fieldPixels, rowPixels };
  frames.set(key, frame);
  frameBytes += frameSize(frame, key);
  for (const [k, old] of frames) {
    if (frameBytes <= FRAME_CACHE_BYTES) break;
    frames.delete(k);
    frameBytes -= frameSize(old, k);
  }
  return frame;
}

/** The fine grid's columns and rows in `grid`'s pixels (nearest neighbour by pixel centre), as sampleOnto maps them. */
function mapOnto(grid: Grid, g: Grid, rect: Rect): { cols: Int32Array; rows: Int32Array } {
  const cols = new Int32Array(rect.w);
  const rows = new Int32Array(rect.h);
  for (let i = 0; i < rect.w; i++) cols[i] = Math.floor((g.ox + (rect.x0 + i + 0.5) * g.rx - grid.ox) / grid.rx);
  for (let j = 0; j < rect.h; j++) rows[j] = Math.floor((g.oy + (rect.y0 + j + 0.5) * g.ry - grid.oy) / grid.ry);
  return { cols, rows };
}

/**
 * Clears in `ok` (a mask over `rect` on the fine grid) the pixels `bad` says are unusable, for one
 * file sampled as sampleOnto samples it; pixels past the raster read `outside`, the value
 * sampleOnto leaves there (0, or NaN for float32). The same values, without the fine-grid copy:
 * each block is decoded once and its verdicts ANDed into `ok` straight from the decoder's memory.
 * With `skipCleared`, a block whose pixels `ok` has cleared already is not read at all.
 */
async function clearUnusable(
  grid: Grid,
  g: Grid,
  index: number,
  band: string,
  rect: Rect,
  usable: Usable,
  bad: (v: number) => boolean,
  signal: AbortSignal | undefined,
  skipCleared: boolean,
): Promise<void> {
  const { ok, dirty, chunks } = usable;
  const dtype = dtypeOf(grid.image, band);
  const outside = dtype === 'f32' ? NaN : 0;
  const { cols, rows } = mapOnto(grid, g, rect);
  const cx0 = Math.max(0, minOf(cols));
  const cx1 = Math.min(grid.width, maxOf(cols) + 1);
  const cy0 = Math.max(0, minOf(rows));
  const cy1 = Math.min(grid.height, maxOf(rows) + 1);
  const { w, h } = rect;
  if (cx1 <= cx0 || cy1 <= cy0) {
    if (bad(outside)) {
      ok.fill(0);
      dirty.fill(1);
    }
    return;
  }
  if (index < 1 || index > grid.samples)
    throw new ImageryError(band, `band index ${index} does not exist (the file has ${grid.samples})`);
  // For each column (row) of the file's window, the first fine column (row) sampling it or one
  // after it; a file whose mapping is not monotone (flipped axes) goes through the window copy.
  const firstCol = firstAtLeast(cols, cx0, cx1);
  const firstRow = firstAtLeast(rows, cy0, cy1);
  if (!firstCol || !firstRow) {
    dirty.fill(1);
    return clearUnusableCopied(grid, g, index, band, rect, ok, bad, signal);
  }
  if (bad(outside)) {
    // Fine pixels past the raster: the first and last columns and rows, which sample nothing.
    const i0 = firstCol[0]!;
    const i1 = firstCol[cx1 - cx0]!;
    for (let j = 0; j < h; j++) {
      const o = j * w;
      if (j < firstRow[0]! || j >= firstRow[cy1 - cy0]!) {
        ok.fill(0, o, o + w);
        markDirty(dirty, chunks, j, 0, w);
      } else {
        ok.fill(0, o, o + i0);
        ok.fill(0, o + i1, o + w);
        markDirty(dirty, chunks, j, 0, i0);
        markDirty(dirty, chunks, j, i1, w);
      }
    }
  }
  const verdicts = verdictsOf(dtype, bad);
  const visit = (part: BlockPart): void => {
    if (firstCol[part.cx0 - cx0]! >= firstCol[part.cx1 - cx0]!) return;
    const { spp } = part;
    const data =
      part.data instanceof Int16Array
        ? new Uint16Array(part.data.buffer, part.data.byteOffset, part.data.length)
        : part.data;
    const f0 = part.cx0 - cx0;
    const n = part.cx1 - part.cx0;
    for (let r = part.cy0; r < part.cy1; r++) {
      const jA = firstRow[r - cy0]!;
      const jB = firstRow[r + 1 - cy0]!;
      if (jA >= jB) continue;
      // the element of file column part.cx0 in this row; column c + k is at s + k * spp
      const s = ((r - part.by0) * part.width + part.cx0 - part.bx0) * spp + part.inner;
      clearRow(usable, w, jA, jB, data, s, spp, firstCol, f0, n, verdicts);
    }
  };
  const read = await visitWindowRaw(grid.raster, [cx0, cy0, cx1, cy1], index - 1, visit, {
    fill: grid.image.getGDALNoData() ?? 0,
    signal,
    ...(skipCleared
      ? {
          want: (x0: number, y0: number, x1: number, y1: number) =>
            anySet(ok, w, firstCol[x0 - cx0]!, firstCol[x1 - cx0]!, firstRow[y0 - cy0]!, firstRow[y1 - cy0]!),
        }
      : {}),
  });
  if (read) return;
  // A file the block reader does not handle: its window through geotiff.js, as one part.
  const raster = await readWindow(grid.raster, [cx0, cy0, cx1, cy1], index - 1, signal);
  if (!ArrayBuffer.isView(raster) || raster.constructor !== typedOf(dtype))
    throw new Error("the window is not of the band's sample type");
  visit({ data: raster as SampleArray, width: cx1 - cx0, spp: 1, inner: 0, bx0: cx0, by0: cy0, cx0, cx1, cy0, cy1 });
}

function minOf(a: Int32Array): number {
  let m = Infinity;
  for (let i = 0; i < a.length; i++) if (a[i]! < m) m = a[i]!;
  return m;
}
function maxOf(a: Int32Array): number {
  let m = -Infinity;
  for (let i = 0; i < a.length; i++) if (a[i]! > m) m = a[i]!;
  return m;
}

/**
 * For each c in [lo, hi], the first index of `map` whose value is ≥ c (so the indices mapping to c
 * are first[c - lo] up to first[c + 1 - lo]); null when `map` is not non-decreasing.
 */
function firstAtLeast(map: Int32Array, lo: number, hi: number): Int32Array | null {
  for (let i = 1; i < map.length; i++) if (map[i]! < map[i - 1]!) return null;
  const first = new Int32Array(hi - lo + 1);
  let i = 0;
  for (let c = lo; c <= hi; c++) {
    while (i < map.length && map[i]! < c) i++;
    first[c - lo] = i;
  }
  return first;
}

/** Whether `ok` (rows of w) has a 1 in [i0, i1) × [j0, j1). */
function anySet(ok: Uint8Array, w: number, i0: number, i1: number, j0: number, j1: number): boolean {
  for (let j = j0; j < j1; j++) {
    const o = j * w;
    for (let i = i0; i < i1; i++) if (ok[o + i] === 1) return true;
  }
  return false;
}

const typedOf = (dtype: Dtype) => ({ u16: Uint16Array, i16: Int16Array, u8: Uint8Array, f32: Float32Array })[dtype];

/**
 * How a sample's verdict is found: the one or two values that are bad when an 8- or 16-bit sample
 * has no more (a band's 0 and its nodata: two compares, no table), else a table of 1 (usable) or 0
 * over every value of an 8- or 16-bit sample (an int16 indexed by its bits read as uint16), or the
 * predicate itself for float32.
 */
type Verdicts =
  | { kind: 'u16' | 'u8'; table: Uint8Array; bad: number; a: number; b: number }
  | { kind: 'f32'; bad: (v: number) => boolean };

function verdictsOf(dtype: Dtype, bad: (v: number) => boolean): Verdicts {
  if (dtype === 'f32') return { kind: 'f32', bad };
  const table = new Uint8Array(dtype === 'u8' ? 256 : 65536);
  let count = 0;
  let a = -1;
  let b = -1;
  for (let v = 0; v < table.length; v++) {
    const ok = bad(dtype === 'i16' && v >= 32768 ? v - 65536 : v) ? 0 : 1;
    table[v] = ok;
    if (ok === 0) {
      if (count === 0) a = v;
      else if (count === 1) b = v;
      count++;
    }
  }
  // -1 never equals a sample read as unsigned: one bad value compares against a only
  return { kind: dtype === 'u8' ? 'u8' : 'u16', table, bad: count, a, b };
}

/**
 * Clears ok over fine rows [jA, jB) for each of the n file columns (from the one at data[s], the
 * next at s + spp, …) whose sample is bad: file column k covers fine columns first[f0 + k] up to
 * first[f0 + k + 1]. Each sample is judged once however many fine pixels it covers (SCL at 20 m:
 * once for four). Whether it cleared any.
 */
function clearRow(
  u: Usable,
  w: number,
  jA: number,
  jB: number,
  data: SampleArray,
  s: number,
  spp: number,
  first: Int32Array,
  f0: number,
  n: number,
  v: Verdicts,
): boolean {
  if (v.kind === 'f32') return clearRowF32(u, w, jA, jB, data as Float32Array, s, spp, first, f0, n, v.bad);
  if (v.bad === 0) return false;
  // int16 samples come as a Uint16Array over their bits (the table and the bad values are so)
  const src = data as Uint8Array | Uint16Array;
  if (v.bad <= 2) {
    if (src instanceof Uint8Array) return clearRowFew8(u, w, jA, jB, src, s, spp, first, f0, n, v.a, v.b);
    return clearRowFew16(u, w, jA, jB, src, s, spp, first, f0, n, v.a, v.b);
  }
  if (src instanceof Uint8Array) return clearRowTable8(u, w, jA, jB, src, s, spp, first, f0, n, v.table);
  return clearRowTable16(u, w, jA, jB, src, s, spp, first, f0, n, v.table);
}

/** Clears the fine pixels of file column c (see clearRow). */
function clearColumn(u: Usable, w: number, jA: number, jB: number, first: Int32Array, c: number): void {
  const iA = first[c]!;
  const iB = first[c + 1]!;
  const { ok, dirty, chunks } = u;
  for (let j = jA; j < jB; j++) {
    for (let i = j * w + iA, e = j * w + iB; i < e; i++) ok[i] = 0;
    markDirty(dirty, chunks, j, iA, iB);
  }
}

// One loop per array type and test: each stays monomorphic. The common case (nothing bad) only
// reads the samples.
function clearRowFew16(
  u: Usable,
  w: number,
  jA: number,
  jB: number,
  src: Uint16Array,
  s: number,
  spp: number,
  first: Int32Array,
  f0: number,
  n: number,
  a: number,
  b: number,
): boolean {
  let hit = false;
  for (let k = 0; k < n; k++) {
    const x = src[s + k * spp]!;
    if (x === a || x === b) {
      hit = true;
      clearColumn(u, w, jA, jB, first, f0 + k);
    }
  }
  return hit;
}
function clearRowFew8(
  u: Usable,
  w: number,
  jA: number,
  jB: number,
  src: Uint8Array,
  s: number,
  spp: number,
  first: Int32Array,
  f0: number,
  n: number,
  a: number,
  b: number,
): boolean {
  let hit = false;
  for (let k = 0; k < n; k++) {
    const x = src[s + k * spp]!;
    if (x === a || x === b) {
      hit = true;
      clearColumn(u, w, jA, jB, first, f0 + k);
    }
  }
  return hit;
}
function clearRowTable16(
  u: Usable,
  w: number,
  jA: number,
  jB: number,
  src: Uint16Array,
  s: number,
  spp: number,
  first: Int32Array,
  f0: number,
  n: number,
  t: Uint8Array,
): boolean {
  let hit = false;
  for (let k = 0; k < n; k++) {
    if (t[src[s + k * spp]!] === 0) {
      hit = true;
      clearColumn(u, w, jA, jB, first, f0 + k);
    }
  }
  return hit;
}
function clearRowTable8(
  u: Usable,
  w: number,
  jA: number,
  jB: number,
  src: Uint8Array,
  s: number,
  spp: number,
  first: Int32Array,
  f0: number,
  n: number,
  t: Uint8Array,
): boolean {
  let hit = false;
  for (let k = 0; k < n; k++) {
    if (t[src[s + k * spp]!] === 0) {
      hit = true;
      clearColumn(u, w, jA, jB, first, f0 + k);
    }
  }
  return hit;
}
function clearRowF32(
  u: Usable,
  w: number,
  jA: number,
  jB: number,
  src: Float32Array,
  s: number,
  spp: number,
  first: Int32Array,
  f0: number,
  n: number,
  bad: (v: number) => boolean,
): boolean {
  let hit = false;
  for (let k = 0; k < n; k++) {
    if (bad(src[s + k * spp]!)) {
      hit = true;
      clearColumn(u, w, jA, jB, first, f0 + k);
    }
  }
  return hit;
}

/** clearUnusable through a copy of the file's window (files whose grid maps onto the fine one non-monotonically). */
async function clearUnusableCopied(
  grid: Grid,
  g: Grid,
  index: number,
  band: string,
  rect: Rect,
  ok: Uint8Array,
  bad: (v: number) => boolean,
  signal?: AbortSignal,
): Promise<void> {
  const dtype = dtypeOf(grid.image, band);
  const outside = dtype === 'f32' ? NaN : 0;
  const { cols, rows } = mapOnto(grid, g, rect);
  const cx0 = Math.max(0, minOf(cols));
  const cx1 = Math.min(grid.width, maxOf(cols) + 1);
  const cy0 = Math.max(0, minOf(rows));
  const cy1 = Math.min(grid.height, maxOf(rows) + 1);
  const { w, h } = rect;
  if (cx1 <= cx0 || cy1 <= cy0) {
    if (bad(outside)) ok.fill(0);
    return;
  }
  if (index < 1 || index > grid.samples)
    throw new ImageryError(band, `band index ${index} does not exist (the file has ${grid.samples})`);
  const raster = await readWindow(grid.raster, [cx0, cy0, cx1, cy1], index - 1, signal);
  // sampleOnto stores values in an array of the band's type: only that type is taken here
  const good = goodValues(raster, dtype, bad);
  const cw = cx1 - cx0;
  const badOutside = bad(outside);
  // Each fine column's column in the window, or -1 past the raster; one run of consecutive ones
  // (the same grid) is copied as a run.
  const at = new Int32Array(w);
  let run = true;
  for (let i = 0; i < w; i++) {
    const c = cols[i]!;
    at[i] = c < cx0 || c >= cx1 ? -1 : c - cx0;
    if (i > 0 && at[i]! >= 0 && at[i - 1]! >= 0 && at[i] !== at[i - 1]! + 1) run = false;
  }
  let i0 = 0;
  while (i0 < w && at[i0]! < 0) i0++;
  let i1 = w;
  while (i1 > i0 && at[i1 - 1]! < 0) i1--;
  for (let i = i0; run && i < i1; i++) if (at[i]! < 0) run = false;
  for (let j = 0; j < h; j++) {
    const r = rows[j]!;
    const o = j * w;
    if (r < cy0 || r >= cy1) {
      if (badOutside) ok.fill(0, o, o + w);
      continue;
    }
    const base = (r - cy0) * cw;
    if (run) {
      if (badOutside) {
        ok.fill(0, o, o + i0);
        ok.fill(0, o + i1, o + w);
      }
      andRun(ok, o + i0, good, base + (i1 > i0 ? at[i0]! : 0), i1 - i0);
    } else andGather(ok, o, good, base, at, w, badOutside);
  }
}

/** 1 for each value of a window that is not `bad`: by a table of every value for 8- and 16-bit samples. */
function goodValues(raster: ArrayLike<number>, dtype: Dtype, bad: (v: number) => boolean): Uint8Array {
  const typed = { u16: Uint16Array, i16: Int16Array, u8: Uint8Array, f32: Float32Array }[dtype];
  if (!(raster instanceof typed)) throw new Error("the window is not of the band's sample type");
  const n = raster.length;
  const good = new Uint8Array(n);
  if (dtype === 'f32') {
    const src = raster as Float32Array;
    for (let k = 0; k < n; k++) good[k] = bad(src[k]!) ? 0 : 1;
    return good;
  }
  const lo = dtype === 'i16' ? -32768 : 0;
  const table = new Uint8Array(dtype === 'u8' ? 256 : 65536);
  for (let v = 0; v < table.length; v++) table[v] = bad(v + lo) ? 0 : 1;
  if (dtype === 'u16') lookup16(raster as Uint16Array, table, good);
  else if (dtype === 'u8') lookup8(raster as Uint8Array, table, good);
  else lookupI16(raster as Int16Array, table, good);
  return good;
}

// One loop per array type: each stays monomorphic.
function lookup16(src: Uint16Array, table: Uint8Array, out: Uint8Array): void {
  for (let k = 0, n = src.length; k < n; k++) out[k] = table[src[k]!]!;
}
function lookup8(src: Uint8Array, table: Uint8Array, out: Uint8Array): void {
  for (let k = 0, n = src.length; k < n; k++) out[k] = table[src[k]!]!;
}
function lookupI16(src: Int16Array, table: Uint8Array, out: Uint8Array): void {
  for (let k = 0, n = src.length; k < n; k++) out[k] = table[src[k]! + 32768]!;
}

function andRun(ok: Uint8Array, o: number, good: Uint8Array, g: number, n: number): void {
  for (let i = 0; i < n; i++) ok[o + i]! &= good[g + i]!;
}

function andGather(
  ok: Uint8Array,
  o: number,
  good: Uint8Array,
  base: number,
  at: Int32Array,
  w: number,
  badOutside: boolean,
): void {
  for (let i = 0; i < w; i++) {
    const c = at[i]!;
    if (c >= 0) ok[o + i]! &= good[base + c]!;
    else if (badOutside) ok[o + i] = 0;
  }
}

/**
 * usablePixels(opened, readPixels(…, rect)) without the bands' copies on the fine grid: 1 where
 * the mask's class is not masked and no band's value is 0 (integer bands), its nodata or NaN.
 */
async function usableOver(capture: CaptureSource, opened: OpenedBands, rect: Rect, opts: ReadOptions): Promise<Usable> {
  const { g } = opened;
  const usable = usableMask(rect.w, rect.h, false);
  // The mask first (SCL: a quarter of the pixels, one byte each): blocks of the bands under pixels
  // it has cleared (clouds, no data) are then neither read nor decoded.
  let first = true;
  if (capture.mask) {
    const mg = await gridOf('mask', capture.mask.href, opts);
    if (mg.epsg !== g.epsg)
      throw new ImageryError('mask', `CRS ${crsLabel(mg.epsg)} differs from the bands' ${crsLabel(g.epsg)}`);
    const excluded = classTable(opts.mask);
    await clearUnusable(
      mg,
      g,
      capture.mask.index ?? 1,
      'mask',
      rect,
      usable,
      (v) => excluded[v] === 1,
      opts.signal,
      false,
    );
    first = false;
  }
  for (const b of opened.bands) {
    const src = capture.bands[b]!;
    const grid = opened.grids.get(b)!;
    const zero = dtypeOf(grid.image, b) !== 'f32';
    const nodata = grid.nodata;
    await clearUnusable(
      grid,
      g,
      src.index ?? 1,
      b,
      rect,
      usable,
      (v) => (zero && v === 0) || (nodata !== null && v === nodata) || Number.isNaN(v),
      opts.signal,
      !first,
    );
    first = false;
  }
  return usable;
}

/** One field's coverage in a group: its pixel counts, or why it could not be computed. */
export type FieldCoverage = { fieldPixels: number; validPixels: number; touched?: TouchedWeights } | { error: string };

/** The smallest rectangle holding every frame (the union window a group reads once). */
function unionRect(frames: readonly Rect[]): Rect {
  let x0 = Infinity,
    y0 = Infinity,
    x1 = -Infinity,
    y1 = -Infinity;
  for (const f of frames) {
    x0 = Math.min(x0, f.x0);
    y0 = Math.min(y0, f.y0);
    x1 = Math.max(x1, f.x0 + f.w);
    y1 = Math.max(y1, f.y0 + f.h);
  }
  return { x0, y0, w: x1 - x0, h: y1 - y0 };
}

/**
 * The coverage (field pixels, usable pixels) of a capture over each of a group of nearby fields,
 * exactly as readFieldWindow counts them, reading the files once: each band is opened once and
 * the union of the fields' windows read once (each block decoded once), then cut per field. A
 * field whose own window cannot be made (outside the raster, not projectable, too large) gets its
 * error and the others go on; when the union cannot be read (a corrupt block, the decode budget),
 * each field is read on its own, so a failure stays with the fields it concerns. A capture whose
 * bands cannot be opened rejects.
 */
export async function readFieldCoverages(
  capture: CaptureSource,
  boundaries: Boundary[],
  needed: CaptureBand[],
  opts: ReadOptions,
): Promise<FieldCoverage[]> {
  const opened = await openBands(capture, needed, opts);
  const frames = boundaries.map((b): CachedFrame | Error => {
    try {
      return cachedFrame(opened, b);
    } catch (err) {
      return err as Error;
    }
  });
  const framed = frames.filter((f): f is CachedFrame => !(f instanceof Error));
  let ok: Usable | null = null;
  let from: Rect | undefined;
  if (framed.length) {
    from = unionRect(framed);
    // Usable pixels of the union once (each block decoded once); any failure: field by field below.
    // A dilation needs the classes around the window, which only readPixels reads.
    const rect = from;
    ok = await withDecodeBudget(() =>
      (opts.mask?.cloud_dilation_m ?? 0) > 0
        ? readPixels(capture, opened, rect, opts).then(
            (px): Usable => ({
              ...usableMask(rect.w, rect.h, true),
              ok: usablePixels(opened, px, rect.w * rect.h, opts.mask),
            }),
          )
        : usableOver(capture, opened, rect, opts),
    ).catch(() => null);
  }
  const out: FieldCoverage[] = [];
  for (const [k, f] of frames.entries()) {
    if (f instanceof Error) {
      out.push({ error: f.message });
      continue;
    }
    if (ok) {
      out.push({ fieldPixels: f.fieldPixels, validPixels: validIn(f, ok, from!) });
      continue;
    }
    try {
      const win = await readFieldWindow(capture, boundaries[k]!, needed, opts);
      out.push({ fieldPixels: win.fieldPixels, validPixels: win.validPixels });
    } catch (err) {
      out.push({ error: (err as Error).message });
    }
  }
  for (const [k, c] of out.entries())
    if (!('error' in c) && c.fieldPixels === 0) {
      const touched = await touchedWeights(capture, boundaries[k]!, needed, opts).catch(() => undefined);
      if (touched) c.touched = touched;
    }
  return out;
}

/**
 * A field with no pixel centre inside (a sliver, a polygon within one pixel): the weight of the
 * pixels it touches, each the share of its area inside (as weighting=coverage reads them), and of
 * the usable ones among them; undefined when it touches none (every share within 1e-9 of none).
 * Such a field's window is narrow: it is read again, with the weights.
 */
export async function touchedWeights(
  capture: CaptureSource,
  boundary: Boundary,
  needed: CaptureBand[],
  opts: ReadOptions,
): Promise<TouchedWeights | undefined> {
  const win = await readFieldWindow(capture, boundary, needed, { ...opts, weighting: 'coverage' });
  if (!win.fieldWeight) return undefined;
  let validWeight = 0;
  for (let k = 0; k < win.valid.length; k++) if (win.valid[k]) validWeight += win.weights![k]!;
  return { fieldWeight: win.fieldWeight, validWeight };
}

/** One field's window in a group read, or why it could not be made. */
export type GroupWindow = FieldWindow | { error: string };

/**
 * `a` (over `from`) cut to `frame`, copied row by row: an element loop per row (field windows are
 * narrow: a view per row would cost more in allocations than the copy).
 */
function cut<A extends { [k: number]: number; length: number }>(a: A, from: Rect, frame: Rect): A {
  const out = new (a.constructor as new (n: number) => A)(frame.w * frame.h);
  const w = frame.w;
  for (let j = 0; j < frame.h; j++) {
    const at = (frame.y0 - from.y0 + j) * from.w + (frame.x0 - from.x0);
    const o = j * w;
    for (let i = 0; i < w; i++) out[o + i] = a[at + i]!;
  }
  return out;
}

/** The bands of `px` (over `from`) cut to `frame` (what the kernel reads). */
function cutBands(px: WindowPixels, from: Rect, frame: Rect): WindowPixels {
  const bands: WindowPixels['bands'] = {};
  for (const [b, wb] of Object.entries(px.bands) as Array<[CaptureBand, WindowBand]>)
    bands[b] = { ...wb, data: cut(wb.data as Uint16Array, from, frame) as WindowBand['data'] };
  return { bands };
}

/**
 * The windows of a group read (readFieldWindows), made one at a time: `window(k)` cuts field k's
 * window from the union's pixels when asked, so a caller that uses each window and lets it go holds
 * one field's window at a time, not the group's (a group has hundreds of fields: their windows
 * together were tens of MB per task in each compute thread, freed only by the next GC).
 */
export interface GroupWindows {
  readonly length: number;
  /** Field k's window or its error; a promise only when the union could not be read (each field read alone). */
  window(k: number): GroupWindow | Promise<GroupWindow>;
}

/**
 * The windows of a capture over each of a group of nearby fields, exactly as readFieldWindow makes
 * them one by one, reading the files once (batch statistics): every band, the mask (and a
 * dilation's classes) over the union of the fields' windows, each block decoded once, then cut per
 * field when asked. A field whose own window cannot be made gets its error; when the union cannot
 * be read, each field is read on its own, so a failure stays with the fields it concerns.
 */
export async function readFieldWindows(
  capture: CaptureSource,
  boundaries: Boundary[],
  needed: CaptureBand[],
  opts: ReadOptions,
): Promise<GroupWindows> {
  const opened = await openBands(capture, needed, opts);
  const frames = boundaries.map((b): FieldFrame | Error => {
    try {
      return opts.weighting === 'coverage' ? frameOf(opened, b, 'coverage') : cachedFrame(opened, b);
    } catch (err) {
      return err as Error;
    }
  });
  const framed = frames.filter((f): f is FieldFrame => !(f instanceof Error));
  let px: WindowPixels | null = null;
  let from: Rect | undefined;
  if (framed.length) {
    const rect = unionRect(framed);
    from = rect;
    px = await withDecodeBudget(() => readPixels(capture, opened, rect, opts)).catch(() => null);
  }
  // Why each pixel is unusable, once over the union: each field cuts its part.
  const whyAll = px && from ? whyUnusable(opened, px, from.w * from.h, opts.mask) : null;
  const alone = async (k: number): Promise<GroupWindow> => {
    try {
      return await readFieldWindow(capture, boundaries[k]!, needed, opts);
    } catch (err) {
      return { error: (err as Error).message };
    }
  };
  return {
    length: frames.length,
    window(k) {
      const f = frames[k]!;
      if (f instanceof Error) return { error: f.message };
      if (!px || !whyAll) return alone(k);
      try {
        return framed.length === 1
          ? fieldWindow(opened, f, px, opts.mask, whyAll)
          : fieldWindow(opened, f, cutBands(px, from!, f), opts.mask, cut(whyAll, from!, f));
      } catch (err) {
        return { error: (err as Error).message };
      }
    },
  };
}
