/**
 * The closed problem catalogue: every code is declared once with its status and title, AppError
 * takes both from it, the type system refuses an undeclared code, and domain errors become
 * problems through a table the composition hands to the error handler.
 */
import path from 'node:path';
import ts from 'typescript';
import { describe, expect, it } from 'vitest';
import {
  AppError,
  domainProblem,
  isProblemCode,
  problemCatalog,
  problemCodes,
  problemOf,
  RefusedInput,
  toProblem,
  UncataloguedStatusError,
} from '../../../src/platform/errors.js';

const ROOT = path.resolve(__dirname, '../../..');

describe('the problem catalogue', () => {
  it('declares every code once, snake_case, with a 4xx/5xx status and a title', () => {
    expect(problemCodes.length).toBeGreaterThanOrEqual(31);
    expect(new Set(problemCodes).size).toBe(problemCodes.length);
    for (const code of problemCodes) {
      const { status, title } = problemCatalog[code];
      expect(code).toMatch(/^[a-z][a-z0-9_]*$/);
      expect(status >= 400 && status < 600, code).toBe(true);
      expect(title.length, code).toBeGreaterThan(3);
    }
  });

  it('holds the codes the features used to invent at their throw sites, with the statuses they had', () => {
    expect(
      Object.fromEntries(
        [
          'imagery_does_not_cover_field',
          'missing_bands',
          'no_imagery',
          'no_usable_imagery',
          'webhook_test_failed',
          'webhook_limit_reached',
          'webhook_disabled',
          'idempotency_key_reused',
          'invalid_signature',
          'link_expired',
        ].map((c) => [c, isProblemCode(c) ? problemCatalog[c].status : null]),
      ),
    ).toEqual({
      imagery_does_not_cover_field: 422,
      missing_bands: 422,
      no_imagery: 404,
      no_usable_imagery: 422,
      webhook_test_failed: 422,
      webhook_limit_reached: 409,
      webhook_disabled: 409,
      idempotency_key_reused: 422,
      invalid_signature: 403,
      link_expired: 403,
    });
  });

  it('AppError takes status and title from the catalogue for every code', () => {
    for (const code of problemCodes) {
      const err = new AppError(code, 'detail');
      expect([err.status, err.title]).toEqual([problemCatalog[code].status, problemCatalog[code].title]);
      expect(toProblem(err)).toMatchObject({
        type: `/problems/${code}`,
        code,
        status: err.status,
        title: err.title,
        detail: 'detail',
      });
    }
  });

  it('isProblemCode knows the catalogue and nothing else (not even Object.prototype)', () => {
    expect(isProblemCode('not_found')).toBe(true);
    expect(isProblemCode('no_such_code')).toBe(false);
    expect(isProblemCode('toString')).toBe(false);
  });

  it('tsc refuses an undeclared code and a per-throw status or title', () => {
    const file = path.join(ROOT, 'test/unit/platform/__closed-catalogue__.ts');
    const source = [
      "import { AppError } from '../../../src/platform/errors.js';",
      "new AppError('not_found', 'declared: compiles');",
      "new AppError('made_up_code', 'undeclared');",
      "new AppError('not_found', 'x', { status: 410 });",
      "new AppError('not_found', 'x', { title: 'Another title' });",
    ].join('\n');
    const options: ts.CompilerOptions = {
      target: ts.ScriptTarget.ES2022,
      module: ts.ModuleKind.NodeNext,
      moduleResolution: ts.ModuleResolutionKind.NodeNext,
      strict: true,
      noEmit: true,
      skipLibCheck: true,
      types: ['node'],
    };
    const host = ts.createCompilerHost(options);
    const read = host.readFile.bind(host);
    host.readFile = (f) => (path.resolve(f) === file ? source : read(f));
    const exists = host.fileExists.bind(host);
    host.fileExists = (f) => path.resolve(f) === file || exists(f);
    const program = ts.createProgram([file], options, host);
    const diagnostics = ts
      .getPreEmitDiagnostics(program)
      .filter((d) => d.file?.fileName && path.resolve(d.file.fileName) === file);
    const lines = diagnostics.map((d) => d.file!.getLineAndCharacterOfPosition(d.start!).line + 1);
    // Line 2 (a declared code) compiles; lines 3-5 are refused.
    expect(lines.sort()).toEqual([3, 4, 5]);
    expect(
      ts.flattenDiagnosticMessageText(
        diagnostics.find((d) => d.file!.getLineAndCharacterOfPosition(d.start!).line === 2)!.messageText,
        '\n',
      ),
    ).toMatch(/made_up_code/);
  }, 60_000);

  it('the one status a throw site does not choose: a framework 4xx no code declares keeps its status', () => {
    const err = new UncataloguedStatusError(406, 'the request is not multipart');
    expect([err.code, err.status, err.title]).toEqual([
      'validation_failed',
      406,
      problemCatalog.validation_failed.title,
    ]);
  });
});

describe('problemOf and a domain table', () => {
  class ParseError extends Error {
    constructor(readonly position: number) {
      super(`bad at ${position}`);
    }
  }
  class DeeperParseError extends ParseError {}
  const table = [
    domainProblem(
      ParseError,
      (err, at = '/body') =>
        new AppError('invalid_formula', err.message, {
          errors: [{ path: at, code: 'parse', message: err.message }],
          extra: { position: err.position },
        }),
    ),
  ];

  it('an AppError is its own problem; an unknown error has none (the handler answers 500)', () => {
    const own = new AppError('conflict', 'x');
    expect(problemOf(own, table)).toBe(own);
    expect(problemOf(new Error('boom'), table)).toBeNull();
    expect(problemOf(new RefusedInput(new Error('boom'), '/body/x'), table)).toBeNull();
  });

  it('a domain error (or a subclass) is mapped by its row, with the request path RefusedInput carries', () => {
    expect(toProblem(problemOf(new DeeperParseError(4), table)!)).toMatchObject({
      code: 'invalid_formula',
      status: 400,
      errors: [{ path: '/body' }],
      position: 4,
    });
    expect(problemOf(new RefusedInput(new ParseError(2), '/query/formula'), table)!.errors).toEqual([
      { path: '/query/formula', code: 'parse', message: 'bad at 2' },
    ]);
  });
});
