import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { compileFormula, constantsOf, FormulaError, parseFormula, OP } from '../../../src/compute/formula.js';

const err = (src: string) => {
  try {
    compileFormula(src);
  } catch (e) {
    return e as FormulaError;
  }
  throw new Error(`"${src}" compiled`);
};

describe('formula parser', () => {
  it.each([
    ['', 'empty', 0],
    ['   ', 'empty', 0],
    ['B08 + B13', 'unknown_band', 6],
    ['b08 - B04', 'unknown_band', 0],
    ['foo(B08)', 'unknown_function', 0],
    ['sqrt(B08, B04)', 'wrong_arity', 0],
    ['pow(B08)', 'wrong_arity', 0],
    ['min(B08)', 'wrong_arity', 0],
    ['(B08 - B04', 'unbalanced_parenthesis', 0],
    ['B08 - B04)', 'unbalanced_parenthesis', 9],
    ['sqrt(B08', 'unbalanced_parenthesis', 4],
    ['B08 B04', 'trailing_input', 4],
    ['B08 +', 'unexpected_token', 5],
    ['B08 ^ 2', 'unexpected_character', 4],
    ['B08 # 2', 'unexpected_character', 4],
    ['NIR - RED', 'unknown_identifier', 0],
    ['2x', 'invalid_number', 0],
    ['sqrt + 1', 'unexpected_token', 0],
    ['B08 * , 2', 'unexpected_token', 6],
  ])('%j → %s at %i', (src, code, pos) => {
    const e = err(src);
    expect(e).toBeInstanceOf(FormulaError);
    expect(e.code).toBe(code);
    expect(e.position).toBe(pos);
    expect(e.message).toMatch(/at character \d+/);
  });

  it('limits length to 1,000 characters and depth to 64 levels', () => {
    expect(err(`${'B08+'.repeat(250)}B04`).code).toBe('too_long');
    expect(() => compileFormula(`${'1+'.repeat(499)}1`)).not.toThrow();
    expect(err(`${'('.repeat(65)}B08${')'.repeat(65)}`).code).toBe('too_deep');
    expect(() => compileFormula(`${'('.repeat(60)}B08${')'.repeat(60)}`)).not.toThrow();
    expect(err(`${'-'.repeat(70)}B08`).code).toBe('too_deep');
  });

  it('reports the bands a formula reads, in band order, and folds constants', () => {
    expect(compileFormula('B11 * 2 + B02 - B11').bands).toEqual(['B02', 'B11']);
    const p = compileFormula('B08 * (2 * 3 + 1) - sqrt(16)');
    expect(constantsOf(p).sort()).toEqual([4, 7]);
    expect(constantsOf(compileFormula('1 / 0 + B04')).some((v) => Number.isNaN(v))).toBe(true);
  });

  it('compiles (Bx − By)/(Bx + By) to one fused instruction and nested ones to ND', () => {
    expect(Array.from(compileFormula('(B08 - B04) / (B08 + B04)').code.slice(0, 1))).toEqual([OP.NDB]);
    const p = compileFormula('((B08 * 2) - B04) / ((B08 * 2) + B04)');
    expect(Array.from(p.code).filter((_, i) => i % 4 === 0)).toContain(OP.ND);
  });

  it('a formula that is just a band or a constant still compiles', () => {
    expect(compileFormula('B08').bands).toEqual(['B08']);
    expect(compileFormula('42').bands).toEqual([]);
    expect(parseFormula('-(-B08)')).toEqual({ k: 'neg', a: { k: 'neg', a: { k: 'band', b: 'B08' } } });
  });

  it('fuzz: any string either compiles or throws FormulaError, never anything else', () => {
    const alphabet = fc.constantFrom(...'B0123456789. +-*/(),eEsqrtabminxpowlgB8AB11B12 \t^#'.split(''));
    const tokens = fc.constantFrom(
      'B02',
      'B04',
      'B08',
      'B8A',
      'B11',
      'sqrt(',
      'pow(',
      'min(',
      'max(',
      'log(',
      ')',
      '(',
      ',',
      '+',
      '-',
      '*',
      '/',
      '1',
      '0.5',
      '1e3',
      ' ',
    );
    const check = (s: string) => {
      try {
        const p = compileFormula(s);
        expect(p.code).toBeInstanceOf(Int32Array);
      } catch (e) {
        if (!(e instanceof FormulaError)) throw e;
      }
    };
    fc.assert(fc.property(fc.string({ maxLength: 200 }), check), { numRuns: 2000 });
    fc.assert(
      fc.property(
        fc.array(alphabet, { maxLength: 120 }).map((a) => a.join('')),
        check,
      ),
      { numRuns: 2000 },
    );
    fc.assert(
      fc.property(
        fc.array(tokens, { maxLength: 80 }).map((a) => a.join('')),
        check,
      ),
      { numRuns: 3000 },
    );
    check('('.repeat(5000));
    check(`${'-'.repeat(999)}1`);
  });
});
