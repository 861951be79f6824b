/**
 * The documented shape of every report's content: the JSON format is exactly this (validated in
 * the tests with ajv), the PDF and CSV are renderings of it. `GET /v1/reports/schemas/{type}`
 * serves them as JSON Schema.
 */
import { Type, type Static, type TSchema } from 'typebox';

const Num = Type.Number();
const NullNum = Type.Union([Type.Number(), Type.Null()]);
const DateStr = Type.String({ pattern: '^\\d{4}-\\d{2}-\\d{2}$' });
const NullDate = Type.Union([DateStr, Type.Null()]);
const LonLat = Type.Object(
  { lon: Type.Number({ minimum: -180, maximum: 180 }), lat: Type.Number({ minimum: -90, maximum: 90 }) },
  { additionalProperties: false },
);
const Position = Type.Array(Type.Number(), { minItems: 2, maxItems: 2 });
const MultiPolygon = Type.Object(
  {
    type: Type.Literal('MultiPolygon'),
    coordinates: Type.Array(Type.Array(Type.Array(Position, { minItems: 4 }), { minItems: 1 })),
  },
  { additionalProperties: false, description: 'GeoJSON MultiPolygon in WGS84 lon/lat, clipped to the field boundary.' },
);

export const Meta = Type.Object(
  {
    report_id: Type.String(),
    type: Type.String(),
    title: Type.String(),
    generated_at: Type.String({ format: 'date-time' }),
    index: Type.String({ description: 'Index the report is built on (catalogue name).' }),
    field: Type.Object(
      {
        id: Type.String(),
        name: Type.String(),
        crop_type: Type.Union([Type.String(), Type.Null()]),
        area_ha: Num,
        planting_date: NullDate,
        harvest_date: NullDate,
        centroid: LonLat,
      },
      { additionalProperties: false },
    ),
    statistics_options: Type.Optional(
      Type.Object(
        {
          weighting: Type.Optional(Type.Literal('coverage')),
          scl_exclude: Type.Optional(Type.Array(Type.Integer({ minimum: 0, maximum: 11 }))),
          cloud_dilation_m: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
        },
        {
          additionalProperties: false,
          description:
            "The report options' cloud mask and weighting the numbers follow, only those not the defaults (absent: all defaults).",
        },
      ),
    ),
  },
  { additionalProperties: false },
);

export const Capture = Type.Object(
  {
    imagery_id: Type.String(),
    date: DateStr,
    source: Type.String(),
    usable_fraction: Type.Number({
      minimum: 0,
      maximum: 1,
      description: 'Share of the field pixels that were usable (not cloud, shadow or no data).',
    }),
  },
  { additionalProperties: false },
);

export const Statistics = Type.Object(
  {
    count: Type.Integer(),
    mean: NullNum,
    median: NullNum,
    min: NullNum,
    max: NullNum,
    std: NullNum,
    p10: NullNum,
    p90: NullNum,
  },
  { additionalProperties: false },
);

const MapLegend = Type.Object(
  {
    value_min: Num,
    value_max: Num,
    colormap: Type.String({ description: 'Colour ramp from value_min (red) to value_max (green).' }),
    width_px: Type.Integer(),
    height_px: Type.Integer(),
    pixel_size_m: Num,
  },
  { additionalProperties: false },
);

export const ScoutingContent = Type.Object(
  {
    meta: Meta,
    capture: Capture,
    statistics: Statistics,
    previous: Type.Union([
      Type.Object(
        { imagery_id: Type.String(), date: DateStr, mean: Num, change: Num },
        { additionalProperties: false },
      ),
      Type.Null(),
    ]),
    threshold: Type.Object(
      {
        method: Type.String(),
        median: Num,
        mad: Num,
        robust_sigma: Num,
        k: Num,
        value: Num,
        min_area_ha: Num,
      },
      { additionalProperties: false },
    ),
    anomalies: Type.Array(
      Type.Object(
        {
          rank: Type.Integer({ minimum: 1 }),
          area_ha: Num,
          share_of_field_pct: Num,
          mean: Num,
          min: Num,
          deficit: Type.Number({ description: 'Field median minus the zone mean.' }),
          severity: Type.Union([Type.Literal('high'), Type.Literal('moderate'), Type.Literal('low')]),
          point: LonLat,
        },
        { additionalProperties: false },
      ),
    ),
    anomalies_total: Type.Object(
      { count: Type.Integer(), area_ha: Num, share_of_field_pct: Num },
      { additionalProperties: false },
    ),
    status: Type.Union([Type.Literal('good'), Type.Literal('watch'), Type.Literal('action')]),
    recommendation: Type.String(),
    map: MapLegend,
  },
  { additionalProperties: false, $id: 'scouting' },
);

export const SeriesPoint = Type.Object(
  {
    date: DateStr,
    mean: Num,
    min: NullNum,
    max: NullNum,
    std: NullNum,
    valid_fraction: NullNum,
    imagery_id: Type.String(),
  },
  { additionalProperties: false },
);

/** The values of a seasonal report that may be left null, each then listed in `unavailable`. */
export const SEASONAL_UNAVAILABLE = [
  'phases',
  'phases.green_up',
  'phases.senescence',
  'phases.season_length_days',
  'baseline',
  'amplitude',
  'auc',
  'yield_potential',
] as const;

export const SeasonalContent = Type.Object(
  {
    meta: Meta,
    period: Type.Object(
      {
        start: DateStr,
        end: DateStr,
        basis: Type.String({
          description: 'Where the period came from: options, planting/harvest dates, or the captures.',
        }),
      },
      { additionalProperties: false },
    ),
    series: Type.Array(SeriesPoint, { minItems: 1 }),
    skipped_captures: Type.Integer({ description: 'Captures in the period left out as too cloudy over the field.' }),
    peak: Type.Object(
      { date: DateStr, value: Num },
      { additionalProperties: false, description: 'The highest field mean among the clear captures.' },
    ),
    baseline: Type.Union([Num, Type.Null()], {
      description: 'Lowest value before the peak; null with a single clear capture (see unavailable).',
    }),
    amplitude: Type.Union([Num, Type.Null()], {
      description: 'Peak minus baseline; null with a single clear capture (see unavailable).',
    }),
    phases: Type.Object(
      {
        amplitude_fraction: Num,
        green_up: NullDate,
        senescence: NullDate,
        season_length_days: NullNum,
      },
      {
        additionalProperties: false,
        description: 'Phenology dates; null when not observed or with fewer than 4 clear captures (see unavailable).',
      },
    ),
    auc: Type.Union(
      [Type.Object({ index_days: Num, above_baseline_index_days: Num }, { additionalProperties: false }), Type.Null()],
      {
        description:
          'Trapezoidal area under the curve over the clear captures, in index x days; null with a single clear capture (see unavailable).',
      },
    ),
    yield_potential: Type.Union(
      [
        Type.Object(
          {
            relative: Num,
            class: Type.Union([Type.Literal('high'), Type.Literal('average'), Type.Literal('low')]),
            method: Type.String(),
            caveats: Type.Array(Type.String()),
          },
          { additionalProperties: false },
        ),
        Type.Null(),
      ],
      { description: 'Null with fewer than 4 clear captures (see unavailable).' },
    ),
    unavailable: Type.Array(
      Type.Object(
        {
          item: Type.Enum([...SEASONAL_UNAVAILABLE], {
            description: 'Path of the value left null in this document (phases: all three phenology values).',
          }),
          reason: Type.String({ description: 'Why the captures of the period did not allow it, in plain words.' }),
        },
        { additionalProperties: false },
      ),
      {
        description:
          'What could not be computed from the clear captures of the period, and why; empty when everything was.',
      },
    ),
  },
  { additionalProperties: false, $id: 'seasonal' },
);

export const HealthContent = Type.Object(
  {
    meta: Meta,
    period: Type.Object(
      { start: DateStr, end: DateStr, granularity: Type.Union([Type.Literal('weekly'), Type.Literal('monthly')]) },
      { additionalProperties: false },
    ),
    periods: Type.Array(
      Type.Object(
        {
          start: DateStr,
          end: DateStr,
          captures: Type.Integer(),
          mean: NullNum,
          min: NullNum,
          max: NullNum,
          change: NullNum,
          change_pct: NullNum,
        },
        { additionalProperties: false },
      ),
    ),
    trend: Type.Object(
      {
        slope_per_30_days: Num,
        direction: Type.Union([Type.Literal('improving'), Type.Literal('stable'), Type.Literal('declining')]),
        r2: NullNum,
        method: Type.String(),
      },
      { additionalProperties: false },
    ),
    latest: Type.Object(
      { date: DateStr, mean: Num, change_vs_previous_period: NullNum },
      { additionalProperties: false },
    ),
    alerts: Type.Array(
      Type.Object(
        {
          triggered_at: Type.String({
            format: 'date-time',
            description: 'When the rule was judged (the capture was registered).',
          }),
          capture_date: Type.Union([DateStr, Type.Null()], { description: 'Date of the capture that triggered it.' }),
          alert_type: Type.String(),
          index: Type.String(),
          value: Num,
          threshold: Num,
          imagery_id: Type.Union([Type.String(), Type.Null()]),
        },
        { additionalProperties: false },
      ),
    ),
    status: Type.Union([Type.Literal('good'), Type.Literal('watch'), Type.Literal('action')]),
    summary: Type.String(),
  },
  { additionalProperties: false, $id: 'health_summary' },
);

export const PrescriptionContent = Type.Object(
  {
    meta: Meta,
    capture: Capture,
    input: Type.String(),
    product: Type.String(),
    unit: Type.String(),
    base_rate: Num,
    rate_direction: Type.Union([Type.Literal('inverse'), Type.Literal('proportional')]),
    rate_spread: Num,
    zoning: Type.Object(
      {
        method: Type.Union([Type.Literal('quantiles'), Type.Literal('kmeans')]),
        zones_requested: Type.Integer({ minimum: 2, maximum: 7 }),
        zones: Type.Integer(),
        breaks: Type.Array(Num),
        min_zone_ha: Num,
        merged_fragments: Type.Integer(),
      },
      { additionalProperties: false },
    ),
    zones: Type.Array(
      Type.Object(
        {
          zone: Type.Integer({ minimum: 1 }),
          mean_index: Num,
          min_index: Num,
          max_index: Num,
          area_ha: Num,
          share_pct: Num,
          rate: Num,
          product_total: Num,
          geometry: MultiPolygon,
        },
        { additionalProperties: false },
      ),
    ),
    totals: Type.Object(
      { area_ha: Num, field_area_ha: Num, product_total: Num, product_unit: Type.String(), average_rate: Num },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false, $id: 'prescription' },
);

export type Meta = Static<typeof Meta>;
export type Capture = Static<typeof Capture>;
export type ScoutingContent = Static<typeof ScoutingContent>;
export type SeasonalContent = Static<typeof SeasonalContent>;
export type HealthContent = Static<typeof HealthContent>;
export type PrescriptionContent = Static<typeof PrescriptionContent>;
export type ReportContent = ScoutingContent | SeasonalContent | HealthContent | PrescriptionContent;

export const CONTENT_SCHEMAS: Record<string, TSchema> = {
  scouting: ScoutingContent,
  seasonal: SeasonalContent,
  health_summary: HealthContent,
  prescription: PrescriptionContent,
};
