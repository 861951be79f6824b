/**
 * Time series of an index over a field: intervals of 1, 7 or 14 days from start_date (the last cut
 * at end_date); in each, the capture with the lowest field cloud cover (then the earliest), as
 * selection.ts orders them. An interval without a capture, or whose best capture has no usable field
 * pixel or more than `max_cloud_cover` percent of the field unusable, is a gap: its element has the
 * interval start as date and null statistics.
 * Statistics are cached per (capture, boundary, formula): see stats-store.ts.
 */
import { isCalendarDate } from '../platform/dates.js';
import { AppError } from '../platform/errors.js';
import { fieldState, type FieldState } from './field-state.js';
import { betterCapture, fieldCloudShare, hasBands, hasUsablePixels, weighed, type Candidate } from './selection.js';
import { resolveProgram, validFraction, type IndexDeps } from './service.js';
import { statsFor } from './stats-store.js';
import type { CachedStats } from './types.js';
import { underMask } from './masked-coverage.js';
import { DEFAULT_OPTIONS, parseStatsOptions, type StatsOptions } from './stats-options.js';

export const INTERVAL_DAYS = { daily: 1, weekly: 7, biweekly: 14 } as const;
export const MAX_INTERVALS = 3660;

export interface SeriesQuery {
  index: string;
  formula?: string;
  start_date: string;
  end_date: string;
  interval?: keyof typeof INTERVAL_DAYS;
  max_cloud_cover?: number;
  /** The statistics' weighting and the cloud mask (stats-options.ts); the cloud cover follows the mask. */
  weighting?: 'centre' | 'coverage';
  scl_exclude?: string | number[];
  cloud_dilation_m?: number;
}

export interface SeriesElement {
  date: string;
  mean: number | null;
  min: number | null;
  max: number | null;
  std: number | null;
  imagery_id: string | null;
  interval_start: string;
  interval_end: string;
  valid_fraction: number | null;
  cloud_cover: number | null;
}

const DAY = 86_400_000;
const pad2 = (n: number) => (n < 10 ? `0${n}` : `${n}`);

/** YYYY-MM-DD of a UTC midnight (days to civil date, H. Hinnant), ~20× Date#toISOString. */
export function iso(t: number): string {
  const z = Math.floor(t / DAY) + 719_468;
  const era = Math.floor(z / 146_097);
  const doe = z - era * 146_097;
  const yoe = Math.floor((doe - Math.floor(doe / 1460) + Math.floor(doe / 36_524) - Math.floor(doe / 146_096)) / 365);
  const doy = doe - (365 * yoe + Math.floor(yoe / 4) - Math.floor(yoe / 100));
  const mp = Math.floor((5 * doy + 2) / 153);
  const d = doy - Math.floor((153 * mp + 2) / 5) + 1;
  const m = mp < 10 ? mp + 3 : mp - 9;
  const y = yoe + era * 400 + (m <= 2 ? 1 : 0);
  return `${y < 1000 ? String(y).padStart(4, '0') : y}-${pad2(m)}-${pad2(d)}`;
}
const parse = (s: string, name: string, at = '/query') => {
  if (!isCalendarDate(s)) {
    throw new AppError('validation_failed', `${name} ${s} is not a calendar date`, {
      errors: [{ path: `${at}/${name}`, code: 'invalid_date', message: 'is not a calendar date (YYYY-MM-DD)' }],
    });
  }
  return Date.parse(`${s}T00:00:00Z`);
};

/** The range of a series: its start and end (UTC ms), interval count and days per interval; 400 when invalid. */
export function seriesRange(
  q: Pick<SeriesQuery, 'start_date' | 'end_date' | 'interval'>,
  at = '/query',
): { t0: number; t1: number; n: number; step: number } {
  const t0 = parse(q.start_date, 'start_date', at);
  const t1 = parse(q.end_date, 'end_date', at);
  if (t1 < t0)
    throw new AppError('validation_failed', 'end_date is before start_date', {
      errors: [{ path: `${at}/end_date`, code: 'before_start', message: 'must not be before start_date' }],
    });
  const step = INTERVAL_DAYS[q.interval ?? 'weekly'];
  const n = Math.floor((t1 - t0) / DAY / step) + 1;
  if (n > MAX_INTERVALS) {
    throw new AppError('validation_failed', `the range has ${n} intervals; at most ${MAX_INTERVALS}`, {
      errors: [{ path: `${at}/end_date`, code: 'range_too_long', message: `at most ${MAX_INTERVALS} intervals` }],
    });
  }
  return { t0, t1, n, step };
}

/** The intervals of a series: n of `step` days from t0, the last cut at t1 (UTC ms, inclusive). */
export function intervalBounds(t0: number, t1: number, n: number, step: number): Array<[number, number]> {
  const out: Array<[number, number]> = [];
  for (let k = 0; k < n; k++) {
    const start = t0 + k * step * DAY;
    out.push([start, Math.min(start + (step - 1) * DAY, t1)]);
  }
  return out;
}

export interface SeriesInterval {
  start: number;
  end: number;
  best: Candidate | null;
}

/**
 * One pass over the captures in date order: each interval (in order, not overlapping) takes the
 * one with the lowest field cloud cover among those in it, then the earliest.
 */
export function chooseIntervals(
  captures: ReadonlyArray<{ c: Candidate; t: number }>,
  bounds: ReadonlyArray<[number, number]>,
): SeriesInterval[] {
  const intervals: SeriesInterval[] = [];
  let next = 0;
  for (const [start, end] of bounds) {
    while (next < captures.length && captures[next]!.t < start) next++;
    let best: Candidate | null = null;
    for (; next < captures.length && captures[next]!.t <= end; next++) {
      const c = captures[next]!.c;
      if (!best || betterCapture(c, best)) best = c;
    }
    intervals.push({ start, end, best });
  }
  return intervals;
}

const cloudOf = (c: Candidate) => 100 * fieldCloudShare(c);

/** Not a gap: a capture with a usable field pixel and at most max_cloud_cover percent unusable. */
export const usedCapture = (c: Candidate | null, maxCloud: number): c is Candidate =>
  !!c && hasUsablePixels(c) && cloudOf(c) <= maxCloud;

/** The ids of the captures whose statistics the series shows. */
export const usedCaptureIds = (intervals: SeriesInterval[], maxCloud: number): string[] => [
  ...new Set(intervals.filter((i) => usedCapture(i.best, maxCloud)).map((i) => i.best!.id)),
];

/** The series' elements from the chosen captures and their statistics (gaps: null statistics). */
export function seriesElements(
  intervals: SeriesInterval[],
  maxCloud: number,
  stats: ReadonlyMap<string, CachedStats>,
): SeriesElement[] {
  return intervals.map(({ start, end, best }) => {
    const base = { interval_start: iso(start), interval_end: iso(end) };
    const s = best ? stats.get(best.id) : undefined;
    if (!usedCapture(best, maxCloud) || !s) {
      return {
        date: iso(start),
        mean: null,
        min: null,
        max: null,
        std: null,
        imagery_id: null,
        ...base,
        valid_fraction: null,
        cloud_cover: best ? Math.round(cloudOf(best) * 100) / 100 : null,
      };
    }
    return {
      date: best.capture_date,
      mean: s.mean,
      min: s.min,
      max: s.max,
      std: s.std,
      imagery_id: best.id,
      ...base,
      valid_fraction: validFraction(s),
      cloud_cover: Math.round(cloudOf(best) * 100) / 100,
    };
  });
}

export async function indexTimeSeries(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  q: SeriesQuery,
): Promise<SeriesElement[]> {
  const { state, t0, t1, n, step, options } = await prepare(deps, accountId, fieldId, q);
  return build(deps, fieldId, state, q, t0, t1, n, step, options);
}

// Serialised series per field state: a series is a function of the state (captures, boundary)
// and the query alone, so a new state (see field-state.ts) starts empty.
const bodies = new WeakMap<FieldState, Map<string, string>>();
const BODIES_PER_FIELD = 32;

/** The series as JSON text (what GET timeseries answers). */
export async function indexTimeSeriesJson(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  q: SeriesQuery,
): Promise<string> {
  const { state, t0, t1, n, step, options } = await prepare(deps, accountId, fieldId, q);
  const key = `${q.index}|${q.formula ?? ''}|${q.start_date}|${q.end_date}|${q.interval ?? 'weekly'}|${q.max_cloud_cover ?? 20}|${options.key}`;
  let known = bodies.get(state);
  const hit = known?.get(key);
  if (hit !== undefined) return hit;
  const text = JSON.stringify(await build(deps, fieldId, state, q, t0, t1, n, step, options));
  if (!known) {
    known = new Map();
    bodies.set(state, known);
  }
  if (known.size >= BODIES_PER_FIELD) known.delete(known.keys().next().value!);
  known.set(key, text);
  return text;
}

async function prepare(deps: IndexDeps, accountId: string, fieldId: string, q: SeriesQuery) {
  const { t0, t1, n, step } = seriesRange(q);
  const options =
    q.weighting !== undefined || q.scl_exclude !== undefined || q.cloud_dilation_m !== undefined
      ? parseStatsOptions(
          { weighting: q.weighting, scl_exclude: q.scl_exclude, cloud_dilation_m: q.cloud_dilation_m },
          (k) => `/query/${k}`,
        )
      : DEFAULT_OPTIONS;
  const state = await fieldState(deps.db, accountId, fieldId);
  return { state, t0, t1, n, step, options };
}

async function build(
  deps: IndexDeps,
  fieldId: string,
  state: FieldState,
  q: SeriesQuery,
  t0: number,
  t1: number,
  n: number,
  step: number,
  options: StatsOptions,
): Promise<SeriesElement[]> {
  const { program } = resolveProgram(q.index, q.formula);
  const maxCloud = q.max_cloud_cover ?? 20;
  let captures = state.byDate.filter(({ c, t }) => t >= t0 && t <= t1 && hasBands(c, program.bands));
  if (options.maskKey) {
    // the cloud cover of each capture under the request's mask
    const masked = await underMask(
      deps,
      state,
      captures.map(({ c }) => c),
      options.mask,
      options.maskKey,
    );
    captures = captures.map(({ t }, i) => ({ c: masked[i]!, t }));
  }
  // a capture the field only touches: by its weights under coverage, left out by pixel centres
  captures = captures.flatMap(({ c, t }) => {
    const w = weighed(c, options.stats.weighting);
    return w ? [{ c: w, t }] : [];
  });

  const intervals = chooseIntervals(captures, intervalBounds(t0, t1, n, step));
  const needed = usedCaptureIds(intervals, maxCloud);
  const stats = await statsFor(deps, fieldId, state, needed, program, { order: false, options });
  return seriesElements(intervals, maxCloud, stats);
}
