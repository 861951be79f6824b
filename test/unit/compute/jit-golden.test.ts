/**
 * The bytes the per-formula JIT emits, pinned: for formulas of every shape the compiler produces
 * (ND, fused NDB, MULCADD, constant forms, DIV by zero, a lone band) on band layouts of every dtype,
 * with and without a mask and a store, the SHA-256 of the modules must not change. Refactoring
 * src/compute/jit/ keeps these; a deliberate change to the emitted code updates them (and the
 * kernel benchmark shows why).
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { compileFormula } from '../../../src/compute/formula.js';
import { type JitBand, jitModuleBytes } from '../../../src/compute/jit/index.js';
import { SHAPED_FORMULAS } from '../../helpers/formulas.js';

const FORMULAS = [...SHAPED_FORMULAS, '-B08 + 3 / B04 - (2 - B03) / 4'];

const LAYOUTS: Record<string, JitBand> = {
  sentinel: { dtype: 'u16', scale: 0.0001 },
  landsat: { dtype: 'u16', scale: 2.75e-5, offset: -0.2, nodata: 65535 },
  raw: { dtype: 'u16' },
  signed: { dtype: 'i16', scale: -0.5, offset: 0.25, nodata: -9999 },
  byte: { dtype: 'u8', scale: 0.004, offset: -0.5, nodata: 7 },
  float: { dtype: 'f32', nodata: -9999 },
  floatNegZero: { dtype: 'f32', scale: 0.5, offset: -0 },
};

/** One digest per formula over every layout (plus one mixed layout), mask and store. */
function digest(formula: string): string {
  const program = compileFormula(formula);
  const h = createHash('sha256');
  const layouts = [
    ...Object.values(LAYOUTS).map((b) => program.bands.map(() => b)),
    program.bands.map((_, j) => Object.values(LAYOUTS)[j % 7]!),
  ];
  for (const bands of layouts)
    for (const hasMask of [false, true])
      for (const store of [false, true]) {
        const bytes = jitModuleBytes(program, bands, hasMask, store);
        h.update(bytes ?? new Uint8Array(0));
        h.update('|');
      }
  return h.digest('hex').slice(0, 16);
}

const EXPECTED: Record<string, string> = {
  '(B08 - B04) / (B08 + B04)': '617643d88a0eabcb',
  '(B08 - B04) / (B08 + B04) * 2': '6be96f608a943d32',
  '2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)': 'ae33fbba596264b3',
  'sqrt(abs((B08 - B04) * (B08 + B03) / (B11 + 0.5))) - min(B02, B04) * 2 + max(B08 / (B03 + 0.1), B11) * 0.25':
    '5aa0f631aba76b7e',
  'B08 / 0': '1800efc3d91a84c8',
  '1 / B04 - B08 * 0': '1e30c9abeb51a81f',
  '0 - B04': 'a98500ce54d123c6',
  'min(B04, 0.1) + max(0.2, B08)': 'ca3c884e7f292b92',
  B08: '9de8f2ec7c76ce3b',
  '(B08 - B04) / (B08 + B04 + 0)': '500c092fd2033931',
  '-B08 + 3 / B04 - (2 - B03) / 4': '38e1213db5024c63',
};

describe('kernel JIT emitted code', () => {
  it('is byte for byte what it was before the split into compute/jit/', () => {
    const got = Object.fromEntries(FORMULAS.map((f) => [f, digest(f)]));
    expect(got).toEqual(EXPECTED);
  });
});
