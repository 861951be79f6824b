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
 * numpy.histogram of the non-NaN values a kernel run left (with weights: `weights=`). With `bins`
 * the range is [min, max] of the values (`range`, the run's; [v − 0.5, v + 0.5] when they are all
 * v; [0, 1] without a value) and the edges numpy's linspace (i × step + min, the last exactly
 * max); with `edges`, values outside are left out. A value goes in the bin searchsorted puts it in
 * (the last bin closed): the kernel counts them in one pass (Kernel.countBins). With `weighted`
 * (the window's coverage weights and its partial pixels: every other counted pixel weighs 1) the
 * counts are weight sums: the partial pixels add w − 1 to their bins.
 */
export function histogramOf(
  kernel: { countBins(edges: Float64Array, uniform: boolean): Uint32Array; values(): Float32Array },
  spec: HistogramSpec,
  range: { min: number; max: number } | null,
  weighted?: { weights: Float64Array; partial: Int32Array },
): Histogram {
  let edges: number[];
  if ('edges' in spec) edges = spec.edges.slice();
  else {
    let lo = range ? range.min : 0;
    let hi = range ? range.max : 1; // no value: numpy's default range
    if (lo === hi) {
      lo -= 0.5;
      hi += 0.5;
    }
    const step = (hi - lo) / spec.bins;
    edges = Array.from({ length: spec.bins + 1 }, (_, i) => i * step + lo);
    edges[spec.bins] = hi;
  }
  const e = Float64Array.from(edges);
  const uniform = 'bins' in spec;
  const counts = Array.from(kernel.countBins(e, uniform));
  if (weighted) {
    const values = kernel.values();
    const nb = edges.length - 1;
    const first = e[0]!;
    const last = e[nb]!;
    const norm = nb / (last - first);
    for (let k = 0; k < weighted.partial.length; k++) {
      const i = weighted.partial[k]!;
      const v = values[i]!;
      if (!(v >= first && v <= last)) continue; // NaN, or outside explicit edges
      counts[binOf(v, e, uniform, norm)] += weighted.weights[i]! - 1;
    }
  }
  return { edges, counts };
}

/**
 * The bin of v (within [e_0, e_nb]) as searchsorted gives it, the last bin closed: equal bins
 * from the step (`norm` = nb / (e_nb − e_0)), checked against the edges either side; else the last
 * edge ≤ v by bisection. The kernel's histogramNp does the same in float64.
 */
function binOf(v: number, e: Float64Array, uniform: boolean, norm: number): number {
  const nb = e.length - 1;
  if (uniform) {
    let b = Math.min(nb - 1, Math.floor((v - e[0]!) * norm));
    if (v < e[b]!) b--;
    else if (b < nb - 1 && v >= e[b + 1]!) b++;
    return b;
  }
  let lo = 0;
  let hi = nb - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (e[mid]! <= v) lo = mid;
    else hi = mid - 1;
  }
  return lo;
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

/** @internal Which way weightedPercentilesBySelection answered each percentile (tests read it). */
export const weightedPaths = { selection: 0, levels: 0, sorted: 0 };

/**
 * weightedPercentiles without sorting the values: the same percentiles (up to the order of a
 * floating sum). s_k = k·w_k + (n − 1)·C_(k−1) lies between (n − 1)(k − D) and n·k, where D is the
 * partial pixels' weight short of 1 (Σ (1 − w)), so the place where s crosses the target
 * q·W·(n − 1) lies within D + 2 places of target / n. `windows` gives, for each range of ranks
 * [r0, r1] among the m values counted (the kernel's rankWindows: two passes over the window for
 * all of them), those values and the others between the first and the last, sorted, with the count
 * of values below them; they are merged with the partial pixels of those values in exactextract's
 * order (by value, then weight) and s is walked from that count. Where the crossing is not among
 * them, the sort answers. `values` gives the kernel's values (read before `windows` runs: it may
 * move them); `partial` lists the pixels of weight in (0, 1); every other counted pixel weighs 1;
 * `order` gives unweighted percentiles (all weights 1: numpy's); `levels`, when the window is a
 * few values, each value and its count (then walked without gathering). Null when m is 0.
 */
export function weightedPercentilesBySelection(
  values: () => Float32Array,
  weights: Float64Array,
  partial: Int32Array,
  m: number,
  ps: readonly number[],
  order: (ps: number[]) => number[] | null,
  windows: (ranges: Array<[number, number]>) => Array<{ first: number; values: Float32Array }>,
  levels?: () => { values: number[]; counts: number[] } | undefined,
): number[] | null {
  if (m === 0) return null;
  if (ps.length === 0) return [];
  // the partial pixels that hold a value, by value then weight, and their prefix sums of 1 − w
  const { pv, pw } = partialsInOrder(values(), weights, partial);
  const nP = pv.length;
  // every weight 1: exactextract's quantile is numpy's linear percentile
  if (nP === 0) return order([...ps]);
  if (m === 1) return ps.map(() => pv[0]!);
  const short = new Float64Array(nP + 1);
  for (let j = 0; j < nP; j++) short[j + 1] = short[j]! + (1 - pw[j]!);
  const n = m;
  const D = short[nP]!;
  const sn = (n - D) * (n - 1);
  const targets = ps.map((p) => (p / 100) * sn);
  // each percentile's values as runs from a place: a window of a few values (the kernel's
  // levelsOf) is its levels, each as often as counted, from the first place (nothing gathered);
  // else the kernel's window around the percentile's places (generous by two each side)
  const few = levels?.();
  const levelled = few && levelRuns(few.values, few.counts);
  const around: Array<{ runs: Runs | null; first: number }> = levelled
    ? ps.map(() => ({ runs: levelled, first: 0 }))
    : windows(
        targets.map((t) => [Math.max(0, Math.floor(t / n) - 2), Math.min(n - 1, Math.ceil(t / (n - 1) + D) + 2)]),
      ).map(({ first, values: u }) => ({ runs: u.length ? valueRuns(u) : null, first }));
  return ps.map((p, i) => {
    const { runs, first } = around[i]!;
    const r = runs ? crossing(runs, first, targets[i]!, n, pv, pw, short) : undefined;
    if (r !== undefined) {
      weightedPaths[few ? 'levels' : 'selection']++;
      return r;
    }
    weightedPaths.sorted++;
    return weightedPercentiles(values(), weights, [p])![0]!;
  });
}

/**
 * The values and weights of the partial pixels that hold a value (not NaN, weight > 0), by value
 * then weight. Sorted natively, in runs of up to 2^21 pixels: each value's order key (its f32 bits
 * made monotone) and its place in the run packed in one float64 (exact under 2^53), equal values
 * then ordered by weight; runs (over 2^21 partial pixels: a window of millions of edge pixels)
 * then merged two by two.
 */
function partialsInOrder(
  values: Float32Array,
  weights: Float64Array,
  partial: Int32Array,
): { pv: Float64Array; pw: Float64Array } {
  const at = new Int32Array(partial.length);
  let nP = 0;
  for (let k = 0; k < partial.length; k++) {
    const i = partial[k]!;
    if (!Number.isNaN(values[i]!) && weights[i]! > 0) at[nP++] = i;
  }
  let pv = new Float64Array(nP);
  let pw = new Float64Array(nP);
  const bits = new Uint32Array(values.buffer, values.byteOffset, values.length);
  const keys = new Float64Array(Math.min(nP, RUN));
  for (let from = 0; from < nP; from += RUN) {
    const len = Math.min(RUN, nP - from);
    const run = keys.subarray(0, len);
    for (let j = 0; j < len; j++) {
      const b = bits[at[from + j]!]!;
      // negative values: all bits flipped; others: the sign bit set (−0 below +0: equal values, ordered by weight after)
      const key = b & 0x80000000 ? ~b >>> 0 : (b | 0x80000000) >>> 0;
      run[j] = key * RUN + j;
    }
    run.sort();
    for (let j = 0; j < len; j++) {
      const key = run[j]!;
      const i = at[from + key - Math.floor(key / RUN) * RUN]!;
      pv[from + j] = values[i]!;
      pw[from + j] = weights[i]!;
    }
  }
  // equal values by weight (runs of ties: short but for quantized values)
  for (let j = 0; j < nP; ) {
    let e = j + 1;
    while (e < nP && pv[e] === pv[j]) e++;
    if (e - j > 1) pw.subarray(j, e).sort();
    j = e;
  }
  // the sorted runs merged, two by two, by value then weight
  if (nP > RUN) {
    let v2 = new Float64Array(nP);
    let w2 = new Float64Array(nP);
    for (let width = RUN; width < nP; width *= 2) {
      for (let lo = 0; lo < nP; lo += 2 * width) {
        const mid = Math.min(lo + width, nP);
        const hi = Math.min(lo + 2 * width, nP);
        let a = lo;
        let b = mid;
        for (let o = lo; o < hi; o++) {
          const fromA = b >= hi || (a < mid && (pv[a]! < pv[b]! || (pv[a] === pv[b] && pw[a]! <= pw[b]!)));
          const q = fromA ? a++ : b++;
          v2[o] = pv[q]!;
          w2[o] = pw[q]!;
        }
      }
      [pv, v2] = [v2, pv];
      [pw, w2] = [w2, pw];
    }
  }
  return { pv, pw };
}

/** Partial pixels sorted at once by partialsInOrder (their places in a run fit 21 bits). */
const RUN = 2 ** 21;

/**
 * Where s crosses target t among the values u (sorted: every value between the first and the
 * last; `below` of all values under them), merged with the partial pixels of those values (pv and
 * pw, by value then weight; short: prefix sums of 1 − w), interpolated as weightedPercentiles does.
 * Undefined when the crossing is not among them (then the caller sorts).
 */
function crossing(
  u: Runs,
  below: number,
  t: number,
  n: number,
  pv: Float64Array,
  pw: Float64Array,
  short: Float64Array,
): number | undefined {
  let j = lowerBound(pv, u.at(0));
  let k = below; // the place of the next value
  let c = below - short[j]!; // the weight of the values before it
  let px = NaN;
  let prevS = NaN;
  // one value at place k, of weight w: false once s passes t (the result then in px)
  const step = (x: number, w: number): boolean => {
    const s = k === 0 ? 0 : k * w + (n - 1) * c;
    if (s > t) {
      px = Number.isNaN(prevS) ? NaN : px + ((t - prevS) * (x - px)) / (s - prevS);
      return false;
    }
    px = x;
    prevS = s;
    c += w;
    k++;
    return true;
  };
  const i1 = u.length;
  for (let i = 0; i < i1; ) {
    // a run of equal values: its partial pixels first (by weight), then the whole ones
    const x = u.at(i);
    const e = u.end(i);
    if (e <= i) return undefined; // (runs that do not advance: never, but the loop must end)
    let whole = e - i;
    for (; j < pv.length && pv[j] === x; j++, whole--) if (!step(x, pw[j]!)) return finite(px);
    // the whole ones: the first stepped (it may interpolate from the value before), the rest at
    // once (a field of a few levels has runs of millions): all x, so a crossing among them gives x
    if (whole > 0) {
      if (!step(x, 1)) return finite(px);
      const rest = whole - 1;
      if (rest > 0) {
        const s = k + rest - 1 + (n - 1) * (c + rest - 1);
        if (s > t) return x;
        px = x;
        prevS = s;
        c += rest;
        k += rest;
      }
    }
    i = e;
  }
  // past the last value: the maximum
  return k === n && !Number.isNaN(prevS) ? px : undefined;
}

const finite = (x: number): number | undefined => (Number.isNaN(x) ? undefined : x);

/**
 * Sorted values as runs of equal values, for crossing: the value at a run's first place, and the
 * place after the run.
 */
interface Runs {
  length: number;
  at(i: number): number;
  end(i: number): number;
}

/** The runs of sorted values u: a run ends at the next value, or (a long run of ties) at the first greater one, by bisection. */
function valueRuns(u: Float32Array): Runs {
  return {
    length: u.length,
    at: (i) => u[i]!,
    end: (i) => (i + 1 < u.length && u[i + 1] === u[i] ? lowerBound(u, u[i]!, true) : i + 1),
  };
}

/** The runs of a window of a few values: each value (ascending) as often as it is counted. */
function levelRuns(values: readonly number[], counts: readonly number[]): Runs {
  const starts = [0];
  for (const c of counts) starts.push(starts[starts.length - 1]! + c);
  const run = (i: number) => {
    let j = 0;
    while (starts[j + 1]! <= i) j++;
    return j;
  };
  return { length: starts[counts.length]!, at: (i) => values[run(i)]!, end: (i) => starts[run(i) + 1]! };
}

/** The first place in sorted a whose value is ≥ x (with `after`, > x). */
function lowerBound(a: ArrayLike<number>, x: number, after = false): number {
  let lo = 0;
  let hi = a.length;
  while (lo < hi) {
    const mid = (lo + hi) >> 1;
    if (after ? a[mid]! <= x : a[mid]! < x) lo = mid + 1;
    else hi = mid;
  }
  return lo;
}
