import { Type } from 'typebox';
import { indexCatalog, SPEC_INDICES } from '../compute/catalog.js';
import { BANDS, compileFormula, FormulaError } from '../compute/formula.js';
import type { Api } from '../platform/http/context.js';
import { computeFieldIndex, formulaProblem, type IndexDeps } from './service.js';
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

const Stats = Type.Object({
  min: Type.Union([Type.Number(), Type.Null()]),
  max: Type.Union([Type.Number(), Type.Null()]),
  mean: Type.Union([Type.Number(), Type.Null()]),
  std: Type.Union([Type.Number(), Type.Null()], { description: 'population standard deviation' }),
  count: Type.Integer({ description: 'valid pixels' }),
  valid_fraction: Type.Number({ description: 'valid pixels / field pixels' }),
  median: Type.Union([Type.Number(), Type.Null()]),
  p10: Type.Union([Type.Number(), Type.Null()]),
  p25: Type.Union([Type.Number(), Type.Null()]),
  p75: Type.Union([Type.Number(), Type.Null()]),
  p90: Type.Union([Type.Number(), Type.Null()]),
});

export const IndexResult = Type.Object({
  field_id: Type.String(),
  index: Type.String(),
  formula: Type.Optional(Type.String()),
  date: Type.String({ description: 'date of the imagery used' }),
  imagery_id: Type.String(),
  zonal_stats: Type.Optional(Stats),
  geojson: Type.Optional(Type.Object({}, { additionalProperties: true, description: 'FeatureCollection: one Polygon per field pixel (its square in WGS84), property value (number or null where masked)' })),
});

export function indexRoutes(app: Api, deps?: IndexDeps): void {
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

  if (deps) registerFieldIndex(app, deps);

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

function registerFieldIndex(app: Api, deps: IndexDeps): void {
  app.get('/fields/:id/indices', {
    schema: {
      tags: ['indices'],
      summary: 'Vegetation index of a field on a date',
      description:
        'Uses the best capture on the date (fewest unusable field pixels), else the nearest date (ties: fewer unusable pixels, then the earlier date), ' +
        'or the pinned imagery_id. index=custom takes `formula`. Masked and cloudy pixels are excluded from the statistics and are null in the GeoJSON.',
      params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
      querystring: Type.Object(
        {
          index: Type.String({ minLength: 1, maxLength: 32, description: 'NDVI, NDRE, NDWI, EVI, SAVI, MSAVI2, custom (or another catalogue name)' }),
          date: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }),
          zonal_stats: Type.Boolean({ default: false }),
          imagery_id: Type.Optional(Type.String({ maxLength: 64 })),
          formula: Type.Optional(Type.String({ maxLength: 1000 })),
          geojson: Type.Boolean({ default: true, description: 'false leaves the per-pixel GeoJSON out' }),
        },
        { additionalProperties: false },
      ),
      response: { 200: IndexResult, ...ProblemResponses },
    },
  }, async (req, reply) => {
    const body = await computeFieldIndex(deps, req.account.id, req.params.id, req.query);
    return reply.type('application/json; charset=utf-8').serializer((p: unknown) => p as string).send(body as never);
  });
}

