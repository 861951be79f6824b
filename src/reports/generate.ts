/**
 * Generation of one report: gather the data through the services the API already uses (field,
 * capture choice, index window in the compute pool, time series with its statistics cache, alert
 * history), build the content (domain code in content/), render it as PDF, JSON or CSV, or a
 * prescription as the files farm terminals load (render/shapefile.ts, render/isoxml.ts).
 * Expected failures (field deleted, no imagery in the period, no clear capture) are
 * ReportFailure with a reason for the client; anything else is an unexpected error.
 */
import { indexProgram } from '../compute/catalog.js';
import type { Boundary } from '../fields/index.js';
import { getField } from '../fields/index.js';
import { MIN_VALID_FRACTION } from '../alerts/index.js';
import {
  capturesUnderMask,
  chooseCapture,
  fieldCaptures,
  loadCaptures,
  onlyTouched,
  parseStatsOptions,
} from '../indices/index.js';
import type { StatsOptions } from '../indices/index.js';
import { indexTimeSeries } from '../indices/index.js';
import { AppError } from '../platform/errors.js';
import type { ResolvedOptions } from './options.js';
import type { ReportDeps, ReportRow } from './service.js';
import { buildHealth } from './content/health.js';
import { buildPrescription } from './content/prescription.js';
import { validValues, type IndexRaster } from './content/raster.js';
import type { Capture, HealthContent, Meta, ReportContent } from './content/schema.js';
import { buildScouting } from './content/scouting.js';
import { buildSeasonal, NoClearCapture, type Point } from './content/seasonal.js';
import { colourRange, indexMapPng, zoneMapPng } from './render/colormap.js';
import { renderCsv } from './render/csv.js';
import { renderIsoxml } from './render/isoxml.js';
import { renderPdf, type MapImage } from './render/pdf.js';
import { renderShapefile, withoutAccents } from './render/shapefile.js';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../platform/paths.js';
import type { PrescriptionContent } from './content/schema.js';

export class ReportFailure extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'ReportFailure';
  }
}

export interface ReportFile {
  content: Buffer;
  filename: string;
  contentType: string;
}

export const CONTENT_TYPES = {
  pdf: 'application/pdf',
  json: 'application/json',
  csv: 'text/csv; charset=utf-8',
  shp: 'application/zip',
  isoxml: 'application/zip',
} as const;
/** Download name endings: both machine formats are zip files, told apart by name. */
const EXTENSIONS = { pdf: 'pdf', json: 'json', csv: 'csv', shp: 'shp.zip', isoxml: 'isoxml.zip' } as const;
const TITLES = {
  scouting: 'Scouting report',
  seasonal: 'Seasonal analysis',
  health_summary: 'Health summary',
  prescription: 'Prescription map',
} as const;

const DAY = 86_400_000;
const r6 = (x: number) => Math.round(x * 1e6) / 1e6;
const r6n = (x: number | null) => (x === null ? null : r6(x));
const iso = (ms: number) => new Date(ms).toISOString().slice(0, 10);
const day = (d: string) => Date.parse(`${d}T00:00:00Z`);

type Field = Awaited<ReturnType<typeof getField>>;

/** The report's cloud mask and weighting options, those not the defaults (resolved options omit those). */
const maskAndWeighting = (o: ResolvedOptions) => ({
  ...(o.weighting ? { weighting: o.weighting } : {}),
  ...(o.scl_exclude ? { scl_exclude: o.scl_exclude } : {}),
  ...(o.cloud_dilation_m ? { cloud_dilation_m: o.cloud_dilation_m } : {}),
});

/** The report's cloud mask and weighting (resolved options; none: the defaults). */
const statsOptionsOf = (o: ResolvedOptions): StatsOptions =>
  parseStatsOptions(maskAndWeighting(o), (k) => `/options/${k}`);

/** The captures of the report's field, their cloud cover under the report's mask. */
const capturesOf = (deps: ReportDeps, row: ReportRow, o: ResolvedOptions) =>
  capturesUnderMask(deps, row.account_id, row.field_id, statsOptionsOf(o));

/** What a pool read of the report takes: the mask and the weighting, when not the defaults. */
function readOptions(o: ResolvedOptions) {
  const so = statsOptionsOf(o);
  return so.key ? { stats: so.stats, mask: so.mask } : {};
}

async function loadField(deps: ReportDeps, row: ReportRow): Promise<Field> {
  try {
    return await getField(deps.db, row.account_id, row.field_id);
  } catch (err) {
    if (err instanceof AppError && err.status === 404)
      throw new ReportFailure(`field ${row.field_id} was deleted before the report was generated`);
    throw err;
  }
}

function metaOf(row: ReportRow, field: Field, o: ResolvedOptions): Meta {
  const [w, s, e, n] = field.bbox as [number, number, number, number];
  const statistics = maskAndWeighting(o);
  return {
    report_id: row.id,
    type: row.type,
    title: TITLES[row.type],
    generated_at: new Date().toISOString(),
    index: o.index,
    field: {
      id: field.id,
      name: field.name,
      crop_type: field.crop_type,
      area_ha: field.area_ha,
      planting_date: field.planting_date,
      harvest_date: field.harvest_date,
      centroid: { lon: Math.round(((w + e) / 2) * 1e6) / 1e6, lat: Math.round(((s + n) / 2) * 1e6) / 1e6 },
    },
    ...(Object.keys(statistics).length ? { statistics_options: statistics } : {}),
  };
}

/**
 * A field whose captures only touch it (smaller or thinner than a pixel) has none under the
 * pixel-centre rule: the report fails saying so, and what counts them.
 */
async function onlyTouchedFailure(deps: ReportDeps, row: ReportRow): Promise<void> {
  const all = await fieldCaptures(deps.db, row.account_id, row.field_id);
  if (all.length && all.every((c) => c.field_pixels === 0))
    throw new ReportFailure(onlyTouched(row.field_id, all.length, 'reports with options.weighting "coverage"'));
}

/** The capture of a scouting or prescription report: pinned, nearest a date, or the latest usable one. */
async function pickCapture(
  deps: ReportDeps,
  row: ReportRow,
  field: Field,
  o: ResolvedOptions,
): Promise<{ id: string; date: string; usable: number }> {
  const program = indexProgram(o.index);
  const captures = await capturesOf(deps, row, o);
  if (!captures.length) await onlyTouchedFailure(deps, row);
  if (o.imagery_id || o.date) {
    const c = await chooseCapture(
      deps.db,
      row.account_id,
      row.field_id,
      { date: o.date ?? '', imagery_id: o.imagery_id },
      program,
      captures,
    );
    return { id: c.id, date: c.capture_date, usable: c.field_pixels ? c.valid_pixels / c.field_pixels : 0 };
  }
  const all = captures.filter((c) => program.bands.every((b) => c.bands.includes(b)));
  if (!all.length)
    throw new ReportFailure(
      `no imagery of field ${row.field_id} has the bands ${o.index} needs (${program.bands.join(', ')})`,
    );
  all.sort((a, b) => b.capture_date.localeCompare(a.capture_date));
  const clear = all.filter((c) => c.field_pixels > 0 && c.valid_pixels / c.field_pixels >= MIN_VALID_FRACTION);
  // Scouting and prescription look at the crop: prefer the latest clear capture inside the season.
  const inSeason = field.planting_date
    ? clear.find(
        (c) => c.capture_date >= field.planting_date! && (!field.harvest_date || c.capture_date <= field.harvest_date),
      )
    : undefined;
  const usable = inSeason ?? clear[0];
  if (!usable)
    throw new ReportFailure(
      `none of the ${all.length} captures of the field has at least ${MIN_VALID_FRACTION * 100} % of it clear of cloud; give options.date or options.imagery_id to use one anyway`,
    );
  return { id: usable.id, date: usable.capture_date, usable: usable.valid_pixels / usable.field_pixels };
}

async function readRaster(
  deps: ReportDeps,
  field: Field,
  imageryId: string,
  index: string,
  o: ResolvedOptions,
): Promise<{ raster: IndexRaster; capture: Capture; mean: number | null }> {
  const sources = await loadCaptures(deps.db, [imageryId]);
  const [info] = await deps.db.query<{ source: string; capture_date: string }>(
    'SELECT source, capture_date::text AS capture_date FROM imagery WHERE id = $1',
    [imageryId],
  );
  const r = await deps.compute.runFieldIndex({
    capture: sources.get(imageryId)!,
    boundary: field.boundary as unknown as Boundary,
    program: indexProgram(index),
    roots: deps.roots,
    values: true,
    ...readOptions(o),
  });
  if (!r.stats.count)
    throw new ReportFailure(`the capture of ${info!.capture_date} has no usable pixel over the field`);
  return {
    raster: { ...r.window, values: r.values!, inside: r.inside! },
    capture: {
      imagery_id: imageryId,
      date: info!.capture_date,
      source: info!.source,
      // weighting=coverage: the usable pixels' weight over the touched pixels' weight
      usable_fraction: Math.round((r.stats.count / (r.fieldWeight ?? r.fieldPixels)) * 1e4) / 1e4,
    },
    mean: r.stats.mean,
  };
}

/** The clear captures of a period as series points (daily intervals: one element per capture day). */
async function seriesOf(
  deps: ReportDeps,
  row: ReportRow,
  o: ResolvedOptions,
  start: string,
  end: string,
): Promise<{ points: Point[]; skipped: number }> {
  const els = await indexTimeSeries(deps, row.account_id, row.field_id, {
    index: o.index,
    ...maskAndWeighting(o),
    start_date: start,
    end_date: end,
    interval: 'daily',
    max_cloud_cover: 30,
  });
  const points = els
    .filter((e) => e.mean !== null && e.imagery_id)
    .map((e) => ({
      date: e.date,
      mean: r6(e.mean!),
      min: r6n(e.min),
      max: r6n(e.max),
      std: r6n(e.std),
      valid_fraction: e.valid_fraction,
      imagery_id: e.imagery_id!,
    }));
  // a field smaller or thinner than a pixel has only gaps by pixel centres: say so, rather than "cloudy"
  if (!points.length && o.weighting !== 'coverage') await onlyTouchedFailure(deps, row);
  return { points, skipped: els.filter((e) => e.mean === null && e.cloud_cover !== null).length };
}

async function captureDates(deps: ReportDeps, row: ReportRow): Promise<string[]> {
  const all = await fieldCaptures(deps.db, row.account_id, row.field_id);
  if (!all.length)
    throw new ReportFailure(`no imagery covers field ${row.field_id}; register some with POST /v1/imagery`);
  return all.map((c) => c.capture_date).sort();
}

let version: string | undefined;
/** The service's version, which ISOXML records as the management software's. */
const serviceVersion = () =>
  (version ??= String(JSON.parse(readFileSync(path.join(packageRoot, 'package.json'), 'utf8')).version));

/** What the machine formats need besides the content: the field's boundary (the partfield) and the account (the customer). */
export interface MachineContext {
  boundary: Boundary;
  customer: string;
}

export async function buildContent(
  deps: ReportDeps,
  row: ReportRow,
): Promise<{ content: ReportContent; map?: MapImage; machine?: MachineContext }> {
  const o = row.options as unknown as ResolvedOptions;
  const field = await loadField(deps, row);
  await deps.onStage?.('data', row.id);
  const meta = metaOf(row, field, o);
  switch (row.type) {
    case 'scouting': {
      const pick = await pickCapture(deps, row, field, o);
      const { raster, capture } = await readRaster(deps, field, pick.id, o.index, o);
      let previous: { imagery_id: string; date: string; mean: number } | null = null;
      const earlier = (await capturesOf(deps, row, o))
        .filter(
          (c) =>
            c.capture_date < capture.date &&
            c.field_pixels > 0 &&
            c.valid_pixels / c.field_pixels >= MIN_VALID_FRACTION &&
            indexProgram(o.index).bands.every((b) => c.bands.includes(b)),
        )
        .sort((a, b) => b.capture_date.localeCompare(a.capture_date))[0];
      if (earlier) {
        const src = await loadCaptures(deps.db, [earlier.id]);
        const r = await deps.compute.runFieldIndex({
          capture: src.get(earlier.id)!,
          boundary: field.boundary as unknown as Boundary,
          program: indexProgram(o.index),
          roots: deps.roots,
          ...readOptions(o),
        });
        if (r.stats.count) previous = { imagery_id: earlier.id, date: earlier.capture_date, mean: r.stats.mean };
      }
      const colour = colourRange(validValues(raster));
      const { content, anomalies } = buildScouting({ meta, capture, raster, previous, colour });
      // The map image is drawn only for the PDF; JSON and CSV carry the numbers.
      if (row.format !== 'pdf') return { content };
      const pins = anomalies.slice(0, 9).map((a) => ({ i: a.at[0], j: a.at[1], label: String(a.content.rank) }));
      return {
        content,
        map: {
          png: indexMapPng(raster, colour),
          gridW: raster.width,
          gridH: raster.height,
          pixelSizeM: Math.abs(raster.resX),
          pins,
        },
      };
    }
    case 'seasonal': {
      let basis = 'options';
      let start = o.start_date;
      let end = o.end_date;
      if (!start || !end) {
        const dates = await captureDates(deps, row);
        if (!start) {
          start = field.planting_date ?? `${(end ?? dates.at(-1)!).slice(0, 4)}-01-01`;
          basis = field.planting_date ? 'planting/harvest dates' : 'captures';
        }
        if (!end) {
          // ISO dates compare as strings: the harvest date, else the last capture, never before start
          const last = dates.at(-1)!;
          if (field.harvest_date && field.harvest_date >= start) end = field.harvest_date;
          // biome-ignore lint/complexity/useMathMinMax: strings (YYYY-MM-DD), which Math.max would turn into NaN
          else end = last >= start ? last : start;
        }
      }
      const { points, skipped } = await seriesOf(deps, row, o, start, end);
      try {
        return { content: buildSeasonal(meta, { start, end, basis }, points, skipped) };
      } catch (err) {
        if (err instanceof NoClearCapture) throw new ReportFailure(err.message);
        throw err;
      }
    }
    case 'health_summary': {
      const granularity = o.period ?? 'weekly';
      let end = o.end_date;
      if (!end) {
        const dates = await captureDates(deps, row);
        end = dates.at(-1)!;
      }
      // Default: the 12 ISO weeks (Monday to Sunday) or 6 calendar months ending with end_date's.
      const e = new Date(day(end));
      const start =
        o.start_date ??
        (granularity === 'weekly'
          ? iso(day(end) - ((e.getUTCDay() + 6) % 7) * DAY - 11 * 7 * DAY)
          : iso(Date.UTC(e.getUTCFullYear(), e.getUTCMonth() - 5, 1)));
      const { points } = await seriesOf(deps, row, o, start, end);
      if (!points.length)
        throw new ReportFailure(
          `no clear capture of the field between ${start} and ${end} (captures with more than 30 % of the field under cloud are not used)`,
        );
      const alerts = await deps.db.query<{
        triggered_at: Date;
        capture_date: string | null;
        alert_type: string;
        index_name: string;
        value: number;
        threshold: number;
        imagery_id: string | null;
      }>(
        `SELECT h.triggered_at, i.capture_date::text AS capture_date, h.alert_type, h.index_name, h.value, h.threshold, h.imagery_id
           FROM alert_history h LEFT JOIN imagery i ON i.id = h.imagery_id
          WHERE h.account_id = $1 AND h.field_id = $2 AND COALESCE(i.capture_date, h.triggered_at::date) BETWEEN $3::date AND $4::date
          ORDER BY COALESCE(i.capture_date, h.triggered_at::date), h.triggered_at, h.id LIMIT 200`,
        [row.account_id, row.field_id, start, end],
      );
      const list: HealthContent['alerts'] = alerts.map((a) => ({
        triggered_at: a.triggered_at.toISOString(),
        capture_date: a.capture_date,
        alert_type: a.alert_type,
        index: a.index_name,
        value: a.value,
        threshold: a.threshold,
        imagery_id: a.imagery_id,
      }));
      return { content: buildHealth(meta, { start, end, granularity }, points, list) };
    }
    case 'prescription': {
      const pick = await pickCapture(deps, row, field, o);
      const { raster, capture } = await readRaster(deps, field, pick.id, o.index, o);
      const { content, labels } = buildPrescription(
        meta,
        capture,
        raster,
        field.boundary as unknown as Boundary,
        o.prescription!,
      );
      if (row.format === 'shp' || row.format === 'isoxml') {
        const [account] = await deps.db.query<{ name: string }>('SELECT name FROM accounts WHERE id = $1', [
          row.account_id,
        ]);
        return {
          content,
          machine: { boundary: field.boundary as unknown as Boundary, customer: account?.name ?? row.account_id },
        };
      }
      if (row.format !== 'pdf') return { content };
      return {
        content,
        map: {
          png: zoneMapPng(labels, raster.width, raster.height, content.zones.length),
          gridW: raster.width,
          gridH: raster.height,
          pixelSizeM: Math.abs(raster.resX),
        },
      };
    }
    default:
      throw new ReportFailure(`unknown report type ${String(row.type)}`);
  }
}

/** The field's name in a download's file name: ASCII letters and digits (Žitné pole → zitne-pole). */
function slug(s: string): string {
  return (
    withoutAccents(s)
      .toLowerCase()
      .replace(/[^a-z0-9]+/g, '-')
      .replace(/^-+|-+$/g, '')
      .slice(0, 40) || 'field'
  );
}

export async function renderContent(
  type: string,
  format: ReportRow['format'],
  content: ReportContent,
  map?: MapImage,
  machine?: MachineContext,
  options?: ResolvedOptions,
): Promise<Buffer> {
  if (format === 'json') return Buffer.from(JSON.stringify(content, null, 2));
  if (format === 'csv') return renderCsv(type, content);
  if (format === 'shp') return renderShapefile(content as PrescriptionContent);
  if (format === 'isoxml') {
    const rx = options?.prescription;
    if (!machine || !rx) throw new Error('an isoxml prescription needs its field, account and options');
    return renderIsoxml(content as PrescriptionContent, {
      ...machine,
      form: rx.isoxml_form ?? 'grid',
      defaultRate: rx.default_rate ?? rx.base_rate,
      version: serviceVersion(),
    });
  }
  return renderPdf(type, content, map);
}

export async function generateReport(deps: ReportDeps, row: ReportRow): Promise<ReportFile> {
  const { content, map, machine } = await buildContent(deps, row);
  await deps.onStage?.('render', row.id);
  const options = row.options as unknown as ResolvedOptions;
  const content_ = await renderContent(row.type, row.format, content, map, machine, options);
  const date = 'capture' in content ? content.capture.date : content.period.end;
  return {
    content: content_,
    filename: `${row.type}_${slug(content.meta.field.name)}_${date}_${row.id}.${EXTENSIONS[row.format]}`,
    contentType: CONTENT_TYPES[row.format],
  };
}
