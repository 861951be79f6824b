/**
 * Seasonal content (domain code) from the clear captures of a period: peak value and date, the
 * baseline (lowest value before the peak) and amplitude, green-up and senescence as the dates the
 * curve crosses baseline + f·amplitude on its way up and down (f = 0.5, the "half-maximum" rule of
 * phenology tools such as TIMESAT), the trapezoidal area under the curve, and a relative yield
 * potential: integrated index over the season against a well-developed reference crop.
 *
 * A season with few clear captures still gets its report, with what they allow: the series and
 * the peak from one capture, baseline, amplitude and area under the curve from two, phenology
 * dates and yield potential from MIN_POINTS. Every value left null is listed in `unavailable` with
 * the reason. Only a period without any clear capture fails (NoClearCapture).
 */
import type { Meta, SeasonalContent } from './schema.js';

export const AMPLITUDE_FRACTION = 0.5;
/** Clear captures the curve analysis (phenology dates, yield potential) needs. */
export const MIN_POINTS = 4;
/** Season-integrated NDVI-like index of a well-developed canopy: 0.8 over 100 days above baseline. */
export const REFERENCE_INTEGRAL = 80;

export type Point = SeasonalContent['series'][number];
type Unavailable = SeasonalContent['unavailable'][number];

const DAY = 86_400_000;
const t = (d: string) => Date.parse(`${d}T00:00:00Z`);
const iso = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const r4 = (x: number) => Math.round(x * 1e4) / 1e4;
const captures = (n: number) => `${n} clear capture${n === 1 ? '' : 's'}`;

export class NoClearCapture extends Error {}

/** Date where the line between two points crosses `level` (linear interpolation, rounded to a day). */
function crossing(a: Point, b: Point, level: number): string {
  const f = (level - a.mean) / (b.mean - a.mean);
  return iso(t(a.date) + Math.round((f * (t(b.date) - t(a.date))) / DAY) * DAY);
}

export function buildSeasonal(
  meta: Meta,
  period: SeasonalContent['period'],
  points: Point[],
  skipped: number,
): SeasonalContent {
  const series = [...points].sort((a, b) => a.date.localeCompare(b.date));
  const n = series.length;
  const cloudy = skipped ? `; ${skipped} more ${skipped === 1 ? 'was' : 'were'} too cloudy over the field to use` : '';
  if (!n) {
    throw new NoClearCapture(
      `no clear capture of the field between ${period.start} and ${period.end}` +
        (skipped
          ? `: the ${skipped} capture${skipped === 1 ? '' : 's'} of the period had more than 30 % of the field under cloud`
          : ': no capture of it in the period'),
    );
  }
  const unavailable: Unavailable[] = [];
  let pk = 0;
  for (const [k, p] of series.entries()) if (p.mean > series[pk]!.mean) pk = k;
  const peak = series[pk]!;
  const baseUp = Math.min(...series.slice(0, pk + 1).map((p) => p.mean));
  const baseDown = Math.min(...series.slice(pk).map((p) => p.mean));
  const curve = n >= 2;
  if (!curve) {
    const why = `a single clear capture gives one value, not a curve (the period has ${captures(n)}${cloudy})`;
    unavailable.push(
      { item: 'baseline', reason: `The baseline is the lowest value before the peak: ${why}.` },
      { item: 'amplitude', reason: `The amplitude is the rise from the baseline to the peak: ${why}.` },
      { item: 'auc', reason: `The area under the curve needs at least 2 clear captures: ${why}.` },
    );
  }
  let greenUp: string | null = null;
  let senescence: string | null = null;
  if (n >= MIN_POINTS) {
    const upLevel = baseUp + AMPLITUDE_FRACTION * (peak.mean - baseUp);
    const downLevel = baseDown + AMPLITUDE_FRACTION * (peak.mean - baseDown);
    for (let k = 1; k <= pk; k++) {
      if (series[k - 1]!.mean < upLevel && series[k]!.mean >= upLevel)
        greenUp = crossing(series[k - 1]!, series[k]!, upLevel);
    }
    for (let k = pk + 1; k < series.length; k++) {
      if (series[k - 1]!.mean >= downLevel && series[k]!.mean < downLevel) {
        senescence = crossing(series[k - 1]!, series[k]!, downLevel);
        break;
      }
    }
    if (!greenUp) {
      unavailable.push({
        item: 'phases.green_up',
        reason: `Green-up not observed: no two clear captures of the period show the curve rising through half its amplitude (${r4(upLevel)}) before the peak of ${peak.date}; the rise may lie before ${period.start}.`,
      });
    }
    if (!senescence) {
      unavailable.push({
        item: 'phases.senescence',
        reason: `Senescence not observed: no two clear captures after the peak of ${peak.date} show the curve falling back through half its amplitude (${r4(downLevel)}); the decline may lie after ${period.end}.`,
      });
    }
    if (!greenUp || !senescence)
      unavailable.push({
        item: 'phases.season_length_days',
        reason: 'The season length runs from green-up to senescence and needs both dates.',
      });
  } else {
    unavailable.push({
      item: 'phases',
      reason:
        `Green-up, senescence and season length are read where the curve crosses half its amplitude on the way up and down, ` +
        `which needs at least ${MIN_POINTS} clear captures spread over the season; the period has ${captures(n)}${cloudy}.`,
    });
  }
  let auc = 0;
  let aucAbove = 0;
  for (let k = 1; k < series.length; k++) {
    const days = (t(series[k]!.date) - t(series[k - 1]!.date)) / DAY;
    auc += (days * (series[k - 1]!.mean + series[k]!.mean)) / 2;
    aucAbove += (days * (Math.max(0, series[k - 1]!.mean - baseUp) + Math.max(0, series[k]!.mean - baseUp))) / 2;
  }
  let yieldPotential: SeasonalContent['yield_potential'] = null;
  if (n >= MIN_POINTS) {
    const relative = r4(aucAbove / REFERENCE_INTEGRAL);
    const caveats = [
      'Relative to a reference canopy, not calibrated to this farm: it ranks seasons and fields, it does not predict tonnes.',
      'Drought after the last clear capture, lodging, disease after flowering and harvest losses are not seen.',
    ];
    if (meta.index !== 'NDVI')
      caveats.push(`The reference was set for NDVI; on ${meta.index} use the value to compare like with like only.`);
    if (!greenUp || !senescence)
      caveats.push(
        'The period does not cover the whole curve (green-up or senescence not observed): the integral is incomplete.',
      );
    if (skipped > series.length)
      caveats.push(`${skipped} cloudy captures were left out; the curve rests on ${series.length} clear ones.`);
    yieldPotential = {
      relative,
      class: relative >= 0.9 ? 'high' : relative >= 0.6 ? 'average' : 'low',
      method:
        `Season-integrated ${meta.index} above the pre-season baseline (trapezoids between clear captures) divided by ${REFERENCE_INTEGRAL} index-days, ` +
        'the integral of a well-developed canopy (about 0.8 above bare soil for 100 days); integrated NDVI tracks biomass and yield (Tucker et al. 1980; Rasmussen 1997).',
      caveats,
    };
  } else {
    unavailable.push({
      item: 'yield_potential',
      reason:
        `The relative yield potential integrates the index over the whole season and needs at least ${MIN_POINTS} clear captures spread over it; ` +
        `with ${captures(n)}${cloudy} the curve between them is unknown and an estimate would mislead.`,
    });
  }
  return {
    meta,
    period,
    series,
    skipped_captures: skipped,
    peak: { date: peak.date, value: r4(peak.mean) },
    baseline: curve ? r4(baseUp) : null,
    amplitude: curve ? r4(peak.mean - baseUp) : null,
    phases: {
      amplitude_fraction: AMPLITUDE_FRACTION,
      green_up: greenUp,
      senescence,
      season_length_days: greenUp && senescence ? (t(senescence) - t(greenUp)) / DAY : null,
    },
    auc: curve ? { index_days: r4(auc), above_baseline_index_days: r4(aucAbove) } : null,
    yield_potential: yieldPotential,
    unavailable,
  };
}
