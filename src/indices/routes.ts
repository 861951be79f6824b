import { Type } from 'typebox';
import { indexCatalog, SPEC_INDICES } from '../compute/catalog.js';
import { BANDS, compileFormula, FormulaError } from '../compute/formula.js';
import { AppError } from '../platform/errors.js';
import type { Api } from '../platform/http/context.js';
import { ProblemResponses } from '../platform/http/openapi.js';

const Entry = Type.Object({
  name: Type.String(),
  long_name: Type.String(),
  formula: Type.String(),
  bands: Type.Array(Type.String()),
  range: Type.Array(Type.Number(), { minItems: 2, maxItems: 2 }),
  primary_use: Type.String(),
  source: Type.String(),
  spec_index: Type.Boolean({ description: 'One of the spec\'s index values (NDVI, NDRE, NDWI, EVI, SAVI, MSAVI2); the others are usable as formulas with index=custom.' }),
});

export function indexRoutes(app: Api): void {
  app.get('/indices/catalog', {
    schema: {
      tags: ['indices'],
      summary: 'The index catalogue',
      description: 'Every built-in index with its formula (in the custom formula language, on reflectance 0..1), bands, expected range, primary use and source.',
      response: { 200: Type.Object({ data: Type.Array(Entry), bands: Type.Array(Type.String()) }), ...ProblemResponses },
    },
  }, async () => ({
    data: indexCatalog.map((e) => ({ ...e, spec_index: (SPEC_INDICES as readonly string[]).includes(e.name) })),
    bands: [...BANDS],
  }));

  app.post('/indices/validate', {
    schema: {
      tags: ['indices'],
      summary: 'Check a custom formula',
      description: 'Parses and compiles a band-math formula; answers the bands it reads, or 400 with the parser\'s message and character position.',
      body: Type.Object({ formula: Type.String({ maxLength: 10_000 }) }, { additionalProperties: false }),
      response: { 200: Type.Object({ formula: Type.String(), bands: Type.Array(Type.String()), operations: Type.Integer() }), ...ProblemResponses },
    },
  }, async (req) => {
    try {
      const p = compileFormula(req.body.formula);
      return { formula: req.body.formula, bands: p.bands, operations: p.ops };
    } catch (err) {
      if (err instanceof FormulaError) throw formulaProblem(err, '/body/formula');
      throw err;
    }
  });
}

export function formulaProblem(err: FormulaError, path: string): AppError {
  return new AppError('invalid_formula', err.message, {
    status: 400,
    title: 'The formula is invalid',
    errors: [{ path, code: err.code, message: err.message }],
    extra: { position: err.position },
  });
}
