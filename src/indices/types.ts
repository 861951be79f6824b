/**
 * The indices feature's shared types: the field state, cached statistics and the services the
 * index calls need. Kept apart so that the cache, the field state, the statistics store and the
 * service import them instead of each other (no import cycle).
 */
import type { ComputePool } from '../compute/pool.js';
import type { MaskReasons } from '../compute/tasks.js';
import type { Histogram } from '../compute/zonal.js';
import type { Boundary } from '../fields/index.js';
import type { CaptureSource } from '../imagery/index.js';
import type { Database } from '../platform/database.js';
import type { HeavyWork } from '../platform/http/protection.js';
import type { Candidate } from './selection.js';

export interface IndexDeps {
  db: Database;
  compute: ComputePool;
  roots: string[];
  /** Per-pixel GeoJSON work: its bound and its (low-priority) threads; none: unbounded, in `compute`. */
  heavy?: { work: HeavyWork; compute: ComputePool };
}

export interface FieldState {
  stamp: string;
  boundary: Boundary;
  /** The key of cached statistics (index_stats.boundary_hash). */
  boundaryHash: string;
  candidates: Candidate[];
  /** The candidates with their date as UTC milliseconds, in date order. */
  byDate: Array<{ c: Candidate; t: number }>;
  sources: Map<string, CaptureSource>;
  /** The database's write count when the stamp was last confirmed (embedded backend). */
  writes?: number;
}

export interface OrderStatsValues {
  median: number | null;
  p10: number | null;
  p25: number | null;
  p75: number | null;
  p90: number | null;
}

export interface CachedStats {
  count: number;
  min: number | null;
  max: number | null;
  mean: number | null;
  std: number | null;
  field_pixels: number;
  /** Present once computed; null when there was no valid pixel. */
  order?: OrderStatsValues | null;
  /** The percentiles asked for (options key), in the order asked. */
  percentiles?: Array<{ percentile: number; value: number | null }>;
  histogram?: Histogram;
  /** Why field pixels are left out (see MaskReasons). */
  reasons?: MaskReasons;
  /** weighting=coverage: the touched pixels' weight sum (count is the valid ones' weight sum). */
  field_weight?: number;
}
