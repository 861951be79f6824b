/**
 * Zonal statistics beyond the kernel's one pass: histograms (numpy's semantics), and the
 * coverage-weighted statistics of exactextract (isciences/exactextract#75) from the kernel's
 * unweighted ones. Pure functions over the values a run left and per-pixel weights.
 */
import type { Stats } from './kernel-host.js';

/** `bins` equal bins over [min, max] of the values, or explicit increasing `edges`. */
export type HistogramSpec = { bins: number } | { edges: number[] };

export interface Histogram {
  /** bins + 1 increasing edges; every bin is [e_i, e_i+1) but the last, which is closed. */
  edges: number[];
  /** Values per bin (the sum of their weights with weighting=coverage). */
  counts: number[];
}

/**
 * numpy.histogram of the non-NaN values (with weights: `weights=`). With `bins` the range is
 * [min, max] of the values ([v − 0.5, v + 0.5] when they are all v) and the edges numpy's
 * linspace (i × step + min, the last exactly max); with `edges`, values outside are left out.
 * A value goes in the bin searchsorted puts it in. `weights` (one per value) are read only where
 * given; `range` is the values' min and max when the caller knows them.
 */
export function histogramOf(
  values: Float32Array,
  spec: HistogramSpec,
  range: { min: number; max: number } | null,
  weights?: Float64Array | null,
): Histogram {
  let edges: number[];
  if ('edges' in spec) edges = spec.edges.slice();
  else {
    let lo = range?.min ?? Infinity;
    let hi = range?.max ?? -Infinity;
    if (!range)
      for (let i = 0; i < values.length; i++) {
        const v = values[i]!;
        if (v < lo) lo = v;
        if (v > hi) hi = v;
      }
    if (!(lo <= hi)) {
      lo = 0;
      hi = 1; // no value: numpy's default range
    }
    if (lo === hi) {
      lo -= 0.5;
      hi += 0.5;
    }
    const step = (hi - lo) / spec.bins;
    edges = Array.from({ length: spec.bins + 1 }, (_, i) => i * step + lo);
    edges[spec.bins] = hi;
  }
  const nb = edges.length - 1;
  const counts = new Float64Array(nb);
  const e = Float64Array.from(edges);
  const first = e[0]!;
  const last = e[nb]!;
  const uniform = 'bins' in spec;
  const norm = nb / (last - first);
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!(v >= first && v <= last)) continue; // NaN, or outside explicit edges
    let b: number;
    if (uniform) {
      b = Math.min(nb - 1, Math.floor((v - first) * norm));
      if (v < e[b]!) b--;
      else if (b < nb - 1 && v >= e[b + 1]!) b++;
    } else {
      // the last edge ≤ v (the last bin is closed)
      let lo = 0;
      let hi = nb - 1;
      while (lo < hi) {
        const mid = (lo + hi + 1) >> 1;
        if (e[mid]! <= v) lo = mid;
        else hi = mid - 1;
      }
      b = lo;
    }
    counts[b] = counts[b]! + (weights ? weights[i]! : 1);
  }
  return { edges, counts: Array.from(counts) };
}

/**
 * The coverage-weighted statistics from the kernel's unweighted ones over the same pixels (every
 * pixel with any coverage, weight 1) and the pixels whose weight is below 1: adding weight
 * (w − 1) for each of those (weighted merge of moments about the unweighted mean). min and max
 * stay those over every pixel with any coverage; count becomes the sum of the weights.
 * `partial` lists the pixel indices with 0 < w < 1; NaN values (masked, ÷0) are skipped.
 */
export function weightedStats(
  s: Stats,
  values: Float32Array,
  weights: Float64Array,
  partial: Int32Array | number[],
): Stats {
  if (!s.count) return s;
  const n = s.count;
  const mean = s.mean;
  const m2 = s.std * s.std * n;
  let dw = 0;
  let d1 = 0;
  let d2 = 0;
  for (let k = 0; k < partial.length; k++) {
    const i = partial[k]!;
    const v = values[i]!;
    if (Number.isNaN(v)) continue;
    const a = weights[i]! - 1;
    const d = v - mean;
    dw += a;
    d1 += a * d;
    d2 += a * d * d;
  }
  const W = n + dw;
  if (!(W > 0)) return { count: 0, min: NaN, max: NaN, mean: NaN, std: NaN };
  const shift = d1 / W;
  const wm2 = Math.max(0, m2 + d2 - W * shift * shift);
  return { count: W, min: s.min, max: s.max, mean: mean + shift, std: Math.sqrt(wm2 / W) };
}

/**
 * exactextract's weighted quantiles (WeightedQuantiles): values sorted, C_k the cumulative
 * weight, s_0 = 0 and s_k = k·w_k + (n − 1)·C_(k−1); the q-quantile interpolates linearly in s at
 * q·W·(n − 1). With all weights 1 it is numpy's linear percentile. Values sorted by value, then
 * weight (ties). Null when no value has weight.
 */
export function weightedPercentiles(
  values: Float32Array,
  weights: Float64Array,
  ps: readonly number[],
): number[] | null {
  // whole pixels (weight 1) sorted natively; the partial ones (few: the boundary) apart
  let nFull = 0;
  let nPart = 0;
  for (let i = 0; i < values.length; i++) {
    const w = weights[i]!;
    if (!(w > 0) || Number.isNaN(values[i]!)) continue;
    if (w === 1) nFull++;
    else nPart++;
  }
  const n = nFull + nPart;
  if (!n) return null;
  const full = new Float32Array(nFull);
  const part: Array<[number, number]> = [];
  for (let i = 0, f = 0; i < values.length; i++) {
    const w = weights[i]!;
    const v = values[i]!;
    if (!(w > 0) || Number.isNaN(v)) continue;
    if (w === 1) full[f++] = v;
    else part.push([v, w]);
  }
  full.sort();
  part.sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  // merged order: by value, then weight (a partial weight < 1 before a whole pixel of equal value)
  const xs = new Float64Array(n);
  const ws = new Float64Array(n);
  for (let k = 0, i = 0, j = 0; k < n; k++) {
    if (j < part.length && (i >= nFull || part[j]![0] <= full[i]!)) {
      xs[k] = part[j]![0];
      ws[k] = part[j]![1];
      j++;
    } else {
      xs[k] = full[i++]!;
      ws[k] = 1;
    }
  }
  const s = new Float64Array(n);
  let cum = 0;
  for (let k = 0; k < n; k++) {
    s[k] = k === 0 ? 0 : k * ws[k]! + (n - 1) * cum;
    cum += ws[k]!;
  }
  const sn = cum * (n - 1);
  return ps.map((p) => {
    const target = (p / 100) * sn;
    // the first s greater than the target
    let lo = 0;
    let hi = n;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (s[mid]! > target) hi = mid;
      else lo = mid + 1;
    }
    if (lo === 0) return xs[0]!;
    if (lo === n) return xs[n - 1]!;
    const l = lo - 1;
    return xs[l]! + ((target - s[l]!) * (xs[lo]! - xs[l]!)) / (s[lo]! - s[l]!);
  });
}
