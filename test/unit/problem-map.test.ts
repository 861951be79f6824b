/**
 * The composition's table from domain errors to problems (src/problem-map.ts): each row gives the
 * code, field-level issue and extras the throw sites used to build themselves.
 */
import { describe, expect, it } from 'vitest';
import { compileFormula, FormulaError } from '../../src/compute/formula.js';
import { BoundaryError, validateBoundary } from '../../src/fields/boundary.js';
import { LocalPathError } from '../../src/imagery/local-path.js';
import { ImageryError } from '../../src/imagery/window-reader.js';
import { AppError, problemOf, RefusedInput, toProblem } from '../../src/platform/errors.js';
import { domainProblems } from '../../src/problem-map.js';
import { OutboundError } from '../../src/webhooks/outbound.js';

const problem = (err: unknown) => {
  const p = problemOf(err, domainProblems);
  expect(p).toBeInstanceOf(AppError);
  return toProblem(p!);
};

function thrown(f: () => unknown): Error {
  try {
    f();
  } catch (err) {
    return err as Error;
  }
  throw new Error('did not throw');
}

describe('domain errors → problems', () => {
  it('FormulaError → 400 invalid_formula at the path the feature names, with the position', () => {
    const err = thrown(() => compileFormula('B04 +'));
    expect(err).toBeInstanceOf(FormulaError);
    const p = problem(new RefusedInput(err, '/query/formula'));
    expect(p).toMatchObject({
      status: 400,
      code: 'invalid_formula',
      title: 'The formula is invalid',
      detail: err.message,
      position: (err as FormulaError).position,
    });
    expect(p.errors).toEqual([{ path: '/query/formula', code: (err as FormulaError).code, message: err.message }]);
  });

  it('BoundaryError → 400 invalid_boundary with every issue and the first three in the detail', () => {
    const err = thrown(() =>
      validateBoundary(
        {
          type: 'Polygon',
          coordinates: [
            [
              [0, 0],
              [1, 0],
              [0, 0],
            ],
          ],
        },
        { basePath: '/body/boundary' },
      ),
    );
    expect(err).toBeInstanceOf(BoundaryError);
    const p = problem(err);
    expect(p).toMatchObject({ status: 400, code: 'invalid_boundary' });
    expect(p.errors!.length).toBeGreaterThan(0);
    expect(p.errors![0]!.path).toMatch(/^\/body\/boundary/);
    expect(p.detail).toBe(
      p
        .errors!.slice(0, 3)
        .map((i) => `${i.path}: ${i.message}`)
        .join('; '),
    );
  });

  it('LocalPathError → 400 invalid_imagery, path_not_allowed or file_not_found, named by band', () => {
    expect(
      problem(new RefusedInput(new LocalPathError('outside', 'the path is outside'), '/body/bands/B04')),
    ).toMatchObject({
      status: 400,
      code: 'invalid_imagery',
      detail: 'B04: the path is outside',
      errors: [{ path: '/body/bands/B04', code: 'path_not_allowed', message: 'B04: the path is outside' }],
    });
    expect(problem(new RefusedInput(new LocalPathError('missing', 'no such file'), '/body/mask')).errors).toEqual([
      { path: '/body/mask', code: 'file_not_found', message: 'mask: no such file' },
    ]);
  });

  it('ImageryError (a worker failure) → invalid_imagery with the decode-limit, CRS or unreadable code', () => {
    expect(
      problem(new RefusedInput(new ImageryError('B08', '[decompression_bomb] decodes to more'), '/body/bands/B08'))
        .errors,
    ).toEqual([{ path: '/body/bands/B08', code: 'decompression_bomb', message: 'B08: decodes to more' }]);
    expect(
      problem(new RefusedInput(new ImageryError('B04', 'unsupported CRS: EPSG:9999'), '/body/bands/B04')).errors![0]!
        .code,
    ).toBe('unsupported_crs');
    expect(problem(new RefusedInput(new ImageryError('', 'worker died'), '/body')).errors).toEqual([
      { path: '/body', code: 'unreadable_file', message: 'worker died' },
    ]);
  });

  it('OutboundError → 400 validation_failed on the URL, by kind', () => {
    const at = (kind: OutboundError['kind']) =>
      problem(new RefusedInput(new OutboundError(kind, 'is wrong'), '/body/url'));
    expect(at('invalid_url')).toMatchObject({
      status: 400,
      code: 'validation_failed',
      detail: 'url is wrong',
      errors: [{ path: '/body/url', code: 'invalid_url', message: 'url is wrong' }],
    });
    expect(at('blocked_address').errors![0]!.code).toBe('blocked_address');
    expect(at('dns').errors![0]!.code).toBe('unresolvable_host');
  });

  it('an error no row names stays unmapped (an opaque 500)', () => {
    expect(problemOf(new TypeError('bug'), domainProblems)).toBeNull();
  });
});
