/**
 * Scouting content (domain code): statistics of the index map, anomaly zones and the points to
 * visit. An anomaly is a connected (8-neighbour) area of pixels below a robust threshold,
 * median − k·σ with σ = 1.4826·MAD (the MAD scaled to a normal standard deviation), so a few very
 * low pixels or a skewed field do not move it the way a mean/std threshold would. σ has a floor
 * (0.02 index units) so that a very uniform field does not flag ordinary noise.
 */
import {
  connectedRegions,
  gridToLonLat,
  medianAbsDeviation,
  pixelAreaHa,
  quantile,
  validValues,
  type IndexRaster,
} from './raster.js';
import type { Capture, Meta, ScoutingContent } from './schema.js';

export const ANOMALY_K = 2;
export const SIGMA_FLOOR = 0.02;
export const MIN_ANOMALY_HA = 0.05;
const MAX_LISTED = 20;

const r4 = (x: number) => Math.round(x * 1e4) / 1e4;
const r2 = (x: number) => Math.round(x * 100) / 100;
const r6 = (x: number) => Math.round(x * 1e6) / 1e6;

export function summarise(sorted: Float64Array): ScoutingContent['statistics'] {
  if (!sorted.length)
    return { count: 0, mean: null, median: null, min: null, max: null, std: null, p10: null, p90: null };
  let s = 0;
  for (const v of sorted) s += v;
  const mean = s / sorted.length;
  let ss = 0;
  for (const v of sorted) ss += (v - mean) * (v - mean);
  return {
    count: sorted.length,
    mean: r4(mean),
    median: r4(quantile(sorted, 0.5)),
    min: r4(sorted[0]!),
    max: r4(sorted[sorted.length - 1]!),
    std: r4(Math.sqrt(ss / sorted.length)),
    p10: r4(quantile(sorted, 0.1)),
    p90: r4(quantile(sorted, 0.9)),
  };
}

export interface ScoutingInput {
  meta: Meta;
  capture: Capture;
  raster: IndexRaster;
  previous: { imagery_id: string; date: string; mean: number } | null;
  colour: { lo: number; hi: number };
}

export interface Anomaly {
  pixels: number[];
  content: ScoutingContent['anomalies'][number];
  /** Pixel centre of the scouting point, in grid coordinates. */
  at: [number, number];
}

export function findAnomalies(
  r: IndexRaster,
  fieldAreaHa: number,
): { threshold: ScoutingContent['threshold']; anomalies: Anomaly[]; total: number; totalHa: number } {
  const sorted = validValues(r);
  const median = quantile(sorted, 0.5);
  const mad = medianAbsDeviation(sorted, median);
  const sigma = Math.max(1.4826 * mad, SIGMA_FLOOR);
  const value = median - ANOMALY_K * sigma;
  const pxHa = pixelAreaHa(r);
  const minPixels = Math.max(2, Math.ceil(MIN_ANOMALY_HA / pxHa));
  const labels = new Int32Array(r.values.length).fill(-1);
  for (let p = 0; p < labels.length; p++) if (r.inside[p] && r.values[p]! < value) labels[p] = 0;
  const { regions } = connectedRegions(labels, r.width, r.height, true);
  const lonLat = gridToLonLat(r);
  const found: Anomaly[] = [];
  for (const reg of regions) {
    if (reg.pixels.length < minPixels) continue;
    let s = 0;
    let mn = Infinity;
    let ci = 0;
    let cj = 0;
    for (const p of reg.pixels) {
      const v = r.values[p]!;
      s += v;
      if (v < mn) mn = v;
      ci += p % r.width;
      cj += Math.floor(p / r.width);
    }
    const mean = s / reg.pixels.length;
    ci /= reg.pixels.length;
    cj /= reg.pixels.length;
    // The pin goes on the member pixel nearest the centroid, so it lands inside an L- or C-shaped area.
    let best = reg.pixels[0]!;
    let bestD = Infinity;
    for (const p of reg.pixels) {
      const d = ((p % r.width) - ci) ** 2 + (Math.floor(p / r.width) - cj) ** 2;
      if (d < bestD) {
        bestD = d;
        best = p;
      }
    }
    const at: [number, number] = [(best % r.width) + 0.5, Math.floor(best / r.width) + 0.5];
    const [lon, lat] = lonLat(at[0], at[1]);
    const z = (median - mean) / sigma;
    const area = reg.pixels.length * pxHa;
    found.push({
      pixels: reg.pixels,
      at,
      content: {
        rank: 0,
        area_ha: r4(area),
        share_of_field_pct: r2((100 * area) / fieldAreaHa),
        mean: r4(mean),
        min: r4(mn),
        deficit: r4(median - mean),
        severity: z >= 4 ? 'high' : z >= 3 ? 'moderate' : 'low',
        point: { lon: r6(lon), lat: r6(lat) },
      },
    });
  }
  // Biggest shortfall first: area times depth below the median.
  found.sort((a, b) => b.content.area_ha * b.content.deficit - a.content.area_ha * a.content.deficit);
  for (const [k, a] of found.entries()) a.content.rank = k + 1;
  return {
    threshold: {
      method: 'median - k * 1.4826 * MAD (robust z-score), sigma floor 0.02',
      median: r4(median),
      mad: r4(mad),
      robust_sigma: r4(sigma),
      k: ANOMALY_K,
      value: r4(value),
      min_area_ha: MIN_ANOMALY_HA,
    },
    anomalies: found.slice(0, MAX_LISTED),
    total: found.length,
    totalHa: found.reduce((sum, a) => sum + a.pixels.length * pxHa, 0),
  };
}

export function buildScouting(input: ScoutingInput): { content: ScoutingContent; anomalies: Anomaly[] } {
  const r = input.raster;
  const sorted = validValues(r);
  const statistics = summarise(sorted);
  const fieldHa = input.meta.field.area_ha;
  const { threshold, anomalies, total, totalHa: anomalyHa } = findAnomalies(r, fieldHa);
  const share = (100 * anomalyHa) / fieldHa;
  const change = input.previous && statistics.mean !== null ? r4(statistics.mean - input.previous.mean) : null;
  const high = anomalies.filter((a) => a.content.severity === 'high').length;
  const status: ScoutingContent['status'] =
    share >= 10 || high >= 2 || (change !== null && change <= -0.1)
      ? 'action'
      : share >= 2 || high >= 1 || (change !== null && change <= -0.05)
        ? 'watch'
        : 'good';
  const parts: string[] = [];
  if (!anomalies.length)
    parts.push(
      `No area of at least ${MIN_ANOMALY_HA} ha falls below ${threshold.value.toFixed(2)} ${input.meta.index}; the canopy is even.`,
    );
  else {
    parts.push(
      `${total} low-${input.meta.index} area${total === 1 ? ' covers' : 's cover'} ${anomalyHa.toFixed(2)} ha (${share.toFixed(1)} % of the field).`,
    );
    parts.push(
      `Visit the ${Math.min(3, anomalies.length)} top-ranked point${anomalies.length === 1 ? '' : 's'} first and check for water-logging, compaction, pests, disease or nutrient deficiency.`,
    );
  }
  if (change !== null)
    parts.push(
      `The field mean ${change < 0 ? 'fell' : 'rose'} by ${Math.abs(change).toFixed(3)} since ${input.previous!.date}.`,
    );
  if (input.capture.usable_fraction < 0.9)
    parts.push(
      `Only ${(input.capture.usable_fraction * 100).toFixed(0)} % of the field was clear of cloud on this date; unseen parts are not judged.`,
    );
  return {
    anomalies,
    content: {
      meta: input.meta,
      capture: input.capture,
      statistics,
      previous:
        input.previous && statistics.mean !== null
          ? { ...input.previous, mean: r4(input.previous.mean), change: change! }
          : null,
      threshold,
      anomalies: anomalies.map((a) => a.content),
      anomalies_total: { count: total, area_ha: r4(anomalyHa), share_of_field_pct: r2(share) },
      status,
      recommendation: parts.join(' '),
      map: {
        value_min: input.colour.lo,
        value_max: input.colour.hi,
        colormap: 'red-yellow-green',
        width_px: r.width,
        height_px: r.height,
        pixel_size_m: Math.abs(r.resX),
      },
    },
  };
}
