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
import { validationFailed, type FieldIssue } from '../platform/errors.js';

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

/** One item of a list as given: its text (for messages) and its number (NaN when not one). */
interface Item {
  text: string;
  value: number;
}

const NUMBER = /^[-+]?(\d+\.?\d*|\.\d+)([eE][-+]?\d+)?$/;

/** A query's comma-separated text (none when blank) or a JSON body's number or array, item by item. */
const items = (v: string | number | number[]): Item[] =>
  Array.isArray(v)
    ? v.map((value) => ({ text: String(value), value }))
    : typeof v === 'number'
      ? [{ text: String(v), value: v }]
      : v.trim() === ''
        ? []
        : v.split(',').map((x) => {
            const text = x.trim();
            return { text, value: NUMBER.test(text) ? Number(text) : Number.NaN };
          });

/** `item 2 is empty` for `5,,50`: a typo is refused rather than read as a shorter list. */
const emptyItem = (list: Item[]): string | undefined => {
  const i = list.findIndex((x) => x.text === '');
  return i < 0 ? undefined : `item ${i + 1} of ${list.length} is empty: give values separated by single commas`;
};

/** The items a message names, as given (text quoted), the first five of them. */
const quoted = (xs: Item[]): string =>
  xs
    .slice(0, 5)
    .map((x) => (NUMBER.test(x.text) ? x.text : JSON.stringify(x.text.slice(0, 40))))
    .join(', ') + (xs.length > 5 ? ` and ${xs.length - 5} more` : '');

/**
 * Checks and canonicalises the options; every problem is one issue at `at(name)` with a stable
 * code, all of them in one 400 validation_failed.
 */
export function parseStatsOptions(raw: RawStatsOptions, at: (name: string) => string): StatsOptions {
  const issues: FieldIssue[] = [];
  const stats: StatsRequest = {};
  const mask: MaskRequest = {};
  if (raw.percentiles !== undefined) {
    const list = items(raw.percentiles);
    const empty = emptyItem(list);
    const bad = list.filter((p) => !(Number.isFinite(p.value) && p.value >= 0 && p.value <= 100));
    if (!list.length || list.length > MAX_PERCENTILES)
      issues.push({
        path: at('percentiles'),
        code: 'invalid_percentiles',
        message: `give 1 to ${MAX_PERCENTILES} percentiles`,
      });
    else if (empty) issues.push({ path: at('percentiles'), code: 'empty_list_item', message: empty });
    else if (bad.length)
      issues.push({
        path: at('percentiles'),
        code: 'percentile_out_of_range',
        message: `every percentile must be a number in [0, 100], not ${quoted(bad)}`,
      });
    else stats.percentiles = list.map((p) => p.value);
  }
  if (raw.histogram !== undefined) {
    // a number (or a query's single value) is a count of bins; a JSON array is always edges
    const list = items(raw.histogram);
    const edgesGiven = Array.isArray(raw.histogram) || list.length > 1;
    const h = list.map((x) => x.value);
    const empty = emptyItem(list);
    let spec: HistogramSpec | undefined;
    if (empty) issues.push({ path: at('histogram'), code: 'empty_list_item', message: empty });
    else if (!list.length)
      issues.push({
        path: at('histogram'),
        code: 'invalid_histogram',
        message: 'give a number of bins, or at least two strictly increasing finite edges',
      });
    else if (!edgesGiven) {
      const bins = h[0]!;
      if (!Number.isInteger(bins) || bins < 1)
        issues.push({
          path: at('histogram'),
          code: 'invalid_histogram',
          message: `bins must be a positive integer, not ${quoted(list)} (or give at least two increasing edges)`,
        });
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
    const list = items(raw.scl_exclude);
    const empty = emptyItem(list);
    const bad = list.filter((c) => !Number.isInteger(c.value) || c.value < 0 || c.value >= SCL_CLASSES);
    if (empty) issues.push({ path: at('scl_exclude'), code: 'empty_list_item', message: empty });
    else if (bad.length)
      issues.push({
        path: at('scl_exclude'),
        code: 'unknown_scl_class',
        message: `unknown SCL class${bad.length > 1 ? 'es' : ''} ${quoted(bad)}: classes are integers 0 to ${SCL_CLASSES - 1}`,
      });
    else {
      const set = [...new Set(list.map((c) => c.value))].sort((a, b) => a - b);
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
  if (issues.length) throw validationFailed(issues);
  const maskKey = Object.keys(mask).length ? JSON.stringify(mask) : '';
  const key = Object.keys(stats).length || maskKey ? JSON.stringify({ ...stats, ...mask }) : '';
  return { stats, mask, key, maskKey };
}

/** The options' keys (for a cache key) without the percentiles and histogram: what the time series depends on. */
export function seriesKey(o: StatsOptions): string {
  return o.stats.weighting === 'coverage' || o.maskKey ? JSON.stringify({ w: o.stats.weighting, ...o.mask }) : '';
}
