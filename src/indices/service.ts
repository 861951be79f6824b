/**
 * Index of a field on a date: pick the capture, read its window and compute in a worker, answer
 * the statistics and the per-pixel GeoJSON.
 */
import { isCalendarDate } from '../platform/dates.js';
import { findIndex, indexProgram, SPEC_INDICES } from '../compute/catalog.js';
import { compileFormula, FormulaError, type Program } from '../compute/formula.js';
import type { ComputePool } from '../compute/pool.js';
import { getField } from '../fields/service.js';
import type { Boundary } from '../fields/boundary.js';
import type { CaptureSource } from '../imagery/window-reader.js';
import type { Database } from '../platform/database.js';
import { AppError, notFound } from '../platform/errors.js';
import { pixelGeoJson } from './geojson.js';
import { selectBestCapture, type Candidate } from './selection.js';

export interface IndexDeps {
  db: Database;
  compute: ComputePool;
  roots: string[];
}

export interface IndexQuery {
  index: string;
  date: string;
  formula?: string;
  zonal_stats?: boolean;
  imagery_id?: string;
  geojson?: boolean;
}

export interface ZonalStats {
  min: number | null;
  max: number | null;
  mean: number | null;
  std: number | null;
  count: number;
  valid_fraction: number;
  median: number | null;
  p10: number | null;
  p25: number | null;
  p75: number | null;
  p90: number | null;
}

export function resolveProgram(index: string, formula: string | undefined, path = '/query/formula'): { name: string; program: Program } {
  if (index.toLowerCase() === 'custom') {
    if (!formula) throw new AppError('validation_failed', 'index=custom needs a formula', { errors: [{ path, code: 'required', message: 'is required with index=custom' }] });
    try {
      return { name: 'custom', program: compileFormula(formula) };
    } catch (err) {
      if (err instanceof FormulaError) throw formulaProblem(err, path);
      throw err;
    }
  }
  const entry = findIndex(index);
  if (!entry) {
    const message = `unknown index "${index}"; use ${SPEC_INDICES.join(', ')}, another name from GET /v1/indices/catalog, or custom`;
    throw new AppError('validation_failed', message, { errors: [{ path: '/query/index', code: 'unknown_index', message }] });
  }
  return { name: entry.name, program: indexProgram(entry.name) };
}

interface CaptureRow extends Candidate {
  capture: CaptureSource;
}

/** The captures over a field, light: band names only (the full capture is loaded once chosen). */
export async function fieldCaptures(db: Database, accountId: string, fieldId: string): Promise<Candidate[]> {
  return db.query<Candidate>(
    `SELECT i.id, i.capture_date::text AS capture_date, f.field_pixels, f.valid_pixels, ARRAY(SELECT jsonb_object_keys(i.bands)) AS bands
       FROM imagery_fields f JOIN imagery i ON i.id = f.imagery_id
      WHERE f.field_id = $1 AND i.account_id = $2`,
    [fieldId, accountId],
  );
}

export async function loadCaptures(db: Database, ids: string[]): Promise<Map<string, CaptureSource>> {
  const rows = await db.query<{ id: string; bands: CaptureSource['bands']; mask: CaptureSource['mask'] | null; scale: number; offset: number }>(
    'SELECT id, bands, mask, scale, "offset" FROM imagery WHERE id = ANY($1)',
    [ids],
  );
  return new Map(rows.map((r) => [r.id, { bands: r.bands, ...(r.mask ? { mask: r.mask } : {}), scale: r.scale, offset: r.offset }]));
}

export async function chooseCapture(db: Database, accountId: string, fieldId: string, q: { date: string; imagery_id?: string }, program: Program): Promise<CaptureRow> {
  const captures = await fieldCaptures(db, accountId, fieldId);
  if (q.imagery_id) {
    const own = await db.query('SELECT 1 FROM imagery WHERE id = $1 AND account_id = $2', [q.imagery_id, accountId]);
    if (!own.length) throw notFound('Imagery', q.imagery_id);
    const c = captures.find((x) => x.id === q.imagery_id);
    if (!c) throw new AppError('imagery_does_not_cover_field', `Imagery ${q.imagery_id} does not cover field ${fieldId}`, { status: 422, title: 'The imagery does not cover the field' });
    const missing = program.bands.filter((b) => !c.bands.includes(b));
    if (missing.length) throw new AppError('missing_bands', `Imagery ${q.imagery_id} has no ${missing.join(', ')}, which the index reads`, { status: 422, title: 'The imagery lacks bands' });
    return { ...c, capture: (await loadCaptures(db, [c.id])).get(c.id)! };
  }
  if (!captures.length) throw new AppError('no_imagery', `No imagery covers field ${fieldId} yet; register some with POST /v1/imagery`, { status: 404, title: 'No imagery for the field' });
  const best = selectBestCapture(captures, q.date, program.bands);
  if (!best) throw new AppError('missing_bands', `No capture of field ${fieldId} has the bands ${program.bands.join(', ')}`, { status: 422, title: 'No imagery with the bands the index reads' });
  return { ...best, capture: (await loadCaptures(db, [best.id])).get(best.id)! };
}

const num = (x: number | undefined) => (x === undefined || Number.isNaN(x) ? null : x);

export interface Evaluated {
  body: { field_id: string; index: string; formula?: string; date: string; imagery_id: string; zonal_stats?: ZonalStats };
  /** The FeatureCollection as JSON text (written by hand, see geojson.ts). */
  geojson?: string;
}

export async function evaluateFieldIndex(deps: IndexDeps, accountId: string, fieldId: string, q: IndexQuery, datePath = '/query/date', formulaPath = '/query/formula'): Promise<Evaluated> {
  if (!isCalendarDate(q.date)) throw new AppError('validation_failed', `date ${q.date} is not a calendar date`, { errors: [{ path: datePath, code: 'invalid_date', message: 'is not a calendar date (YYYY-MM-DD)' }] });
  const field = await getField(deps.db, accountId, fieldId);
  const { name, program } = resolveProgram(q.index, q.formula, formulaPath);
  const capture = await chooseCapture(deps.db, accountId, fieldId, q, program);
  const wantGeo = q.geojson !== false;
  const r = await deps.compute.runFieldIndex({
    capture: capture.capture,
    boundary: field.boundary as unknown as Boundary,
    program,
    roots: deps.roots,
    values: wantGeo,
    orderStats: !!q.zonal_stats,
  });
  const body: Evaluated['body'] = { field_id: fieldId, index: name, ...(name === 'custom' ? { formula: q.formula } : {}), date: capture.capture_date, imagery_id: capture.id };
  if (q.zonal_stats) body.zonal_stats = zonal(r.stats, r.fieldPixels, r.order);
  return { body, ...(wantGeo ? { geojson: pixelGeoJson(r.window, r.values!, r.inside!) } : {}) };
}

/** `{...body, "geojson": <geojson>}` without parsing the GeoJSON text again. */
export function withGeoJson(body: object, geojson: string | undefined): string {
  const head = JSON.stringify(body);
  return geojson === undefined ? head : `${head.slice(0, -1)},"geojson":${geojson}}`;
}

/** The response body as a JSON string. */
export async function computeFieldIndex(deps: IndexDeps, accountId: string, fieldId: string, q: IndexQuery): Promise<string> {
  const { body, geojson } = await evaluateFieldIndex(deps, accountId, fieldId, q);
  return withGeoJson(body, geojson);
}

export function zonal(s: { count: number; min: number; max: number; mean: number; std: number }, fieldPixels: number, o?: { median: number; p10: number; p25: number; p75: number; p90: number } | null): ZonalStats {
  return {
    min: num(s.min),
    max: num(s.max),
    mean: num(s.mean),
    std: num(s.std),
    count: s.count,
    valid_fraction: fieldPixels ? Math.round((s.count / fieldPixels) * 1e6) / 1e6 : 0,
    median: num(o?.median),
    p10: num(o?.p10),
    p25: num(o?.p25),
    p75: num(o?.p75),
    p90: num(o?.p90),
  };
}

export function formulaProblem(err: FormulaError, path: string): AppError {
  return new AppError('invalid_formula', err.message, {
    status: 400,
    title: 'The formula is invalid',
    errors: [{ path, code: err.code, message: err.message }],
    extra: { position: err.position },
  });
}
