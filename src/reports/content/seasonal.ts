/**
 * Seasonal content (domain code) from the clear captures of a period: peak value and date, the
 * baseline (lowest value before the peak) and amplitude, green-up and senescence as the dates the
 * curve crosses baseline + f·amplitude on its way up and down (f = 0.5, the "half-maximum" rule of
 * phenology tools such as TIMESAT), the trapezoidal area under the curve, and a relative yield
 * potential: integrated index over the season against a well-developed reference crop.
 */
import type { Meta, SeasonalContent } from './schema.js';

export const AMPLITUDE_FRACTION = 0.5;
export const MIN_POINTS = 4;
/** Season-integrated NDVI-like index of a well-developed canopy: 0.8 over 100 days above baseline. */
export const REFERENCE_INTEGRAL = 80;

export type Point = SeasonalContent['series'][number];

const DAY = 86_400_000;
const t = (d: string) => Date.parse(`${d}T00:00:00Z`);
const iso = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const r4 = (x: number) => Math.round(x * 1e4) / 1e4;

export class NotEnoughData extends Error {}

/** Date where the line between two points crosses `level` (linear interpolation, rounded to a day). */
function crossing(a: Point, b: Point, level: number): string {
  const f = (level - a.mean) / (b.mean - a.mean);
  return iso(t(a.date) + Math.round((f * (t(b.date) - t(a.date))) / DAY) * DAY);
}

export function buildSeasonal(meta: Meta, period: SeasonalContent['period'], points: Point[], skipped: number): SeasonalContent {
  const series = [...points].sort((a, b) => a.date.localeCompare(b.date));
  if (series.length < MIN_POINTS) {
    throw new NotEnoughData(`only ${series.length} clear capture${series.length === 1 ? '' : 's'} of the field between ${period.start} and ${period.end}; a seasonal analysis needs at least ${MIN_POINTS}`);
  }
  let pk = 0;
  series.forEach((p, k) => (p.mean > series[pk]!.mean ? (pk = k) : 0));
  const peak = series[pk]!;
  const before = series.slice(0, pk + 1);
  const after = series.slice(pk);
  const baseUp = Math.min(...before.map((p) => p.mean));
  const baseDown = Math.min(...after.map((p) => p.mean));
  const amplitude = peak.mean - baseUp;
  const upLevel = baseUp + AMPLITUDE_FRACTION * (peak.mean - baseUp);
  const downLevel = baseDown + AMPLITUDE_FRACTION * (peak.mean - baseDown);
  let greenUp: string | null = null;
  for (let k = 1; k <= pk; k++) {
    if (series[k - 1]!.mean < upLevel && series[k]!.mean >= upLevel) greenUp = crossing(series[k - 1]!, series[k]!, upLevel);
  }
  let senescence: string | null = null;
  for (let k = pk + 1; k < series.length; k++) {
    if (series[k - 1]!.mean >= downLevel && series[k]!.mean < downLevel) {
      senescence = crossing(series[k - 1]!, series[k]!, downLevel);
      break;
    }
  }
  let auc = 0;
  let aucAbove = 0;
  for (let k = 1; k < series.length; k++) {
    const days = (t(series[k]!.date) - t(series[k - 1]!.date)) / DAY;
    auc += (days * (series[k - 1]!.mean + series[k]!.mean)) / 2;
    aucAbove += (days * (Math.max(0, series[k - 1]!.mean - baseUp) + Math.max(0, series[k]!.mean - baseUp))) / 2;
  }
  const relative = r4(aucAbove / REFERENCE_INTEGRAL);
  const caveats = [
    'Relative to a reference canopy, not calibrated to this farm: it ranks seasons and fields, it does not predict tonnes.',
    'Drought after the last clear capture, lodging, disease after flowering and harvest losses are not seen.',
  ];
  if (meta.index !== 'NDVI') caveats.push(`The reference was set for NDVI; on ${meta.index} use the value to compare like with like only.`);
  if (!greenUp || !senescence) caveats.push('The period does not cover the whole curve (green-up or senescence not observed): the integral is incomplete.');
  if (skipped > series.length) caveats.push(`${skipped} cloudy captures were left out; the curve rests on ${series.length} clear ones.`);
  return {
    meta,
    period,
    series,
    skipped_captures: skipped,
    peak: { date: peak.date, value: r4(peak.mean) },
    baseline: r4(baseUp),
    amplitude: r4(amplitude),
    phases: {
      amplitude_fraction: AMPLITUDE_FRACTION,
      green_up: greenUp,
      senescence,
      season_length_days: greenUp && senescence ? (t(senescence) - t(greenUp)) / DAY : null,
    },
    auc: { index_days: r4(auc), above_baseline_index_days: r4(aucAbove) },
    yield_potential: {
      relative,
      class: relative >= 0.9 ? 'high' : relative >= 0.6 ? 'average' : 'low',
      method:
        `Season-integrated ${meta.index} above the pre-season baseline (trapezoids between clear captures) divided by ${REFERENCE_INTEGRAL} index-days, ` +
        'the integral of a well-developed canopy (about 0.8 above bare soil for 100 days); integrated NDVI tracks biomass and yield (Tucker et al. 1980; Rasmussen 1997).',
      caveats,
    },
  };
}
