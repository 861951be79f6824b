/**
 * The kernel's instruction set: the one table of op codes. src/compute/formula.ts compiles to it
 * and the JIT emits from it; scripts/build-wasm.mjs generates assembly/opcodes.ts (the kernel's
 * constants) from this file before compiling the kernel, and test/unit/compute/opcodes.test.ts
 * fails when that file is stale. This file imports nothing (the build script evaluates it alone).
 *
 * An instruction is 4 × i32: [op, dst, a, b]. The kernel and the JIT test ranges of codes
 * (NEG … LOG are the unary operations, ADDC … MAXC the forms with a constant), so a new code goes
 * at the end unless it belongs in one of those ranges.
 */
export const OP = {
  /** dst = band slot a, DN × scale + offset, no-value DNs → NaN. */
  LOAD: 1,
  ADD: 2,
  SUB: 3,
  MUL: 4,
  DIV: 5,
  NEG: 6,
  SQRT: 7,
  ABS: 8,
  EXP: 9,
  LOG: 10,
  MIN: 11,
  MAX: 12,
  POW: 13,
  /** (a − b)/(a + b): normalised difference, the commonest index shape. */
  ND: 14,
  /** Normalised difference of two band slots (a, b), loaded and computed in one pass. */
  NDB: 15,
  // With a constant c (its f32 bits in the b field), no constant register read: a op c; c op a
  // for the reversed RSUBC / RDIVC.
  ADDC: 16,
  SUBC: 17,
  RSUBC: 18,
  MULC: 19,
  DIVC: 20,
  RDIVC: 21,
  MINC: 22,
  MAXC: 23,
  /** a × c + b (two roundings, as MULC then ADD): [MULCADD, dst, a | b << 16, bits(c)]. */
  MULCADD: 24,
} as const;

export type OpName = keyof typeof OP;
