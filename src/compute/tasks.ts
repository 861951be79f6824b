/**
 * Messages between the pool and its workers (versioned: `{kind, v, ...}`). Typed arrays travel as
 * transferred buffers, never as copied JSON; a program is plain data (a small Int32Array).
 */
import type { BandSpec, OrderStats, Stats } from './kernel-host.js';
import type { Program } from './formula.js';
import type { Histogram, HistogramSpec } from './zonal.js';

/**
 * What a field's statistics include beyond count, min, max, mean and std (every field is
 * optional; absent is the spec's default: pixel-centre rule, no percentile, no histogram).
 */
export interface StatsRequest {
  /** Percentiles in [0, 100], numpy's linear interpolation (weighted: exactextract's). */
  percentiles?: number[];
  histogram?: HistogramSpec;
  /** centre: pixels whose centre is inside, weight 1; coverage: every touched pixel, weight = its area share inside. */
  weighting?: 'centre' | 'coverage';
}

/** The cloud mask of a read: excluded SCL classes (default SCL_MASKED) and a dilation around clouds and shadows. */
export interface MaskRequest {
  scl_exclude?: number[];
  /** Metres on the capture's grid around excluded cloud and shadow pixels (classes 3, 8, 9, 10). */
  cloud_dilation_m?: number;
}

/**
 * Why the field's pixels are not in the statistics, each pixel counted once, in this order: a
 * band's no-data (DN 0, the declared no-data, NaN, outside the raster), its SCL class (excluded
 * classes only), the dilation around clouds and shadows, and the formula giving ÷0 or a
 * non-finite value. valid + the reasons = the field's pixels (touched ones with weighting=coverage).
 */
export interface MaskReasons {
  no_data: number;
  /** Per excluded SCL class (its number as the key), every excluded class listed. */
  scl: Record<string, number>;
  dilation: number;
  non_finite: number;
}

/** Bytes left free before and after the per-pixel GeoJSON, for the caller to write what surrounds it. */
export interface Room {
  before: number;
  after: number;
}

/** Where a field window lies: its size, CRS (EPSG code or proj4 text) and pixel grid. */
export interface WindowGrid {
  width: number;
  height: number;
  epsg: number | string;
  originX: number;
  originY: number;
  resX: number;
  resY: number;
}

export interface BandInput extends BandSpec {
  /** Digital numbers or reflectance, one per pixel; its buffer is transferred to the worker. */
  data: Float32Array | Uint16Array | Int16Array | Uint8Array;
}

export interface IndexTask {
  kind: 'index';
  v: 1;
  program: Program;
  /** In program.bands order. */
  bands: BandInput[];
  /** 1 = counted, 0 = outside the field or invalid (clouds, ...). Optional. */
  mask?: Uint8Array;
  /** Return the per-pixel values (transferred back). */
  values?: boolean;
  /** Median and percentiles. */
  orderStats?: boolean;
  histogram?: { lo: number; hi: number; bins: number };
}

export interface IndexResult {
  stats: Stats;
  order?: OrderStats | null;
  values?: Float32Array;
  histogram?: Uint32Array;
  /** Worker time in ms (kernel only, no queueing). */
  kernelMs: number;
}

/**
 * Read a capture's window over a field (in the worker) and run a program on it. `Capture` and
 * `Geometry` are the imagery feature's CaptureSource and the field's Boundary: the pool only
 * carries them to the thread entry (src/threads/compute-worker.ts), which reads the window.
 */
export interface FieldIndexTask<Capture = unknown, Geometry = unknown> {
  kind: 'field-index';
  v: 1;
  capture: Capture;
  boundary: Geometry;
  program: Program;
  roots: string[];
  values?: boolean;
  orderStats?: boolean;
  stats?: StatsRequest;
  mask?: MaskRequest;
  /**
   * Return the per-pixel GeoJSON (written in the worker, pixel-geojson.ts) instead of the values,
   * with this many free bytes before and after it.
   */
  geojson?: Room;
}

export interface FieldIndexResult extends IndexResult {
  window: WindowGrid;
  fieldPixels: number;
  validPixels: number;
  /** The percentiles asked for, in their order (null: no valid pixel). */
  percentiles?: number[] | null;
  bins?: Histogram;
  reasons?: MaskReasons;
  /** weighting=coverage: the sum of the touched pixels' weights (the field's area in pixels). */
  fieldWeight?: number;
  /** Per pixel: 1 inside the field (the GeoJSON has one feature per such pixel). */
  inside?: Uint8Array;
  /** The FeatureCollection as JSON bytes within the room asked for (transferred back). */
  geojson?: Uint8Array;
}

/** Open every band of a capture and decode a little of each: catches corrupt and truncated files. */
export interface InspectTask<Capture = unknown> {
  kind: 'inspect';
  v: 1;
  capture: Capture;
  roots: string[];
}

export interface InspectResult {
  bands: Record<
    string,
    {
      epsg: number | string;
      width: number;
      height: number;
      resX: number;
      resY: number;
      originX: number;
      originY: number;
      dtype: string;
      samples: number;
    }
  >;
}

/** Share of a field's pixels that are usable in a capture (field-level cloud cover). */
export interface CoverageTask<Capture = unknown, Geometry = unknown> {
  kind: 'coverage';
  v: 1;
  capture: Capture;
  boundary: Geometry;
  bands: string[];
  roots: string[];
  mask?: MaskRequest;
}

export interface CoverageResult {
  fieldPixels: number;
  validPixels: number;
  /**
   * A field with no pixel centre inside (a sliver, a polygon within one pixel) that touches pixels:
   * the weight of those pixels (the share of each inside, weighting=coverage) and of the usable
   * ones. Absent when the field has a pixel centre inside, or touches no pixel.
   */
  touched?: TouchedWeights;
}

/** The weight (pixels' shares inside) of the pixels a field touches, and of the usable ones. */
export interface TouchedWeights {
  fieldWeight: number;
  validWeight: number;
}

/**
 * The coverage of one capture over a group of nearby fields, the files read once for the group
 * (the union of the fields' windows): one result per boundary, in order, each the counts or the
 * reason that field's coverage could not be computed.
 */
export interface CoverageBatchTask<Capture = unknown, Geometry = unknown> {
  kind: 'coverage-batch';
  v: 1;
  capture: Capture;
  boundaries: Geometry[];
  bands: string[];
  roots: string[];
  mask?: MaskRequest;
}

export interface CoverageBatchResult {
  fields: Array<CoverageResult | { error: string }>;
}

/**
 * Batch statistics: one capture over a group of nearby fields, the files read once for the group
 * (the union of the fields' windows), then each program's statistics per field on the shared
 * pixels, as a field-index task computes them. `coverage`: also each field's pixel counts as a
 * coverage task counts them (the coverage bands, pixel centres, the request's mask).
 */
export interface FieldStatsBatchTask<Capture = unknown, Geometry = unknown> {
  kind: 'field-stats-batch';
  v: 1;
  capture: Capture;
  boundaries: Geometry[];
  /** Per program, the fields (indices into boundaries) that need its statistics. */
  programs: Array<{ program: Program; fields: number[] }>;
  /** The fields (indices into boundaries) that need their coverage counted. */
  coverage: number[];
  roots: string[];
  stats?: StatsRequest;
  mask?: MaskRequest;
}

export type BatchFieldStats = Pick<
  FieldIndexResult,
  'stats' | 'fieldPixels' | 'percentiles' | 'bins' | 'reasons' | 'fieldWeight'
>;

export interface FieldStatsBatchResult {
  /** Per boundary: its coverage counts (when asked), or why they could not be made. */
  coverage: Array<CoverageResult | { error: string } | null>;
  /** Per program (in order), per boundary: the statistics (when asked), or why not. */
  stats: Array<Array<BatchFieldStats | { error: string } | null>>;
}

/** What a field raster task draws: the COG, a PNG of the window, one WebMercatorQuad map tile, or only the window's grid. */
export type RasterOutput =
  | { kind: 'grid' }
  | { kind: 'tif'; metadata: Record<string, string>; description: string }
  | { kind: 'png'; ramp: string; range?: [number, number] }
  | { kind: 'tile'; ramp: string; range?: [number, number]; z: number; x: number; y: number };

/** The index values over a field's window, NaN where there is none, and their range. */
export interface RasterLayer {
  grid: WindowGrid;
  values: Float32Array;
  min: number | null;
  max: number | null;
}

/** A map tile's pixels over a window: a rectangle of the tile, per pixel the window index or −1. */
export interface TileMapping {
  x0: number;
  y0: number;
  width: number;
  height: number;
  idx: Int32Array;
}

/**
 * An index of a field as an image. The layer comes with the task when the caller holds it, else
 * from the thread's cache under `layer` (a key naming the capture, boundary and formula), else the
 * thread reads the window and runs the program; a tile's mapping likewise (false: the tile misses
 * the window).
 */
export interface FieldRasterTask<Capture = unknown, Geometry = unknown> {
  kind: 'field-raster';
  v: 1;
  layer: string;
  capture: Capture;
  boundary: Geometry;
  program: Program;
  roots: string[];
  output: RasterOutput;
  layerData?: RasterLayer;
  tileMap?: TileMapping | false;
}

export interface FieldRasterResult {
  /** The file (transferred back); absent for output `grid`. */
  bytes?: Uint8Array;
  window: WindowGrid;
  /** The range the colours were drawn over (PNG and tiles). */
  range?: [number, number];
  /** Why the output cannot be made from this capture (a 422 upstream). */
  refused?: string;
  /** The layer, when the task came without it (for the caller to keep and send again). */
  layerData?: RasterLayer;
  /** The tile's mapping, when the task came without it. */
  tileMap?: TileMapping | false;
}

export interface PingTask {
  kind: 'ping';
  v: 1;
}

/** gzip of bytes (a response body), so that the CPU it takes is the pool's, not the API thread's. */
export interface GzipTask {
  kind: 'gzip';
  v: 1;
  data: Uint8Array;
  level: number;
}

export type Task =
  | IndexTask
  | FieldIndexTask
  | FieldRasterTask
  | InspectTask
  | CoverageTask
  | CoverageBatchTask
  | FieldStatsBatchTask
  | GzipTask
  | PingTask;
