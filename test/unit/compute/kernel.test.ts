/**
 * The WASM kernel against independent references: a float64 evaluator (reference.ts) and the
 * same evaluator rounding every step to float32 (the kernel's arithmetic, so that the comparison
 * can be exact). Runs the SIMD build and the scalar build.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { indexCatalog, indexProgram } from '../../../src/compute/catalog.js';
import { compile, parseFormula } from '../../../src/compute/formula.js';
import { Kernel, type BandSpec } from '../../../src/compute/kernel-host.js';
import { referencePercentile, referenceStats, referenceValues } from '../../../src/compute/reference.js';
import { close, formulaTree, printFormula } from '../../helpers/formulas.js';
import { rng } from '../../helpers/random.js';

// The SIMD build with the per-formula JIT (what the service runs), the interpreter alone, and
// the scalar build.
const kernels = [
  new Kernel({ simd: true, jit: true }),
  new Kernel({ simd: true, jit: false }),
  new Kernel({ simd: false }),
];
const label = (k: Kernel) => (k.simd ? (k.jit ? 'simd + jit' : 'simd interpreter') : 'scalar');

const BANDS = ['B02', 'B03', 'B04', 'B05', 'B08', 'B11'] as const;

// Random formulas as syntax trees (printed back to text, so the parser is in the loop too).
const tree = formulaTree({ bands: BANDS, constants: [0, 1, 0.5], maxCallArgs: 2 });

const dnValue = fc.oneof(
  { weight: 1, arbitrary: fc.constant(0) },
  { weight: 8, arbitrary: fc.integer({ min: 1, max: 12000 }) },
  { weight: 1, arbitrary: fc.constant(65535) },
);
const f32Value = fc.oneof(
  { weight: 1, arbitrary: fc.constant(0) },
  { weight: 1, arbitrary: fc.constant(Number.NaN) },
  { weight: 6, arbitrary: fc.double({ min: -1, max: 1.5, noNaN: true }).map(Math.fround) },
);

describe.each(kernels.map((k) => [label(k), k] as const))('kernel (%s build)', (_name, kernel) => {
  it('random formulas on u16 digital numbers equal the float32-emulating reference exactly', () => {
    fc.assert(
      fc.property(
        tree,
        fc.integer({ min: 1, max: 70 }),
        fc.array(dnValue, { minLength: 70 * 6, maxLength: 70 * 6 }),
        (t, n, dns) => {
          const program = compile(parseFormula(printFormula(t)));
          const specs: BandSpec[] = program.bands.map(() => ({
            dtype: 'u16',
            scale: 0.0001,
            offset: -0.1,
            nodata: 65535,
          }));
          const prep = kernel.prepare(n, specs);
          const inputs: Record<string, { data: Uint16Array; spec: BandSpec }> = {};
          program.bands.forEach((b, j) => {
            const data = Uint16Array.from(dns.slice(j * 70, j * 70 + n));
            prep.bands[j]!.set(data);
            inputs[b] = { data, spec: specs[j]! };
          });
          kernel.run(program);
          const got = kernel.copyValues();
          const want = referenceValues(parseFormula(printFormula(t)), inputs, n, undefined, Math.fround);
          for (let i = 0; i < n; i++) {
            if (!close(got[i]!, want[i]!, 0, 0))
              throw new Error(`pixel ${i}: kernel ${got[i]} reference ${want[i]} for ${printFormula(t)}`);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('random formulas on f32 inputs with zeros, NaN and negatives: exact against float32, close to float64', () => {
    fc.assert(
      fc.property(
        tree,
        fc.integer({ min: 1, max: 37 }),
        fc.array(f32Value, { minLength: 37 * 6, maxLength: 37 * 6 }),
        fc.array(fc.boolean(), { minLength: 37, maxLength: 37 }),
        (t, n, vals, maskBits) => {
          const src = printFormula(t);
          const program = compile(parseFormula(src));
          const specs: BandSpec[] = program.bands.map(() => ({ dtype: 'f32' }));
          const prep = kernel.prepare(n, specs, { mask: true });
          const mask = Uint8Array.from(maskBits.slice(0, n).map((b) => (b ? 1 : 0)));
          prep.mask!.set(mask);
          const inputs: Record<string, { data: Float32Array; spec: BandSpec }> = {};
          program.bands.forEach((b, j) => {
            const data = Float32Array.from(vals.slice(j * 37, j * 37 + n));
            prep.bands[j]!.set(data);
            inputs[b] = { data, spec: specs[j]! };
          });
          const stats = kernel.run(program);
          const got = kernel.copyValues();
          const want32 = referenceValues(parseFormula(src), inputs, n, mask, Math.fround);
          for (let i = 0; i < n; i++) {
            if (!close(got[i]!, want32[i]!, 0, 0))
              throw new Error(`pixel ${i}: kernel ${got[i]} float32 reference ${want32[i]} for ${src}`);
            if (mask[i] === 0 && !Number.isNaN(got[i]!)) throw new Error('masked pixel has a value');
          }
          const ref = referenceStats(want32);
          expect(stats.count).toBe(ref.count);
          if (ref.count) {
            expect(close(stats.mean, ref.mean, 1e-9, 1e-12)).toBe(true);
            expect(stats.min === ref.min).toBe(true); // == so that -0 equals 0
            expect(stats.max === ref.max).toBe(true);
          }
        },
      ),
      { numRuns: 300 },
    );
  });

  it('exp, log and pow (kernel math library) agree with float64 within 1e-5 relative', () => {
    const n = 1001;
    for (const src of ['exp(B04 * 3)', 'log(B08)', 'pow(B08, 1.7)', 'pow(B04 + 1, B08)']) {
      const program = compile(parseFormula(src));
      const specs: BandSpec[] = program.bands.map(() => ({ dtype: 'u16', scale: 0.0001 }));
      const prep = kernel.prepare(n, specs);
      const inputs: Record<string, { data: Uint16Array; spec: BandSpec }> = {};
      program.bands.forEach((b, j) => {
        const data = Uint16Array.from({ length: n }, (_, i) => 1 + ((i * (37 + j * 11)) % 9000));
        prep.bands[j]!.set(data);
        inputs[b] = { data, spec: specs[j]! };
      });
      kernel.run(program);
      const got = kernel.copyValues();
      const want = referenceValues(src, inputs, n);
      for (let i = 0; i < n; i++)
        expect(close(got[i]!, want[i]!, 1e-5, 1e-6), `${src} px ${i}: ${got[i]} vs ${want[i]}`).toBe(true);
    }
  });

  it('division by zero and NaN inputs give NaN, never ±Infinity; DN 0 and nodata are NaN', () => {
    const program = compile(parseFormula('B08 / B04'));
    const prep = kernel.prepare(5, [{ dtype: 'f32' }, { dtype: 'f32', nodata: -9999 }]);
    prep.bands[0]!.set([0, 1, NaN, 2, -0]); // B04
    prep.bands[1]!.set([1, 0, 1, -9999, 1]); // B08
    const s = kernel.run(program);
    expect(Array.from(kernel.values())).toEqual([NaN, 0, NaN, NaN, NaN]);
    expect(s.count).toBe(1);
    const ovf = compile(parseFormula('exp(B08 * 1000) + log(B04 * 0)'));
    const p2 = kernel.prepare(3, [{ dtype: 'u16' }, { dtype: 'u16' }]);
    p2.bands[0]!.set([1, 2, 3]);
    p2.bands[1]!.set([1, 2, 3]);
    kernel.run(ovf);
    expect(Array.from(kernel.values()).every(Number.isNaN)).toBe(true);
    const u = compile(parseFormula('(B08 - B04) / (B08 + B04)'));
    const p3 = kernel.prepare(11, [
      { dtype: 'u16', scale: 0.0001 },
      { dtype: 'u16', scale: 0.0001, nodata: 65535 },
    ]);
    p3.bands[0]!.set([0, 100, 100, 100, 100, 100, 100, 100, 100, 100, 100]);
    p3.bands[1]!.set([100, 0, 65535, 300, 300, 300, 300, 300, 300, 300, 300]);
    const s3 = kernel.run(u);
    const v = Array.from(kernel.values());
    expect(v.slice(0, 3).every(Number.isNaN)).toBe(true);
    expect(v[3]).toBeCloseTo(0.5, 6);
    expect(s3.count).toBe(8);
  });

  it('every catalogue index equals its hand-computed value on sample pixels', () => {
    // Sentinel-2-like reflectances of one pixel of healthy crop.
    const px = {
      B01: 0.03,
      B02: 0.04,
      B03: 0.07,
      B04: 0.05,
      B05: 0.12,
      B06: 0.3,
      B07: 0.36,
      B08: 0.4,
      B8A: 0.42,
      B09: 0.1,
      B11: 0.22,
      B12: 0.12,
    } as const;
    const hand: Record<string, number> = {
      NDVI: (0.4 - 0.05) / (0.4 + 0.05),
      NDRE: (0.4 - 0.12) / (0.4 + 0.12),
      NDWI: (0.4 - 0.22) / (0.4 + 0.22),
      EVI: (2.5 * (0.4 - 0.05)) / (0.4 + 6 * 0.05 - 7.5 * 0.04 + 1),
      SAVI: (1.5 * (0.4 - 0.05)) / (0.4 + 0.05 + 0.5),
      MSAVI2: (2 * 0.4 + 1 - Math.sqrt((2 * 0.4 + 1) ** 2 - 8 * (0.4 - 0.05))) / 2,
      GNDVI: (0.4 - 0.07) / (0.4 + 0.07),
      OSAVI: (0.4 - 0.05) / (0.4 + 0.05 + 0.16),
      NDMI: (0.4 - 0.22) / (0.4 + 0.22),
      CIgreen: 0.4 / 0.07 - 1,
      CIre: 0.4 / 0.12 - 1,
      MCARI: (0.12 - 0.05 - 0.2 * (0.12 - 0.07)) * (0.12 / 0.05),
      NBR: (0.4 - 0.12) / (0.4 + 0.12),
      EVI2: (2.5 * (0.4 - 0.05)) / (0.4 + 2.4 * 0.05 + 1),
      ReCI: 0.4 / 0.05 - 1,
      NDRE2: (0.4 - 0.3) / (0.4 + 0.3),
      NDRE_B8A: (0.42 - 0.12) / (0.42 + 0.12),
      NDVI_B8A: (0.42 - 0.05) / (0.42 + 0.05),
      MSI: 0.22 / 0.4,
      NDMI2: (0.4 - 0.12) / (0.4 + 0.12),
      SIPI: (0.4 - 0.04) / (0.4 - 0.05),
      ARVI: (0.4 - (2 * 0.05 - 0.04)) / (0.4 + (2 * 0.05 - 0.04)),
      GCI: 0.42 / 0.07 - 1,
      BSI: (0.22 + 0.05 - (0.4 + 0.04)) / (0.22 + 0.05 + (0.4 + 0.04)),
      TCARI_OSAVI:
        (3 * (0.12 - 0.05 - 0.2 * (0.12 - 0.07) * (0.12 / 0.05))) / ((1.16 * (0.4 - 0.05)) / (0.4 + 0.05 + 0.16)),
    };
    expect(indexCatalog.length).toBeGreaterThanOrEqual(21);
    for (const e of indexCatalog) {
      expect(hand[e.name], `hand value for ${e.name}`).toBeDefined();
      const program = indexProgram(e.name);
      // Digital numbers as Sentinel-2 L2A from baseline 04.00: DN = (refl + 0.1) × 10000.
      const prep = kernel.prepare(
        3,
        program.bands.map(() => ({ dtype: 'u16' as const, scale: 0.0001, offset: -0.1 })),
      );
      for (const [j, b] of program.bands.entries()) prep.bands[j]!.fill(Math.round((px[b] + 0.1) * 10000));
      const s = kernel.run(program);
      expect(s.count, e.name).toBe(3);
      expect(Math.abs(s.mean - hand[e.name]!), `${e.name}: ${s.mean} vs ${hand[e.name]}`).toBeLessThan(
        2e-6 * Math.max(1, Math.abs(hand[e.name]!)),
      );
      expect(e.range[0]).toBeLessThan(e.range[1]);
      expect(e.source.length).toBeGreaterThan(5);
    }
  });

  it('median, percentiles and histogram match numpy-style references', () => {
    const n = 12_345;
    const program = compile(parseFormula('B08 * 2 - B04'));
    const prep = kernel.prepare(n, [{ dtype: 'f32' }, { dtype: 'f32' }]);
    let seed = 7;
    const rnd = () => {
      seed = (seed * 1103515245 + 12345) & 0x7fffffff;
      return seed / 0x7fffffff;
    };
    for (let i = 0; i < n; i++) {
      prep.bands[0]![i] = i % 17 === 0 ? NaN : rnd();
      prep.bands[1]![i] = rnd();
    }
    kernel.run(program);
    const values = kernel.copyValues();
    const o = kernel.orderStats()!;
    for (const [p, v] of [
      [10, o.p10],
      [25, o.p25],
      [50, o.median],
      [75, o.p75],
      [90, o.p90],
    ] as const) {
      expect(Math.abs(v - referencePercentile(values, p))).toBeLessThan(1e-6);
    }
    const h = kernel.histogram(-1, 2, 30);
    const valid = values.filter((x) => !Number.isNaN(x));
    expect(h.reduce((a, b) => a + b, 0)).toBe(valid.length);
    const ref = new Array(30).fill(0);
    for (const x of valid) ref[Math.min(29, Math.max(0, Math.floor((x + 1) / 0.1)))]++;
    const diff = Array.from(h).reduce((a, c, i) => a + Math.abs(c - ref[i]), 0);
    expect(diff).toBeLessThanOrEqual(2); // bin-edge rounding of float32 widths
    const single = kernel.prepare(1, [{ dtype: 'f32' }, { dtype: 'f32' }]);
    single.bands[0]![0] = 0.25;
    single.bands[1]![0] = 0.5;
    kernel.run(program);
    // B08 × 2 − B04 = 0.5 × 2 − 0.25 (slot 0 is B04)
    expect(kernel.orderStats()).toEqual({ p10: 0.75, p25: 0.75, median: 0.75, p75: 0.75, p90: 0.75 });
  });
});

describe.each(kernels.map((k) => [label(k), k] as const))(
  'one-pass statistics and the fused NDVI loop (%s build)',
  (_name, kernel) => {
    const ndvi = compile(parseFormula('(B08 - B04) / (B08 + B04)'));
    /** Random DNs with DN 0, nodata 65535 and a mask, over sizes that cross blocks, chunks and tails. */
    const ndviCase = fc.record({
      n: fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 250, max: 9000 })),
      seed: fc.integer({ min: 1, max: 2 ** 30 }),
      invalidLead: fc.integer({ min: 0, max: 1200 }),
      withMask: fc.boolean(),
    });
    const fill = (n: number, seed: number, invalidLead: number, withMask: boolean) => {
      let s = seed;
      const rnd = () => {
        s = (s * 1103515245 + 12345) & 0x7fffffff;
        return s / 0x7fffffff;
      };
      const red = new Uint16Array(n);
      const nir = new Uint16Array(n);
      const mask = withMask ? new Uint8Array(n) : undefined;
      for (let i = 0; i < n; i++) {
        const u = rnd();
        red[i] = i < invalidLead ? 0 : u < 0.03 ? 0 : u < 0.05 ? 65535 : 1 + Math.floor(rnd() * 9000);
        nir[i] = u > 0.98 ? 0 : 1 + Math.floor(rnd() * 9000);
        if (mask) mask[i] = rnd() < 0.8 ? 1 : 0;
      }
      return { red, nir, mask };
    };

    /** Runs NDVI on fresh random bands (scale 0.0001, nodata 65535, the given offset). */
    const runNdvi = (n: number, seed: number, invalidLead: number, withMask: boolean, offset: number) => {
      const { red, nir, mask } = fill(n, seed, invalidLead, withMask);
      const specs: BandSpec[] = [
        { dtype: 'u16', scale: 0.0001, offset, nodata: 65535 },
        { dtype: 'u16', scale: 0.0001, offset, nodata: 65535 },
      ];
      const prep = kernel.prepare(n, specs, { mask: !!mask });
      prep.bands[0]!.set(red);
      prep.bands[1]!.set(nir);
      if (mask) prep.mask!.set(mask);
      const stats = kernel.run(ndvi);
      return { red, nir, mask, specs, stats, got: kernel.copyValues() };
    };

    it('NDVI with an offset (reflectance math): values equal the float32 reference exactly, statistics the float64 ones to 1e-9', () => {
      fc.assert(
        fc.property(ndviCase, ({ n, seed, invalidLead, withMask }) => {
          const { red, nir, mask, specs, stats, got } = runNdvi(n, seed, invalidLead, withMask, -0.1);
          const statsOnly = kernel.run(ndvi, { writeValues: false });
          const inputs = { B04: { data: red, spec: specs[0]! }, B08: { data: nir, spec: specs[1]! } };
          const want = referenceValues('(B08 - B04) / (B08 + B04)', inputs, n, mask, Math.fround);
          for (let i = 0; i < n; i++)
            if (!close(got[i]!, want[i]!, 0, 0)) throw new Error(`pixel ${i}: ${got[i]} vs ${want[i]}`);
          const ref = referenceStats(want);
          for (const s of [stats, statsOnly]) {
            expect(s.count).toBe(ref.count);
            if (!ref.count) continue;
            expect(s.min).toBe(ref.min);
            expect(s.max).toBe(ref.max);
            expect(close(s.mean, ref.mean, 1e-9, 1e-12), `mean ${s.mean} vs ${ref.mean}`).toBe(true);
            expect(close(s.std, ref.std, 1e-9, 1e-12), `std ${s.std} vs ${ref.std}`).toBe(true);
          }
        }),
        { numRuns: 60 },
      );
    });

    it('NDVI with equal scales and no offset (integer math on the DNs in the SIMD build): within 2.5e-7 of float64', () => {
      fc.assert(
        fc.property(ndviCase, ({ n, seed, invalidLead, withMask }) => {
          const { red, nir, mask, specs, stats, got } = runNdvi(n, seed, invalidLead, withMask, 0);
          const want = referenceValues(
            '(B08 - B04) / (B08 + B04)',
            { B04: { data: red, spec: specs[0]! }, B08: { data: nir, spec: specs[1]! } },
            n,
            mask,
          );
          for (let i = 0; i < n; i++)
            if (!close(got[i]!, want[i]!, 0, 2.5e-7)) throw new Error(`pixel ${i}: ${got[i]} vs ${want[i]}`);
          const ref = referenceStats(got); // the kernel's own values, in float64
          expect(stats.count).toBe(ref.count);
          if (ref.count) {
            expect(stats.min).toBe(ref.min);
            expect(stats.max).toBe(ref.max);
            expect(close(stats.mean, ref.mean, 1e-9, 1e-12)).toBe(true);
            expect(close(stats.std, ref.std, 1e-9, 1e-12)).toBe(true);
          }
        }),
        { numRuns: 60 },
      );
    });

    it('a formula through the interpreter over many blocks, the first ones without a value: statistics to 1e-9', () => {
      const n = 5000;
      const program = compile(parseFormula('2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)'));
      const specs: BandSpec[] = program.bands.map(() => ({ dtype: 'u16', scale: 0.0001 }));
      const prep = kernel.prepare(n, specs);
      const inputs: Record<string, { data: Uint16Array; spec: BandSpec }> = {};
      program.bands.forEach((b, j) => {
        const data = Uint16Array.from({ length: n }, (_, i) => (i < 1100 ? 0 : 1 + ((i * (37 + j * 11)) % 9000)));
        prep.bands[j]!.set(data);
        inputs[b] = { data, spec: specs[j]! };
      });
      const stats = kernel.run(program);
      const ref = referenceStats(
        referenceValues(
          parseFormula('2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)'),
          inputs,
          n,
          undefined,
          Math.fround,
        ),
      );
      expect(stats.count).toBe(ref.count);
      expect(stats.min).toBe(ref.min);
      expect(stats.max).toBe(ref.max);
      expect(close(stats.mean, ref.mean, 1e-9, 1e-12)).toBe(true);
      expect(close(stats.std, ref.std, 1e-9, 1e-12)).toBe(true);
      const none = kernel.prepare(700, [{ dtype: 'u16' }, { dtype: 'u16' }]);
      none.bands[0]!.fill(0);
      none.bands[1]!.fill(5);
      expect(kernel.run(ndvi).count).toBe(0);
    });
  },
);

describe('statistics on 10 million values', () => {
  it('agree with a float64 two-pass reference to 1e-9 relative', () => {
    const kernel = kernels[0]!;
    const n = 10_000_000;
    const values = new Float32Array(n);
    let seed = 42;
    for (let i = 0; i < n; i++) {
      seed = (seed * 1664525 + 1013904223) >>> 0;
      values[i] = i % 101 === 0 ? NaN : 0.45 + (seed / 4294967296 - 0.5) * 0.6;
    }
    const got = kernel.statsOf(values);
    const ref = referenceStats(values);
    expect(got.count).toBe(ref.count);
    expect(got.min).toBe(ref.min);
    expect(got.max).toBe(ref.max);
    expect(Math.abs(got.mean - ref.mean) / Math.abs(ref.mean)).toBeLessThan(1e-9);
    expect(Math.abs(got.std - ref.std) / ref.std).toBeLessThan(1e-9);
  });
  it('agree to 1e-9 when the spread is tiny against the mean (std/mean ~1e-5), and a constant gives std 0 exactly', () => {
    // What the shift by K is for: Σx² − (Σx)²/n in float64 would lose the variance here.
    const kernel = kernels[0]!;
    const n = 10_000_000;
    const values = new Float32Array(n);
    let seed = 7;
    for (let i = 0; i < n; i++) {
      seed = (seed * 1664525 + 1013904223) >>> 0;
      values[i] = i % 97 === 0 ? NaN : 0.8125 + (seed / 4294967296 - 0.5) * 3e-5;
    }
    const got = kernel.statsOf(values);
    const ref = referenceStats(values);
    expect(ref.std / ref.mean).toBeLessThan(2e-5);
    expect(got.count).toBe(ref.count);
    expect(Math.abs(got.mean - ref.mean) / ref.mean).toBeLessThan(1e-9);
    expect(Math.abs(got.std - ref.std) / ref.std).toBeLessThan(1e-9);
    values.fill(0.7);
    const flat = kernel.statsOf(values);
    expect(flat.mean).toBe(Math.fround(0.7));
    expect(flat.std).toBe(0);
  });
});

describe.each(kernels.filter((k) => k.jit || !k.simd).map((k) => [label(k), k] as const))(
  'sortF32 (%s build): the order of Float32Array.prototype.sort',
  (_name, kernel) => {
    type X = { sortF32(p: number, n: number, tmp: number): void; memory: WebAssembly.Memory; dataBase(): number };
    const x = (kernel as unknown as { x: X }).x;
    // values with every kind of key: −0 and 0, NaN of both signs and payloads, ±Infinity,
    // subnormals, ties, values of one byte of the key apart
    const special = [-0, 0, Number.NaN, Infinity, -Infinity, 1e-45, -1e-45, 3.4e38, -3.4e38, 1, 1, -1, 0.5];
    const bits = new Uint32Array(1);
    const asF32 = new Float32Array(bits.buffer);
    const mixed = (n: number, seed: number): Float32Array => {
      const r = rng(seed);
      const a = new Float32Array(n);
      for (let i = 0; i < n; i++) {
        const c = r();
        if (c < 0.1) a[i] = special[Math.floor(r() * special.length)]!;
        else if (c < 0.15) {
          bits[0] = r() < 0.5 ? 0xffc00001 : 0x7f800123; // NaNs that are not the canonical one
          a[i] = asF32[0]!;
        } else if (c < 0.4)
          a[i] = Math.floor(r() * 8) / 8; // ties
        else if (c < 0.6)
          a[i] = 1 + Math.floor(r() * 256) * 2 ** -23; // the key's low byte only
        else a[i] = (r() - 0.5) * 10 ** Math.floor(r() * 12 - 6);
      }
      return a;
    };
    it('equals the typed array sort on 0–100,000 values: −0 before 0, NaN last, ties, subnormals', () => {
      const p = x.dataBase();
      for (const [t, n] of [0, 1, 2, 47, 48, 49, 255, 256, 1000, 4097, 100_000].entries()) {
        const a = mixed(n, 11 + t);
        const room = p + 8 * n + 64;
        if (x.memory.buffer.byteLength < room) x.memory.grow(Math.ceil((room - x.memory.buffer.byteLength) / 65536));
        new Float32Array(x.memory.buffer, p, n).set(a);
        x.sortF32(p, n, p + 4 * n + 16);
        const got = new Float32Array(x.memory.buffer, p, n);
        const want = a.slice().sort();
        for (let i = 0; i < n; i++)
          expect(Object.is(got[i], want[i]), `${n} values, place ${i}: ${got[i]} for ${want[i]}`).toBe(true);
      }
    });
    it('leaves values that share every byte but one, or all of them, in order', () => {
      const p = x.dataBase();
      for (const a of [
        new Float32Array(500).fill(0.25),
        Float32Array.from({ length: 500 }, (_, i) => 2 + (499 - i) * 2 ** -22),
      ]) {
        new Float32Array(x.memory.buffer, p, a.length).set(a);
        x.sortF32(p, a.length, p + 4 * a.length + 16);
        expect(Array.from(new Float32Array(x.memory.buffer, p, a.length))).toEqual(Array.from(a.slice().sort()));
      }
    });
  },
);
