/**
 * The statistics and cloud-mask options of a request (issue 23), parsed once for every path that
 * computes a field's statistics (single date, time series, reports; a batch job takes the same
 * object): percentiles, a histogram, the weighting of edge pixels, the excluded SCL classes and a
 * dilation around clouds. Domain code: no HTTP. Absent options are the spec's defaults (pixel
 * centres, SCL_MASKED, no dilation), and a request with only defaults has the key '' so that it
 * shares every cache entry with requests that gave no option at all.
 */
import type { MaskRequest, StatsRequest } from '../compute/tasks.js';
import type { HistogramSpec } from '../compute/zonal.js';
import { SCL_MASKED } from '../imagery/index.js';
import { AppError, type FieldIssue } from '../platform/errors.js';

export const MAX_PERCENTILES = 100;
export const MAX_BINS = 1000;
export const MAX_DILATION_M = 1000;
/** Sentinel-2 L2A scene classification classes (0 no data … 11 snow or ice). */
export const SCL_CLASSES = 12;
export const DEFAULT_SCL_EXCLUDE: readonly number[] = [...SCL_MASKED].sort((a, b) => a - b);

/** The options as a request gives them (query strings, or a JSON body's fields). */
export interface RawStatsOptions {
  percentiles?: string | number[];
  histogram?: string | number | number[];
  weighting?: 'centre' | 'coverage';
  scl_exclude?: string | number[];
  cloud_dilation_m?: number;
}

export interface StatsOptions {
  stats: StatsRequest;
  mask: MaskRequest;
  /** '' for the defaults; else a canonical text of the non-default options (cache keys). */
  key: string;
  /** The same for the mask alone (what coverage and capture choice depend on). */
  maskKey: string;
}

export const DEFAULT_OPTIONS: StatsOptions = Object.freeze({ stats: {}, mask: {}, key: '', maskKey: '' });

const numbers = (v: string | number | number[]): number[] =>
  Array.isArray(v)
    ? v
    : typeof v === 'number'
      ? [v]
      : v
          .split(',')
          .map((x) => x.trim())
          .filter((x) => x !== '')
          .map((x) => (/^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/.test(x) ? Number(x) : NaN));

/**
 * Checks and canonicalises the options; every problem is one issue at `at(name)` with a stable
 * code, all of them in one 400 validation_failed.
 */
export function parseStatsOptions(raw: RawStatsOptions, at: (name: string) => string): StatsOptions {
  const issues: FieldIssue[] = [];
  const stats: StatsRequest = {};
  const mask: MaskRequest = {};
  if (raw.percentiles !== undefined) {
    const ps = numbers(raw.percentiles);
    if (!ps.length || ps.length > MAX_PERCENTILES)
      issues.push({
        path: at('percentiles'),
        code: 'invalid_percentiles',
        message: `give 1 to ${MAX_PERCENTILES} percentiles, comma-separated`,
      });
    else if (!ps.every((p) => Number.isFinite(p) && p >= 0 && p <= 100))
      issues.push({
        path: at('percentiles'),
        code: 'percentile_out_of_range',
        message: 'every percentile must be a number in [0, 100]',
      });
    else stats.percentiles = ps;
  }
  if (raw.histogram !== undefined) {
    const h = numbers(raw.histogram);
    let spec: HistogramSpec | undefined;
    if (h.length === 1) {
      const bins = h[0]!;
      if (!Number.isInteger(bins) || bins < 1)
        issues.push({ path: at('histogram'), code: 'invalid_histogram', message: 'bins must be a positive integer' });
      else if (bins > MAX_BINS)
        issues.push({ path: at('histogram'), code: 'too_many_bins', message: `at most ${MAX_BINS} bins` });
      else spec = { bins };
    } else if (h.length > MAX_BINS + 1)
      issues.push({ path: at('histogram'), code: 'too_many_bins', message: `at most ${MAX_BINS} bins` });
    else if (h.length < 2 || !h.every((e, i) => Number.isFinite(e) && (i === 0 || e > h[i - 1]!)))
      issues.push({
        path: at('histogram'),
        code: 'invalid_histogram',
        message: 'give a number of bins, or at least two strictly increasing finite edges',
      });
    else spec = { edges: h };
    if (spec) stats.histogram = spec;
  }
  if (raw.weighting === 'coverage') stats.weighting = 'coverage';
  else if (raw.weighting !== undefined && raw.weighting !== 'centre')
    issues.push({ path: at('weighting'), code: 'invalid_weighting', message: 'is centre or coverage' });
  if (raw.scl_exclude !== undefined) {
    const cs = typeof raw.scl_exclude === 'string' && raw.scl_exclude.trim() === '' ? [] : numbers(raw.scl_exclude);
    const bad = cs.filter((c) => !Number.isInteger(c) || c < 0 || c >= SCL_CLASSES);
    if (bad.length)
      issues.push({
        path: at('scl_exclude'),
        code: 'unknown_scl_class',
        message: `unknown SCL class${bad.length > 1 ? 'es' : ''} ${bad.join(', ')}: classes are integers 0 to ${SCL_CLASSES - 1}`,
      });
    else {
      const set = [...new Set(cs)].sort((a, b) => a - b);
      if (set.join(',') !== DEFAULT_SCL_EXCLUDE.join(',')) mask.scl_exclude = set;
    }
  }
  if (raw.cloud_dilation_m !== undefined) {
    const d = raw.cloud_dilation_m;
    if (Number.isNaN(d) || d < 0)
      issues.push({ path: at('cloud_dilation_m'), code: 'negative_dilation', message: 'must be 0 or more metres' });
    // 1e309 arrives as Infinity: too large, not negative
    else if (d > MAX_DILATION_M)
      issues.push({ path: at('cloud_dilation_m'), code: 'dilation_too_large', message: `at most ${MAX_DILATION_M} m` });
    else if (d > 0) mask.cloud_dilation_m = d;
  }
  if (issues.length)
    throw new AppError('validation_failed', issues.map((i) => `${i.path} ${i.message}`).join('; '), { errors: issues });
  const maskKey = Object.keys(mask).length ? JSON.stringify(mask) : '';
  const key = Object.keys(stats).length || maskKey ? JSON.stringify({ ...stats, ...mask }) : '';
  return { stats, mask, key, maskKey };
}

/** The options' keys (for a cache key) without the percentiles and histogram: what the time series depends on. */
export function seriesKey(o: StatsOptions): string {
  return o.stats.weighting === 'coverage' || o.maskKey ? JSON.stringify({ w: o.stats.weighting, ...o.mask }) : '';
}
