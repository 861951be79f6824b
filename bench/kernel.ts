/**
 * Kernel throughput in megapixels per second for NDVI, EVI and a custom formula of 15 operations
 * on 10,000 (one 100 ha field) and 10,000,000 pixels: the WASM SIMD kernel through the compiled-
 * formula path the service uses (values and statistics, values only, statistics only; the per-formula
 * JIT and, beside it, the bytecode interpreter with KERNEL_JIT=0), the same
 * kernel built without SIMD, and a straightforward TypeScript loop; for NDVI also the C loops of
 * bench/c/ndvi.c (checked, plain, fused with statistics, and fused vectorised by hand on 128 and
 * 256 bits) built twice, with gcc -O3 and with -O3 -march=native. Then every target of issue 3
 * with PASS or MISS, against each C build.
 *
 * The machine is shared: every variant of a row is measured in interleaved rounds (one tinybench
 * run of all variants per round) and each keeps its best round's median, as the C program keeps
 * its best repetition. Read the ratios, which come from one run.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { Bench } from 'tinybench';
import { compileFormula } from '../src/compute/formula.js';
import { Kernel, ORDER_PS } from '../src/compute/kernel-host.js';
import { weightedPercentiles, weightedPercentilesBySelection, weightedStats } from '../src/compute/zonal.js';
import { coverageFractions, type Ring } from '../src/imagery/coverage-fraction.js';
import { packageRoot } from '../src/platform/paths.js';

const FORMULAS = {
  NDVI: '(B08 - B04) / (B08 + B04)',
  EVI: '2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)',
  custom: 'sqrt(abs((B08 - B04) * (B08 + B03) / (B11 + 0.5))) - min(B02, B04) * 2 + max(B08 / (B03 + 0.1), B11) * 0.25',
} as const;
type Name = keyof typeof FORMULAS;

// Straightforward TypeScript loops over the same inputs and semantics (DN 0 no-data, x/0 NaN).
const tsLoops: Record<Name, (b: Record<string, Uint16Array>, out: Float32Array) => void> = {
  NDVI: ({ B04, B08 }, out) => {
    for (let i = 0; i < out.length; i++) {
      const r = B04![i]!,
        n = B08![i]!;
      const x = n * 0.0001,
        y = r * 0.0001,
        s = x + y;
      out[i] = r === 0 || n === 0 || s === 0 ? NaN : (x - y) / s;
    }
  },
  EVI: ({ B02, B04, B08 }, out) => {
    for (let i = 0; i < out.length; i++) {
      const b = B02![i]!,
        r = B04![i]!,
        n = B08![i]!;
      const d = n * 0.0001 + 6 * r * 0.0001 - 7.5 * b * 0.0001 + 1;
      out[i] = b === 0 || r === 0 || n === 0 || d === 0 ? NaN : (2.5 * (n * 0.0001 - r * 0.0001)) / d;
    }
  },
  custom: ({ B02, B03, B04, B08, B11 }, out) => {
    for (let i = 0; i < out.length; i++) {
      const b2 = B02![i]! * 0.0001,
        b3 = B03![i]! * 0.0001,
        b4 = B04![i]! * 0.0001,
        b8 = B08![i]! * 0.0001,
        b11 = B11![i]! * 0.0001;
      if (b2 === 0 || b3 === 0 || b4 === 0 || b8 === 0 || b11 === 0) {
        out[i] = NaN;
        continue;
      }
      out[i] =
        Math.sqrt(Math.abs(((b8 - b4) * (b8 + b3)) / (b11 + 0.5))) -
        Math.min(b2, b4) * 2 +
        Math.max(b8 / (b3 + 0.1), b11) * 0.25;
    }
  },
};

function synthetic(n: number, band: string): Uint16Array {
  const seed = band.charCodeAt(1) * 31 + band.charCodeAt(2);
  const a = new Uint16Array(n);
  for (let i = 0; i < n; i++) a[i] = 300 + ((i * (7 + seed)) % 4000);
  return a;
}

interface CFigures {
  checked: number;
  plain: number;
  fused: number;
  /** The fused loop vectorised by hand (the JIT's algorithm) on 128-bit and 256-bit vectors (0: no AVX2). */
  simd128: number;
  simd256: number;
}

/** The two builds of bench/c/ndvi.c: "-O3" as the issue names it (x86-64 baseline, SSE2) and with -march=native. */
const C_BUILDS = { o3: ['-O3'], native: ['-O3', '-march=native'] } as const;
type CBuild = keyof typeof C_BUILDS;
const C_LABEL: Record<CBuild, string> = { o3: 'gcc -O3', native: 'gcc -O3 -march=native' };

function cReference(n: number, build: CBuild): CFigures | null {
  const exe = path.join(packageRoot, 'dist', 'bench', `ndvi-${build}`);
  try {
    if (!existsSync(exe) || statSync(exe).mtimeMs < statSync(path.join(packageRoot, 'bench', 'c', 'ndvi.c')).mtimeMs) {
      mkdirSync(path.dirname(exe), { recursive: true });
      execFileSync('gcc', [...C_BUILDS[build], '-o', exe, path.join(packageRoot, 'bench', 'c', 'ndvi.c'), '-lm'], {
        stdio: 'ignore',
      });
    }
    const ms = execFileSync(exe, [String(n)], { encoding: 'utf8' })
      .trim()
      .split(' ')
      .slice(1, 6)
      .map(Number);
    const mpxs = (x: number) => (x > 0 ? n / x / 1000 : 0);
    const [checked, plain, fused, simd128, simd256] = ms.map(mpxs) as [number, number, number, number, number];
    return { checked, plain, fused, simd128, simd256 };
  } catch {
    return null;
  }
}

/** Each loop's better figure of two runs. */
const bestOf = (a: CFigures | null, b: CFigures | null): CFigures | null =>
  !a || !b
    ? (a ?? b)
    : (Object.fromEntries(
        Object.entries(a).map(([k, v]) => [k, Math.max(v, b[k as keyof CFigures])]),
      ) as unknown as CFigures);

/**
 * Mpx/s of each variant: interleaved rounds, the best round's median per variant. `perRound` runs
 * once a round too (the C program, so that it sees the same load as the kernel).
 */
async function measure(
  n: number,
  variants: Record<string, () => void>,
  perRound?: () => void,
): Promise<Record<string, number>> {
  const big = n > 1e6;
  const reps = big ? 1 : Math.max(1, Math.round(200_000 / n)); // calls per sample, so a sample is ≥ ~0.1 ms
  const rounds = big ? 4 : 6;
  const best: Record<string, number> = {};
  for (let r = 0; r < rounds; r++) {
    const bench = new Bench({
      time: big ? 150 : 60,
      warmupTime: r === 0 ? (big ? 100 : 60) : 0,
      warmupIterations: r === 0 ? 5 : 0,
      iterations: big ? 3 : 10,
    });
    for (const [label, fn] of Object.entries(variants)) {
      bench.add(label, () => {
        for (let i = 0; i < reps; i++) fn();
      });
    }
    await bench.run();
    perRound?.();
    for (const t of bench.tasks) {
      const res = t.result as unknown as { latency: { p50: number } };
      const mpxs = (n * reps) / res.latency.p50 / 1000;
      best[t.name] = Math.max(best[t.name] ?? 0, mpxs);
    }
  }
  return best;
}

const f0 = (x: number | undefined) => (x === undefined ? '' : x.toFixed(0));

/**
 * CPU time (user + system, process.cpuUsage) per call of each variant, best of interleaved rounds
 * of about 50 ms each: a measure the other processes on a shared machine disturb less than wall time.
 */
function cpuPerCall(variants: Record<string, () => void>, calls: number, rounds = 5): Record<string, number> {
  const best: Record<string, number> = {};
  for (let r = 0; r < rounds; r++)
    for (const [label, fn] of Object.entries(variants)) {
      const t0 = process.cpuUsage();
      for (let i = 0; i < calls; i++) fn();
      const d = process.cpuUsage(t0);
      best[label] = Math.min(best[label] ?? Infinity, (d.user + d.system) / calls);
    }
  return best;
}
const f2 = (x: number) => x.toFixed(2);
/** CPU µs: one decimal under 100. */
const us = (x: number) => (x < 100 ? x.toFixed(1) : x.toFixed(0));

/**
 * Where the CPU time of the percentile path goes (Kernel.percentilesBySample on the run's values):
 * prefix timings, each call cut by an exception at the first kernel call of the next phase (the
 * cut's own cost measured and taken out). Phases: drawing the sample (and placing its brackets'
 * ranks), selecting the brackets' ends in it, the pass over the window (bracketPack and
 * bracketSplit), narrowing the brackets and selecting the ranks.
 */
function percentileBreakdown(k: Kernel, ps: number[], count: number, calls: number): Record<string, number> {
  type Fn = (...a: number[]) => number;
  const holder = k as unknown as { x: Record<string, Fn> };
  const x = holder.x;
  const cut = new Error('cut');
  let stage = 99;
  let passed = false;
  const proxy: Record<string, Fn> = { ...x };
  // the pass over the window is the call's first bracketPack (bracketSplit, when it follows,
  // belongs to it); later bracketPack calls narrow
  const wrap = (name: string, stopAt: number) => {
    const fn = x[name]!;
    const pass = name === 'bracketPack';
    proxy[name] = (...a: number[]) => {
      if (pass && !passed) {
        if (stage === 2) throw cut;
        const r = fn(...a);
        passed = true;
        return r;
      }
      if (stage === stopAt || (stage === 3 && passed)) throw cut;
      return fn(...a);
    };
  };
  wrap('sampleValid', 0);
  wrap('selectFR', 1);
  wrap('bracketPack', -1);
  wrap('minOf', -1);
  const upTo = (s: number) => () => {
    stage = s;
    passed = false;
    try {
      k.percentilesBySample(ps, count);
    } catch (e) {
      if (e !== cut) throw e;
    }
  };
  holder.x = proxy;
  try {
    const t = cpuPerCall(
      { c0: upTo(0), c1: upTo(1), c2: upTo(2), c3: upTo(3), all: upTo(99) },
      calls,
      calls > 100 ? 30 : 5,
    );
    return {
      sample: t.c1! - t.c0!,
      'ends in the sample': t.c2! - t.c1!,
      'pass over the window': t.c3! - t.c2!,
      'narrowing + selection': t.all! - t.c3!,
      total: t.all! - t.c0!,
    };
  } finally {
    holder.x = x;
  }
}

/**
 * A window of about n pixels (a square) holding a round field (a 64-gon filling it), NDVI's bands
 * loaded: one kernel masked to the pixel centres inside, one to every pixel touched, and the
 * coverage weights with the edge pixels (0 < w < 1).
 */
function roundField(
  program: ReturnType<typeof compileFormula>,
  n: number,
): { m: number; weights: Float64Array; partial: Int32Array; kc: Kernel; kt: Kernel } {
  const side = Math.round(Math.sqrt(n));
  const m = side * side;
  const c = side / 2;
  const ring: Ring = [];
  for (let a = 0; a <= 64; a++) {
    const t = (2 * Math.PI * (a % 64)) / 64;
    ring.push([c + 0.47 * side * Math.cos(t), c + 0.47 * side * Math.sin(t)]);
  }
  const weights = coverageFractions([[ring]], side, side);
  const touched = new Uint8Array(m);
  const centre = new Uint8Array(m);
  const edge: number[] = [];
  for (let i = 0; i < m; i++) {
    touched[i] = weights[i]! > 0 ? 1 : 0;
    if (weights[i]! > 0 && weights[i]! < 1) edge.push(i);
  }
  // pixel centres inside the 64-gon (even-odd ray cast, once)
  for (let j = 0; j < side; j++)
    for (let i = 0; i < side; i++) {
      const x = i + 0.5;
      const y = j + 0.5;
      let inside = false;
      for (let e = 0; e + 1 < ring.length; e++) {
        const [x1, y1] = ring[e]!;
        const [x2, y2] = ring[e + 1]!;
        if (y1 > y !== y2 > y && x < x1 + ((y - y1) * (x2 - x1)) / (y2 - y1)) inside = !inside;
      }
      centre[j * side + i] = inside ? 1 : 0;
    }
  const partial = Int32Array.from(edge);
  const inputs = program.bands.map((b) => synthetic(m, b));
  // one kernel holds the centres' mask, one the touched pixels' (the inputs are loaded outside the timing)
  const kc = new Kernel({ simd: true, jit: true });
  const kt = new Kernel({ simd: true, jit: true });
  for (const [kk, mask] of [
    [kc, centre],
    [kt, touched],
  ] as const) {
    const prep = kk.prepare(
      m,
      program.bands.map(() => ({ dtype: 'u16' as const, scale: 0.0001, offset: 0 })),
      { mask: true },
    );
    for (const [j, b] of inputs.entries()) prep.bands[j]!.set(b);
    prep.mask!.set(mask);
  }
  return { m, weights, partial, kc, kt };
}

/**
 * The median and p10–p90 that every zonal request reads, CPU µs a call: a quickselect over all
 * the values (orderStats without the run's statistics, as before `orderStats(stats)`) against the
 * service's call (Kernel.runWithPercentiles: the paths of percentiles with the run's statistics,
 * and from 2^20 pixels the brackets' pass in the run).
 */
function orderRow(kc: Kernel, program: ReturnType<typeof compileFormula>, m: number): Record<string, string> {
  const large = m > 1e6;
  const oc = cpuPerCall(
    {
      fused: () => kc.run(program),
      quickselect: () => {
        kc.run(program);
        kc.orderStats();
      },
      // the service's call: in the run from 2^20 pixels, else run() then orderStats(stats)
      'with the statistics': () => kc.runWithPercentiles(program, ORDER_PS),
    },
    large ? 2 : 1000,
    large ? 3 : 30,
  );
  const beyond = (x: number) => us(x - oc.fused!);
  return {
    pixels: m.toLocaleString('en'),
    'fused (CPU µs)': us(oc.fused!),
    'quickselect, µs beyond': beyond(oc.quickselect!),
    'with the statistics, µs beyond': beyond(oc['with the statistics']!),
    'speed-up of the whole call': `${f2(oc.quickselect! / oc['with the statistics']!)}×`,
  };
}

/**
 * The order statistics of a weighted zonal request (weighting=coverage: exactextract's weighted
 * quantiles, median and p10–p90), CPU µs beyond the weighted statistics (the run over the touched
 * pixels and weightedStats): by sorting the window's values (weightedPercentiles, the worker
 * before) against by selection around each percentile's place (weightedPercentilesBySelection, the
 * worker's call); the unweighted order statistics beside them.
 */
function weightedOrderRow(
  kc: Kernel,
  kt: Kernel,
  weights: Float64Array,
  partial: Int32Array,
  program: ReturnType<typeof compileFormula>,
  m: number,
): Record<string, string> {
  const large = m > 4e6;
  const c = cpuPerCall(
    {
      weighted: () => weightedStats(kt.run(program), kt.values(), weights, partial),
      'by the sort': () => {
        weightedStats(kt.run(program), kt.values(), weights, partial);
        weightedPercentiles(kt.values(), weights, ORDER_PS);
      },
      'by selection': () => weightedOrder(kt, program, weights, partial, true),
      fused: () => kc.run(program),
      unweighted: () => kc.runWithPercentiles(program, ORDER_PS),
    },
    large ? 1 : Math.max(1, Math.round(2e5 / m)),
    large ? 2 : 10,
  );
  return {
    pixels: m.toLocaleString('en'),
    'weighted statistics (CPU µs)': us(c.weighted!),
    'by the sort, µs beyond': us(c['by the sort']! - c.weighted!),
    'by selection, µs beyond': us(c['by selection']! - c.weighted!),
    'speed-up of the whole call': `${f2(c['by the sort']! / c['by selection']!)}×`,
    'unweighted, µs beyond the fused pass': us(c.unweighted! - c.fused!),
  };
}

/**
 * n values sorted as rankWindows sorts a window: copied out of the kernel's memory and sorted by
 * Float32Array.prototype.sort (before), against sorted there by the kernel's sortF32 (an LSD radix
 * of the values' order keys) and copied out. Random values of either sign, a tenth of them ties.
 */
function sortRow(n: number): Record<string, string> {
  const k = new Kernel({ simd: true, jit: true });
  const x = (
    k as unknown as {
      x: { memory: WebAssembly.Memory; dataBase(): number; sortF32(p: number, n: number, t: number): void };
    }
  ).x;
  const p = x.dataBase();
  const need = p + 8 * n + 64 - x.memory.buffer.byteLength;
  if (need > 0) x.memory.grow(Math.ceil(need / 65536));
  // (a fixed, irregular sequence: the golden ratio's multiples, a tenth of them one value)
  const values = Float32Array.from({ length: n }, (_, i) => (i % 10 === 3 ? 0.5 : ((i * 0.6180339887) % 1) - 0.3));
  const F = new Float32Array(x.memory.buffer, p, n);
  const c = cpuPerCall(
    {
      'typed array': () => {
        F.set(values);
        F.slice().sort();
      },
      sortF32: () => {
        F.set(values);
        x.sortF32(p, n, p + 4 * n + 16);
        F.slice();
      },
    },
    Math.max(10, Math.round(1e6 / n)),
    15,
  );
  return {
    values: n.toLocaleString('en'),
    'typed array sort (CPU µs)': us(c['typed array']!),
    'sortF32 (CPU µs)': us(c.sortF32!),
    'speed-up': `${f2(c['typed array']! / c.sortF32!)}×`,
  };
}

/**
 * A zonal request that asks for percentiles too (GET …/indices?zonal_stats=true&percentiles=5,50,95),
 * CPU µs beyond the fused pass: the order statistics placed in the run, then the percentiles asked
 * after it (the worker before), against both lists as one (compute-worker statsOn: ranks 5, 10,
 * 25, 50, 75, 90, 95 in one call: the buckets under 2^22 values, seven brackets in the run from
 * there).
 */
function bothRow(kc: Kernel, program: ReturnType<typeof compileFormula>, m: number): Record<string, string> {
  const large = m > 4e6;
  const ps = [5, 50, 95];
  const union = [5, 10, 25, 50, 75, 90, 95];
  const c = cpuPerCall(
    {
      fused: () => kc.run(program),
      'one after the other': () => {
        const { stats } = kc.runWithPercentiles(program, ORDER_PS);
        kc.percentiles(ps, stats);
      },
      'one list': () => kc.runWithPercentiles(program, union),
    },
    large ? 2 : Math.max(2, Math.round(2e6 / m)),
    large ? 3 : 15,
  );
  return {
    pixels: m.toLocaleString('en'),
    'fused (CPU µs)': us(c.fused!),
    'one after the other': us(c['one after the other']! - c.fused!),
    'one list': us(c['one list']! - c.fused!),
    'speed-up of the whole call': `${f2(c['one after the other']! / c['one list']!)}×`,
  };
}

/**
 * Percentiles 5, 50, 95 after the run (run() then percentiles() with its statistics: the brackets'
 * pass reads the whole window's values again) against in it (runWithPercentiles from 2^20 pixels:
 * the pass on each chunk as the run writes it), CPU µs beyond the fused pass; a second kernel's run
 * between calls, as the other variants of the statistics rows run between them. Below 2^20 pixels
 * runWithPercentiles takes the first path: the rows under it show why.
 */
function inRunRow(
  program: ReturnType<typeof compileFormula>,
  n: number,
  given?: { kc: Kernel; kt: Kernel },
): Record<string, string> {
  const { m, kc, kt } = given ? { m: n, ...given } : roundField(program, n);
  const ps = [5, 50, 95];
  const large = m > 4e6;
  const c = cpuPerCall(
    {
      fused: () => kc.run(program),
      after: () => kc.percentiles(ps, kc.run(program)),
      'in the run': () => kc.runWithPercentiles(program, ps, { inRun: true }),
      'other kernel': () => kt.run(program),
    },
    large ? 2 : Math.max(2, Math.round(2e6 / m)),
    large ? 3 : 10,
  );
  return {
    pixels: m.toLocaleString('en'),
    'fused (CPU µs)': us(c.fused!),
    'after the run': us(c.after! - c.fused!),
    'in the run': us(c['in the run']! - c.fused!),
    'ratio to fused, after / in': `${f2(c.fused! / c.after!)} / ${f2(c.fused! / c['in the run']!)}`,
  };
}

/**
 * A weighted zonal request's statistics and median and p10–p90 (exactextract's quantiles) as the
 * compute worker places them: by selection around each place, with the kernel's count of each value
 * when the window is a few values (`levels`; without it, the rank windows always).
 */
function weightedOrder(
  kt: Kernel,
  program: ReturnType<typeof compileFormula>,
  weights: Float64Array,
  partial: Int32Array,
  levels: boolean,
): void {
  const s = kt.run(program);
  weightedStats(s, kt.values(), weights, partial);
  weightedPercentilesBySelection(
    () => kt.values(),
    weights,
    partial,
    s.count,
    [...ORDER_PS],
    (qs) => kt.percentiles(qs, s),
    (ranges) => kt.rankWindows(ranges, s),
    levels ? () => kt.levelsOf(s) : undefined,
  );
}

/**
 * The median and p10–p90 of a window of a few values (a custom formula of classes: two or three
 * levels over the round field), CPU µs beyond the fused pass: placed by the brackets, as before
 * levelPercentiles (its sample said to hold many values), against answered by the counts of the
 * levels (the service's call, Kernel.runWithPercentiles).
 */
function levelsRow(formula: string, label: string, n: number): Record<string, string> {
  const program = compileFormula(formula);
  const { m, kc, kt, weights, partial } = roundField(program, n);
  type Fn = (...a: number[]) => number;
  const holder = kc as unknown as { x: Record<string, Fn> };
  const x = holder.x;
  const many = { ...x, sampleLevels: (_p: number, _s: number, most: number) => most + 1 };
  // weighted (coverage): from the kernel's rank windows (as before levelsOf) or walked by the
  // count of each value (the worker's call)
  const weighted = (levels: boolean) => weightedOrder(kt, program, weights, partial, levels);
  const c = cpuPerCall(
    {
      fused: () => kc.run(program),
      brackets: () => {
        holder.x = many;
        try {
          kc.runWithPercentiles(program, ORDER_PS);
        } finally {
          holder.x = x;
        }
      },
      counts: () => kc.runWithPercentiles(program, ORDER_PS),
      'weighted statistics': () => {
        const s = kt.run(program);
        weightedStats(s, kt.values(), weights, partial);
      },
      'weighted, windows': () => weighted(false),
      'weighted, counts': () => weighted(true),
    },
    m > 2e6 ? 1 : 4,
    5,
  );
  const ws = c['weighted statistics']!;
  return {
    window: `${m.toLocaleString('en')} px, ${label}`,
    'fused (CPU µs)': us(c.fused!),
    'by the brackets, µs beyond': us(c.brackets! - c.fused!),
    'by the counts, µs beyond': us(c.counts! - c.fused!),
    'speed-up of the whole call': `${f2(c.brackets! / c.counts!)}×`,
    'weighted: windows, µs beyond the weighted statistics': us(c['weighted, windows']! - ws),
    'weighted: counts, µs beyond': us(c['weighted, counts']! - ws),
    'weighted: the whole call': `${f2(c['weighted, windows']! / c['weighted, counts']!)}× faster`,
  };
}

/**
 * Issue 23: NDVI over a round field (a 64-gon filling the window, which has n pixels) with the
 * service's default path (pixel centres: values+stats, the mask the centres inside) against the
 * same with coverage weights (every touched pixel in the kernel's pass, then the edge pixels
 * reweighted: compute/zonal.ts weightedStats; the weights and the edge list come with the window,
 * as the window cache keeps them) and with percentiles 5, 50, 95 by selection
 * (Kernel.percentiles: one pass over brackets of values placed by a sample, then selection among
 * the values of the ranks' brackets). Goals: weighted ≥ 0.7× and percentiles ≥ 0.5× the unweighted
 * fused path.
 */
async function statisticsRows(): Promise<void> {
  const program = compileFormula(FORMULAS.NDVI);
  const rows: Array<Record<string, string>> = [];
  const breakdown: Array<Record<string, string | number>> = [];
  const order: Array<Record<string, string>> = [];
  const inRun: Array<Record<string, string>> = [];
  const both: Array<Record<string, string>> = [];
  const weightedOrder: Array<Record<string, string>> = [];
  // small fields first (576–4,096 px: 6–40 ha at 10 m), for the order statistics only
  for (const n of [576, 1_600, 4_096]) {
    const { m, kc } = roundField(program, n);
    order.push(orderRow(kc, program, m));
  }
  for (const n of [10_000, 10_000_000]) {
    const { m, weights, partial, kc, kt } = roundField(program, n);
    const variants = {
      fused: () => kc.run(program),
      weighted: () => {
        const s = kt.run(program);
        weightedStats(s, kt.values(), weights, partial);
      },
      // the service's call (compute-worker statsOn)
      percentiles: () => kc.runWithPercentiles(program, [5, 50, 95]),
    };
    const r = await measure(m, variants);
    // small windows: many short interleaved rounds (the best of 30 is steadier on a shared machine)
    const cpu = m > 1e6 ? cpuPerCall(variants, 3) : cpuPerCall(variants, 1000, 30);
    if (m < 1e6) {
      const st = kc.run(program);
      breakdown.push({
        pixels: m.toLocaleString('en'),
        'fused (CPU µs)': cpu.fused!,
        ...percentileBreakdown(kc, [5, 50, 95], st.count, 1000),
      });
    }
    order.push(orderRow(kc, program, m));
    if (m > 1e6) for (const w of [1 << 20, 1 << 22]) both.push(bothRow(roundField(program, w).kc, program, w));
    both.push(bothRow(kc, program, m));
    if (m > 1e6) {
      const f = roundField(program, 1 << 20);
      weightedOrder.push(weightedOrderRow(f.kc, f.kt, f.weights, f.partial, program, f.m));
    }
    weightedOrder.push(weightedOrderRow(kc, kt, weights, partial, program, m));
    if (m > 1e6) for (const w of [1 << 18, 1 << 19, 1 << 20, 1 << 21]) inRun.push(inRunRow(program, w));
    if (m > 1e6) inRun.push(inRunRow(program, m, { kc, kt }));
    const mark = (x: number, goal: number) => `${f2(x)} ${x >= goal ? 'PASS' : 'MISS'} (≥ ${goal})`;
    rows.push({
      pixels: m.toLocaleString('en'),
      'edge pixels': partial.length.toLocaleString('en'),
      'fused values+stats (centres)': f0(r.fused),
      'coverage-weighted': f0(r.weighted),
      'percentiles 5,50,95': f0(r.percentiles),
      'weighted ÷ fused': mark(r.weighted! / r.fused!, 0.7),
      'percentiles ÷ fused': mark(r.percentiles! / r.fused!, 0.5),
      'CPU µs/call fused / weighted / pct': [cpu.fused!, cpu.weighted!, cpu.percentiles!].map(us).join(' / '),
      'CPU ratios w / pct': `${f2(cpu.fused! / cpu.weighted!)} / ${f2(cpu.fused! / cpu.percentiles!)}`,
    });
  }
  console.log(
    'Issue 23: NDVI over a round field filling the window, Mpx/s of window pixels; the service path (pixel centres,',
  );
  console.log(
    'values+stats) against coverage weights and against percentiles 5, 50, 95 (runWithPercentiles: sampled brackets):',
  );
  console.table(rows);
  console.log(
    'Order statistics of every zonal request (median, p10–p90), CPU µs a call: a quickselect over all the values',
  );
  console.log(
    "against the service's call, Kernel.runWithPercentiles (the paths of percentiles with the run's statistics):",
  );
  console.table(order);
  console.log(
    "Percentiles 5, 50, 95 on large windows, CPU µs beyond the fused pass: run() then percentiles() with the run's",
  );
  console.log(
    'statistics (a pass over the whole window after the run) against runWithPercentiles making the pass in the run:',
  );
  console.table(inRun);
  console.log(
    'A zonal request with percentiles 5, 50, 95, CPU µs beyond the fused pass: the order statistics, then the percentiles',
  );
  console.log("asked (two placements) against both lists as one (the worker's call: seven ranks, one placement):");
  console.table(both);
  console.log(
    'The order statistics of a weighted zonal request (median, p10–p90, exactextract), CPU µs beyond the weighted',
  );
  console.log("statistics: by sorting the values against by selection around each place (the worker's call):");
  console.table(weightedOrder);
  console.log(
    'Sorting the values of a rank window (Kernel.rankWindows, around each place of a weighted percentile: about 190',
  );
  console.log(
    'values on the 10,000-px field, 6,000 on the 10 M one), CPU µs a call: the typed array sort against sortF32:',
  );
  console.table([190, 1_000, 6_000, 60_000].map((n) => sortRow(n)));
  const levels: Array<Record<string, string>> = [];
  const step = (expr: string) => `min(1, max(0, (${expr}) * 1000000))`;
  for (const n of [1 << 20, 10_000_000])
    for (const [label, formula] of [
      ['two levels', step('B08 - B04')],
      ['three levels', `${step('B08 - B04')} + ${step('B08 - 2 * B04')}`],
    ] as const)
      levels.push(levelsRow(formula, label, n));
  console.log(
    'The median and p10–p90 of a window of a few values (a formula of classes), CPU µs beyond the fused pass:',
  );
  console.log(
    'placed by the brackets (as before levelPercentiles) against answered by the counts of its levels; weighted',
  );
  console.log(
    "(coverage), beyond the weighted statistics: the kernel's rank windows (as before levelsOf) against the counts:",
  );
  console.table(levels);
  console.log('The percentile path beyond the fused pass, CPU µs a call by phase (Kernel.percentilesBySample):');
  console.table(
    breakdown.map((b) =>
      Object.fromEntries(
        Object.entries(b).map(([key, v]) => [key, typeof v === 'number' ? (v < 100 ? v.toFixed(2) : v.toFixed(0)) : v]),
      ),
    ),
  );
}

export default async function kernelBench(): Promise<void> {
  if (process.env.BENCH_KERNEL_ONLY === 'statistics') return statisticsRows();
  const simd = new Kernel({ simd: true, jit: true });
  const interp = new Kernel({ simd: true, jit: false });
  const scalar = new Kernel({ simd: false });
  const sizes = [10_000, 10_000_000];
  const rows: Array<Record<string, string>> = [];
  const cRows: Array<Record<string, string>> = [];
  const targets: Array<Record<string, string>> = [];
  for (const n of sizes) {
    const c: Record<CBuild, CFigures | null> = { o3: null, native: null };
    const cRound = () => {
      for (const b of Object.keys(C_BUILDS) as CBuild[]) c[b] = bestOf(c[b], cReference(n, b));
    };
    const px = n.toLocaleString('en');
    for (const [name, src] of Object.entries(FORMULAS) as Array<[Name, string]>) {
      const program = compileFormula(src);
      const inputs = Object.fromEntries(program.bands.map((b) => [b, synthetic(n, b)]));
      const out = new Float32Array(n);
      // Sentinel-2 L2A: DN × 0.0001 (offset 0 before processing baseline 04.00, −0.1 since).
      const prepare = (k: Kernel, offset: number) => {
        const prep = k.prepare(
          n,
          program.bands.map(() => ({ dtype: 'u16' as const, scale: 0.0001, offset })),
        );
        for (const [j, b] of program.bands.entries()) prep.bands[j]!.set(inputs[b]!);
      };
      // Each kernel holds the inputs of its current row; the scalar build is slow, so it is measured
      // in a round of its own (it does not compete with the others).
      const offsets = name === 'NDVI' ? [0, -0.1] : [0];
      for (const offset of offsets) {
        prepare(simd, offset);
        prepare(interp, offset);
        const variants: Record<string, () => void> = {
          ts: () => tsLoops[name](inputs, out),
          simd: () => simd.run(program, { stats: true, writeValues: true }),
          simdValues: () => simd.run(program, { stats: false, writeValues: true }),
          simdStats: () => simd.run(program, { stats: true, writeValues: false }),
          vm: () => interp.run(program, { stats: true, writeValues: true }),
          vmValues: () => interp.run(program, { stats: false, writeValues: true }),
          vmStats: () => interp.run(program, { stats: true, writeValues: false }),
        };
        const m = await measure(n, variants, name === 'NDVI' ? cRound : undefined);
        prepare(scalar, offset);
        const s = await measure(n, { scalar: () => scalar.run(program, { stats: true, writeValues: true }) });
        const label = name === 'NDVI' ? `NDVI (${program.ops} ops), offset ${offset}` : `${name} (${program.ops} ops)`;
        const isNdvi = name === 'NDVI';
        rows.push({
          formula: label,
          pixels: px,
          'SIMD values+stats': f0(m.simd),
          'SIMD values only': f0(m.simdValues),
          'SIMD stats only (fused)': f0(m.simdStats),
          'interp. values+stats': f0(m.vm),
          'interp. values only': f0(m.vmValues),
          'interp. stats only': f0(m.vmStats),
          'no-SIMD values+stats': f0(s.scalar),
          'TS loop': f0(m.ts),
          'SIMD ÷ TS': f2(m.simd! / m.ts!),
          'interp. ÷ TS': f2(m.vm! / m.ts!),
          'no-SIMD ÷ TS': f2(s.scalar! / m.ts!),
          'C -O3 plain': isNdvi && c.o3 ? f0(c.o3.plain) : '',
          'C native plain': isNdvi && c.native ? f0(c.native.plain) : '',
        });
        const mark = (ratio: number, goal?: number) =>
          goal === undefined ? f2(ratio) : `${f2(ratio)} ${ratio >= goal ? 'PASS' : 'MISS'} (≥ ${goal})`;
        // the service's path (JIT) and, beside it, the interpreter (KERNEL_JIT=0) in the same run
        const t = (target: string, jit: number, vm: number, goal?: number) =>
          targets.push({
            pixels: px,
            formula: label,
            target,
            ratio: mark(jit, goal),
            'interpreter (KERNEL_JIT=0)': f2(vm),
          });
        if (name === 'NDVI') {
          t('compiled path (values+stats) ÷ TS loop', m.simd! / m.ts!, m.vm! / m.ts!, 5);
          // the C loops compute NDVI with offset 0: the −0.1 row (reflectance math) is another computation
          if (offset === 0)
            for (const b of Object.keys(C_BUILDS) as CBuild[]) {
              const cf = c[b];
              if (!cf) continue;
              t(
                `compiled path, values only ÷ C plain (${C_LABEL[b]})`,
                m.simdValues! / cf.plain,
                m.vmValues! / cf.plain,
                0.6,
              );
              t(`compiled path, values+stats ÷ C plain (${C_LABEL[b]})`, m.simd! / cf.plain, m.vm! / cf.plain, 0.6);
              t(
                `fused with stats (one pass) ÷ C plain (${C_LABEL[b]})`,
                m.simdStats! / cf.plain,
                m.vmStats! / cf.plain,
                0.5,
              );
            }
          if (offset === 0 && c.o3)
            t(
              'fused with stats (one pass) ÷ C fused (gcc -O3, scalar)',
              m.simdStats! / c.o3.fused,
              m.vmStats! / c.o3.fused,
              0.5,
            );
          if (offset === 0 && c.native) {
            t(
              'fused with stats ÷ C fused vectorised by hand, 128-bit (same width as WASM)',
              m.simdStats! / c.native.simd128,
              m.vmStats! / c.native.simd128,
            );
            if (c.native.simd256)
              t(
                'fused with stats ÷ C fused vectorised by hand, 256-bit (AVX2)',
                m.simdStats! / c.native.simd256,
                m.vmStats! / c.native.simd256,
              );
          }
        } else if (name === 'custom') {
          t(`${program.ops}-operation formula (values+stats) ÷ TS loop`, m.simd! / m.ts!, m.vm! / m.ts!, 3);
        }
      }
    }
    for (const b of Object.keys(C_BUILDS) as CBuild[]) {
      const cf = c[b];
      if (cf) {
        cRows.push({
          pixels: n.toLocaleString('en'),
          build: C_LABEL[b],
          checked: f0(cf.checked),
          plain: f0(cf.plain),
          fused: f0(cf.fused),
          'fused SIMD 128-bit': f0(cf.simd128),
          'fused SIMD 256-bit': cf.simd256 ? f0(cf.simd256) : 'no AVX2',
        });
      }
    }
    if (!c.o3 && !c.native)
      console.log('gcc not found: no C reference (bash scripts/install-bench-tools.sh installs it)');
  }
  console.log(
    'Mpx/s (higher is better). "SIMD" is what the service runs (the per-formula JIT, src/compute/jit/); "interp." the same',
  );
  console.log(
    'SIMD build with KERNEL_JIT=0 (the bytecode interpreter). "values+stats": every value written and count/min/max/mean/std',
  );
  console.log(
    'in the same pass; "values only" skips the statistics, "stats only" is NDVI fused with its statistics, nothing stored.',
  );
  for (const n of sizes) console.table(rows.filter((r) => r.pixels === n.toLocaleString('en')));
  console.log(
    'C NDVI loops (bench/c/ndvi.c, one thread, Mpx/s), built with gcc -O3 (the x86-64 baseline: SSE2, 4 f32 lanes like',
  );
  console.log(
    'WebAssembly SIMD) and with -O3 -march=native (AVX2: 8 lanes). "checked" has the service semantics, "plain" none',
  );
  console.log(
    '(vectorised by gcc), "fused" = checked + statistics in double in one pass (gcc leaves it scalar), "fused SIMD" the',
  );
  console.log(
    "same vectorised by hand with the JIT's algorithm (128-bit: SSE4.1; 256-bit: AVX2), from the native build.",
  );
  if (cRows.length) console.table(cRows);
  console.log(
    'Targets of issue 3 (its C figure is for 10 M pixels; C ratios on the offset 0 row, the formula the C loops compute;',
  );
  console.log(
    'the ratios to the hand-vectorised C fused loops have no goal: they show how close the JIT is to the same algorithm in C):',
  );
  console.table(targets);
  await statisticsRows();
}
