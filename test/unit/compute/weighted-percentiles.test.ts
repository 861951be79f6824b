/**
 * Weighted percentiles by selection (compute/zonal.ts weightedPercentilesBySelection, what the
 * compute worker calls for weighting=coverage) against exactextract's weighted quantile written out
 * plainly in the test (test/helpers/exactextract.ts) and against the sort-based
 * weightedPercentiles, on windows of every shape: ties between whole and partial pixels, NaN, no
 * partial pixel, all partial, tiny weights, one value, p0/p100, more than eight percentiles.
 */
import { describe, expect, it } from 'vitest';
import { compileFormula } from '../../../src/compute/formula.js';
import { Kernel } from '../../../src/compute/kernel-host.js';
import { weightedPaths, weightedPercentiles, weightedPercentilesBySelection } from '../../../src/compute/zonal.js';
import { refQuantile, refQuantiles } from '../../helpers/exactextract.js';
import { rng } from '../../helpers/random.js';

const identity = compileFormula('B04');

/**
 * A window as the worker has it: the kernel's values (NaN where not counted: no weight, or no
 * value), the weights, and the partial pixels (0 < w < 1).
 */
function windowOf(kernel: Kernel, values: Float32Array, weights: Float64Array) {
  for (let i = 0; i < values.length; i++) if (!(weights[i]! > 0)) values[i] = NaN;
  const prep = kernel.prepare(values.length, [{ dtype: 'f32' }]);
  prep.bands[0]!.set(values);
  const stats = kernel.run(identity);
  const partial: number[] = [];
  for (let i = 0; i < weights.length; i++) if (weights[i]! > 0 && weights[i]! < 1) partial.push(i);
  return { stats, partial: Int32Array.from(partial) };
}

/** The (value, weight) pairs of the pixels counted: weight > 0 and a value (the references' input). */
function pairsOf(values: Float32Array, weights: Float64Array): Array<[number, number]> {
  const pairs: Array<[number, number]> = [];
  for (let i = 0; i < values.length; i++)
    if (weights[i]! > 0 && !Number.isNaN(values[i]!)) pairs.push([values[i]!, weights[i]!]);
  return pairs;
}

/** exactextract's quantiles of those pairs (test/helpers/exactextract.ts) at percentiles ps. */
function reference(values: Float32Array, weights: Float64Array, ps: readonly number[]): number[] {
  return refQuantiles(
    pairsOf(values, weights),
    ps.map((p) => p / 100),
  );
}

/** As the compute worker calls it (with `levels`, the kernel's levelsOf, as the worker does). */
function bySelection(
  kernel: Kernel,
  weights: Float64Array,
  partial: Int32Array,
  m: number,
  ps: number[],
  levels = false,
) {
  const stats = { ...kernel.run(identity) };
  return weightedPercentilesBySelection(
    () => kernel.values(),
    weights,
    partial,
    m,
    ps,
    (qs) => kernel.percentiles(qs, stats),
    (ranges) => kernel.rankWindows(ranges, stats),
    levels ? () => kernel.levelsOf(stats) : undefined,
  );
}

describe('weighted percentiles by selection', () => {
  const kernel = new Kernel();

  it("equal exactextract's quantile and the sort on windows of every shape, without sorting", () => {
    const r = rng(2311);
    const shapes: Array<[string, (u: number) => number]> = [
      ['smooth', (u) => u * 2 - 1],
      ['skewed', (u) => u ** 9],
      ['five levels', (u) => Math.floor(u * 5) / 5],
      ['all equal', () => 0.25],
      ['two peaks', (u) => (u < 0.5 ? -Math.exp(-30 * u) : Math.exp(-30 * (1 - u)))],
    ];
    const weightsOf: Array<[string, (u: number) => number]> = [
      ['a few partial', (u) => (u < 0.04 ? u / 0.04 : 1)],
      ['a third partial', (u) => (u < 0.33 ? u / 0.33 : 1)],
      ['all partial', (u) => 0.001 + u * 0.998],
      ['tiny and near 1', (u) => (u < 0.05 ? 1e-9 : u < 0.1 ? 1 - 1e-12 : 1)],
      ['none partial', () => 1],
    ];
    const lists = [
      [0, 5, 10, 25, 50, 75, 90, 95, 100],
      [5, 50, 95],
      [0.1, 1, 2.5, 10, 20, 33.3, 50, 66.7, 80, 90, 97.5, 99.9], // twelve: two gathers
      [50, 50, 37.5],
    ];
    const before = { ...weightedPaths };
    let checked = 0;
    for (let t = 0; t < 50; t++) {
      const n = [1, 2, 7, 60, 700, 6000, 20_000][t % 7]!;
      const [shapeName, shape] = shapes[t % shapes.length]!;
      const [weightName, weightOf] = weightsOf[Math.floor(t / 5) % weightsOf.length]!;
      const nanShare = [0, 0.2, 0.6][t % 3]!;
      const values = Float32Array.from({ length: n }, () => (r() < nanShare ? NaN : shape(r())));
      // no weight for a tenth of the pixels (outside the boundary)
      const weights = Float64Array.from({ length: n }, () => (r() < 0.1 ? 0 : weightOf(r())));
      const { stats, partial } = windowOf(kernel, values, weights);
      const pairs = pairsOf(values, weights);
      expect(stats.count).toBe(pairs.length);
      for (const ps of lists) {
        const label = `${shapeName}, ${weightName}, ${n} px, NaN ${nanShare}, ${ps}`;
        const got = bySelection(kernel, weights, partial, stats.count, ps);
        if (!pairs.length) {
          expect(got, label).toBeNull();
          continue;
        }
        const sorted = weightedPercentiles(kernel.values(), weights, ps)!;
        for (const [i, p] of ps.entries()) {
          const want = refQuantile(pairs, p / 100);
          expect(Math.abs(got![i]! - want), `${label}: p${p} against the reference`).toBeLessThan(1e-9);
          expect(Math.abs(got![i]! - sorted[i]!), `${label}: p${p} against the sort`).toBeLessThan(1e-9);
        }
        checked++;
      }
    }
    expect(checked).toBeGreaterThan(150);
    // every percentile found its place among the values gathered: the sort was never needed
    expect(weightedPaths.sorted - before.sorted).toBe(0);
    expect(weightedPaths.selection - before.selection).toBeGreaterThan(500);
  });

  it('a window of 1.2 M pixels with a field edge: the kernel gathers, the values stay the run’s', () => {
    // the worker's shape: a round field, its edge pixels partial; the kernel's buckets gather each
    // place's values, and the values the per-pixel outputs read after are untouched
    const side = 1100;
    const n = side * side;
    const r = rng(5);
    const c = side / 2;
    const rad = 0.47 * side;
    const values = new Float32Array(n);
    const weights = new Float64Array(n);
    for (let i = 0; i < n; i++) {
      const d = Math.hypot((i % side) + 0.5 - c, Math.floor(i / side) + 0.5 - c) - rad;
      weights[i] = d < -0.7 ? 1 : d > 0.7 ? 0 : 0.5 - d / 1.4;
      values[i] = Math.round((r() * 0.6 + (d < -200 ? 0.3 : 0)) * 1000) / 1000; // ties
    }
    const { stats, partial } = windowOf(kernel, values, weights);
    const ps = [5, 10, 25, 50, 75, 90, 95];
    const copy = kernel.values().slice();
    const got = bySelection(kernel, weights, partial, stats.count, ps)!;
    const want = reference(values, weights, ps);
    for (const [i, p] of ps.entries()) expect(Math.abs(got[i]! - want[i]!), `p${p}`).toBeLessThan(1e-9);
    expect(
      Buffer.from(kernel.values().buffer, kernel.values().byteOffset, n * 4).equals(Buffer.from(copy.buffer)),
    ).toBe(true);
  }, 60_000);

  it('fields of one, two and three levels (ties by the million) on 1.2 M pixels', () => {
    // the buckets then hold far more values than the places: each is sorted alone, one of a single
    // value not at all, and the walk crosses a run of equal values at once
    const side = 1100;
    const n = side * side;
    const r = rng(31);
    for (const levels of [1, 2, 3]) {
      const values = Float32Array.from({ length: n }, () => 0.25 + Math.floor(r() * levels) / 8);
      const weights = Float64Array.from({ length: n }, () => (r() < 0.02 ? r() : r() < 0.01 ? 0 : 1));
      const { stats, partial } = windowOf(kernel, values, weights);
      const ps = [0, 5, 10, 25, 50, 75, 90, 95, 100, 33.3];
      const want = reference(values, weights, ps);
      // gathered by the kernel's rank windows, then walked by the kernel's count of each value
      // (levelsOf, as the worker asks): the same quantiles
      for (const withLevels of [false, true]) {
        const before = { ...weightedPaths };
        const got = bySelection(kernel, weights, partial, stats.count, ps, withLevels)!;
        for (const [i, p] of ps.entries())
          expect(Math.abs(got[i]! - want[i]!), `${levels} levels p${p}, levels ${withLevels}`).toBeLessThan(1e-9);
        expect(weightedPaths.sorted - before.sorted).toBe(0);
        expect(weightedPaths.levels - before.levels).toBe(withLevels ? ps.length : 0);
      }
    }
  }, 60_000);

  it('a window of a few values walked by the count of each: where a level ends, and levels with another value among them', () => {
    // levelsOf gives each value and its count; the walk crosses each level's partial pixels one
    // by one and its whole pixels at once. A percentile whose target falls between the last pixel
    // of one level and the first of the next interpolates between the two: there every weight
    // and count must be right
    const n = 600_000;
    const r = rng(6161);
    const values = Float32Array.from({ length: n }, () => [0.25, 0.5, 0.875][Math.floor(r() ** 1.3 * 3)]!);
    const weights = Float64Array.from({ length: n }, () => (r() < 0.03 ? 1e-6 + r() * 0.9 : r() < 0.01 ? 0 : 1));
    const { stats, partial } = windowOf(kernel, values, weights);
    // exactextract's s at the last pixel of each level and the first of the next (the reference's
    // order: by value, then weight; the level's whole pixels last)
    const pairs = pairsOf(values, weights).sort((a, b) => a[0] - b[0] || a[1] - b[1]);
    const N = pairs.length;
    const total = pairs.reduce((acc, [, w]) => acc + w, 0);
    const edges: number[] = [];
    let cum = 0;
    for (let i = 0; i + 1 < N; i++) {
      if (pairs[i]![0] !== pairs[i + 1]![0]) {
        const sl = i * pairs[i]![1] + (N - 1) * cum;
        const sr = (i + 1) * pairs[i + 1]![1] + (N - 1) * (cum + pairs[i]![1]);
        edges.push((100 * (sl + sr)) / 2 / (total * (N - 1)));
      }
      cum += pairs[i]![1];
    }
    expect(edges).toHaveLength(2);
    const ps = [0, 5, 50, 95, 100, ...edges];
    const want = refQuantiles(
      pairs,
      ps.map((p) => p / 100),
    );
    const before = { ...weightedPaths };
    const got = bySelection(kernel, weights, partial, stats.count, ps, true)!;
    expect(weightedPaths.levels - before.levels).toBe(ps.length);
    for (const [i, p] of ps.entries()) {
      // (the edges' values move by 0.25–0.375 across a gap in s of about N/2: the order of the sums shows)
      expect(Math.abs(got[i]! - want[i]!), `p${p}`).toBeLessThan(i >= 5 ? 1e-7 : 1e-9);
      if (i >= 5) expect(got[i]! % 0.125, `p${p} between two levels`).not.toBe(0);
    }
    // another value among the levels: not a few values; the windows answer
    values[1234] = 0.3;
    const other = windowOf(kernel, values, weights);
    expect(kernel.levelsOf(kernel.run(identity))).toBeUndefined();
    const before2 = { ...weightedPaths };
    const got2 = bySelection(kernel, weights, other.partial, other.stats.count, [5, 50, 95], true)!;
    expect(weightedPaths.levels - before2.levels).toBe(0);
    const want2 = reference(values, weights, [5, 50, 95]);
    for (const [i, p] of [5, 50, 95].entries()) expect(Math.abs(got2[i]! - want2[i]!), `p${p}`).toBeLessThan(1e-9);
  }, 60_000);

  it('over 2^21 partial pixels (sorted in runs, then merged): the same quantiles', () => {
    // partialsInOrder sorts the partial pixels natively in runs of 2^21 (a packed key: the value's
    // order and the place in the run) and merges the runs: this window has two, with negative
    // values and two levels of ties (−0.5, and −0 with +0) in both
    const n = 2 ** 21 + 60_000;
    const r = rng(2121);
    // the others in [−1, −0.5), [−0.25, 0) and [0.5, 1): the value after each level is far from it
    const others = [-1, -0.5, -0.25, 0, 0.5, 1];
    const values = Float32Array.from({ length: n }, () => {
      const u = r();
      const j = 2 * Math.floor(r() * 3);
      return u < 0.015 ? -0.5 : u < 0.02 ? -0 : u < 0.03 ? 0 : others[j]! + r() * (others[j + 1]! - others[j]!);
    });
    // weights up to 0.9, the levels all partial (a whole pixel, weight 1, would come last among
    // them in any order); each level's heaviest (0.99) in another run, so the merge decides whether
    // it comes last: −0.5's in the second run, the zeros' in the first
    const level = (v: number) => v === -0.5 || v === 0;
    const weights = Float64Array.from(values, (v) => (r() < 0.01 && !level(v) ? 1 : r() < 0.01 ? 0 : 1e-6 + r() * 0.9));
    values[0] = 0;
    weights[0] = 0.99;
    values[n - 1] = -0.5;
    weights[n - 1] = 0.99;
    const { stats, partial } = windowOf(kernel, values, weights);
    expect(partial.length).toBeGreaterThan(2 ** 21);
    // for each level, a percentile whose target falls between its last value and the value after
    // it: there s depends on which of the level comes last (exactextract's order: by value, then
    // weight), s_i = i·w_i + (N − 1)·C_(i−1) over the N pairs so ordered
    const pairs = pairsOf(values, weights);
    const N = pairs.length;
    const total = pairs.reduce((acc, [, w]) => acc + w, 0);
    const afterLevel = (x: number) => {
      let below = 0; // pairs under the level, and their weight
      let cBelow = 0;
      let count = 0;
      let c = 0;
      let wLast = 0; // the heaviest of the level comes last
      let next: [number, number] = [Infinity, Infinity]; // the first pair after the level
      for (const [v, w] of pairs) {
        if (v < x) {
          below++;
          cBelow += w;
        } else if (v === x) {
          count++;
          c += w;
          wLast = Math.max(wLast, w);
        } else if (v < next[0] || (v === next[0] && w < next[1])) next = [v, w];
      }
      expect(wLast).toBe(0.99);
      const last = below + count - 1;
      const sl = last * wLast + (N - 1) * (cBelow + c - wLast);
      const sr = (last + 1) * next[1] + (N - 1) * (cBelow + c);
      return { p: (100 * (sl + sr)) / 2 / (total * (N - 1)), next: next[0] };
    };
    const edges = [afterLevel(-0.5), afterLevel(0)];
    const ps = [0, 5, 33.3, 50, 95, 100, ...edges.map((e) => e.p)];
    const before = { ...weightedPaths };
    const got = bySelection(kernel, weights, partial, stats.count, ps)!;
    expect(weightedPaths.selection - before.selection).toBe(ps.length);
    const want = refQuantiles(
      pairs,
      ps.map((p) => p / 100),
    );
    // each edge's between its level and the value after it; its value moves by 0.25–0.5 across a
    // gap in s of about N/2 there, where the order of the sums of 2 M weights shows (a few 1e-9),
    // and another value of the level last moves it by about 1e-3
    for (const [e, { next }] of edges.entries()) {
      expect(want[6 + e]).toBeGreaterThan([-0.5, 0][e]!);
      expect(want[6 + e]).toBeLessThan(next);
    }
    for (const [i, p] of ps.entries())
      expect(Math.abs(got[i]! - want[i]!), `p${p} against the reference`).toBeLessThan(i >= 6 ? 1e-6 : 1e-9);
  }, 60_000);

  it('windows that miss the place fall back to the sort, with the same result', () => {
    const r = rng(17);
    const n = 3000;
    const values = Float32Array.from({ length: n }, () => r());
    const weights = Float64Array.from({ length: n }, () => (r() < 0.3 ? r() : 1));
    const { stats, partial } = windowOf(kernel, values, weights);
    const ps = [10, 50, 90];
    const before = weightedPaths.sorted;
    // windows of the lowest ranks only: the crossing is never among the values they hold
    const got = weightedPercentilesBySelection(
      () => kernel.values(),
      weights,
      partial,
      stats.count,
      ps,
      (qs) => kernel.percentiles(qs, stats),
      (ranges) =>
        kernel.rankWindows(
          ranges.map(() => [0, 3]),
          stats,
        ),
    )!;
    expect(weightedPaths.sorted - before).toBe(3);
    expect(got).toEqual(weightedPercentiles(kernel.values(), weights, ps));
  });

  it("the kernel's rank windows: every value from the first rank's bucket to the last's, sorted, and the count below", () => {
    const r = rng(404);
    for (let t = 0; t < 33; t++) {
      // the last three: 20,000 values of one, two and three levels and a tenth of others (buckets
      // sorted one by one: a level's bucket holds a few others too)
      const n = t < 30 ? [600, 5000, 70_000][t % 3]! : 20_000;
      const levels = t < 30 ? [0, 7, 300][t % 3]! : t - 29;
      const others = t < 30 ? 0 : 0.1;
      const values = Float32Array.from({ length: n }, () =>
        r() < 0.15 ? NaN : r() < others ? r() : levels ? Math.floor(r() * levels) / levels : r() ** 3,
      );
      const prep = kernel.prepare(n, [{ dtype: 'f32' }]);
      prep.bands[0]!.set(values);
      const stats = kernel.run(identity);
      const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
      const m = sorted.length;
      const ranges: Array<[number, number]> = [
        [0, 0],
        [m - 1, m - 1],
        [0, m - 1],
      ];
      for (let q = 0; q < 5; q++) {
        const a = Math.floor(r() * m);
        ranges.push([a, Math.min(m - 1, a + Math.floor(r() * 400))]);
      }
      const got = kernel.rankWindows(ranges, stats);
      for (const [i, [r0, r1]] of ranges.entries()) {
        const { first, values: w } = got[i]!;
        const label = `${n} values, ${levels} levels, ranks ${r0}–${r1}`;
        // the ranks asked are inside, and the values are the sorted ones from first on
        expect(first, label).toBeLessThanOrEqual(r0);
        expect(first + w.length - 1, label).toBeGreaterThanOrEqual(r1);
        expect(Array.from(w), label).toEqual(Array.from(sorted.subarray(first, first + w.length)));
        // every value equal to the ends is in (a bucket holds all of a value)
        expect(first === 0 || sorted[first - 1]! < w[0]!, label).toBe(true);
        expect(first + w.length === m || sorted[first + w.length]! > w[w.length - 1]!, label).toBe(true);
      }
    }
    // a count that is not the run's is a caller's mistake
    const stats = kernel.run(identity);
    expect(() => kernel.rankWindows([[0, 1]], { ...stats, count: stats.count + 1 })).toThrow(/expected/);
  });
});
