/**
 * Shared by the kernel and JIT property tests: random formulas as syntax trees (printed back to
 * text, so that the parser is in the loop too) and the closeness test both compare with.
 */
import fc from 'fast-check';
import type { BandId, Node } from '../../src/compute/formula.js';

/** Same value, or both NaN, or within a relative tolerance plus an absolute one. */
export function close(a: number, b: number, rel: number, abs = 0): boolean {
  if (Number.isNaN(a) || Number.isNaN(b)) return Number.isNaN(a) && Number.isNaN(b);
  return Math.abs(a - b) <= abs + rel * Math.max(Math.abs(a), Math.abs(b));
}

/**
 * Trees over `bands`, the literals `constants` and random float32 values in ±10, the four
 * operators, unary minus, sqrt, abs, and min/max of 2 to `maxCallArgs` arguments.
 */
export function formulaTree(o: {
  bands: readonly BandId[];
  constants: number[];
  maxCallArgs: number;
}): fc.Arbitrary<Node> {
  const leaf = fc.oneof(
    fc.constantFrom(...o.bands).map((b): Node => ({ k: 'band', b })),
    fc
      .oneof(...o.constants.map((v) => fc.constant(v)), fc.double({ min: -10, max: 10, noNaN: true }).map(Math.fround))
      .map((v): Node => ({ k: 'num', v })),
  );
  return fc.letrec((tie) => ({
    node: fc.oneof({ depthSize: 'small', withCrossShrink: true }, leaf, tie('bin'), tie('un'), tie('call')),
    bin: fc.record({
      k: fc.constant('bin' as const),
      op: fc.constantFrom('+', '-', '*', '/') as fc.Arbitrary<'+' | '-' | '*' | '/'>,
      a: tie('node') as fc.Arbitrary<Node>,
      b: tie('node') as fc.Arbitrary<Node>,
    }),
    un: fc.record({ k: fc.constant('neg' as const), a: tie('node') as fc.Arbitrary<Node> }),
    call: fc.oneof(
      fc.record({
        k: fc.constant('call' as const),
        f: fc.constantFrom('sqrt', 'abs') as fc.Arbitrary<'sqrt' | 'abs'>,
        args: fc.tuple(tie('node') as fc.Arbitrary<Node>),
      }),
      fc.record({
        k: fc.constant('call' as const),
        f: fc.constantFrom('min', 'max') as fc.Arbitrary<'min' | 'max'>,
        args: fc.array(tie('node') as fc.Arbitrary<Node>, { minLength: 2, maxLength: o.maxCallArgs }),
      }),
    ),
  })).node as fc.Arbitrary<Node>;
}

/** The formula text of a tree (negative literals as (0 − v), everything parenthesised). */
export function printFormula(n: Node): string {
  switch (n.k) {
    case 'num':
      return n.v < 0 || Object.is(n.v, -0) ? `(0 - ${-n.v})` : String(n.v);
    case 'band':
      return n.b;
    case 'neg':
      return `(-${printFormula(n.a)})`;
    case 'bin':
      return `(${printFormula(n.a)} ${n.op} ${printFormula(n.b)})`;
    case 'call':
      return `${n.f}(${n.args.map(printFormula).join(', ')})`;
  }
}

/** Formulas the compiler turns into its fused shapes (ND, NDB, MULCADD, constants in instructions). */
export const SHAPED_FORMULAS = [
  '(B08 - B04) / (B08 + B04)',
  '(B08 - B04) / (B08 + B04) * 2',
  '2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)',
  'sqrt(abs((B08 - B04) * (B08 + B03) / (B11 + 0.5))) - min(B02, B04) * 2 + max(B08 / (B03 + 0.1), B11) * 0.25',
  'B08 / 0',
  '1 / B04 - B08 * 0',
  '0 - B04',
  'min(B04, 0.1) + max(0.2, B08)',
  'B08',
  '(B08 - B04) / (B08 + B04 + 0)',
];
