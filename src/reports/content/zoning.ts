/**
 * Management zones from an index map (domain code): classes by quantiles (equal-area) or 1-D
 * k-means, masked pixels inside the field given the class of their nearest classified neighbour,
 * fragments below a minimum size merged into the neighbour they share most border with (so a
 * machine can follow the map), then zones numbered from the lowest mean index.
 */
import { connectedRegions, quantile, validValues, type IndexRaster } from './raster.js';

export type ZoningMethod = 'quantiles' | 'kmeans';

export interface ZoneClasses {
  /** Zone number (0-based, ascending mean index) per pixel; -1 outside the field. */
  labels: Int32Array;
  /** Class boundaries on the index (k - 1 values). */
  breaks: number[];
  zones: Array<{ zone: number; pixels: number; mean: number; min: number; max: number }>;
  merged_fragments: number;
}

/** k-means in one dimension: Lloyd's iterations from the quantile midpoints (deterministic). */
export function kmeans1d(sorted: Float64Array, k: number): number[] {
  let centres = Array.from({ length: k }, (_, c) => quantile(sorted, (c + 0.5) / k));
  for (let iter = 0; iter < 100; iter++) {
    const sum = new Float64Array(k);
    const cnt = new Float64Array(k);
    let c = 0;
    for (const v of sorted) {
      // Sorted values: the nearest centre only moves right.
      while (c < k - 1 && Math.abs(v - centres[c + 1]!) <= Math.abs(v - centres[c]!)) c++;
      sum[c] += v;
      cnt[c]++;
    }
    const next = centres.map((m, i) => (cnt[i] ? sum[i]! / cnt[i]! : m));
    const moved = next.some((m, i) => Math.abs(m - centres[i]!) > 1e-9);
    centres = next;
    if (!moved) break;
  }
  return centres.sort((a, b) => a - b);
}

export function classBreaks(sorted: Float64Array, k: number, method: ZoningMethod): number[] {
  if (method === 'quantiles') return Array.from({ length: k - 1 }, (_, c) => quantile(sorted, (c + 1) / k));
  const centres = kmeans1d(sorted, k);
  return centres.slice(1).map((m, c) => (m + centres[c]!) / 2);
}

/** Gives every pixel with label -2 (to fill) the label of its nearest labelled 4-neighbour, breadth first. */
export function fillFromNeighbours(labels: Int32Array, width: number, height: number): void {
  let frontier: number[] = [];
  for (let k = 0; k < labels.length; k++) if (labels[k]! >= 0) frontier.push(k);
  while (frontier.length) {
    const next: number[] = [];
    for (const k of frontier) {
      const i = k % width;
      const j = (k - i) / width;
      for (const [ni, nj] of [[i + 1, j], [i - 1, j], [i, j + 1], [i, j - 1]] as const) {
        if (ni < 0 || nj < 0 || ni >= width || nj >= height) continue;
        const nk = nj * width + ni;
        if (labels[nk] === -2) {
          labels[nk] = labels[k]!;
          next.push(nk);
        }
      }
    }
    frontier = next;
  }
}

export function classifyZones(r: IndexRaster, k: number, method: ZoningMethod, minPixels: number): ZoneClasses {
  const sorted = validValues(r);
  if (sorted.length < k) throw new Error(`only ${sorted.length} usable pixels for ${k} zones`);
  const breaks = classBreaks(sorted, k, method);
  const n = r.width * r.height;
  const labels = new Int32Array(n);
  for (let p = 0; p < n; p++) {
    if (!r.inside[p]) labels[p] = -1;
    else if (Number.isNaN(r.values[p]!)) labels[p] = -2;
    else {
      const v = r.values[p]!;
      let c = 0;
      while (c < breaks.length && v >= breaks[c]!) c++;
      labels[p] = c;
    }
  }
  fillFromNeighbours(labels, r.width, r.height);
  let merged = 0;
  for (let round = 0; round < 50; round++) {
    const { ids, regions } = connectedRegions(labels, r.width, r.height, false);
    const small = regions.map((reg, id) => ({ reg, id })).filter((x) => x.reg.pixels.length < minPixels).sort((a, b) => a.reg.pixels.length - b.reg.pixels.length);
    let changed = 0;
    const touched = new Set<number>();
    for (const { reg, id } of small) {
      // Neighbouring regions changed this round are re-examined in the next one.
      if (touched.has(id)) continue;
      const border = new Map<number, number>();
      for (const p of reg.pixels) {
        const i = p % r.width;
        const j = (p - i) / r.width;
        for (const [ni, nj] of [[i + 1, j], [i - 1, j], [i, j + 1], [i, j - 1]] as const) {
          if (ni < 0 || nj < 0 || ni >= r.width || nj >= r.height) continue;
          const q = nj * r.width + ni;
          const lab = labels[q]!;
          if (lab >= 0 && lab !== reg.label) border.set(ids[q]!, (border.get(ids[q]!) ?? 0) + 1);
        }
      }
      if (!border.size) continue;
      const [target] = [...border.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]!;
      if (touched.has(target)) continue;
      const to = regions[target]!.label;
      for (const p of reg.pixels) labels[p] = to;
      touched.add(target);
      touched.add(id);
      changed++;
    }
    merged += changed;
    if (!changed) break;
  }
  // Statistics per class, then classes renumbered by ascending mean (empty ones dropped).
  const sum = new Float64Array(k);
  const cnt = new Float64Array(k);
  const px = new Float64Array(k);
  const mn = new Float64Array(k).fill(Infinity);
  const mx = new Float64Array(k).fill(-Infinity);
  for (let p = 0; p < n; p++) {
    const lab = labels[p]!;
    if (lab < 0) continue;
    px[lab]++;
    const v = r.values[p]!;
    if (Number.isNaN(v)) continue;
    sum[lab] += v;
    cnt[lab]++;
    if (v < mn[lab]!) mn[lab] = v;
    if (v > mx[lab]!) mx[lab] = v;
  }
  const order = Array.from({ length: k }, (_, c) => c)
    .filter((c) => cnt[c]! > 0)
    .sort((a, b) => sum[a]! / cnt[a]! - sum[b]! / cnt[b]!);
  const renum = new Int32Array(k).fill(-1);
  order.forEach((c, z) => (renum[c] = z));
  for (let p = 0; p < n; p++) if (labels[p]! >= 0) labels[p] = renum[labels[p]!]!;
  return {
    labels,
    breaks,
    zones: order.map((c, z) => ({ zone: z, pixels: px[c]!, mean: sum[c]! / cnt[c]!, min: mn[c]!, max: mx[c]! })),
    merged_fragments: merged,
  };
}

/**
 * Rates scaled around the base rate: each zone departs from it in proportion to how far its mean
 * index lies from the field mean (area-weighted), the farthest zone by `spread` (0.2 = ±20 %).
 * `inverse` gives more where the index is low. The area-weighted average rate equals base_rate.
 */
export function zoneRates(zones: Array<{ mean: number; weight: number }>, base: number, direction: 'inverse' | 'proportional', spread: number): number[] {
  const w = zones.reduce((s, z) => s + z.weight, 0);
  const m = zones.reduce((s, z) => s + z.mean * z.weight, 0) / w;
  const maxDev = Math.max(...zones.map((z) => Math.abs(z.mean - m)));
  const sign = direction === 'inverse' ? -1 : 1;
  return zones.map((z) => base * (1 + sign * spread * (maxDev > 0 ? (z.mean - m) / maxDev : 0)));
}
