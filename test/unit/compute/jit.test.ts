/**
 * The per-formula JIT (src/compute/jit/) against the interpreter it replaces (values
 * bit-identical, statistics to rounding) and against the float32-emulating and float64 references,
 * for random formulas and inputs: zeros, NaN, negatives, lengths that are not multiples of 4 or 8,
 * f32, u16, i16 and u8 bands with scale, offset and nodata, validity masks.
 */
import fc from 'fast-check';
import { describe, expect, it, vi } from 'vitest';
import { compile, compileFormula, parseFormula } from '../../../src/compute/formula.js';
import { jitModuleBytes, jitSupports } from '../../../src/compute/jit/index.js';
import { jitFromEnv, Kernel, type BandSpec } from '../../../src/compute/kernel-host.js';
import { referenceStats, referenceValues } from '../../../src/compute/reference.js';
import { O, V } from '../../../src/compute/wasm-module.js';
import { close, formulaTree, printFormula, SHAPED_FORMULAS } from '../../helpers/formulas.js';

const jit = new Kernel({ simd: true, jit: true });
const vm = new Kernel({ simd: true, jit: false });

const BANDS = ['B02', 'B03', 'B04', 'B08', 'B11'] as const;
const tree = formulaTree({ bands: BANDS, constants: [0, 1, -0.5], maxCallArgs: 3 });

/** Formulas the compiler turns into its fused shapes (ND, NDB, MULCADD, constants in instructions). */
const shaped = fc.constantFrom(...SHAPED_FORMULAS);

const dtypeSpec = fc.oneof(
  fc.record({
    dtype: fc.constant('u16' as const),
    scale: fc.constantFrom(1, 0.0001, 2.75e-5),
    offset: fc.constantFrom(0, -0.1, -0.2),
    nodata: fc.constantFrom(undefined, 65535, 1),
  }),
  fc.record({
    dtype: fc.constant('i16' as const),
    scale: fc.constantFrom(1, 0.0001, -0.5),
    offset: fc.constantFrom(0, 0.25),
    nodata: fc.constantFrom(undefined, -9999, 5),
  }),
  fc.record({
    dtype: fc.constant('u8' as const),
    scale: fc.constantFrom(1, 0.004),
    offset: fc.constantFrom(0, -0.5),
    nodata: fc.constantFrom(undefined, 255, 7),
  }),
  fc.record({
    dtype: fc.constant('f32' as const),
    scale: fc.constantFrom(1, 0.5),
    offset: fc.constantFrom(0, -0, 0.1),
    nodata: fc.constantFrom(undefined, -9999),
  }),
);

const MAXN = 83;
/** Raw samples, mapped into each dtype's range (with the dtype's special values). */
const sample = fc.oneof(
  { weight: 1, arbitrary: fc.constant(0) },
  { weight: 1, arbitrary: fc.constant(-0) },
  { weight: 1, arbitrary: fc.constant(NaN) },
  { weight: 1, arbitrary: fc.constantFrom(65535, -9999, 255, 7, 5, 1) },
  { weight: 8, arbitrary: fc.double({ min: -2, max: 12000, noNaN: true }) },
);
function fillBand(spec: BandSpec, raw: number[]): Float32Array | Uint16Array | Int16Array | Uint8Array {
  const n = raw.length;
  switch (spec.dtype) {
    case 'f32':
      return Float32Array.from(raw, (x) => (Math.abs(x) > 10 ? x / 10000 : x));
    case 'u16':
      return Uint16Array.from(raw, (x) => (Number.isNaN(x) ? 0 : Math.abs(Math.round(x))));
    case 'i16':
      return Int16Array.from(raw, (x) => (Number.isNaN(x) ? 0 : Math.round(x) - 3000));
    case 'u8':
      return Uint8Array.from({ length: n }, (_, i) =>
        Number.isNaN(raw[i]!) ? 0 : Math.abs(Math.round(raw[i]!)) % 256,
      );
  }
}

/** Runs the program on both kernels with the same inputs; returns values and statistics of each. */
function both(
  program: ReturnType<typeof compile>,
  specs: BandSpec[],
  data: ArrayLike<number>[],
  mask: Uint8Array | undefined,
  opts: { stats?: boolean; writeValues?: boolean } = {},
  n = data[0]?.length ?? mask?.length ?? 0,
) {
  return [jit, vm].map((k) => {
    const prep = k.prepare(n, specs, { mask: !!mask });
    for (const [j, d] of data.entries()) prep.bands[j]!.set(d as never);
    if (mask) prep.mask!.set(mask);
    const stats = k.run(program, opts);
    return { stats, values: k.copyValues() };
  });
}

function expectSame(a: Float32Array, b: Float32Array, what: string): void {
  for (let i = 0; i < a.length; i++) {
    if (Number.isNaN(a[i]!) && Number.isNaN(b[i]!)) continue;
    if (!Object.is(a[i], b[i])) throw new Error(`${what}: pixel ${i}: jit ${a[i]} interpreter ${b[i]}`);
  }
}

function expectStatsClose(s: ReturnType<Kernel['run']>, r: ReturnType<Kernel['run']>, rel: number, what: string): void {
  expect(s.count, what).toBe(r.count);
  if (!r.count) return;
  expect(s.min === r.min, `${what} min ${s.min} vs ${r.min}`).toBe(true);
  expect(s.max === r.max, `${what} max ${s.max} vs ${r.max}`).toBe(true);
  const scale = Math.max(Math.abs(r.mean), r.std, Number.MIN_VALUE);
  expect(Math.abs(s.mean - r.mean) <= rel * scale, `${what} mean ${s.mean} vs ${r.mean}`).toBe(true);
  expect(close(s.std, r.std, rel, rel * scale), `${what} std ${s.std} vs ${r.std}`).toBe(true);
}

describe('kernel JIT', () => {
  it('is on by default in the SIMD build, off with KERNEL_JIT=0 and in the scalar build', () => {
    expect(jitFromEnv({})).toBe(true);
    expect(jitFromEnv({ KERNEL_JIT: '1' })).toBe(true);
    expect(jitFromEnv({ KERNEL_JIT: '0' })).toBe(false);
    expect(new Kernel({ simd: false }).jit).toBe(false);
    expect(jit.jit).toBe(true);
    expect(vm.jit).toBe(false);
  });

  it('encodes the opcodes it uses as binaryen does', async () => {
    const binaryen = (await import('binaryen')).default;
    const simdOp = (wat: string, params: string, result: string): number => {
      let m: ReturnType<typeof binaryen.parseText>;
      try {
        m = binaryen.parseText(`(module (memory 1) (func (export "f") ${params} (result ${result}) ${wat}))`);
      } catch (err) {
        throw new Error(`${wat}: ${String(err)}`);
      }
      const b = m.emitBinary();
      m.dispose();
      let i = b.lastIndexOf(0xfd) + 1;
      let v = 0;
      for (let s = 0; ; s += 7) {
        const c = b[i++]!;
        v |= (c & 0x7f) << s;
        if (!(c & 0x80)) return v;
      }
    };
    const names: Record<string, string> = {};
    for (const k of Object.keys(V))
      names[k] = k
        .replace(/^(i16x8|i32x4|f32x4|f64x2)_/, '$1.')
        .replace(/^(load|load8x8_u|store|const|shuffle|not|and|andnot|or|bitselect)$/, 'v128.$1');
    names.shuffle = 'i8x16.shuffle';
    for (const [k, code] of Object.entries(V)) {
      const n = names[k]!;
      let got: number;
      if (k === 'const') got = simdOp('(v128.const i32x4 1 2 3 4)', '', 'v128');
      else if (k === 'shuffle')
        got = simdOp(
          `(i8x16.shuffle ${Array.from({ length: 16 }, (_, i) => i).join(' ')} (local.get 0) (local.get 0))`,
          '(param v128)',
          'v128',
        );
      else if (k === 'store')
        got = simdOp('(v128.store (local.get 0) (local.get 1)) (i32.const 0)', '(param i32 v128)', 'i32');
      else if (k === 'load' || k === 'load8x8_u') got = simdOp(`(${n} (local.get 0))`, '(param i32)', 'v128');
      else if (k.endsWith('_splat'))
        got = simdOp(
          `(${n} (local.get 0))`,
          `(param ${k.startsWith('f32') ? 'f32' : k.startsWith('f64') ? 'f64' : 'i32'})`,
          'v128',
        );
      else if (k.includes('extract_lane'))
        got = simdOp(
          `(${n} 1 (local.get 0))`,
          '(param v128)',
          k.startsWith('f32') ? 'f32' : k.startsWith('f64') ? 'f64' : 'i32',
        );
      else if (k === 'bitselect')
        got = simdOp(`(${n} (local.get 0) (local.get 0) (local.get 0))`, '(param v128)', 'v128');
      else if (k === 'not' || /extend|abs|neg|sqrt|convert|promote/.test(k))
        got = simdOp(`(${n} (local.get 0))`, '(param v128)', 'v128');
      else got = simdOp(`(${n} (local.get 0) (local.get 0))`, '(param v128)', 'v128');
      expect(got, n).toBe(code);
    }
    // a few core opcodes by value (the spec's table)
    expect([O.f32_add, O.f32_div, O.f64_promote_f32, O.select, O.i32_load16_s]).toEqual([0x92, 0x95, 0xbb, 0x1b, 0x2e]);
  });

  it('random formulas on random bands of every dtype equal the interpreter bit for bit, and the float32 reference', () => {
    fc.assert(
      fc.property(
        fc.oneof({ weight: 3, arbitrary: tree.map(printFormula) }, { weight: 1, arbitrary: shaped }),
        fc.array(dtypeSpec, { minLength: 5, maxLength: 5 }),
        fc.integer({ min: 1, max: MAXN }),
        fc.array(fc.array(sample, { minLength: MAXN, maxLength: MAXN }), { minLength: 5, maxLength: 5 }),
        fc.option(fc.array(fc.boolean(), { minLength: MAXN, maxLength: MAXN })),
        (src, specPool, n, raws, maskBits) => {
          const program = compileFormula(src);
          const specs: BandSpec[] = program.bands.map((_, j) => specPool[j]!);
          const data = specs.map((s, j) => fillBand(s, raws[j]!.slice(0, n)));
          const mask = maskBits ? Uint8Array.from(maskBits.slice(0, n), (b) => (b ? 1 : 0)) : undefined;
          const [a, b] = both(program, specs, data, mask, {}, n);
          expectSame(a!.values, b!.values, src);
          expectStatsClose(a!.stats, b!.stats, 1e-12, src);
          // the float32-emulating reference (nodata within the dtype's range, as the generators make it)
          const inputs = Object.fromEntries(program.bands.map((bd, j) => [bd, { data: data[j]!, spec: specs[j]! }]));
          const isNdb = program.code.length === 4 && program.code[0] === 15;
          const want = referenceValues(src, inputs, n, mask, Math.fround);
          for (let i = 0; i < n; i++) {
            // NDB on two u16 bands of equal scale and no offset is integer math (within 2.5e-7)
            if (!close(a!.values[i]!, want[i]!, 0, isNdb ? 2.5e-7 : 0))
              throw new Error(`${src}: pixel ${i}: jit ${a!.values[i]} reference ${want[i]}`);
          }
          // values only and statistics only agree with values+stats
          const [vo] = both(program, specs, data, mask, { stats: false }, n);
          expectSame(vo!.values, a!.values, `${src} (values only)`);
          expect(vo!.stats.count).toBe(0);
          const [so] = both(program, specs, data, mask, { writeValues: false }, n);
          expectStatsClose(so!.stats, a!.stats, 1e-12, `${src} (stats only)`);
        },
      ),
      { numRuns: 400 },
    );
  });

  it('NDVI over chunks and blocks (K found late, masks, tails): equal to the interpreter, statistics to 1e-12', () => {
    const ndvi = compileFormula('(B08 - B04) / (B08 + B04)');
    fc.assert(
      fc.property(
        fc.oneof(fc.integer({ min: 1, max: 40 }), fc.integer({ min: 500, max: 40_000 })),
        fc.integer({ min: 1, max: 2 ** 30 }),
        fc.integer({ min: 0, max: 2000 }),
        fc.boolean(),
        fc.constantFrom(0, -0.1),
        fc.constantFrom(0.0001, 0.0002),
        (n, seed, invalidLead, withMask, offset, scaleB) => {
          let s = seed;
          const rnd = () => {
            s = (s * 1103515245 + 12345) & 0x7fffffff;
            return s / 0x7fffffff;
          };
          const red = Uint16Array.from({ length: n }, (_, i) =>
            i < invalidLead ? 0 : rnd() < 0.05 ? 65535 : 1 + Math.floor(rnd() * 9000),
          );
          const nir = Uint16Array.from({ length: n }, () => (rnd() < 0.02 ? 0 : 1 + Math.floor(rnd() * 9000)));
          const mask = withMask ? Uint8Array.from({ length: n }, () => (rnd() < 0.8 ? 1 : 0)) : undefined;
          const specs: BandSpec[] = [
            { dtype: 'u16', scale: 0.0001, offset, nodata: 65535 },
            { dtype: 'u16', scale: scaleB, offset, nodata: 65535 },
          ];
          const [a, b] = both(ndvi, specs, [red, nir], mask);
          expectSame(a!.values, b!.values, 'NDVI');
          expectStatsClose(a!.stats, b!.stats, 1e-12, 'NDVI');
          const ref = referenceStats(a!.values);
          expectStatsClose(a!.stats, ref, 1e-9, 'NDVI vs float64');
        },
      ),
      { numRuns: 60 },
    );
  });

  /**
   * NDVI on 10 million pixels of u16 bands filled by `dn` (from an LCG draw and the pixel index):
   * the fused statistics (nothing stored), and the two-pass float64 reference over the values.
   */
  const fusedNdvi10M = (offset: number, seed: number, dn: (draw: number, i: number) => [red: number, nir: number]) => {
    const n = 10_000_000;
    const ndvi = compileFormula('(B08 - B04) / (B08 + B04)');
    const prep = jit.prepare(n, [
      { dtype: 'u16', scale: 0.0001, offset },
      { dtype: 'u16', scale: 0.0001, offset },
    ]);
    const red = prep.bands[0]! as Uint16Array;
    const nir = prep.bands[1]! as Uint16Array;
    for (let i = 0; i < n; i++) {
      seed = (seed * 1664525 + 1013904223) >>> 0;
      [red[i], nir[i]] = dn(seed, i);
    }
    const stats = jit.run(ndvi, { writeValues: false });
    jit.run(ndvi, { stats: false });
    return { stats, ref: referenceStats(jit.values()) };
  };

  it('NDVI fused with its statistics on 10 million pixels agrees with a float64 two-pass reference to 1e-9', () => {
    const { stats, ref } = fusedNdvi10M(0, 42, (s, i) => [
      i % 101 === 0 ? 0 : 300 + (s >>> 20),
      2000 + ((s >>> 8) & 4095),
    ]);
    expect(stats.count).toBe(ref.count);
    expect(stats.min).toBe(ref.min);
    expect(stats.max).toBe(ref.max);
    expect(Math.abs(stats.mean - ref.mean) / Math.abs(ref.mean)).toBeLessThan(1e-9);
    expect(Math.abs(stats.std - ref.std) / ref.std).toBeLessThan(1e-9);
  });

  it('NDVI fused with its statistics on 10 million nearly equal pixels (std/mean ~4e-4) agrees with the two-pass reference to 1e-9', () => {
    // a uniform canopy: digital numbers within a few counts of each other
    for (const offset of [0, -0.1]) {
      const { stats, ref } = fusedNdvi10M(offset, 3, (s, i) => [
        i % 89 === 0 ? 0 : 1500 + (s >>> 30),
        6000 + ((s >>> 12) & 3),
      ]);
      expect(ref.std / ref.mean).toBeLessThan(1e-3);
      expect(stats.count).toBe(ref.count);
      expect(Math.abs(stats.mean - ref.mean) / Math.abs(ref.mean), `offset ${offset}`).toBeLessThan(1e-9);
      expect(Math.abs(stats.std - ref.std) / ref.std, `offset ${offset}`).toBeLessThan(1e-9);
    }
  });

  it('exp, log and pow are left to the interpreter; results still equal', () => {
    for (const src of ['exp(B04) + B08', 'log(B08) * 2', 'pow(B08, 1.5) - B04']) {
      const program = compileFormula(src);
      expect(jitSupports(program)).toBe(false);
      expect(
        jitModuleBytes(
          program,
          program.bands.map(() => ({ dtype: 'u16' })),
          false,
          true,
        ),
      ).toBeNull();
      const data = program.bands.map((_, j) => Uint16Array.from({ length: 37 }, (_, i) => (i * (11 + j)) % 900));
      const [a, b] = both(
        program,
        program.bands.map(() => ({ dtype: 'u16', scale: 0.0001 })),
        data,
        undefined,
      );
      expectSame(a!.values, b!.values, src);
      expect(a!.stats).toEqual(b!.stats);
    }
  });

  it('falls back to the interpreter (with a warning) when a module fails to compile', () => {
    const k = new Kernel({ simd: true, jit: true });
    const program = compileFormula('B03 * 3 - B05 / 7');
    const data = [
      Uint16Array.from({ length: 29 }, (_, i) => i * 37),
      Uint16Array.from({ length: 29 }, (_, i) => 29 - i),
    ];
    const specs: BandSpec[] = [
      { dtype: 'u16', scale: 0.0001 },
      { dtype: 'u16', scale: 0.0001 },
    ];
    // the interpreter's result, without compiling this program's module anywhere first
    const vp = vm.prepare(29, specs);
    for (const [j, d] of data.entries()) vp.bands[j]!.set(d);
    const want = { stats: vm.run(program), values: vm.copyValues() };
    const Module = WebAssembly.Module;
    const warn = vi.spyOn(process, 'emitWarning').mockImplementation(() => {});
    (WebAssembly as { Module: unknown }).Module = () => {
      throw new Error('compile failed (test)');
    };
    try {
      const prep = k.prepare(29, specs);
      for (const [j, d] of data.entries()) prep.bands[j]!.set(d);
      const s = k.run(program);
      const got = k.copyValues();
      expectSame(got, want.values, 'fallback');
      expect(s).toEqual(want.stats);
      expect(warn).toHaveBeenCalledOnce();
      k.run(program);
      expect(warn).toHaveBeenCalledOnce(); // once: the kernel stays on the interpreter
    } finally {
      (WebAssembly as { Module: unknown }).Module = Module;
      warn.mockRestore();
    }
  });

  it('a band-layout change compiles a new module; programs from another thread (structured clones) hit the cache', () => {
    const p = compile(parseFormula('B08 * 2 + B04'));
    for (const scale of [1, 0.5]) {
      const data = [Uint16Array.from([1, 2, 3, 4, 5]), Uint16Array.from([10, 20, 30, 40, 50])];
      const [a, b] = both(
        structuredClone(p),
        [
          { dtype: 'u16', scale },
          { dtype: 'u16', scale },
        ],
        data,
        undefined,
      );
      expectSame(a!.values, b!.values, `scale ${scale}`);
      expect(a!.values[0]).toBe(scale * 21);
    }
  });
});
