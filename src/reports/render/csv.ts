/**
 * CSV: the tabular part of each report, one table with a header row (fast-csv): scouting points
 * with their anomaly zones, the season's series (then a row per value that could not be computed,
 * with the reason), the periods of a health summary, the zones of a prescription with their rates
 * and outlines as WKT (QGIS and most farm software read a WKT column).
 */
import { writeToBuffer } from 'fast-csv';
import type {
  HealthContent,
  PrescriptionContent,
  ReportContent,
  ScoutingContent,
  SeasonalContent,
} from '../content/schema.js';

const blank = (x: number | string | null) => (x === null ? '' : x);

export function multiPolygonWkt(g: PrescriptionContent['zones'][number]['geometry']): string {
  const ring = (r: number[][]) => `(${r.map((p) => `${p[0]} ${p[1]}`).join(', ')})`;
  return `MULTIPOLYGON (${g.coordinates.map((poly) => `(${poly.map(ring).join(', ')})`).join(', ')})`;
}

export function csvRows(type: string, c: ReportContent): Array<Record<string, string | number>> {
  switch (type) {
    case 'scouting':
      return (c as ScoutingContent).anomalies.map((a) => ({
        rank: a.rank,
        lon: a.point.lon,
        lat: a.point.lat,
        area_ha: a.area_ha,
        share_of_field_pct: a.share_of_field_pct,
        mean: a.mean,
        min: a.min,
        deficit: a.deficit,
        severity: a.severity,
        capture_date: (c as ScoutingContent).capture.date,
        index: c.meta.index,
      }));
    case 'seasonal': {
      // The series, then one row per value that could not be computed (date empty), with why.
      const s = c as SeasonalContent;
      return [
        ...s.series.map((p) => ({
          date: p.date,
          mean: p.mean,
          min: blank(p.min),
          max: blank(p.max),
          std: blank(p.std),
          valid_fraction: blank(p.valid_fraction),
          imagery_id: p.imagery_id,
          index: c.meta.index,
        })),
        ...s.unavailable.map((u) => ({ index: c.meta.index, not_computed: u.item, reason: u.reason })),
      ];
    }
    case 'health_summary':
      return (c as HealthContent).periods.map((p) => ({
        period_start: p.start,
        period_end: p.end,
        captures: p.captures,
        mean: blank(p.mean),
        min: blank(p.min),
        max: blank(p.max),
        change: blank(p.change),
        change_pct: blank(p.change_pct),
        index: c.meta.index,
      }));
    case 'prescription': {
      const p = c as PrescriptionContent;
      return p.zones.map((z) => ({
        zone: z.zone,
        mean_index: z.mean_index,
        min_index: z.min_index,
        max_index: z.max_index,
        area_ha: z.area_ha,
        rate: z.rate,
        unit: p.unit,
        product_total: z.product_total,
        product_unit: p.totals.product_unit,
        input: p.input,
        wkt: multiPolygonWkt(z.geometry),
      }));
    }
    default:
      throw new Error(`no CSV layout for ${type}`);
  }
}

/** Column names per type, written even when there are no rows (a field without anomalies). */
export const CSV_HEADERS: Record<string, string[]> = {
  scouting: [
    'rank',
    'lon',
    'lat',
    'area_ha',
    'share_of_field_pct',
    'mean',
    'min',
    'deficit',
    'severity',
    'capture_date',
    'index',
  ],
  seasonal: ['date', 'mean', 'min', 'max', 'std', 'valid_fraction', 'imagery_id', 'index', 'not_computed', 'reason'],
  health_summary: ['period_start', 'period_end', 'captures', 'mean', 'min', 'max', 'change', 'change_pct', 'index'],
  prescription: [
    'zone',
    'mean_index',
    'min_index',
    'max_index',
    'area_ha',
    'rate',
    'unit',
    'product_total',
    'product_unit',
    'input',
    'wkt',
  ],
};

export async function renderCsv(type: string, c: ReportContent): Promise<Buffer> {
  return writeToBuffer(csvRows(type, c), { headers: CSV_HEADERS[type]!, alwaysWriteHeaders: true });
}
