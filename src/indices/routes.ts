import { Type } from 'typebox';
import { indexCatalog, SPEC_INDICES } from '../compute/catalog.js';
import { BANDS, compileFormula, FormulaError } from '../compute/formula.js';
import { routePlugin, type Api } from '../platform/http/context.js';
import { RefusedInput } from '../platform/errors.js';
import { computeFieldIndex, type IndexDeps } from './service.js';
import { indexTimeSeriesJson, MAX_INTERVALS } from './timeseries.js';
import { createCustomIndex, getCustomIndex, listCustomIndices } from './custom.js';
import { page, PageEnvelope, PageQuery, setLinkHeader } from '../platform/http/pagination.js';
import { ProblemResponses, problemResponses } from '../platform/http/openapi.js';
import { acceptsEncoding } from '../platform/http/accept-encoding.js';
import { registerRasterRoutes } from './raster-routes.js';

const Entry = Type.Object({
  name: Type.String(),
  long_name: Type.String(),
  formula: Type.String(),
  bands: Type.Array(Type.String()),
  range: Type.Array(Type.Number(), { minItems: 2, maxItems: 2 }),
  primary_use: Type.String(),
  source: Type.String(),
  spec_index: Type.Boolean({
    description:
      "One of the spec's index values (NDVI, NDRE, NDWI, EVI, SAVI, MSAVI2); the others are usable as formulas with index=custom.",
  }),
});

const Stats = Type.Object({
  min: Type.Union([Type.Number(), Type.Null()]),
  max: Type.Union([Type.Number(), Type.Null()]),
  mean: Type.Union([Type.Number(), Type.Null()]),
  std: Type.Union([Type.Number(), Type.Null()], { description: 'population standard deviation' }),
  count: Type.Number({
    description: 'valid pixels (an integer); weighting=coverage: the sum of their weights (area inside, in pixels)',
  }),
  valid_fraction: Type.Number({ description: 'valid pixels / field pixels (coverage: valid weight / field weight)' }),
  median: Type.Union([Type.Number(), Type.Null()]),
  p10: Type.Union([Type.Number(), Type.Null()]),
  p25: Type.Union([Type.Number(), Type.Null()]),
  p75: Type.Union([Type.Number(), Type.Null()]),
  p90: Type.Union([Type.Number(), Type.Null()]),
  pixels: Type.Optional(
    Type.Integer({ description: "the field's pixels: centres inside (weighting=coverage: every pixel touched)" }),
  ),
  mask_reasons: Type.Optional(
    Type.Object(
      {
        no_data: Type.Number({ description: "a band's no-data (DN 0, declared no-data, outside the raster)" }),
        scl: Type.Record(Type.String(), Type.Number(), { description: 'per excluded SCL class' }),
        dilation: Type.Number({ description: 'within cloud_dilation_m of a cloud or shadow' }),
        non_finite: Type.Number({ description: 'the formula gave ÷0 or a non-finite value' }),
      },
      {
        description:
          'Field pixels left out, each counted once under its first reason in this order; count (pixel-centre rule) + these = the field pixels',
      },
    ),
  ),
  percentiles: Type.Optional(
    Type.Array(Type.Object({ percentile: Type.Number(), value: Type.Union([Type.Number(), Type.Null()]) }), {
      description: 'The percentiles asked for, in the order asked (numpy linear interpolation)',
    }),
  ),
  histogram: Type.Optional(
    Type.Object(
      {
        edges: Type.Array(Type.Number()),
        counts: Type.Array(Type.Number(), { description: 'values per bin; the last bin includes its upper edge' }),
      },
      { description: 'numpy.histogram of the valid values' },
    ),
  ),
});

/** The cloud mask and weighting options (stats-options.ts checks them). */
const MaskQuery = {
  weighting: Type.Optional(
    Type.Union([Type.Literal('centre'), Type.Literal('coverage')], {
      description:
        "centre (default, the spec's rule): pixels whose centre is inside, each counted once. coverage: every pixel the field touches, weighted by the exact share of its area inside (exactextract's semantics: mean, std and percentiles weighted, min/max over any coverage, count = sum of weights, pixels = touched; a share within 1e-9 of none or all counts as none or all)",
    }),
  ),
  scl_exclude: Type.Optional(
    Type.String({
      maxLength: 100,
      description:
        'Comma-separated Sentinel-2 SCL classes (0-11) excluded from the statistics and the cloud cover; default 0,1,3,8,9,10,11 (no data, saturated, cloud shadow, cloud medium and high probability, cirrus, snow); empty: none',
    }),
  ),
  cloud_dilation_m: Type.Optional(
    Type.Number({
      description:
        "Also exclude pixels whose centre lies within this many metres of an excluded cloud or shadow pixel (classes 3, 8, 9, 10), on the capture's grid; at most 1000",
    }),
  ),
};

/** The statistics options of the single-date endpoint (stats-options.ts checks them). */
const StatsQuery = {
  ...MaskQuery,
  percentiles: Type.Optional(
    Type.String({
      maxLength: 2000,
      description:
        'Comma-separated percentiles in [0, 100] (at most 100), e.g. 5,50,95; numpy linear interpolation; in zonal_stats, so with zonal_stats=true (400 needs_zonal_stats without)',
    }),
  ),
  histogram: Type.Optional(
    Type.String({
      maxLength: 20_000,
      description:
        'A number of equal bins over [min, max] of the values (at most 1000), or at least two comma-separated increasing edges; in zonal_stats, so with zonal_stats=true (400 needs_zonal_stats without)',
    }),
  ),
};

/** The same options in a JSON body (POST custom): lists as arrays; stats-options.ts checks them. */
const StatsBody = {
  weighting: MaskQuery.weighting,
  scl_exclude: Type.Optional(
    Type.Array(Type.Integer(), {
      maxItems: 100,
      description:
        'Sentinel-2 SCL classes (0-11) excluded from the statistics and the capture choice, as on GET indices; default [0, 1, 3, 8, 9, 10, 11]; []: none',
    }),
  ),
  cloud_dilation_m: MaskQuery.cloud_dilation_m,
  percentiles: Type.Optional(
    Type.Array(Type.Number(), {
      maxItems: 1000,
      description: 'Percentiles in [0, 100] (at most 100), e.g. [5, 50, 95]; numpy linear interpolation',
    }),
  ),
  histogram: Type.Optional(
    Type.Union([Type.Number(), Type.Array(Type.Number(), { maxItems: 2000 })], {
      description:
        'A number of equal bins over [min, max] of the values (at most 1000), or an array of at least two increasing edges ([10] is one edge, refused)',
    }),
  ),
};

export const IndexResult = Type.Object({
  field_id: Type.String(),
  index: Type.String(),
  formula: Type.Optional(Type.String()),
  date: Type.String({ description: 'date of the imagery used' }),
  imagery_id: Type.String(),
  zonal_stats: Type.Optional(Stats),
  geojson: Type.Optional(
    Type.Object(
      {},
      {
        additionalProperties: true,
        description:
          'FeatureCollection: one Polygon per field pixel (its square in WGS84), property value (number or null where masked)',
      },
    ),
  ),
});

declare module 'fastify' {
  interface FastifyInstance {
    /** Decorated by the services plugin (src/services.ts). */
    indices: IndexDeps;
  }
}

/** What computing an index over a field can refuse (the single-date and the stored-custom routes). */
const INDEX_PROBLEMS = problemResponses(
  'not_found',
  'invalid_formula',
  'no_imagery',
  'imagery_does_not_cover_field',
  'missing_bands',
  'no_usable_imagery',
);

export const indexRoutes = routePlugin('indices-routes', async (app) => {
  app.get(
    '/indices/catalog',
    {
      schema: {
        tags: ['indices'],
        summary: 'The index catalogue',
        description:
          'Every built-in index with its formula (in the custom formula language, on reflectance 0..1), bands, expected range, primary use and source.',
        response: {
          200: Type.Object({ data: Type.Array(Entry), bands: Type.Array(Type.String()) }),
          ...ProblemResponses,
        },
      },
    },
    async () => ({
      data: indexCatalog.map((e) => ({ ...e, spec_index: (SPEC_INDICES as readonly string[]).includes(e.name) })),
      bands: [...BANDS],
    }),
  );

  registerFieldIndex(app, { ...app.indices, publicBaseUrl: app.config.publicBaseUrl });
  registerRasterRoutes(app, {
    ...app.indices,
    publicBaseUrl: app.config.publicBaseUrl,
    imageCacheMb: app.config.imageCacheMb,
  });

  app.post(
    '/indices/validate',
    {
      schema: {
        tags: ['indices'],
        summary: 'Check a custom formula',
        description:
          "Parses and compiles a band-math formula; answers the bands it reads, or 400 with the parser's message and character position.",
        body: Type.Object({ formula: Type.String({ maxLength: 10_000 }) }, { additionalProperties: false }),
        response: {
          200: Type.Object({ formula: Type.String(), bands: Type.Array(Type.String()), operations: Type.Integer() }),
          ...problemResponses('invalid_formula'),
        },
      },
    },
    async (req) => {
      try {
        const p = compileFormula(req.body.formula);
        return { formula: req.body.formula, bands: p.bands, operations: p.ops };
      } catch (err) {
        if (err instanceof FormulaError) throw new RefusedInput(err, '/body/formula');
        throw err;
      }
    },
  );
});

function registerFieldIndex(app: Api, deps: IndexDeps & { publicBaseUrl: string }): void {
  app.get(
    '/fields/:id/indices',
    {
      schema: {
        tags: ['indices'],
        summary: 'Vegetation index of a field on a date',
        description:
          'Uses the best available capture: among those with every band the index reads and a usable field pixel, the nearest the date ' +
          '(ties: lower field cloud cover, then the earlier date); or the pinned imagery_id, even one entirely under cloud. index=custom takes `formula`. Masked and cloudy pixels are excluded from the statistics and are null in the GeoJSON.',
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        querystring: Type.Object(
          {
            index: Type.String({
              minLength: 1,
              maxLength: 32,
              description: 'NDVI, NDRE, NDWI, EVI, SAVI, MSAVI2, custom (or another catalogue name)',
            }),
            date: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }),
            zonal_stats: Type.Boolean({ default: false }),
            imagery_id: Type.Optional(Type.String({ maxLength: 64 })),
            formula: Type.Optional(Type.String({ maxLength: 1000 })),
            ...StatsQuery,
            geojson: Type.Boolean({
              default: true,
              description:
                'false leaves the per-pixel GeoJSON out; with it, the body is gzip-encoded when Accept-Encoding allows gzip',
            }),
          },
          { additionalProperties: false },
        ),
        response: {
          200: IndexResult,
          ...INDEX_PROBLEMS,
        },
      },
    },
    async (req, reply) => {
      const gzip = req.query.geojson !== false && acceptsEncoding(req.headers['accept-encoding'], 'gzip');
      const r = await computeFieldIndex(deps, req.account.id, req.params.id, req.query, { gzip });
      if (req.query.geojson !== false) reply.header('vary', 'Accept-Encoding');
      if (r.encoding) reply.header('content-encoding', r.encoding);
      return reply
        .type('application/json; charset=utf-8')
        .serializer((p: unknown) => p as string)
        .send(r.payload as never);
    },
  );

  app.get(
    '/fields/:id/indices/timeseries',
    {
      schema: {
        tags: ['indices'],
        summary: 'Time series of an index over a field',
        description:
          'One element per interval (1, 7 or 14 days from start_date, the last cut at end_date), from the capture with the lowest field cloud cover in it (then the earliest). ' +
          'An interval without a capture, or whose best capture has no usable field pixel or more than max_cloud_cover percent of the field unusable, is a gap: date = interval start, null statistics. ' +
          `At most ${MAX_INTERVALS} intervals.`,
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        querystring: Type.Object(
          {
            index: Type.String({ minLength: 1, maxLength: 32 }),
            start_date: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }),
            end_date: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }),
            interval: Type.Union([Type.Literal('daily'), Type.Literal('weekly'), Type.Literal('biweekly')], {
              default: 'weekly',
            }),
            max_cloud_cover: Type.Number({ minimum: 0, maximum: 100, default: 20 }),
            formula: Type.Optional(Type.String({ maxLength: 1000 })),
            ...MaskQuery,
          },
          { additionalProperties: false },
        ),
        response: { 200: Type.Array(SeriesElement), ...problemResponses('not_found', 'invalid_formula') },
      },
    },
    async (req, reply) => {
      const body = await indexTimeSeriesJson(deps, req.account.id, req.params.id, req.query);
      return reply
        .type('application/json; charset=utf-8')
        .serializer((p: unknown) => p as string)
        .send(body as never);
    },
  );

  const CustomParams = Type.Object({ id: Type.String({ maxLength: 64 }), custom_id: Type.String({ maxLength: 64 }) });
  const CustomResult = Type.Object({
    id: Type.String(),
    name: Type.String(),
    formula: Type.String(),
    field_id: Type.String(),
    date: Type.String(),
    imagery_id: Type.String(),
    zonal_stats: Stats,
    created_at: Type.String({ format: 'date-time' }),
    geojson: Type.Optional(Type.Object({}, { additionalProperties: true })),
  });
  app.post(
    '/fields/:id/indices/custom',
    {
      schema: {
        tags: ['indices'],
        summary: 'Compute and store a custom index',
        description:
          "Division by zero yields null values, not an error; a bad formula is a 400 with the parser's message and position. " +
          'The statistics options of GET indices (percentiles, histogram, weighting, scl_exclude, cloud_dilation_m) as JSON: the stored zonal_stats follow them, and the capture choice follows the mask.',
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        body: Type.Object(
          {
            name: Type.String({ minLength: 1, maxLength: 200 }),
            formula: Type.String({ minLength: 1, maxLength: 1000 }),
            date: Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' }),
            imagery_id: Type.Optional(Type.String({ maxLength: 64 })),
            ...StatsBody,
          },
          { additionalProperties: false },
        ),
        response: {
          201: CustomResult,
          ...INDEX_PROBLEMS,
        },
      },
    },
    async (req, reply) => {
      const body = await createCustomIndex(deps, req.account.id, req.params.id, req.body);
      return reply
        .code(201)
        .type('application/json; charset=utf-8')
        .serializer((p: unknown) => p as string)
        .send(body as never);
    },
  );
  app.get(
    '/fields/:id/indices/custom',
    {
      schema: {
        tags: ['indices'],
        summary: 'Stored custom indices of a field (without GeoJSON)',
        params: Type.Object({ id: Type.String({ maxLength: 64 }) }),
        querystring: Type.Object({ ...PageQuery.properties }, { additionalProperties: false }),
        response: { 200: PageEnvelope(CustomResult), ...ProblemResponses },
      },
    },
    async (req, reply) => {
      const { data, total } = await listCustomIndices(deps, req.account.id, req.params.id, req.query);
      const p = page(data, total, req.query);
      setLinkHeader(reply, req, deps.publicBaseUrl, p);
      return p;
    },
  );
  app.get(
    '/fields/:id/indices/custom/:custom_id',
    {
      schema: {
        tags: ['indices'],
        summary: 'A stored custom index with its GeoJSON',
        params: CustomParams,
        response: { 200: CustomResult, ...problemResponses('not_found') },
      },
    },
    async (req, reply) => {
      const body = await getCustomIndex(deps, req.account.id, req.params.id, req.params.custom_id);
      return reply
        .type('application/json; charset=utf-8')
        .serializer((p: unknown) => p as string)
        .send(body as never);
    },
  );
}

const SeriesElement = Type.Object({
  date: Type.String(),
  mean: Type.Union([Type.Number(), Type.Null()]),
  min: Type.Union([Type.Number(), Type.Null()]),
  max: Type.Union([Type.Number(), Type.Null()]),
  std: Type.Union([Type.Number(), Type.Null()]),
  imagery_id: Type.Union([Type.String(), Type.Null()]),
  interval_start: Type.String(),
  interval_end: Type.String(),
  valid_fraction: Type.Union([Type.Number(), Type.Null()]),
  cloud_cover: Type.Union([Type.Number(), Type.Null()], {
    description: 'percent of the field unusable in the capture used (or considered)',
  }),
});
