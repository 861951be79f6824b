/**
 * Time series of an index over a field: intervals of 1, 7 or 14 days from start_date (the last cut
 * at end_date); in each, the capture with the fewest unusable field pixels (then the earliest). An
 * interval without a capture, or whose best capture has more than `max_cloud_cover` percent of the
 * field unusable, is a gap: its element has the interval start as date and null statistics.
 * Statistics are cached per (capture, boundary, formula).
 */
import { createHash } from 'node:crypto';
import type { Boundary } from '../fields/boundary.js';
import { getField } from '../fields/service.js';
import { AppError } from '../platform/errors.js';
import { fieldCaptures, loadCaptures, resolveProgram, type IndexDeps } from './service.js';

export const INTERVAL_DAYS = { daily: 1, weekly: 7, biweekly: 14 } as const;
export const MAX_INTERVALS = 3660;

export interface SeriesQuery {
  index: string;
  formula?: string;
  start_date: string;
  end_date: string;
  interval?: keyof typeof INTERVAL_DAYS;
  max_cloud_cover?: number;
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
const iso = (t: number) => new Date(t).toISOString().slice(0, 10);
const parse = (s: string, name: string) => {
  const t = Date.parse(`${s}T00:00:00Z`);
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s) || Number.isNaN(t) || iso(t) !== s) {
    throw new AppError('validation_failed', `${name} ${s} is not a calendar date`, { errors: [{ path: `/query/${name}`, code: 'invalid_date', message: 'is not a calendar date (YYYY-MM-DD)' }] });
  }
  return t;
};

export const hash = (x: unknown) => createHash('sha256').update(typeof x === 'string' ? x : JSON.stringify(x)).digest('base64url').slice(0, 22);

interface CachedStats {
  count: number;
  min: number | null;
  max: number | null;
  mean: number | null;
  std: number | null;
  field_pixels: number;
}

export async function indexTimeSeries(deps: IndexDeps, accountId: string, fieldId: string, q: SeriesQuery): Promise<SeriesElement[]> {
  const t0 = parse(q.start_date, 'start_date');
  const t1 = parse(q.end_date, 'end_date');
  if (t1 < t0) throw new AppError('validation_failed', 'end_date is before start_date', { errors: [{ path: '/query/end_date', code: 'before_start', message: 'must not be before start_date' }] });
  const step = INTERVAL_DAYS[q.interval ?? 'weekly'];
  const n = Math.floor((t1 - t0) / DAY / step) + 1;
  if (n > MAX_INTERVALS) {
    throw new AppError('validation_failed', `the range has ${n} intervals; at most ${MAX_INTERVALS}`, { errors: [{ path: '/query/end_date', code: 'range_too_long', message: `at most ${MAX_INTERVALS} intervals` }] });
  }
  const field = await getField(deps.db, accountId, fieldId);
  const { program } = resolveProgram(q.index, q.formula);
  const maxCloud = q.max_cloud_cover ?? 20;
  const captures = (await fieldCaptures(deps.db, accountId, fieldId)).filter((c) => program.bands.every((b) => c.bands.includes(b)));
  const boundaryHash = hash(field.boundary);
  const formulaHash = hash(Array.from(program.code).join(',') + '|' + program.consts.join(';'));

  const intervals = Array.from({ length: n }, (_, k) => {
    const start = t0 + k * step * DAY;
    const end = Math.min(start + (step - 1) * DAY, t1);
    const inside = captures.filter((c) => {
      const t = Date.parse(`${c.capture_date}T00:00:00Z`);
      return t >= start && t <= end;
    });
    inside.sort((a, b) => a.field_pixels - a.valid_pixels - (b.field_pixels - b.valid_pixels) || a.capture_date.localeCompare(b.capture_date));
    return { start, end, best: inside[0] ?? null };
  });

  const chosen = [...new Map(intervals.filter((i) => i.best).map((i) => [i.best!.id, i.best!])).values()];
  const cloudOf = (c: { field_pixels: number; valid_pixels: number }) => (c.field_pixels ? 100 * (1 - c.valid_pixels / c.field_pixels) : 100);
  const needed = chosen.filter((c) => cloudOf(c) <= maxCloud);
  const stats = new Map<string, CachedStats>();
  if (needed.length) {
    const rows = await deps.db.query<{ imagery_id: string; stats: CachedStats }>(
      'SELECT imagery_id, stats FROM index_stats WHERE field_id = $1 AND boundary_hash = $2 AND formula_hash = $3 AND imagery_id = ANY($4)',
      [fieldId, boundaryHash, formulaHash, needed.map((c) => c.id)],
    );
    for (const r of rows) stats.set(r.imagery_id, r.stats);
  }
  const missing = needed.filter((c) => !stats.has(c.id));
  const sources = missing.length ? await loadCaptures(deps.db, missing.map((c) => c.id)) : new Map();
  await Promise.all(
    missing.map(async (c) => {
      const r = await deps.compute.runFieldIndex({ capture: sources.get(c.id)!, boundary: field.boundary as unknown as Boundary, program, roots: deps.roots });
      const s: CachedStats = {
        count: r.stats.count,
        min: r.stats.count ? r.stats.min : null,
        max: r.stats.count ? r.stats.max : null,
        mean: r.stats.count ? r.stats.mean : null,
        std: r.stats.count ? r.stats.std : null,
        field_pixels: r.fieldPixels,
      };
      stats.set(c.id, s);
      await deps.db.query(
        `INSERT INTO index_stats (imagery_id, field_id, boundary_hash, formula_hash, stats) VALUES ($1, $2, $3, $4, $5::jsonb) ON CONFLICT DO NOTHING`,
        [c.id, fieldId, boundaryHash, formulaHash, JSON.stringify(s)],
      );
    }),
  );

  return intervals.map(({ start, end, best }) => {
    const base = { interval_start: iso(start), interval_end: iso(end) };
    const s = best ? stats.get(best.id) : undefined;
    if (!best || !s || cloudOf(best) > maxCloud) {
      return { date: iso(start), mean: null, min: null, max: null, std: null, imagery_id: null, ...base, valid_fraction: null, cloud_cover: best ? Math.round(cloudOf(best) * 100) / 100 : null };
    }
    return {
      date: best.capture_date,
      mean: s.mean,
      min: s.min,
      max: s.max,
      std: s.std,
      imagery_id: best.id,
      ...base,
      valid_fraction: s.field_pixels ? Math.round((s.count / s.field_pixels) * 1e6) / 1e6 : 0,
      cloud_cover: Math.round(cloudOf(best) * 100) / 100,
    };
  });
}
