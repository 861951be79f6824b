/** HTTP schemas of the batch statistics endpoints (types come from here, never written twice). */
import { Type, type Static } from 'typebox';
import { PageEnvelope, PageQuery } from '../platform/http/pagination.js';

export const BATCH_INTERVALS = ['daily', 'weekly', 'biweekly', 'capture'] as const;
export const BATCH_FORMATS = ['csv', 'ndjson'] as const;
export const BATCH_STATUSES = ['pending', 'running', 'ready', 'failed', 'cancelled'] as const;
export type BatchInterval = (typeof BATCH_INTERVALS)[number];
export type BatchFormat = (typeof BATCH_FORMATS)[number];
export type BatchStatus = (typeof BATCH_STATUSES)[number];

const IndexSpec = Type.Union([
  Type.String({ minLength: 1, maxLength: 32, description: 'An index name from GET /v1/indices/catalog' }),
  Type.Object(
    {
      name: Type.String({ minLength: 1, maxLength: 64, description: 'The name the rows carry in `index`' }),
      formula: Type.String({ minLength: 1, maxLength: 2000, description: 'Band math (see docs/api.md#formulas)' }),
    },
    { additionalProperties: false },
  ),
]);

export const BatchCreate = Type.Object(
  {
    fields: Type.Optional(
      Type.Union(
        [
          Type.Literal('all'),
          Type.Array(Type.String({ minLength: 1, maxLength: 64 }), { minItems: 1, description: 'Field ids' }),
        ],
        { description: 'Registered fields: their ids, or "all" (every field of the account when the job is made)' },
      ),
    ),
    features: Type.Optional(
      Type.Object(
        {},
        {
          additionalProperties: true,
          description:
            'Ad-hoc polygons: a GeoJSON FeatureCollection (WGS84) whose features have a unique `id` (string or number, the Feature member or an `id` property) and a Polygon or MultiPolygon geometry. At most BATCH_MAX_FEATURES (default 100,000).',
        },
      ),
    ),
    indices: Type.Array(IndexSpec, { minItems: 1, maxItems: 20 }),
    start_date: Type.String({ maxLength: 10, description: 'YYYY-MM-DD' }),
    end_date: Type.String({ maxLength: 10, description: 'YYYY-MM-DD, inclusive' }),
    interval: Type.Optional(
      Type.Enum([...BATCH_INTERVALS], {
        description:
          'daily, weekly, biweekly: intervals from start_date, each with its best capture, as the time series; capture: one row per capture over the feature. Default weekly.',
      }),
    ),
    format: Type.Optional(Type.Enum([...BATCH_FORMATS], { description: 'Result file format. Default csv.' })),
    max_cloud_cover: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: 100,
        description: 'A capture with more of the feature unusable (percent) is a gap. Default 20.',
      }),
    ),
    percentiles: Type.Optional(
      Type.Array(Type.Number(), { description: 'Percentiles in [0, 100]: a p<N> column each' }),
    ),
    histogram: Type.Optional(
      Type.Union([Type.Integer(), Type.Array(Type.Number())], {
        description: 'Bins (a number) or edges: a histogram column (JSON)',
      }),
    ),
    weighting: Type.Optional(Type.Enum(['centre', 'coverage'] as const)),
    scl_exclude: Type.Optional(Type.Array(Type.Integer(), { description: 'SCL classes to exclude' })),
    cloud_dilation_m: Type.Optional(Type.Number({ description: 'Metres around clouds and shadows also excluded' })),
  },
  { additionalProperties: false },
);
export type BatchCreate = Static<typeof BatchCreate>;

const Nullable = <T extends Parameters<typeof Type.Union>[0][number]>(t: T) => Type.Union([t, Type.Null()]);

export const BatchJob = Type.Object({
  id: Type.String({ description: 'bat_…' }),
  status: Type.Enum([...BATCH_STATUSES]),
  format: Type.Enum([...BATCH_FORMATS]),
  interval: Type.Enum([...BATCH_INTERVALS]),
  start_date: Type.String(),
  end_date: Type.String(),
  indices: Type.Array(Type.String()),
  max_cloud_cover: Type.Number({ description: 'As asked, or the default 20' }),
  // the statistics options as the request gave them, each only when it did
  percentiles: Type.Optional(Type.Array(Type.Number())),
  histogram: Type.Optional(Type.Union([Type.Integer(), Type.Array(Type.Number())])),
  weighting: Type.Optional(Type.Enum(['centre', 'coverage'] as const)),
  scl_exclude: Type.Optional(Type.Array(Type.Integer())),
  cloud_dilation_m: Type.Optional(Type.Number()),
  feature_count: Type.Integer(),
  progress: Type.Object({
    done: Type.Integer({ description: 'features × indices × intervals computed' }),
    total: Type.Integer(),
    chunks_done: Type.Integer(),
    chunks: Type.Integer(),
  }),
  error_count: Type.Integer({ description: 'Features that failed (their rows are left out)' }),
  errors: Type.Array(Type.Object({ feature_id: Type.String(), error: Type.String() }), {
    description: 'The first 100 failed features and why',
  }),
  error: Nullable(Type.String({ description: 'Why the whole job failed' })),
  download_url: Nullable(Type.String({ description: 'Signed link to the result (ready only)' })),
  expires_at: Nullable(Type.String()),
  size_bytes: Nullable(Type.Integer()),
  created_at: Type.String(),
  updated_at: Type.String(),
  completed_at: Nullable(Type.String()),
});
export type BatchJob = Static<typeof BatchJob>;

export const BatchParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const BatchListQuery = Type.Object(
  {
    ...PageQuery.properties,
    status: Type.Optional(Type.Enum([...BATCH_STATUSES])),
  },
  { additionalProperties: false },
);
export type BatchListQuery = Static<typeof BatchListQuery>;
export const BatchList = PageEnvelope(BatchJob);
// Lenient on purpose, as the reports' download: an altered link is a 403, not a malformed request.
export const DownloadQuery = Type.Object({
  expires: Type.Optional(Type.String({ maxLength: 32, description: 'Unix seconds at which the link expires.' })),
  signature: Type.Optional(
    Type.String({ maxLength: 256, description: 'HMAC-SHA256 of `<job id>.<expires>` (base64url).' }),
  ),
});
