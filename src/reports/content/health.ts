/**
 * Health summary content (domain code): the clear captures of a period grouped into ISO weeks
 * (Monday to Sunday) or calendar months, the mean of each, its change against the period before,
 * a least-squares trend over the captures (per 30 days), and the field's alerts in the period.
 * Periods without a clear capture are gaps (null), never interpolated.
 */
import type { HealthContent, Meta } from './schema.js';
import type { Point } from './seasonal.js';

/** A change of the index mean smaller than this per 30 days is "stable". */
export const STABLE_SLOPE = 0.02;

const DAY = 86_400_000;
const t = (d: string) => Date.parse(`${d}T00:00:00Z`);
const iso = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const r4 = (x: number) => Math.round(x * 1e4) / 1e4;
const r2 = (x: number) => Math.round(x * 100) / 100;

export function periodStarts(
  start: string,
  end: string,
  granularity: 'weekly' | 'monthly',
): Array<{ start: string; end: string }> {
  const out: Array<{ start: string; end: string }> = [];
  if (granularity === 'weekly') {
    const s = t(start);
    const monday = s - ((new Date(s).getUTCDay() + 6) % 7) * DAY;
    for (let a = monday; a <= t(end); a += 7 * DAY) out.push({ start: iso(a), end: iso(a + 6 * DAY) });
  } else {
    const d = new Date(t(start));
    let y = d.getUTCFullYear();
    let m = d.getUTCMonth();
    while (Date.UTC(y, m, 1) <= t(end)) {
      out.push({ start: iso(Date.UTC(y, m, 1)), end: iso(Date.UTC(y, m + 1, 0)) });
      m++;
      if (m === 12) {
        m = 0;
        y++;
      }
    }
  }
  return out;
}

export function linearTrend(points: Array<{ x: number; y: number }>): { slope: number; r2: number | null } {
  const n = points.length;
  if (n < 2) return { slope: 0, r2: null };
  const mx = points.reduce((s, p) => s + p.x, 0) / n;
  const my = points.reduce((s, p) => s + p.y, 0) / n;
  let sxy = 0;
  let sxx = 0;
  let syy = 0;
  for (const p of points) {
    sxy += (p.x - mx) * (p.y - my);
    sxx += (p.x - mx) ** 2;
    syy += (p.y - my) ** 2;
  }
  if (sxx === 0) return { slope: 0, r2: null };
  return { slope: sxy / sxx, r2: syy === 0 ? null : (sxy * sxy) / (sxx * syy) };
}

export function buildHealth(
  meta: Meta,
  period: HealthContent['period'],
  points: Point[],
  alerts: HealthContent['alerts'],
): HealthContent {
  const series = [...points].sort((a, b) => a.date.localeCompare(b.date));
  if (!series.length) throw new Error(`no clear capture of the field between ${period.start} and ${period.end}`);
  const periods: HealthContent['periods'] = [];
  let prev: number | null = null;
  for (const p of periodStarts(period.start, period.end, period.granularity)) {
    const inside = series.filter((s) => s.date >= p.start && s.date <= p.end);
    if (!inside.length) {
      periods.push({ ...p, captures: 0, mean: null, min: null, max: null, change: null, change_pct: null });
      continue;
    }
    const mean = inside.reduce((s, x) => s + x.mean, 0) / inside.length;
    const change = prev === null ? null : mean - prev;
    periods.push({
      ...p,
      captures: inside.length,
      mean: r4(mean),
      min: r4(Math.min(...inside.map((x) => x.min ?? x.mean))),
      max: r4(Math.max(...inside.map((x) => x.max ?? x.mean))),
      change: change === null ? null : r4(change),
      change_pct: change === null || prev === 0 ? null : r2((100 * change) / Math.abs(prev!)),
    });
    prev = mean;
  }
  const t0 = t(series[0]!.date);
  const { slope, r2: fit } = linearTrend(series.map((s) => ({ x: (t(s.date) - t0) / DAY, y: s.mean })));
  const per30 = slope * 30;
  const direction = per30 >= STABLE_SLOPE ? 'improving' : per30 <= -STABLE_SLOPE ? 'declining' : 'stable';
  const last = series.at(-1)!;
  const filled = periods.filter((p) => p.mean !== null);
  const lastChange = filled.at(-1)?.change ?? null;
  const status =
    direction === 'declining' && (lastChange ?? 0) < -0.05
      ? 'action'
      : direction === 'declining' || alerts.length > 0 || (lastChange ?? 0) < -0.05
        ? 'watch'
        : 'good';
  const unit = period.granularity === 'weekly' ? 'week' : 'month';
  const parts = [
    `${meta.index} was ${direction} over the period (${per30 >= 0 ? '+' : ''}${per30.toFixed(3)} per 30 days, ${series.length} clear capture${series.length === 1 ? '' : 's'}).`,
    `Latest clear capture ${last.date}: mean ${last.mean.toFixed(3)}${lastChange === null ? '' : `, ${lastChange >= 0 ? '+' : ''}${lastChange.toFixed(3)} against the previous ${unit} with data`}.`,
    alerts.length
      ? `${alerts.length} alert${alerts.length === 1 ? '' : 's'} triggered in the period.`
      : 'No alert was triggered in the period.',
  ];
  return {
    meta,
    period,
    periods,
    trend: {
      slope_per_30_days: r4(per30),
      direction,
      r2: fit === null ? null : r4(fit),
      method: "least-squares line through the clear captures' field means; |slope| below 0.02 per 30 days is stable",
    },
    latest: { date: last.date, mean: r4(last.mean), change_vs_previous_period: lastChange },
    alerts,
    status,
    summary: parts.join(' '),
  };
}
