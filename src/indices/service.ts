/**
 * Index of a field on a date: pick the capture (from the field's state, field-state.ts), take its
 * statistics from the statistics cache or compute them in a worker (stats-store.ts), answer the
 * statistics and the per-pixel GeoJSON (whole bodies cached, cache.ts).
 */
import { isCalendarDate } from '../platform/dates.js';
import { findIndex, indexProgram, SPEC_INDICES } from '../compute/catalog.js';
import { compileFormula, FormulaError, type Program } from '../compute/formula.js';
import { promisify } from 'node:util';
import zlib from 'node:zlib';
import type { CaptureSource } from '../imagery/index.js';
import type { Database } from '../platform/database.js';
import { AppError, notFound, RefusedInput, validationFailed } from '../platform/errors.js';
import { hasBands, onlyTouched, selectBestCapture, underWeighting, type Candidate } from './selection.js';
import { cacheFor, type CachedBody } from './cache.js';
import { fieldState } from './field-state.js';
import { underMask } from './masked-coverage.js';
import { rememberStats, statsFor, statsHash, toCached } from './stats-store.js';
import { DEFAULT_OPTIONS, parseStatsOptions, type RawStatsOptions, type StatsOptions } from './stats-options.js';
import type { Histogram } from '../compute/zonal.js';
import type { MaskReasons } from '../compute/tasks.js';
import type { CachedStats, FieldState, IndexDeps } from './types.js';

export type { IndexDeps } from './types.js';

export interface IndexQuery extends RawStatsOptions {
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
  /** The percentiles asked for, in the order asked. */
  percentiles?: Array<{ percentile: number; value: number | null }>;
  histogram?: Histogram;
  /** The field's pixels: centres inside (weighting=coverage: pixels touched). */
  pixels?: number;
  mask_reasons?: MaskReasons;
}

export function resolveProgram(
  index: string,
  formula: string | undefined,
  path = '/query/formula',
): { name: string; program: Program } {
  if (index.toLowerCase() === 'custom') {
    if (!formula)
      throw new AppError('validation_failed', 'index=custom needs a formula', {
        errors: [{ path, code: 'required', message: 'is required with index=custom' }],
      });
    try {
      return { name: 'custom', program: compileFormula(formula) };
    } catch (err) {
      if (err instanceof FormulaError) throw new RefusedInput(err, path);
      throw err;
    }
  }
  const entry = findIndex(index);
  if (!entry) {
    const message = `unknown index "${index}"; use ${SPEC_INDICES.join(', ')}, another name from GET /v1/indices/catalog, or custom`;
    throw new AppError('validation_failed', message, {
      errors: [{ path: '/query/index', code: 'unknown_index', message }],
    });
  }
  return { name: entry.name, program: indexProgram(entry.name) };
}

interface CaptureRow extends Candidate {
  capture: CaptureSource;
}

/** The captures over a field, light: band names only (the full capture is loaded once chosen). */
export async function fieldCaptures(db: Database, accountId: string, fieldId: string): Promise<Candidate[]> {
  return db.query<Candidate>(
    `SELECT i.id, i.capture_date::text AS capture_date, f.field_pixels, f.valid_pixels, f.field_weight, f.valid_weight,
            ARRAY(SELECT jsonb_object_keys(i.bands)) AS bands
       FROM imagery_fields f JOIN imagery i ON i.id = f.imagery_id
      WHERE f.field_id = $1 AND i.account_id = $2`,
    [fieldId, accountId],
  );
}

export async function loadCaptures(db: Database, ids: string[]): Promise<Map<string, CaptureSource>> {
  const rows = await db.query<{
    id: string;
    bands: CaptureSource['bands'];
    mask: CaptureSource['mask'] | null;
    scale: number;
    offset: number;
  }>('SELECT id, bands, mask, scale, "offset" FROM imagery WHERE id = ANY($1)', [ids]);
  return new Map(
    rows.map((r) => [r.id, { bands: r.bands, ...(r.mask ? { mask: r.mask } : {}), scale: r.scale, offset: r.offset }]),
  );
}

const ownsImagery = async (db: Database, accountId: string, id: string) =>
  (await db.query('SELECT 1 FROM imagery WHERE id = $1 AND account_id = $2', [id, accountId])).length > 0;

/** The pinned capture, or the best one for the date (selection.ts), among a field's captures. */
async function pickCapture(
  db: Database,
  accountId: string,
  fieldId: string,
  captures: Candidate[],
  q: { date: string; imagery_id?: string },
  program: Program,
): Promise<Candidate> {
  if (q.imagery_id) {
    const c = captures.find((x) => x.id === q.imagery_id);
    // Not over the field: another account's (or no) imagery is "not found", the caller's own a 422.
    if (!c && !(await ownsImagery(db, accountId, q.imagery_id))) throw notFound('Imagery', q.imagery_id);
    if (!c)
      throw new AppError('imagery_does_not_cover_field', `Imagery ${q.imagery_id} does not cover field ${fieldId}`);
    const missing = program.bands.filter((b) => !c.bands.includes(b));
    if (missing.length)
      throw new AppError(
        'missing_bands',
        `Imagery ${q.imagery_id} has no ${missing.join(', ')}, which the index reads`,
        { extra: { missing_bands: missing } },
      );
    return c;
  }
  if (!captures.length)
    throw new AppError('no_imagery', `No imagery covers field ${fieldId} yet; register some with POST /v1/imagery`);
  const best = selectBestCapture(captures, q.date, program.bands);
  if (best) return best;
  const withBands = captures.filter((c) => hasBands(c, program.bands));
  if (!withBands.length) throw missingBands(fieldId, captures, program.bands);
  throw new AppError(
    'no_usable_imagery',
    `None of the ${withBands.length} captures of field ${fieldId} with the bands the index reads has a usable pixel over the field (all cloud, shadow or no-data); pin one with imagery_id to use it anyway`,
  );
}

/** No capture has every band: names only the bands some capture lacks, and in how many it is missing. */
function missingBands(fieldId: string, captures: Candidate[], needed: string[]): AppError {
  const missing = needed
    .map((b) => ({ band: b, lacking: captures.filter((c) => !c.bands.includes(b)).length }))
    .filter((m) => m.lacking > 0);
  const list = missing
    .map((m) => (m.lacking === captures.length ? m.band : `${m.band} (missing in ${m.lacking} of ${captures.length})`))
    .join(', ');
  return new AppError(
    'missing_bands',
    `No capture of field ${fieldId} has every band the index reads; missing: ${list}`,
    {
      extra: { missing_bands: missing.map((m) => m.band) },
    },
  );
}

/**
 * The captures over a field with their field cloud cover under a mask (the registered counts for
 * the default one) and counted as the weighting counts them (selection.ts underWeighting).
 */
export async function capturesUnderMask(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  options: StatsOptions,
): Promise<Candidate[]> {
  if (!options.maskKey)
    return underWeighting(await fieldCaptures(deps.db, accountId, fieldId), options.stats.weighting);
  const state = await fieldState(deps.db, accountId, fieldId);
  return underWeighting(
    await underMask(deps, state, state.candidates, options.mask, options.maskKey),
    options.stats.weighting,
  );
}

export async function chooseCapture(
  db: Database,
  accountId: string,
  fieldId: string,
  q: { date: string; imagery_id?: string },
  program: Program,
  candidates?: Candidate[],
): Promise<CaptureRow> {
  const c = await pickCapture(
    db,
    accountId,
    fieldId,
    candidates ?? (await fieldCaptures(db, accountId, fieldId)),
    q,
    program,
  );
  return { ...c, capture: (await loadCaptures(db, [c.id])).get(c.id)! };
}

export interface Evaluated {
  body: {
    field_id: string;
    index: string;
    formula?: string;
    date: string;
    imagery_id: string;
    zonal_stats?: ZonalStats;
  };
  /** The FeatureCollection as JSON text (written by hand in a compute thread, see imagery/pixel-geojson.ts). */
  geojson?: string;
}

export interface Chosen {
  options: StatsOptions;
  state: FieldState;
  name: string;
  program: Program;
  capture: Candidate;
  head: Evaluated['body'];
}

export async function choose(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  q: IndexQuery,
  datePath: string,
  formulaPath: string,
  optionsAt: (name: string) => string = (k) => `/query/${k}`,
  known?: FieldState,
): Promise<Chosen> {
  if (!isCalendarDate(q.date))
    throw new AppError('validation_failed', `date ${q.date} is not a calendar date`, {
      errors: [{ path: datePath, code: 'invalid_date', message: 'is not a calendar date (YYYY-MM-DD)' }],
    });
  const options = hasOptions(q) ? parseStatsOptions(q, optionsAt) : DEFAULT_OPTIONS;
  const state = known ?? (await fieldState(deps.db, accountId, fieldId));
  const { name, program } = resolveProgram(q.index, q.formula, formulaPath);
  // The capture choice follows the mask: each candidate's cloud cover under it (masked-coverage.ts)
  let candidates = state.candidates;
  if (options.maskKey) {
    const masked = await underMask(
      deps,
      state,
      candidates.filter((c) => hasBands(c, program.bands)),
      options.mask,
      options.maskKey,
    );
    const byId = new Map(masked.map((c) => [c.id, c]));
    candidates = candidates.map((c) => byId.get(c.id) ?? c);
  }
  const weighed = underWeighting(candidates, options.stats.weighting);
  // A field smaller or thinner than a pixel has captures, but none under the pixel-centre rule
  if (weighed.length < candidates.length) {
    const pinned = q.imagery_id && candidates.find((c) => c.id === q.imagery_id && c.field_pixels === 0);
    if (pinned) throw new AppError('no_usable_imagery', onlyTouched(fieldId, 1));
    if (!weighed.length && !q.imagery_id)
      throw new AppError('no_usable_imagery', onlyTouched(fieldId, candidates.length));
  }
  candidates = weighed;
  const capture = await pickCapture(deps.db, accountId, fieldId, candidates, q, program);
  const head = {
    field_id: fieldId,
    index: name,
    ...(name === 'custom' ? { formula: q.formula } : {}),
    date: capture.capture_date,
    imagery_id: capture.id,
  };
  return { options, state, name, program, capture, head };
}

const hasOptions = (q: RawStatsOptions) =>
  q.percentiles !== undefined ||
  q.histogram !== undefined ||
  q.weighting !== undefined ||
  q.scl_exclude !== undefined ||
  q.cloud_dilation_m !== undefined;

/**
 * Computes the index afresh (no response cache): what POST custom stores. The statistics options
 * (percentiles, histogram, weighting, scl_exclude, cloud_dilation_m) as on GET indices; a bad one
 * is a 400 at `optionsAt(name)`.
 */
export async function evaluateFieldIndex(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  q: IndexQuery,
  datePath = '/query/date',
  formulaPath = '/query/formula',
  optionsAt?: (name: string) => string,
): Promise<Evaluated> {
  const { options, state, program, capture, head } = await choose(
    deps,
    accountId,
    fieldId,
    q,
    datePath,
    formulaPath,
    optionsAt,
  );
  const wantGeo = q.geojson !== false;
  const run = () =>
    (wantGeo ? heavyPool(deps) : deps.compute).runFieldIndex({
      capture: state.sources.get(capture.id)!,
      boundary: state.boundary,
      program,
      roots: deps.roots,
      ...(wantGeo ? { geojson: { before: 0, after: 0 } } : {}),
      orderStats: !!q.zonal_stats,
      ...(options.key ? { stats: options.stats, mask: options.mask } : {}),
    });
  const r = await (wantGeo ? heavily(deps, run) : run());
  const body: Evaluated['body'] = { ...head };
  if (q.zonal_stats) body.zonal_stats = zonal(toCached(r, true, options.stats));
  return { body, ...(wantGeo ? { geojson: bytes(r.geojson!).toString('latin1') } : {}) };
}

/** `{...body, "geojson": <geojson>}` without parsing the GeoJSON text again. */
export function withGeoJson(body: object, geojson: string | undefined): string {
  const head = JSON.stringify(body);
  return geojson === undefined ? head : `${head.slice(0, -1)},"geojson":${geojson}}`;
}

export interface IndexResponse {
  /** The JSON body, encoded as `encoding` says. */
  payload: string | Buffer;
  encoding?: 'gzip';
}

// Level 3: a 100 ha field's 2.1 MB in 12 ms to 0.24 MB; level 6 (zlib's default) took 27 ms for 0.22 MB.
const GZIP_LEVEL = 3;
// The other encoding of a cached body, made on libuv's threads; output buffers of 1 MiB, as each
// chunk is a callback on this thread.
const gzipBody = promisify(zlib.gzip);
const gunzipBody = promisify(zlib.gunzip);
const gzip = (b: Buffer) => gzipBody(b, { chunkSize: 1 << 20, level: GZIP_LEVEL });
const gunzip = (b: Buffer) => gunzipBody(b, { chunkSize: 1 << 20 });

/** Room the compute thread leaves before a GeoJSON body for its head (larger heads are copied). */
const HEAD_ROOM = 4096;

/** `{...head, "geojson": <collection>}` around the collection, in the room left for it. */
function bodyAround(head: string, fc: Buffer): Buffer {
  const open = Buffer.from(`${head.slice(0, -1)},"geojson":`);
  fc[fc.length - 1] = 0x7d; // '}'
  if (open.length > HEAD_ROOM) return Buffer.concat([open, fc.subarray(HEAD_ROOM)]);
  open.copy(fc, HEAD_ROOM - open.length);
  return fc.subarray(HEAD_ROOM - open.length);
}

/** Per-pixel GeoJSON work runs under the heavy-work bound (protection.ts), when there is one. */
const heavily = <T>(deps: IndexDeps, work: () => Promise<T>): Promise<T> =>
  deps.heavy ? deps.heavy.work.run(work) : work();
const heavyPool = (deps: IndexDeps) => deps.heavy?.compute ?? deps.compute;

/** A Buffer over the bytes a worker transferred (no copy). */
const bytes = (u: Uint8Array) => Buffer.from(u.buffer, u.byteOffset, u.byteLength);

/**
 * GET indices. Statistics come from the statistics cache (stats-store.ts); a body with GeoJSON is
 * kept whole (plain, gzip-encoded or both, each made once), keyed by everything it is made of.
 */
export async function computeFieldIndex(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  q: IndexQuery,
  opts: { gzip?: boolean } = {},
): Promise<IndexResponse> {
  // Percentiles and a histogram are members of zonal_stats: asked without it, they would be
  // computed and left out of the answer without a word.
  if (!q.zonal_stats) {
    const issues = (['percentiles', 'histogram'] as const)
      .filter((k) => q[k] !== undefined)
      .map((k) => ({
        path: `/query/${k}`,
        code: 'needs_zonal_stats',
        message: 'is part of zonal_stats: add zonal_stats=true',
      }));
    if (issues.length) throw validationFailed(issues);
  }
  const cache = cacheFor(deps.db);
  if (q.geojson === false) {
    // Statistics answers are kept whole, keyed by the field's state stamp (checked here as on
    // every request) and the query; a request that fails is never kept, so it fails again.
    const state = await fieldState(deps.db, accountId, fieldId);
    const key = `${accountId}/${fieldId}|${state.stamp}|${answerKey(q)}`;
    const known = cache.answers.get(key);
    if (known !== undefined) return { payload: known };
    const { options, program, capture, head } = await choose(
      deps,
      accountId,
      fieldId,
      q,
      '/query/date',
      '/query/formula',
      undefined,
      state,
    );
    let payload: string;
    if (!q.zonal_stats) payload = JSON.stringify(head);
    else {
      const s = (
        await statsFor(deps, fieldId, state, [capture.id], program, { order: true, reasons: true, options })
      ).get(capture.id)!;
      payload = JSON.stringify({ ...head, zonal_stats: zonal(s) });
    }
    cache.answers.set(key, payload);
    return { payload };
  }
  const { options, state, name, program, capture, head } = await choose(
    deps,
    accountId,
    fieldId,
    q,
    '/query/date',
    '/query/formula',
  );
  const withStats = !!q.zonal_stats;
  const fHash = statsHash(program, options);
  const key = `${fieldId}|${capture.id}|${state.boundaryHash}|${fHash}|${withStats ? 1 : 0}|${name}|${name === 'custom' ? q.formula : ''}`;
  // The pixels are serialised and gzipped in the heavy compute threads (pixel-geojson.ts, at a low
  // priority); here only the head is written, in room left for it. The first request of a burst
  // decides which encoding is kept: for a gzip client only the gzip, so that the 2 MB text dies
  // young (a scavenge frees it) instead of ageing in the cache and forcing full collections that
  // stall this thread. The other encoding is made when first asked for, as heavy work too.
  const body =
    cache.bodies.get(key) ??
    (await cache.once(`body|${key}`, () =>
      heavily(deps, async () => {
        const r = await heavyPool(deps).runFieldIndex({
          capture: state.sources.get(capture.id)!,
          boundary: state.boundary,
          program,
          roots: deps.roots,
          geojson: { before: HEAD_ROOM, after: 1 },
          orderStats: withStats,
          ...(options.key ? { stats: options.stats, mask: options.mask } : {}),
        });
        let text = JSON.stringify(head);
        if (withStats) {
          const s = toCached(r, true, options.stats);
          await rememberStats(deps, fieldId, state, capture.id, fHash, s);
          text = JSON.stringify({ ...head, zonal_stats: zonal(s) });
        }
        const raw = bodyAround(text, bytes(r.geojson!));
        // gzip in the same thread pool (the text's buffer goes there, not kept here).
        const b: CachedBody = opts.gzip ? { gzip: bytes(await heavyPool(deps).gzip(raw, GZIP_LEVEL)) } : { raw };
        cache.bodies.set(key, b);
        return b;
      }),
    ));
  if (opts.gzip) {
    if (!body.gzip) {
      body.gzip = await cache.once(`gzip|${key}`, () => heavily(deps, () => gzip(body.raw!)));
      cache.bodies.delete(key); // re-measured with its other encoding
      cache.bodies.set(key, body);
    }
    return { payload: body.gzip, encoding: 'gzip' };
  }
  if (!body.raw) {
    body.raw = await cache.once(`raw|${key}`, () => heavily(deps, () => gunzip(body.gzip!)));
    cache.bodies.delete(key);
    cache.bodies.set(key, body);
  }
  return { payload: body.raw };
}

/** Everything of the query a GET indices body without GeoJSON depends on, as one text. */
const answerKey = (q: IndexQuery) =>
  JSON.stringify([
    q.index,
    q.date,
    !!q.zonal_stats,
    q.imagery_id,
    q.formula,
    q.percentiles,
    q.histogram,
    q.weighting,
    q.scl_exclude,
    q.cloud_dilation_m,
  ]);

/** Valid pixels / field pixels; weighting=coverage: valid weight / field weight. */
export function validFraction(s: CachedStats): number {
  const of = s.field_weight ?? s.field_pixels;
  return of ? Math.round((s.count / of) * 1e6) / 1e6 : 0;
}

export function zonal(s: CachedStats): ZonalStats {
  const o = s.order;
  return {
    min: s.min,
    max: s.max,
    mean: s.mean,
    std: s.std,
    count: s.count,
    valid_fraction: validFraction(s),
    median: o?.median ?? null,
    p10: o?.p10 ?? null,
    p25: o?.p25 ?? null,
    p75: o?.p75 ?? null,
    p90: o?.p90 ?? null,
    ...(s.percentiles ? { percentiles: s.percentiles } : {}),
    ...(s.histogram ? { histogram: s.histogram } : {}),
    ...(s.reasons ? { pixels: s.field_pixels, mask_reasons: s.reasons } : {}),
  };
}
