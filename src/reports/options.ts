/**
 * Options of a report request, checked per type and completed with their defaults (domain code:
 * no HTTP, no database). A misplaced option (a prescription input on a scouting report, dates on
 * a prescription) is an error rather than silently ignored, so a typo surfaces.
 */
import { findIndex } from '../compute/catalog.js';
import { isCalendarDate } from '../platform/dates.js';
import { MAX_INTERVALS, parseStatsOptions } from '../indices/index.js';
import { AppError, type FieldIssue } from '../platform/errors.js';
import { MAX_PROCESS_VALUE, RATE_DDI, rawPerUnit } from './rate-ddi.js';
import {
  MACHINE_FORMATS,
  type PrescriptionInput,
  type RateUnit,
  type ReportFormat,
  type ReportOptions,
  type ReportType,
} from './schemas.js';

/** Per input: the default unit, base rate, and which way rates follow the index. */
export const INPUT_DEFAULTS: Record<
  PrescriptionInput,
  { unit: RateUnit; base_rate: number; direction: 'inverse' | 'proportional'; product: string }
> = {
  // More nitrogen where biomass is low (compensating), the common choice for in-season N.
  nitrogen: { unit: 'kg/ha', base_rate: 150, direction: 'inverse', product: 'Nitrogen (N)' },
  // More seed where the soil has shown it can carry more plants (maize/cereal practice).
  seed_rate: { unit: 'seeds/ha', base_rate: 80_000, direction: 'proportional', product: 'Seed' },
  phosphorus: { unit: 'kg/ha', base_rate: 60, direction: 'inverse', product: 'Phosphate (P2O5)' },
  potassium: { unit: 'kg/ha', base_rate: 80, direction: 'inverse', product: 'Potash (K2O)' },
  lime: { unit: 't/ha', base_rate: 2, direction: 'inverse', product: 'Lime (CaCO3 equivalent)' },
};

const APPLIES: Record<keyof ReportOptions, ReportType[]> = {
  start_date: ['seasonal', 'health_summary'],
  end_date: ['seasonal', 'health_summary'],
  index: ['scouting', 'seasonal', 'health_summary', 'prescription'],
  date: ['scouting', 'prescription'],
  imagery_id: ['scouting', 'prescription'],
  period: ['health_summary'],
  prescription_input: ['prescription'],
  base_rate: ['prescription'],
  unit: ['prescription'],
  zones: ['prescription'],
  zoning: ['prescription'],
  rate_direction: ['prescription'],
  rate_spread: ['prescription'],
  min_zone_ha: ['prescription'],
  default_rate: ['prescription'],
  isoxml_form: ['prescription'],
  scl_exclude: ['scouting', 'seasonal', 'health_summary', 'prescription'],
  cloud_dilation_m: ['scouting', 'seasonal', 'health_summary', 'prescription'],
  weighting: ['scouting', 'seasonal', 'health_summary', 'prescription'],
};
/** Options that only one format uses (checked after the type). */
const FORMAT_ONLY: Partial<Record<keyof ReportOptions, ReportFormat>> = {
  default_rate: 'isoxml',
  isoxml_form: 'isoxml',
};

export interface ResolvedOptions {
  index: string;
  start_date?: string;
  end_date?: string;
  date?: string;
  imagery_id?: string;
  period?: 'weekly' | 'monthly';
  /** The cloud mask and weighting (indices' stats-options.ts), canonical; absent: the defaults. */
  scl_exclude?: number[];
  cloud_dilation_m?: number;
  weighting?: 'coverage';
  prescription?: {
    input: PrescriptionInput;
    product: string;
    base_rate: number;
    unit: RateUnit;
    zones: number;
    zoning: 'quantiles' | 'kmeans';
    rate_direction: 'inverse' | 'proportional';
    rate_spread: number;
    min_zone_ha: number;
    /** isoxml only: the rate where no zone applies (default and position-lost treatment zones). */
    default_rate?: number;
    isoxml_form?: 'grid' | 'zones';
  };
}

export function resolveOptions(type: ReportType, o: ReportOptions = {}, format?: ReportFormat): ResolvedOptions {
  const issues: FieldIssue[] = [];
  const at = (k: string) => `/body/options/${k}`;
  const machine = format !== undefined && (MACHINE_FORMATS as readonly string[]).includes(format);
  if (machine && type !== 'prescription')
    issues.push({
      path: '/body/format',
      code: 'not_applicable',
      message: `${format} is a prescription file for farm terminals: only prescription reports have it (${type}: pdf, json or csv)`,
    });
  for (const k of Object.keys(o) as Array<keyof ReportOptions>) {
    if (o[k] === undefined) continue;
    if (!APPLIES[k].includes(type))
      issues.push({
        path: at(k),
        code: 'not_applicable',
        message: `does not apply to ${type} reports (only ${APPLIES[k].join(', ')})`,
      });
    else if (FORMAT_ONLY[k] && format !== undefined && format !== FORMAT_ONLY[k])
      issues.push({
        path: at(k),
        code: 'not_applicable',
        message: `applies to the ${FORMAT_ONLY[k]} format only, not ${format}`,
      });
  }
  let index = 'NDVI';
  if (o.index !== undefined) {
    const e = o.index.toLowerCase() === 'custom' ? undefined : findIndex(o.index);
    if (!e)
      issues.push({
        path: at('index'),
        code: 'unknown_index',
        message: `"${o.index}" is not in the catalogue (GET /v1/indices/catalog); custom formulas are not available in reports`,
      });
    else index = e.name;
  }
  for (const k of ['start_date', 'end_date', 'date'] as const) {
    if (o[k] !== undefined && !isCalendarDate(o[k]!))
      issues.push({ path: at(k), code: 'invalid_date', message: 'is not a calendar date (YYYY-MM-DD)' });
  }
  if (
    o.start_date &&
    o.end_date &&
    isCalendarDate(o.start_date) &&
    isCalendarDate(o.end_date) &&
    o.end_date < o.start_date
  ) {
    issues.push({ path: at('end_date'), code: 'before_start', message: 'must not be before start_date' });
  } else if (o.start_date && o.end_date && isCalendarDate(o.start_date) && isCalendarDate(o.end_date)) {
    // The period is read as a daily series, which takes at most MAX_INTERVALS days: refused here
    // rather than by the report worker after a 202.
    const days = (Date.parse(o.end_date) - Date.parse(o.start_date)) / 86_400_000 + 1;
    if (days > MAX_INTERVALS)
      issues.push({
        path: at('end_date'),
        code: 'range_too_long',
        message: `the period has ${days} days; at most ${MAX_INTERVALS}`,
      });
  }
  if (o.date !== undefined && o.imagery_id !== undefined)
    issues.push({ path: at('imagery_id'), code: 'conflict', message: 'give date or imagery_id, not both' });
  let prescription: ResolvedOptions['prescription'];
  if (type === 'prescription') {
    const input = o.prescription_input ?? 'nitrogen';
    const d = INPUT_DEFAULTS[input];
    const unit = o.unit ?? d.unit;
    if (input === 'seed_rate' && unit !== 'seeds/ha')
      issues.push({ path: at('unit'), code: 'unit_mismatch', message: 'seed_rate is in seeds/ha' });
    if (input !== 'seed_rate' && unit === 'seeds/ha')
      issues.push({ path: at('unit'), code: 'unit_mismatch', message: `seeds/ha is for seed_rate, not ${input}` });
    if (unit !== d.unit && o.base_rate === undefined)
      issues.push({
        path: at('base_rate'),
        code: 'required',
        message: `is required when unit is ${unit} (the default ${d.base_rate} is in ${d.unit})`,
      });
    if (format === 'isoxml') {
      // Process data values are int32: the highest zone rate (base × (1 + spread)) and the default must fit.
      const max = MAX_PROCESS_VALUE / rawPerUnit(unit);
      const highest = (o.base_rate ?? d.base_rate) * (1 + (o.rate_spread ?? 0.2));
      const d6 = RATE_DDI[unit];
      const fits = `ISOXML carries at most ${Math.floor(max).toLocaleString('en')} ${unit} (DDI ${d6.ddi}, ${d6.ddiUnit} at a resolution of ${d6.resolution}, in a 32-bit integer)`;
      if (highest > max)
        issues.push({
          path: at('base_rate'),
          code: 'out_of_range',
          message: `the highest zone rate, ${highest} ${unit}, does not fit: ${fits}`,
        });
      if (o.default_rate !== undefined && o.default_rate > max)
        issues.push({ path: at('default_rate'), code: 'out_of_range', message: `does not fit: ${fits}` });
    }
    prescription = {
      input,
      product: d.product,
      base_rate: o.base_rate ?? d.base_rate,
      unit,
      zones: o.zones ?? 4,
      zoning: o.zoning ?? 'quantiles',
      rate_direction: o.rate_direction ?? d.direction,
      rate_spread: o.rate_spread ?? 0.2,
      min_zone_ha: o.min_zone_ha ?? 0.5,
      ...(format === 'isoxml'
        ? { default_rate: o.default_rate ?? o.base_rate ?? d.base_rate, isoxml_form: o.isoxml_form ?? 'grid' }
        : {}),
    };
  }
  let stats: ReturnType<typeof parseStatsOptions> | undefined;
  try {
    stats = parseStatsOptions(
      { scl_exclude: o.scl_exclude, cloud_dilation_m: o.cloud_dilation_m, weighting: o.weighting },
      at,
    );
  } catch (err) {
    if (!(err instanceof AppError)) throw err;
    issues.push(...(err.errors ?? []));
  }
  if (issues.length)
    throw new AppError('validation_failed', issues.map((i) => `${i.path} ${i.message}`).join('; '), { errors: issues });
  return {
    ...(stats?.mask.scl_exclude ? { scl_exclude: stats.mask.scl_exclude } : {}),
    ...(stats?.mask.cloud_dilation_m ? { cloud_dilation_m: stats.mask.cloud_dilation_m } : {}),
    ...(stats?.stats.weighting === 'coverage' ? { weighting: 'coverage' as const } : {}),
    index,
    ...(o.start_date ? { start_date: o.start_date } : {}),
    ...(o.end_date ? { end_date: o.end_date } : {}),
    ...(o.date ? { date: o.date } : {}),
    ...(o.imagery_id ? { imagery_id: o.imagery_id } : {}),
    ...(type === 'health_summary' ? { period: o.period ?? 'weekly' } : {}),
    ...(prescription ? { prescription } : {}),
  };
}
