/**
 * Formulas that read no band (constants, after folding) on every kernel path: the SIMD build with
 * the per-formula JIT, its interpreter, and the scalar build. Every pixel the mask lets through has
 * the constant; the others, and every pixel when the constant is not finite (1/0, 0/0, log(0),
 * sqrt(-1), exp(1000)), have no value (NaN, null in JSON).
 */
import { describe, expect, it } from 'vitest';
import { compileFormula } from '../../../src/compute/formula.js';
import { Kernel } from '../../../src/compute/kernel-host.js';

const kernels = [
  new Kernel({ simd: true, jit: true }),
  new Kernel({ simd: true, jit: false }),
  new Kernel({ simd: false }),
];
const label = (k: Kernel) => (k.simd ? (k.jit ? 'simd + jit' : 'simd interpreter') : 'scalar');

const CASES: Array<[string, number | null]> = [
  ['2', 2],
  ['-(3 - 0.5) * 2', -5],
  ['pow(2, 3)', 8],
  ['0.1', Math.fround(0.1)],
  ['1/0', null],
  ['0/0', null],
  ['log(0)', null],
  ['sqrt(-1)', null],
  ['exp(1000)', null],
];

describe.each(kernels.map((k) => [label(k), k] as const))('formulas without a band (%s)', (_name, kernel) => {
  it.each(CASES)('%s', (formula, value) => {
    const program = compileFormula(formula);
    expect(program.bands).toEqual([]);
    // lengths that are not multiples of the block or of 8 lanes, a mask with holes
    for (const n of [1, 7, 1000, 5003]) {
      const prep = kernel.prepare(n, [], { mask: true });
      for (let i = 0; i < n; i++) prep.mask![i] = i % 3 === 1 ? 0 : 1;
      const valid = prep.mask!.reduce((s, m) => s + m, 0);
      const stats = kernel.run(program);
      const values = kernel.copyValues();
      for (let i = 0; i < n; i++) {
        const want = value === null || !prep.mask![i] ? NaN : value;
        if (!Object.is(values[i], want) && !(Number.isNaN(values[i]!) && Number.isNaN(want)))
          throw new Error(`n=${n} pixel ${i}: ${values[i]} instead of ${want}`);
      }
      if (value === null) {
        expect(stats.count).toBe(0);
      } else {
        expect(stats).toEqual({ count: valid, min: value, max: value, mean: value, std: 0 });
        expect(kernel.orderStats()).toEqual({ p10: value, p25: value, median: value, p75: value, p90: value });
      }
    }
  });
});
