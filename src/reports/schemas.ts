/** HTTP schemas of the reports endpoints (types come from here, never written twice). */
import { Type, type Static } from 'typebox';
import { PageEnvelope, PageQuery } from '../platform/http/pagination.js';

export const REPORT_TYPES = ['scouting', 'seasonal', 'health_summary', 'prescription'] as const;
export const REPORT_FORMATS = ['pdf', 'json', 'csv', 'shp', 'isoxml'] as const;
/** Files a farm terminal loads (src/reports/render/machine/): prescription reports only. */
export const MACHINE_FORMATS = ['shp', 'isoxml'] as const;
export const REPORT_STATUSES = ['pending', 'processing', 'ready', 'failed'] as const;
export const PRESCRIPTION_INPUTS = ['nitrogen', 'seed_rate', 'phosphorus', 'potassium', 'lime'] as const;
export const RATE_UNITS = ['kg/ha', 't/ha', 'l/ha', 'seeds/ha'] as const;

export type ReportType = (typeof REPORT_TYPES)[number];
export type ReportFormat = (typeof REPORT_FORMATS)[number];
export type ReportStatus = (typeof REPORT_STATUSES)[number];
export type PrescriptionInput = (typeof PRESCRIPTION_INPUTS)[number];
export type RateUnit = (typeof RATE_UNITS)[number];

const lit = <const T extends string[]>(values: readonly [...T], description?: string) =>
  Type.Enum(values, description ? { description } : {});
const DATE = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$', description: 'YYYY-MM-DD' });

export const ReportOptions = Type.Object(
  {
    start_date: Type.Optional({
      ...DATE,
      description:
        'Start of the analysis period (seasonal, health_summary). Default: planting_date (seasonal); for health_summary the start of the 12 ISO weeks (weekly) or 6 months (monthly) ending with end_date.',
    }),
    end_date: Type.Optional({
      ...DATE,
      description:
        'End of the analysis period (seasonal, health_summary). Default: harvest_date (seasonal) or the latest capture (health_summary). The period is at most 3660 days.',
    }),
    index: Type.Optional(
      Type.String({ minLength: 1, maxLength: 32, description: 'Index from GET /v1/indices/catalog. Default NDVI.' }),
    ),
    date: Type.Optional({
      ...DATE,
      description:
        'scouting, prescription: use the capture nearest this date (default: the latest capture with at least 70 % of the field usable).',
    }),
    imagery_id: Type.Optional(
      Type.String({ minLength: 1, maxLength: 64, description: 'scouting, prescription: use this capture.' }),
    ),
    period: Type.Optional(lit(['weekly', 'monthly'] as const, 'health_summary: period of the means. Default weekly.')),
    prescription_input: Type.Optional(lit(PRESCRIPTION_INPUTS, 'prescription (required): the input to vary.')),
    base_rate: Type.Optional(
      Type.Number({
        exclusiveMinimum: 0,
        maximum: 1_000_000,
        description:
          'prescription: the field-average rate the zones are scaled around. Default per input (nitrogen 150 kg/ha, seed_rate 80,000 seeds/ha, phosphorus 60 kg/ha, potassium 80 kg/ha, lime 2 t/ha).',
      }),
    ),
    unit: Type.Optional(
      lit(RATE_UNITS, 'prescription: rate unit. seeds/ha for seed_rate only; default kg/ha (t/ha for lime).'),
    ),
    zones: Type.Optional(
      Type.Integer({
        minimum: 2,
        maximum: 7,
        description: 'prescription: number of management zones, 2-7. Default 4.',
      }),
    ),
    zoning: Type.Optional(
      lit(
        ['quantiles', 'kmeans'] as const,
        'prescription: quantiles (equal-area classes, default) or kmeans (1-D k-means of the index).',
      ),
    ),
    rate_direction: Type.Optional(
      lit(
        ['inverse', 'proportional'] as const,
        'prescription: inverse = more input where the index is low (default, except seed_rate); proportional = more where it is high (default for seed_rate).',
      ),
    ),
    rate_spread: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: 1,
        description: 'prescription: largest relative departure from base_rate (0.2 = ±20 %, the default).',
      }),
    ),
    min_zone_ha: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: 100,
        description: 'prescription: fragments smaller than this are merged into their neighbour. Default 0.5 ha.',
      }),
    ),
    default_rate: Type.Optional(
      Type.Number({
        minimum: 0,
        maximum: 1_000_000,
        description:
          'prescription as isoxml: the rate (in the unit) a terminal applies where no zone tells it, at task start and when its position is lost (the default and position-lost treatment zones). Default: base_rate.',
      }),
    ),
    isoxml_form: Type.Optional(
      lit(
        ['grid', 'zones'] as const,
        'prescription as isoxml: grid = a binary grid of rates (ISOXML grid type 2, 10 m cells; what most ISOBUS terminals read, the default); zones = treatment zones with polygons.',
      ),
    ),
    scl_exclude: Type.Optional(
      Type.Array(Type.Integer(), {
        maxItems: 12,
        description:
          'Every type: Sentinel-2 SCL classes (0-11) left out of the statistics and the cloud cover, as in GET indices. Default [0, 1, 3, 8, 9, 10, 11].',
      }),
    ),
    cloud_dilation_m: Type.Optional(
      Type.Number({
        description:
          'Every type: also leave out pixels within this many metres of an excluded cloud or shadow pixel (0-1000). Default 0.',
      }),
    ),
    weighting: Type.Optional(
      lit(
        ['centre', 'coverage'] as const,
        "Every type: centre (the spec's pixel-centre rule, default) or coverage (each touched pixel weighted by its area inside the field).",
      ),
    ),
  },
  { additionalProperties: false },
);
export type ReportOptions = Static<typeof ReportOptions>;

export const ReportCreate = Type.Object(
  {
    type: lit(REPORT_TYPES),
    format: lit(
      REPORT_FORMATS,
      'pdf, json, csv; for prescription also shp (zipped Shapefile) and isoxml (zipped ISO 11783-10 TaskData).',
    ),
    options: Type.Optional(ReportOptions),
  },
  { additionalProperties: false },
);
export type ReportCreate = Static<typeof ReportCreate>;

export const Report = Type.Object({
  id: Type.String(),
  field_id: Type.String(),
  type: lit(REPORT_TYPES),
  format: lit(REPORT_FORMATS),
  status: lit(REPORT_STATUSES),
  created_at: Type.String({ format: 'date-time' }),
  download_url: Type.Union([Type.String(), Type.Null()], {
    description: 'Pre-signed, no API key needed; only when ready.',
  }),
  expires_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  options: Type.Object({}, { additionalProperties: true }),
  error: Type.Union([Type.String(), Type.Null()], { description: 'Why generation failed (status failed).' }),
  updated_at: Type.String({ format: 'date-time' }),
  completed_at: Type.Union([Type.String({ format: 'date-time' }), Type.Null()]),
  size_bytes: Type.Union([Type.Integer(), Type.Null()]),
  filename: Type.Union([Type.String(), Type.Null()]),
});
export type Report = Static<typeof Report>;

export const ReportParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const FieldReportParams = Type.Object({ id: Type.String({ minLength: 1, maxLength: 64 }) });
export const ReportListQuery = Type.Object(
  {
    ...PageQuery.properties,
    field_id: Type.Optional(Type.String({ minLength: 1, maxLength: 64 })),
    type: Type.Optional(lit(REPORT_TYPES)),
    status: Type.Optional(lit(REPORT_STATUSES)),
  },
  { additionalProperties: false },
);
export type ReportListQuery = Static<typeof ReportListQuery>;
export const ReportList = PageEnvelope(Report);
// Lenient on purpose: a link with its signature or expiry cut off or altered is a tampered link
// (403), not a malformed request.
export const DownloadQuery = Type.Object(
  {
    expires: Type.Optional(Type.String({ maxLength: 32, description: 'Unix seconds at which the link expires.' })),
    signature: Type.Optional(
      Type.String({ maxLength: 256, description: 'HMAC-SHA256 of `<report id>.<expires>` (base64url).' }),
    ),
  },
  { additionalProperties: true },
);
export type DownloadQuery = Static<typeof DownloadQuery>;
