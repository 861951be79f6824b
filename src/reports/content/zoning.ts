/**
 * Management zones from an index map (domain code): the map smoothed 3 × 3, classes by quantiles
 * (equal-area) or 1-D k-means, masked pixels inside the field given the class of their nearest classified neighbour,
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

/**
 * k-means in one dimension, globally optimal on a 1,024-bin histogram (dynamic programming over
 * sorted bins, as Ckmeans.1d.dp does on raw values), then refined by Lloyd's iterations on the
 * values themselves. Plain Lloyd from quantile seeds can stall with two centres in one cluster.
 */
export function kmeans1d(sorted: Float64Array, k: number): number[] {
  const lo = sorted[0]!;
  const hi = sorted[sorted.length - 1]!;
  const B = 1024;
  const w: number[] = [];
  const sx: number[] = [];
  const sxx: number[] = [];
  {
    const cw = new Float64Array(B);
    const cs = new Float64Array(B);
    const css = new Float64Array(B);
    for (const v of sorted) {
      const b = hi > lo ? Math.min(B - 1, Math.floor(((v - lo) / (hi - lo)) * B)) : 0;
      cw[b]++;
      cs[b] += v;
      css[b] += v * v;
    }
    for (let b = 0; b < B; b++) {
      if (!cw[b]) continue;
      w.push(cw[b]!);
      sx.push(cs[b]!);
      sxx.push(css[b]!);
    }
  }
  const n = w.length;
  const kk = Math.min(k, n);
  const pw = [0];
  const ps = [0];
  const pss = [0];
  for (let b = 0; b < n; b++) {
    pw.push(pw[b]! + w[b]!);
    ps.push(ps[b]! + sx[b]!);
    pss.push(pss[b]! + sxx[b]!);
  }
  const cost = (a: number, b: number) => {
    const W = pw[b + 1]! - pw[a]!;
    const S = ps[b + 1]! - ps[a]!;
    return pss[b + 1]! - pss[a]! - (S * S) / W;
  };
  // D[m][j]: best cost of bins 0..j in m+1 clusters; T: where the last cluster starts.
  const D = Array.from({ length: kk }, () => new Float64Array(n).fill(Infinity));
  const T = Array.from({ length: kk }, () => new Int32Array(n));
  for (let j = 0; j < n; j++) D[0]![j] = cost(0, j);
  for (let m = 1; m < kk; m++) {
    for (let j = m; j < n; j++) {
      for (let i = m; i <= j; i++) {
        const c = D[m - 1]![i - 1]! + cost(i, j);
        if (c < D[m]![j]!) {
          D[m]![j] = c;
          T[m]![j] = i;
        }
      }
    }
  }
  let centres: number[] = [];
  for (let m = kk - 1, j = n - 1; m >= 0; m--) {
    const i = m ? T[m]![j]! : 0;
    centres.unshift((ps[j + 1]! - ps[i]!) / (pw[j + 1]! - pw[i]!));
    j = i - 1;
  }
  for (let iter = 0; iter < 50; iter++) {
    const sum = new Float64Array(kk);
    const cnt = new Float64Array(kk);
    let c = 0;
    for (const v of sorted) {
      // Sorted values: the nearest centre only moves right.
      while (c < kk - 1 && Math.abs(v - centres[c + 1]!) <= Math.abs(v - centres[c]!)) c++;
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

/**
 * Gives every pixel labelled -2 (to fill) the most common label among its labelled 8-neighbours,
 * one ring at a time from the labelled area inwards (ties: the lower label), so masked patches
 * are shared out between the zones around them instead of streaked by a single-source flood.
 */
export function fillFromNeighbours(labels: Int32Array, width: number, height: number): void {
  let todo: number[] = [];
  for (let k = 0; k < labels.length; k++) if (labels[k] === -2) todo.push(k);
  const votes = new Map<number, number>();
  while (todo.length) {
    const assign: Array<[number, number]> = [];
    const rest: number[] = [];
    for (const k of todo) {
      const i = k % width;
      const j = (k - i) / width;
      votes.clear();
      for (let dj = -1; dj <= 1; dj++) {
        for (let di = -1; di <= 1; di++) {
          const ni = i + di;
          const nj = j + dj;
          if ((di === 0 && dj === 0) || ni < 0 || nj < 0 || ni >= width || nj >= height) continue;
          const lab = labels[nj * width + ni]!;
          if (lab >= 0) votes.set(lab, (votes.get(lab) ?? 0) + 1);
        }
      }
      if (!votes.size) {
        rest.push(k);
        continue;
      }
      let best = -1;
      let bestN = 0;
      for (const [lab, n] of votes) {
        if (n > bestN || (n === bestN && lab < best)) {
          best = lab;
          bestN = n;
        }
      }
      assign.push([k, best]);
    }
    if (!assign.length) break; // nothing labelled anywhere near: leave as is
    for (const [k, lab] of assign) labels[k] = lab;
    todo = rest;
  }
}

/**
 * 3 × 3 mean of the usable pixels inside the field (NaN stays NaN): zoning works on the smoothed
 * map, as zoning tools do, so that single noisy pixels do not become zones of their own.
 */
export function smooth3x3(r: IndexRaster): Float32Array {
  const out = new Float32Array(r.values.length).fill(NaN);
  for (let j = 0; j < r.height; j++) {
    for (let i = 0; i < r.width; i++) {
      const k = j * r.width + i;
      if (!r.inside[k] || Number.isNaN(r.values[k]!)) continue;
      let s = 0;
      let n = 0;
      for (let dj = -1; dj <= 1; dj++) {
        for (let di = -1; di <= 1; di++) {
          const ni = i + di;
          const nj = j + dj;
          if (ni < 0 || nj < 0 || ni >= r.width || nj >= r.height) continue;
          const q = nj * r.width + ni;
          const v = r.values[q]!;
          if (r.inside[q] && !Number.isNaN(v)) {
            s += v;
            n++;
          }
        }
      }
      out[k] = s / n;
    }
  }
  return out;
}

export function classifyZones(r: IndexRaster, k: number, method: ZoningMethod, minPixels: number): ZoneClasses {
  const smooth = { ...r, values: smooth3x3(r) };
  const sorted = validValues(smooth);
  if (sorted.length < k) throw new Error(`only ${sorted.length} usable pixels for ${k} zones`);
  const breaks = classBreaks(sorted, k, method);
  const n = r.width * r.height;
  const labels = new Int32Array(n);
  for (let p = 0; p < n; p++) {
    if (!r.inside[p]) labels[p] = -1;
    else if (Number.isNaN(smooth.values[p]!)) labels[p] = -2;
    else {
      const v = smooth.values[p]!;
      let c = 0;
      while (c < breaks.length && v >= breaks[c]!) c++;
      labels[p] = c;
    }
  }
  fillFromNeighbours(labels, r.width, r.height);
  let merged = 0;
  // Each merge joins a fragment to a neighbour, so the number of regions falls until none is small.
  for (let round = 0; round < 1000; round++) {
    const { regions } = connectedRegions(labels, r.width, r.height, false);
    const small = regions
      .filter((reg) => reg.pixels.length < minPixels)
      .sort((a, b) => a.pixels.length - b.pixels.length);
    let changed = 0;
    for (const reg of small) {
      // Border length with each neighbouring class, read from the labels as merged so far.
      const border = new Map<number, number>();
      const own = labels[reg.pixels[0]!]!;
      for (const p of reg.pixels) {
        const i = p % r.width;
        const j = (p - i) / r.width;
        for (const [ni, nj] of [
          [i + 1, j],
          [i - 1, j],
          [i, j + 1],
          [i, j - 1],
        ] as const) {
          if (ni < 0 || nj < 0 || ni >= r.width || nj >= r.height) continue;
          const lab = labels[nj * r.width + ni]!;
          if (lab >= 0 && lab !== own) border.set(lab, (border.get(lab) ?? 0) + 1);
        }
      }
      if (!border.size) continue;
      const [to] = [...border.entries()].sort((a, b) => b[1] - a[1] || a[0] - b[0])[0]!;
      for (const p of reg.pixels) labels[p] = to;
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
  for (const [z, c] of order.entries()) renum[c] = z;
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
export function zoneRates(
  zones: Array<{ mean: number; weight: number }>,
  base: number,
  direction: 'inverse' | 'proportional',
  spread: number,
): number[] {
  const w = zones.reduce((s, z) => s + z.weight, 0);
  const m = zones.reduce((s, z) => s + z.mean * z.weight, 0) / w;
  const maxDev = Math.max(...zones.map((z) => Math.abs(z.mean - m)));
  const sign = direction === 'inverse' ? -1 : 1;
  return zones.map((z) => base * (1 + sign * spread * (maxDev > 0 ? (z.mean - m) / maxDev : 0)));
}
