/**
 * Percentiles (by selection in the kernel) and histograms (compute/zonal.ts) against float64
 * references written here: a full sort and numpy's linear interpolation (`_lerp`), and numpy's
 * histogram (linspace edges, searchsorted, last bin closed), on 10 M random values and on
 * awkward small sets (ties, one value, NaNs).
 */
import { describe, expect, it, vi } from 'vitest';
import { compileFormula } from '../../../src/compute/formula.js';
import { Kernel } from '../../../src/compute/kernel-host.js';
import { histogramOf } from '../../../src/compute/zonal.js';
import { npHistogram, npPercentile } from '../../helpers/numpy.js';
import { rng } from '../../helpers/random.js';

const identity = compileFormula('B04');

/** Runs the identity formula over f32 values: the kernel's output is the values, NaN kept. */
function load(kernel: Kernel, values: Float32Array) {
  const prep = kernel.prepare(values.length, [{ dtype: 'f32' }]);
  prep.bands[0]!.set(values);
  return kernel.run(identity);
}

describe('percentiles by selection and numpy histograms', () => {
  const kernel = new Kernel();

  it('10 M random values (some NaN, many ties): every percentile equals the sorted float64 reference exactly', () => {
    const n = 10_000_000;
    const r = rng(23);
    const values = new Float32Array(n);
    for (let i = 0; i < n; i++) {
      const u = r();
      // a skewed mixture with ties (rounded values) and 1 % NaN
      values[i] = u < 0.01 ? NaN : u < 0.2 ? Math.round(r() * 50) / 100 : r() * r() * 2 - 0.4;
    }
    const stats = load(kernel, values);
    const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
    expect(stats.count).toBe(sorted.length);
    const ps = [0, 0.1, 1, 2.5, 5, 10, 25, 33.3, 50, 66.7, 75, 90, 95, 97.5, 99, 99.9, 100, 50, 37.123456];
    // quickselect over every value, and selection in the buckets of [min, max] that hold the ranks
    const got = kernel.percentiles(ps)!;
    const byBuckets = kernel.percentiles(ps, stats)!;
    for (const [i, p] of ps.entries()) {
      expect(got[i], `p${p}`).toBe(npPercentile(sorted, p));
      expect(byBuckets[i], `p${p} by buckets`).toBe(npPercentile(sorted, p));
    }
    // one pass over brackets placed by a sample (up to eight brackets: a few percentiles at a time)
    for (const few of [
      [5, 50, 95],
      [0, 100],
      [25, 75],
      [50],
      [0.1, 33.3, 66.7, 99.9],
      [37.123456, 37.2],
      [10, 25, 50, 75, 90],
      [1, 10, 30, 60, 80, 99],
      [5, 10, 25, 50, 75, 90, 95],
      [1, 10, 25, 40, 55, 70, 85, 99],
    ]) {
      const bySample = kernel.percentilesBySample(few, stats.count);
      expect(bySample, `${few} by sample`).toBeDefined();
      expect(bySample).toEqual(few.map((p) => npPercentile(sorted, p)));
      expect(kernel.percentiles(few, stats)).toEqual(bySample);
    }
    // the same in the run (runWithPercentiles: the sample's places computed first, the brackets'
    // pass made on each chunk as the JIT writes it), with the run's own statistics
    const jk = new Kernel({ jit: true });
    jk.prepare(n, [{ dtype: 'f32' }]).bands[0]!.set(values);
    for (const few of [
      [5, 50, 95],
      [10, 25, 50, 75, 90],
      [0, 100],
      [37.123456, 37.2],
      // zonal_stats' ranks with p5 and p95, and eight: seven and eight brackets in one pass (from 2^22 values)
      [5, 10, 25, 50, 75, 90, 95],
      [1, 10, 25, 40, 55, 70, 85, 99],
    ]) {
      const inRun = jk.runWithPercentiles(identity, few);
      expect(inRun.stats).toEqual(stats);
      expect(inRun.percentiles, `${few} in the run`).toEqual(few.map((p) => npPercentile(sorted, p)));
    }
    // the ranks come from the pass's own count; a wrong count only misplaces the brackets: with
    // count 1 they sit at the minimum, p50 and p95 fall outside, and the buckets answer instead
    expect(kernel.percentilesBySample([5, 50, 95], 1)).toBeUndefined();
    for (const count of [1, 1000, stats.count - 400_000, stats.count + 400_000]) {
      const ref = [5, 50, 95].map((p) => npPercentile(sorted, p));
      const bySample = kernel.percentilesBySample([5, 50, 95], count);
      if (bySample) expect(bySample).toEqual(ref);
      expect(kernel.percentiles([5, 50, 95], { ...stats, count })).toEqual(ref);
    }

    for (const spec of [
      { bins: 1 },
      { bins: 37 },
      { bins: 1000 },
      { edges: [-1, -0.2, 0, 0.1, 0.25, 0.5, 2] },
      { edges: [0.1, 0.3] },
    ]) {
      const h = histogramOf(kernel, spec, { min: stats.min, max: stats.max });
      const ref = npHistogram(sorted, spec);
      expect(h.edges).toEqual(ref.edges);
      expect(h.counts).toEqual(ref.counts);
    }
  }, 120_000);

  it('brackets by sample on many windows (few levels, NaN, wrong counts that crowd a bracket past its room) equal the reference', () => {
    // crowded brackets (ties, few levels, a count that misplaces them) hold ranks they should not,
    // or miss them, and must fall back
    const r = rng(7);
    let answered = 0;
    for (let t = 0; t < 60; t++) {
      const n = 4096 + Math.floor(r() * 12000);
      const levels = [2, 3, 17, 1000, 0][t % 5]!;
      const nanShare = [0, 0.3, 0.9][t % 3]!;
      const values = Float32Array.from({ length: n }, () =>
        r() < nanShare ? NaN : levels ? Math.floor(r() * levels) / levels : r() * 2 - 1,
      );
      const st = load(kernel, values);
      const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
      const few = [[5, 50, 95], [0, 100], [50], [10, 20, 80, 90], [49, 51]][t % 5]!;
      const ref = few.map((p) => npPercentile(sorted, p));
      for (const count of [st.count, Math.max(1, Math.round(st.count * r() * 2))]) {
        const bySample = kernel.percentilesBySample(few, count);
        if (bySample) {
          answered++;
          expect(bySample, `${n} ${levels} ${few} count ${count}`).toEqual(ref);
        }
        expect(kernel.percentiles(few, { ...st, count })).toEqual(ref);
      }
    }
    expect(answered).toBeGreaterThan(30);
  });

  it('brackets narrowed by interpolation (smooth, skewed, few levels, all equal, NaN, one value, p0/p100, brackets near 256 values) equal the reference', () => {
    // after the pass each bracket of over 256 values is narrowed by one-bracket passes placed by
    // linear interpolation; a skewed bracket makes the guess miss (then the ranks are selected
    // among the values it had): both must give numpy's values
    const r = rng(2323);
    const before = { ...kernel.narrowings };
    const shapes: Array<(u: number) => number> = [
      (u) => u * 2 - 1, // smooth
      (u) => u ** 12, // skewed: most values near 0, a long tail
      (u) => Math.floor(u * 3) / 3, // three levels (ties across brackets)
      () => 0.375, // all equal
      (u) => (u < 0.5 ? -Math.exp(-40 * u) : Math.exp(-40 * (1 - u))), // two sharp peaks
    ];
    const lists = [[5, 50, 95], [0, 100], [0.1, 99.9], [50], [49.9, 50, 50.1], [1, 25, 75, 99], [0, 5, 50, 95, 100]];
    for (let t = 0; t < 60; t++) {
      const n = t < 20 ? 4096 + Math.floor(r() * 6000) : 8000 + Math.floor(r() * 120_000);
      const nanShare = [0, 0.5, 0.75, 0.93][t % 4]!;
      const shape = shapes[t % shapes.length]!;
      const values = Float32Array.from({ length: n }, () => (r() < nanShare ? NaN : shape(r())));
      const st = load(kernel, values);
      const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
      for (const few of [lists[t % lists.length]!, lists[(t + 3) % lists.length]!]) {
        const ref = few.map((p) => npPercentile(sorted, p));
        const bySample = kernel.percentilesBySample(few, st.count);
        if (bySample) expect(bySample, `${n} shape ${t % shapes.length} NaN ${nanShare} ${few}`).toEqual(ref);
        expect(kernel.percentiles(few, st)).toEqual(ref);
      }
    }
    // both ways out of a narrowing were taken
    expect(kernel.narrowings.passes - before.passes).toBeGreaterThan(100);
    expect(kernel.narrowings.misses - before.misses).toBeGreaterThan(0);
    // one valid value among 8,000 NaN, and one value repeated: p0 and p100 are that value
    for (const values of [
      Float32Array.from({ length: 8000 }, (_, i) => (i === 4321 ? -0.125 : NaN)),
      Float32Array.from({ length: 9000 }, (_, i) => (i % 3 ? 0.8125 : NaN)),
    ]) {
      const st = load(kernel, values);
      const v = values.find((x) => !Number.isNaN(x))!;
      expect(kernel.percentiles([0, 5, 50, 95, 100], st)).toEqual([v, v, v, v, v]);
      const bySample = kernel.percentilesBySample([0, 50, 100], st.count);
      if (bySample) expect(bySample).toEqual([v, v, v]);
    }
  });

  it('a percentile near either end: its bracket opened to −∞ or +∞ for the pass, narrowed from the sample’s, equal to the reference', () => {
    // p ≤ about 10 (≥ 90): the first (last) bracket holds every value beyond it, and the pass
    // neither compares nor counts that end; the narrowing then starts from the sample's bracket
    type Fn = (...a: number[]) => number;
    const x = (kernel as unknown as { x: Record<string, Fn> & { memory: WebAssembly.Memory } }).x;
    const opened = { low: 0, high: 0, closed: 0 };
    (kernel as unknown as { x: unknown }).x = {
      ...x,
      bracketPack: (src: number, n: number, br: number, dst: number, k: number, countValid: number) => {
        const f32 = new Float32Array(x.memory.buffer, br, 16);
        if (f32[0] === -Infinity) opened.low++;
        if (f32[8 + k - 1] === Infinity) opened.high++;
        if (f32[0] !== -Infinity && f32[8 + k - 1] !== Infinity) opened.closed++;
        return x.bracketPack!(src, n, br, dst, k, countValid);
      },
    };
    try {
      const r = rng(515);
      const before = { ...kernel.narrowings };
      const lists = [[5, 50, 95], [1], [99.5], [0.5, 99.5], [8, 92], [2, 30, 70], [25, 75]];
      for (let t = 0; t < 42; t++) {
        const n = 6144 + Math.floor(r() * 60_000);
        const shape = [(u: number) => u * 2 - 1, (u: number) => u ** 8, (u: number) => -Math.log(1 - u)][t % 3]!;
        const values = Float32Array.from({ length: n }, () => (r() < 0.25 ? NaN : Math.fround(shape(r()))));
        const st = load(kernel, values);
        const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
        const few = lists[t % lists.length]!;
        const ref = few.map((p) => npPercentile(sorted, p));
        const bySample = kernel.percentilesBySample(few, st.count);
        expect(bySample, `${n} shape ${t % 3} ${few}`).toEqual(ref);
        expect(kernel.percentiles(few, st)).toEqual(ref);
      }
      // each way taken: open below, above, and brackets of neither (p25, p75, the narrowing)
      expect(opened.low).toBeGreaterThan(10);
      expect(opened.high).toBeGreaterThan(10);
      expect(opened.closed).toBeGreaterThan(10);
      expect(kernel.narrowings.passes - before.passes).toBeGreaterThan(40);
    } finally {
      (kernel as unknown as { x: unknown }).x = x;
    }
  });

  it('a large window whose brackets hold most values: of one value answered by the counts, else counted first, else the buckets', () => {
    // past 2^20 values the room for the split and the narrowing is bounded by 8 bytes a value: a
    // few levels over 1,100,000 values make the brackets whole levels, the union nearly the window.
    // Three levels: every rank in a bracket of one value, whose count (bracketSizes) places it: no
    // split, no selection. Four: the median's bracket spans two levels; areas of u values each
    // would take 20 bytes a value, so each bracket is counted first and the areas go back to back (4
    // bytes a value, and twice the largest bracket's for the narrowing). Two: the median lies
    // between the levels, one bracket holds the window, and the sample path declines. (A window of
    // a few levels is answered by its counts first, levelPercentiles: here the sample is said to
    // hold more values than it takes, as when a few others are among the levels)
    const r = rng(99);
    const x = (kernel as unknown as { x: Record<string, (...a: number[]) => number> }).x;
    let sized = 0;
    (kernel as unknown as { x: unknown }).x = {
      ...x,
      bracketSizes: (...a: number[]) => {
        sized++;
        return x.bracketSizes!(...a);
      },
      sampleLevels: (_p: number, _s: number, most: number) => most + 1,
    };
    try {
      for (const levels of [2, 3, 4]) {
        const values = Float32Array.from({ length: 1_100_000 }, () => Math.floor(r() * levels) / 4);
        const st = load(kernel, values);
        const sorted = Float64Array.from(values).sort();
        const ps = [5, 50, 95];
        const ref = ps.map((p) => npPercentile(sorted, p));
        const [sizedBefore, tiedBefore] = [sized, kernel.tied];
        const bySample = kernel.percentilesBySample(ps, st.count);
        expect(bySample, `${levels} levels`).toEqual(levels === 2 ? undefined : ref);
        expect(sized - sizedBefore, `${levels} levels: counted once`).toBe(levels === 2 ? 0 : 1);
        expect(kernel.tied - tiedBefore, `${levels} levels: by the counts`).toBe(levels === 3 ? 1 : 0);
        expect(kernel.percentiles(ps, st)).toEqual(ref);
      }
    } finally {
      (kernel as unknown as { x: unknown }).x = x;
    }
  });

  it('a window of a few values (1–8 levels, NaN, −0 and 0) is answered by its counts, without copying a value', () => {
    // levelPercentiles: the sample holds at most eight values, one pass counts the window's values
    // below and equal to each, the ranks that fall on them are answered. Spies tell it from the
    // brackets (bracketPack copies) and the buckets (bucketCounts)
    const r = rng(808);
    const x = (kernel as unknown as { x: Record<string, (...a: number[]) => number> }).x;
    const calls: Record<string, number> = { bracketPack: 0, bucketCounts: 0, levelCounts: 0 };
    const spied = { ...x };
    for (const name of Object.keys(calls))
      spied[name] = (...a: number[]) => {
        calls[name]!++;
        return x[name]!(...a);
      };
    (kernel as unknown as { x: unknown }).x = spied;
    const lists = [
      [5, 50, 95],
      [10, 25, 50, 75, 90],
      [0, 33.3, 100],
      [5, 10, 25, 50, 75, 90, 95],
    ];
    try {
      for (let t = 0; t < 16; t++) {
        const k = 1 + (t % 8);
        const n = t < 8 ? 300_000 + Math.floor(r() * 200_000) : 1_100_000;
        // levels of either sign, one of them zero written as −0 and 0 alike
        const levels = Array.from({ length: k }, (_, j) => (j === 0 ? 0 : (j - k / 2 - 0.25) * 0.37));
        expect(new Set(levels).size).toBe(k);
        const nanShare = [0, 0.35][t % 2]!;
        const values = Float32Array.from({ length: n }, () => {
          if (r() < nanShare) return NaN;
          const v = levels[Math.floor(r() ** 1.5 * k)]!; // unequal shares
          return v === 0 && r() < 0.5 ? -0 : v;
        });
        const st = load(kernel, values);
        const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
        for (const ps of lists) {
          const label = `${k} levels, ${n} values, NaN ${nanShare}, ${ps}`;
          const before: Record<string, number> = { ...calls, levels: kernel.levels };
          const got = kernel.percentilesBySample(ps, st.count);
          // (−0 and 0 are one value: compared as numbers)
          expect(
            got?.map((v) => v + 0),
            label,
          ).toEqual(ps.map((p) => npPercentile(sorted, p) + 0));
          expect(kernel.levels - before.levels!, label).toBe(1);
          expect(calls.levelCounts! - before.levelCounts!, label).toBe(1);
          expect(calls.bracketPack! - before.bracketPack!, label).toBe(0);
          expect(calls.bucketCounts! - before.bucketCounts!, label).toBe(0);
        }
        // a count that is not the run's: not by the counts (the brackets or the buckets, which count)
        const before = kernel.levels;
        kernel.percentilesBySample([50], st.count - 1);
        expect(kernel.levels, `${k} levels: a count not the run's`).toBe(before);
      }
      // ranks either side of where one level ends and the next begins (a quarter of the values 0.5,
      // the rest 2): the last of the first, the first of the next, and between them
      const n = 400_000;
      const values = Float32Array.from({ length: n }, (_, i) => (i % 4 === 0 ? 0.5 : 2));
      const st = load(kernel, values);
      const q = n / 4; // the first rank of 2
      const ps = [q - 1, q - 0.5, q, q + 0.5].map((rank) => (100 * rank) / (n - 1));
      const before = kernel.levels;
      const got = kernel.percentilesBySample(ps, st.count)!;
      expect(kernel.levels - before).toBe(1);
      expect(got).toEqual(ps.map((p) => npPercentile(Float64Array.from(values).sort(), p)));
      expect(got[1]).toBeCloseTo(1.25, 9);
      // nine levels: more than the sample may hold; three levels with others among them: by the
      // counts when every rank falls on a level, else by the brackets, with the same values
      const cases: Array<[string, () => number, number[], boolean]> = [
        ['nine levels', () => Math.floor(r() * 9) / 8, [5, 50, 95], false],
        [
          'three levels, 0.01 % others, ranks on levels',
          () => (r() < 1e-4 ? r() : Math.floor(r() * 3)),
          [5, 50, 95],
          true,
        ],
        ['three levels, 0.01 % others, p0 among them', () => (r() < 1e-4 ? -r() : Math.floor(r() * 3)), [0, 50], false],
      ];
      for (const [label, draw, ps, byLevels] of cases) {
        const values = Float32Array.from({ length: 600_000 }, draw);
        const st = load(kernel, values);
        const sorted = Float64Array.from(values).sort();
        const before = kernel.levels;
        const got = kernel.percentiles(ps, st);
        expect(got, label).toEqual(ps.map((p) => npPercentile(sorted, p)));
        expect(kernel.levels - before, label).toBe(byLevels ? 1 : 0);
      }
    } finally {
      (kernel as unknown as { x: unknown }).x = x;
    }
    // in the run (from 2^18 pixels, through the JIT): a sample of a few values leaves the window to
    // the counts after the run, with the run's statistics and values unchanged
    const jk = new Kernel({ jit: true });
    const plain = new Kernel({ jit: true });
    const values = Float32Array.from({ length: 700_000 }, () => (r() < 0.2 ? NaN : Math.floor(r() * 4) * 0.25));
    for (const kk of [jk, plain]) kk.prepare(values.length, [{ dtype: 'f32' }]).bands[0]!.set(values);
    const before = jk.levels;
    const got = jk.runWithPercentiles(identity, [5, 10, 25, 50, 75, 90, 95]);
    const st = plain.run(identity);
    expect(got.stats).toEqual(st);
    const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
    expect(got.percentiles).toEqual([5, 10, 25, 50, 75, 90, 95].map((p) => npPercentile(sorted, p)));
    expect(jk.levels - before).toBe(1);
    // the scalar kernel (no SIMD: the tests' and benchmarks' comparison) counts the same
    const scalar = new Kernel({ simd: false });
    const sst = load(scalar, values);
    expect(scalar.percentiles([5, 50, 95], sst)).toEqual([5, 50, 95].map((p) => npPercentile(sorted, p)));
    expect(scalar.levels).toBe(1);
  }, 120_000);

  it('percentiles in the run equal the reference and the run after it, on large windows of every shape, and say which path answered', () => {
    // Kernel.runWithPercentiles from 2^20 pixels through the JIT: the sample computed at its places
    // before the run, the brackets' pass on each chunk as it is written; it must give what run()
    // then percentiles() give. Spies tell the paths apart: in the run (neither run nor the buckets
    // called), declined before the run (run called), or after it (the buckets called).
    type Paths = { run: () => unknown; percentilesByBuckets: () => unknown };
    const jk = new Kernel({ jit: true });
    const plain = new Kernel({ jit: true });
    const k = jk as unknown as Paths;
    const r = rng(2020);
    const shapes: Array<[string, (u: number) => number, number]> = [
      ['smooth', (u) => u * 2 - 1, 0],
      ['skewed', (u) => u ** 12, 0.4],
      ['two peaks', (u) => (u < 0.5 ? -Math.exp(-40 * u) : Math.exp(-40 * (1 - u))), 0.9],
      ['three levels', (u) => Math.floor(u * 3) / 3, 0],
      ['all equal', () => 0.375, 0.4],
      ['two levels', (u) => Math.floor(u * 2) / 2, 0],
    ];
    const paths: Record<string, number> = { 'in the run': 0, 'before the run': 0, 'after the run': 0 };
    const levelsBefore = jk.levels;
    // the windows of levels once more with their sample said to hold many values (as when a few
    // others are among the levels): the brackets then place them, in the run or after it
    const x = (jk as unknown as { x: Record<string, unknown> }).x;
    const many = { ...x, sampleLevels: (_p: number, _s: number, most: number) => most + 1 };
    const levelShapes = shapes.filter(([name]) => name.includes('level') || name === 'all equal');
    for (const [name, shape, nanShare, manyValues] of [
      ...shapes.map(([a, b, c]) => [a, b, c, false] as const),
      ...levelShapes.map(([a, b, c]) => [`${a} (many values said)`, b, c, true] as const),
    ]) {
      (jk as unknown as { x: unknown }).x = manyValues ? many : x;
      const n = (1 << 20) + Math.floor(r() * 300_000);
      const values = Float32Array.from({ length: n }, () => (r() < nanShare ? NaN : shape(r())));
      const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
      for (const ps of [
        [5, 50, 95],
        [10, 25, 50, 75, 90],
        [0, 0.1, 99.9, 100],
        [1, 10, 25, 40, 55, 70, 85, 99],
      ]) {
        jk.prepare(n, [{ dtype: 'f32' }]).bands[0]!.set(values);
        // not the last run's values: the sample must read only the pixels it computed
        jk.values().fill(NaN);
        plain.prepare(n, [{ dtype: 'f32' }]).bands[0]!.set(values);
        const run = vi.spyOn(k, 'run');
        const buckets = vi.spyOn(k, 'percentilesByBuckets');
        const got = jk.runWithPercentiles(identity, ps);
        const label = `${name}, ${n} values, NaN ${nanShare}, ${ps}`;
        const path = run.mock.calls.length
          ? 'before the run'
          : buckets.mock.calls.length
            ? 'after the run'
            : 'in the run';
        paths[path]!++;
        run.mockRestore();
        buckets.mockRestore();
        const st = plain.run(identity);
        expect(got.stats, label).toEqual(st);
        expect(got.percentiles, label).toEqual(ps.map((p) => npPercentile(sorted, p)));
        expect(got.percentiles, label).toEqual(plain.percentiles(ps, st));
        // the values are the run's: the per-pixel outputs read them after (compared as bytes)
        const bytes = (v: Float32Array) => Buffer.from(v.buffer, v.byteOffset, v.byteLength);
        expect(bytes(jk.values()).equals(bytes(plain.values())), label).toBe(true);
      }
    }
    (jk as unknown as { x: unknown }).x = x;
    // the windows of levels (three, two, all equal; four lists each) are answered by their counts
    // after the run (levelPercentiles: run called, before); the smooth and peaked windows answer in
    // the run; eight ranks need more brackets than a pass takes under 2^22 values (before); two
    // levels, placed by the brackets, fill one with the window, past the room of 8 bytes a value
    // (after)
    expect(jk.levels - levelsBefore).toBe(12);
    expect(paths['in the run']).toBeGreaterThanOrEqual(8);
    expect(paths['before the run']).toBeGreaterThan(0);
    expect(paths['after the run']).toBeGreaterThan(0);
    // the three levels and the equal values: ranks in brackets of one value, placed by the counts
    expect(jk.tied).toBeGreaterThanOrEqual(4);
  }, 120_000);

  it('percentiles in the run: a masked two-band NDVI, a five-band formula, the interpreter, no value at all', () => {
    // the sample's pixels are gathered (each band, the mask) and the formula run on them as one
    // small window; that sample must be the run's values at its places (what percentilesBySample
    // draws after a run), whatever the bands' types. The reference is run() then percentiles() on
    // a second kernel over the same inputs
    const side = 1100;
    const n = side * side;
    const r = rng(77);
    const ps = [10, 25, 50, 75, 90];
    const speckled = () => Uint8Array.from({ length: n }, () => (r() < 0.7 ? 1 : 0));
    // a round field filling the window, with square clouds: runs of pixels without a value, which
    // the brackets' pass skips eight at a time, at other places in each chunk
    const field = () => {
      const m = new Uint8Array(n);
      for (let i = 0; i < n; i++) {
        const [cx, cy] = [(i % side) + 0.5 - side / 2, Math.floor(i / side) + 0.5 - side / 2];
        const cloud = (i % side) % 200 < 37 && Math.floor(i / side) % 150 < 23;
        m[i] = cx * cx + cy * cy < (0.47 * side) ** 2 && !cloud ? 1 : 0;
      }
      return m;
    };
    type D = 'u16' | 'u8' | 'i16' | 'f32';
    const cases: Array<[string, string, () => Uint8Array, D[]?]> = [
      ['NDVI with a mask', '(B08 - B04) / (B08 + B04)', speckled],
      ['NDVI over a round field with clouds', '(B08 - B04) / (B08 + B04)', field],
      ['five bands', '(B08 - B04) / (B08 + B04 + B02 * 0.5 + B03 - B11 * 0.25)', speckled],
      ['three bands of u8, i16 and f32', 'B08 * 0.01 - B04 * 0.0001 + B03', field, ['u8', 'i16', 'f32']],
      ['the interpreter (log)', 'log(B08) - B04', field],
    ];
    const draw: Record<D, () => number> = {
      u16: () => Math.floor(r() * 5000),
      u8: () => Math.floor(r() * 256),
      i16: () => Math.floor(r() * 20000) - 10000,
      f32: () => r() * 2 - 1,
    };
    const arrays = { u16: Uint16Array, u8: Uint8Array, i16: Int16Array, f32: Float32Array };
    for (const [name, formula, maskOf, types] of cases) {
      const program = compileFormula(formula);
      const dtypes = program.bands.map((_, j) => types?.[j] ?? 'u16');
      const bands = dtypes.map((d) => {
        const a = new arrays[d](n);
        for (let i = 0; i < n; i++) a[i] = draw[d]();
        return a;
      });
      const mask = maskOf();
      const loaded = () => {
        const kk = new Kernel({ jit: true });
        const prep = kk.prepare(
          n,
          dtypes.map((dtype) => ({ dtype, scale: dtype === 'f32' ? 1 : 0.0001, offset: 0 })),
          { mask: true },
        );
        for (const [j, b] of bands.entries()) prep.bands[j]!.set(b);
        prep.mask!.set(mask);
        return kk;
      };
      const jk = loaded();
      const buckets = vi.spyOn(jk as unknown as { percentilesByBuckets: () => unknown }, 'percentilesByBuckets');
      // the sample as computed before the run (compactValid keeps the gathered window's values)
      type X = Record<string, (...a: number[]) => number> & { memory: WebAssembly.Memory };
      const x = (jk as unknown as { x: X }).x;
      let sample: Float32Array | undefined;
      let s0 = 0;
      (jk as unknown as { x: unknown }).x = {
        ...x,
        compactValid: (src: number, len: number, dst: number) => {
          const s = x.compactValid!(src, len, dst);
          sample = new Float32Array(x.memory.buffer, dst, s).slice();
          s0 = len;
          return s;
        },
      };
      const got = jk.runWithPercentiles(program, ps);
      (jk as unknown as { x: unknown }).x = x;
      // answered in the run (the counts below each bracket right), not left to the buckets
      expect(buckets, name).not.toHaveBeenCalled();
      if (name.includes('interpreter')) expect(sample, name).toBeUndefined();
      else {
        // the run's values at the sample's places, drawn as percentilesBySample draws them
        const tmp = x.memory.buffer.byteLength;
        x.memory.grow(Math.ceil((s0 * 4 + 64) / 65536));
        const s = x.sampleValid!(jk.values().byteOffset, n, s0, (0x9e3779b9 ^ n) | 0, tmp);
        expect(s0, name).toBeGreaterThan(512);
        expect(Array.from(sample!), name).toEqual(Array.from(new Float32Array(x.memory.buffer, tmp, s)));
      }
      const plain = loaded();
      const stats = plain.run(program);
      const want = { stats, percentiles: plain.percentiles(ps, stats) };
      const sorted = Float64Array.from(plain.values().filter((v) => !Number.isNaN(v))).sort();
      expect(want.percentiles, name).toEqual(ps.map((p) => npPercentile(sorted, p)));
      expect(got, name).toEqual(want);
    }
    // every pixel masked: no value, no percentile
    const jk = new Kernel({ jit: true });
    const prep = jk.prepare(n, [{ dtype: 'f32' }], { mask: true });
    prep.bands[0]!.fill(0.5);
    prep.mask!.fill(0);
    const none = jk.runWithPercentiles(identity, [5, 50, 95]);
    expect(none.stats.count).toBe(0);
    expect(none.percentiles).toBeNull();
    // a program that reads two bands on one prepared: run's error, and the JIT still on after it
    expect(() => jk.runWithPercentiles(compileFormula('B08 - B04'), [50])).toThrow('program reads 2 bands, 1 prepared');
    expect((jk as unknown as { jitFailed: boolean }).jitFailed).toBe(false);
  }, 60_000);

  it('windows of a small field take the quickselect under 512 values, the buckets up to 6,144, then the sample; all equal the reference', () => {
    // the path each size takes with the run's statistics (a spy on each), and the values exactly,
    // over smooth, skewed, few-level, all-equal and two-peak values with NaN, from 1 to 9,000 values
    type Paths = { percentilesByBuckets: () => unknown; percentilesBySample: () => unknown };
    const k = kernel as unknown as Paths;
    const r = rng(512);
    const shapes: Array<(u: number) => number> = [
      (u) => u * 2 - 1,
      (u) => u ** 12,
      (u) => Math.floor(u * 3) / 3,
      () => -0.0625,
      (u) => (u < 0.5 ? -Math.exp(-40 * u) : Math.exp(-40 * (1 - u))),
    ];
    const lists = [[10, 25, 50, 75, 90], [5, 50, 95], [0, 100], [50], [0.1, 33.3, 99.9]];
    const sizes = [1, 2, 7, 100, 511, 512, 513, 777, 1600, 2049, 4095, 4096, 6143, 6144, 9000];
    for (const [t, n] of sizes.entries()) {
      const nanShare = [0, 0.3, 0.9][t % 3]!;
      const shape = shapes[t % shapes.length]!;
      const values = Float32Array.from({ length: n }, () => (r() < nanShare ? NaN : shape(r())));
      const st = load(kernel, values);
      if (st.count === 0) continue;
      const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
      for (const ps of [lists[t % lists.length]!, lists[(t + 2) % lists.length]!]) {
        const buckets = vi.spyOn(k, 'percentilesByBuckets');
        const sample = vi.spyOn(k, 'percentilesBySample');
        const got = kernel.percentiles(ps, st);
        expect(got, `${n} values, NaN ${nanShare}, ${ps}`).toEqual(ps.map((p) => npPercentile(sorted, p)));
        expect(sample.mock.calls.length, `${n}: sample`).toBe(n >= 6144 ? 1 : 0);
        expect(buckets.mock.calls.length > 0 || sample.mock.calls.length > 0, `${n}: quickselect`).toBe(n >= 512);
        buckets.mockRestore();
        sample.mockRestore();
      }
    }
  });

  it('bracketPack, bracketSizes and bracketSplit equal a reference written here (NaN, ±∞, ties, one to eight brackets, open ends, tails of 1–3 values)', () => {
    // the branchless copy: each group of four lanes moved to the front by a swizzle and stored whole
    // (the SIMD kernel and the scalar one: the scalar loop takes open ends as any others)
    type Fn = (...a: number[]) => number;
    for (const kk of [kernel, new Kernel({ simd: false })]) {
      const x = (kk as unknown as { x: Record<string, Fn> & { memory: WebAssembly.Memory } }).x;
      const r = rng(4242);
      for (let t = 0; t < 200; t++) {
        const n = 1 + Math.floor(r() * 3000);
        const levels = [0, 5, 64][t % 3]!;
        const values = Float32Array.from({ length: n }, () =>
          r() < 0.2 ? NaN : levels ? Math.floor(r() * levels) / levels : r() * 2 - 1,
        );
        // infinities (bracketPack takes any f32), which only a bracket open that way holds
        if (t % 7 === 3) for (let i = 0; i < n; i += 97) values[i] = i % 2 ? Infinity : -Infinity;
        load(kk, values);
        for (let i = 0; i < n; i += 97) if (t % 7 === 3) kk.values()[i] = values[i]!;
        const k = 1 + (t % 8);
        // k disjoint ascending brackets from sorted random ends (a bracket may be one value wide)
        // (or, every other window, distinct values of the window, as a sample's are: values on an end
        // belong inside)
        const distinct = [...new Set(values.filter((v) => Number.isFinite(v)))];
        const ends =
          Math.floor(t / 32) % 2 && distinct.length >= 2 * k
            ? distinct
                .map((v) => [r(), v] as const)
                .sort((a, b) => a[0] - b[0])
                .slice(0, 2 * k)
                .map(([, v]) => v)
                .sort((a, b) => a - b)
            : Array.from({ length: 2 * k }, () => Math.fround(r() * 2.2 - 1.1)).sort((a, b) => a - b);
        const lo = ends.filter((_, i) => i % 2 === 0);
        const hi = ends.filter((_, i) => i % 2 === 1);
        if (t % 5 === 0) hi[0] = lo[0]!;
        // open ends (the tails: bracketPack's variants that neither compare nor count them): the
        // first bracket from −∞, the last to +∞, or both (one bracket of both: every non-NaN value)
        const open = Math.floor(t / 8) % 4;
        if (open & 1) lo[0] = -Infinity;
        if (open & 2) hi[k - 1] = Infinity;
        const values2 = kk.values();
        const src = values2.byteOffset;
        // the test's own memory past the kernel's: the block, the union, then the split
        const br = x.memory.buffer.byteLength;
        x.memory.grow(2);
        const dst = br + 256;
        const f32 = new Float32Array(x.memory.buffer);
        const i32 = new Int32Array(x.memory.buffer);
        const ref = values.filter((v) => lo.some((l, j) => v >= l && v <= hi[j]!));
        for (const countValid of [0, 1]) {
          for (let j = 0; j < 8; j++) {
            f32[(br >> 2) + j] = j < k ? lo[j]! : NaN;
            f32[(br >> 2) + 8 + j] = j < k ? hi[j]! : NaN;
          }
          i32[(br >> 2) + 24] = -7;
          const u = x.bracketPack!(src, n, br, dst, k, countValid);
          expect(u).toBe(ref.length);
          expect(Array.from(new Float32Array(x.memory.buffer, dst, u))).toEqual(Array.from(ref));
          for (let j = 0; j < k; j++) expect(i32[(br >> 2) + 16 + j]).toBe(values.filter((v) => v < lo[j]!).length);
          expect(i32[(br >> 2) + 24]).toBe(countValid ? values.filter((v) => !Number.isNaN(v)).length : -7);
        }
        if (k === 1) continue;
        const u = ref.length;
        const want = lo.map((l, j) => ref.filter((v) => v >= l && v <= hi[j]!));
        // bracketSizes: each bracket's count, as the split will place them
        i32.fill(-1, (br >> 2) + 25, (br >> 2) + 33);
        x.bracketSizes!(dst, u, br, k);
        for (let j = 0; j < 8; j++) expect(i32[(br >> 2) + 25 + j], `size ${j} of ${k}`).toBe(want[j]?.length ?? 0);
        // the split into areas of u values each, then back to back by those sizes (the starts in the block)
        const stride = (u * 4 + 16 + 15) & ~15;
        const out = dst + stride + 16;
        const exact: number[] = [];
        for (let j = 0, at = 0; j < k; j++) {
          exact.push(at);
          at += (want[j]!.length * 4 + 16 + 15) & ~15;
        }
        for (const starts of [want.map((_, j) => j * stride), exact]) {
          for (let j = 0; j < k; j++) i32[(br >> 2) + 33 + j] = starts[j]!;
          x.bracketSplit!(dst, u, br, out, k);
          for (let j = 0; j < k; j++) {
            expect(i32[(br >> 2) + 25 + j], `bracket ${j} of ${k}`).toBe(want[j]!.length);
            const got = new Float32Array(x.memory.buffer, out + starts[j]!, want[j]!.length);
            expect(Array.from(got)).toEqual(Array.from(want[j]!));
          }
        }
      }
    }
  });

  it('histogram bins at their edges: values on and one float either side of each edge, as searchsorted puts them', () => {
    // the kernel takes a value's bin from the step, then checks it against the float64 edges
    // either side; values at an edge, or one f32 step away, are where the step alone goes wrong
    const r = rng(88);
    const f32 = new Float32Array(1);
    const u32 = new Uint32Array(f32.buffer);
    const step = (x: number, d: number) => {
      f32[0] = x;
      u32[0]! += x >= 0 ? d : -d;
      return f32[0]!;
    };
    let checked = 0;
    for (let t = 0; t < 200; t++) {
      const lo = Math.fround(r() * 2 - 1);
      const hi = Math.fround(lo + 0.001 + r() * 2);
      const bins = 1 + Math.floor(r() * 60);
      const explicit = t % 4 === 3 ? [lo, Math.fround((lo + hi) / 2), hi] : null;
      const spec = explicit ? { edges: explicit } : { bins };
      const w = (hi - lo) / bins;
      const edges = explicit ?? Array.from({ length: bins + 1 }, (_, i) => i * w + lo);
      const values: number[] = [lo, hi];
      for (const e of edges) for (const d of [-2, -1, 0, 1, 2]) values.push(step(Math.fround(e), d));
      const v = Float32Array.from(values.filter((x) => x >= lo && x <= hi));
      load(kernel, v);
      const got = histogramOf(kernel, spec, { min: lo, max: hi });
      const want = npHistogram(Float64Array.from(v), explicit ? { edges: explicit } : { edges: got.edges });
      expect(got.counts, `${lo} ${hi} ${bins}`).toEqual(want.counts);
      checked++;
    }
    expect(checked).toBe(200);
  });

  it('oneValue, and the buckets of ties it spares a selection', () => {
    type Fn = (...a: number[]) => number;
    const x = (kernel as unknown as { x: Record<string, Fn> & { memory: WebAssembly.Memory } }).x;
    const at = x.memory.buffer.byteLength;
    x.memory.grow(1);
    const f32 = new Float32Array(x.memory.buffer, at, 64);
    for (let len = 1; len <= 40; len++) {
      f32.fill(0.375, 0, len);
      expect(x.oneValue!(at, 0, len - 1), `${len} equal`).toBe(1);
      for (let q = 0; q < len; q++) {
        f32[q] = q % 2 ? 0.5 : NaN;
        expect(x.oneValue!(at, 0, len - 1), `${len}, another at ${q}`).toBe(len === 1 ? 1 : 0);
        f32[q] = 0.375;
      }
    }
    f32.set([0, -0, 0, -0, 0]);
    expect(x.oneValue!(at, 0, 4)).toBe(1);
    // the buckets of [min, max] on 1,100,000 values: half 0.25, half 0.75, and 1 % just above 0.25
    // (in 0.25's bucket): that bucket holds two values and is selected in, the other not at all
    const r = rng(12);
    const values = Float32Array.from({ length: 1_100_000 }, () => {
      const u = r();
      return u < 0.49 ? 0.25 : u < 0.5 ? 0.25 + Math.fround(r() * 1e-6) : 0.75;
    });
    const st = load(kernel, values);
    const sorted = Float64Array.from(values).sort();
    const ps = [1, 25, 49.5, 50, 50.5, 75, 99];
    const byBuckets = (
      kernel as unknown as { percentilesByBuckets: (p: number[], lo: number, hi: number) => number[] }
    ).percentilesByBuckets(ps, st.min, st.max);
    expect(byBuckets).toEqual(ps.map((p) => npPercentile(sorted, p)));
  });

  it("order statistics (median, p10–p90) with the run's statistics equal numpy's linear percentiles exactly", () => {
    // every zonal request reads them: with the run's statistics they take the sample or the bucket
    // path (5 ranks: mostly the buckets), without them a quickselect over all values
    const r = rng(11);
    const cases: Array<[string, number, () => number]> = [
      ['100 values (quickselect)', 100, () => r()],
      ['10,000 smooth', 10_000, () => r() * r()],
      ['10,000 with NaN and ties', 10_000, () => (r() < 0.3 ? NaN : Math.round(r() * 40) / 40)],
      ['100,000 skewed', 100_000, () => (r() < 0.05 ? NaN : r() ** 3 * 2 - 1)],
      ['1,000,000 few levels', 1_000_000, () => Math.floor(r() * 7) / 7],
      ['4,096 all equal', 4096, () => 0.25],
    ];
    for (const [name, n, next] of cases) {
      const values = Float32Array.from({ length: n }, next);
      const stats = load(kernel, values);
      const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
      const want = [10, 25, 50, 75, 90].map((p) => npPercentile(sorted, p));
      const spy = vi.spyOn(kernel, 'percentiles');
      const o = kernel.orderStats(stats)!;
      expect(spy, name).toHaveBeenCalledWith([10, 25, 50, 75, 90], stats);
      spy.mockRestore();
      expect([o.p10, o.p25, o.median, o.p75, o.p90], name).toEqual(want);
      const plain = kernel.orderStats()!;
      expect([plain.p10, plain.p25, plain.median, plain.p75, plain.p90], `${name} (no statistics)`).toEqual(want);
    }
    load(kernel, new Float32Array([NaN, NaN]));
    expect(kernel.orderStats({ min: NaN, max: NaN, count: 0 })).toBeNull();
  }, 60_000);

  it('small sets: one value, two values, all equal, all NaN; order of the list kept', () => {
    const cases: number[][] = [[0.25], [1, 2], [3, 3, 3, 3], [5, NaN, 1, NaN, 3, 2, 4], [-1, 1e-8, 7, 7, 7, 0.5]];
    for (const c of cases) {
      load(kernel, Float32Array.from(c));
      const sorted = Float64Array.from(Float32Array.from(c).filter((v) => !Number.isNaN(v))).sort();
      const ps = [100, 0, 50, 12.5, 99, 1];
      expect(kernel.percentiles(ps)).toEqual(ps.map((p) => npPercentile(sorted, p)));
      // buckets (5,000 values): the same set repeated, shuffled, with the run's min and max
      const big = Float32Array.from({ length: 5000 }, (_, i) => c[(i * 7919) % c.length]!);
      const st = load(kernel, big);
      const bigSorted = Float64Array.from(big.filter((v) => !Number.isNaN(v))).sort();
      expect(kernel.percentiles(ps, st)).toEqual(ps.map((p) => npPercentile(bigSorted, p)));
      // by sample where it answers (every value in one bracket, ties, NaN), and by buckets
      for (const few of [[50], [0, 100], [1, 12.5, 99]]) {
        const bySample = kernel.percentilesBySample(few, st.count);
        if (bySample) expect(bySample).toEqual(few.map((p) => npPercentile(bigSorted, p)));
        expect(kernel.percentiles(few, st)).toEqual(few.map((p) => npPercentile(bigSorted, p)));
        expect(kernel.percentiles(few, { min: st.min, max: st.max })).toEqual(
          few.map((p) => npPercentile(bigSorted, p)),
        );
      }
      load(kernel, Float32Array.from(c));
      const spec = { bins: 4 };
      const range = sorted.length ? { min: sorted[0]!, max: sorted[sorted.length - 1]! } : null;
      expect(histogramOf(kernel, spec, range)).toEqual(npHistogram(sorted, spec));
    }
    load(kernel, Float32Array.from([NaN, NaN]));
    expect(kernel.percentiles([50])).toBeNull();
    expect(histogramOf(kernel, { bins: 2 }, null)).toEqual({ edges: [0, 0.5, 1], counts: [0, 0] });
  });
});
