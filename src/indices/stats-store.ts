/**
 * Zonal statistics per (capture, field boundary, formula): in process first, then the index_stats
 * table (shared by replicas), then computed in the pool and stored in both. Time series and the
 * single-date call share them; the single-date call also needs the median and percentiles, which
 * an entry carries once some call computed them (`order`).
 */
import type { Program } from '../compute/formula.js';
import type { FieldIndexResult, StatsRequest } from '../compute/tasks.js';
import { cacheFor, hash } from './cache.js';
import { DEFAULT_OPTIONS, type StatsOptions } from './stats-options.js';
import type { CachedStats, FieldState, IndexDeps } from './types.js';

export type { CachedStats, OrderStatsValues } from './types.js';

const formulaHashes = new WeakMap<Program, string>();

// The bands belong in it: NDVI and NDRE compile to the same code over different bands.
export function formulaHash(p: Program): string {
  let h = formulaHashes.get(p);
  if (h === undefined) {
    h = hash(`${p.bands.join(',')}|${Array.from(p.code).join(',')}|${p.consts.join(';')}|${p.resultReg}`);
    formulaHashes.set(p, h);
  }
  return h;
}

const val = (count: number, x: number | undefined) => (count && x !== undefined && Number.isFinite(x) ? x : null);

/** The statistics' key: the formula's hash, with the options' when they are not the defaults. */
export function statsHash(p: Program, o: StatsOptions = DEFAULT_OPTIONS): string {
  return o.key ? hash(`${formulaHash(p)}|${o.key}`) : formulaHash(p);
}

/** The cache entry for a pool result (its order statistics when it computed them). */
export function toCached(
  r: Pick<FieldIndexResult, 'stats' | 'fieldPixels' | 'order' | 'percentiles' | 'bins' | 'reasons' | 'fieldWeight'>,
  withOrder: boolean,
  req: StatsRequest = {},
): CachedStats {
  const n = r.stats.count;
  const s: CachedStats = {
    count: n,
    min: val(n, r.stats.min),
    max: val(n, r.stats.max),
    mean: val(n, r.stats.mean),
    std: val(n, r.stats.std),
    field_pixels: r.fieldPixels,
  };
  if (withOrder)
    s.order = r.order
      ? {
          median: val(n, r.order.median),
          p10: val(n, r.order.p10),
          p25: val(n, r.order.p25),
          p75: val(n, r.order.p75),
          p90: val(n, r.order.p90),
        }
      : null;
  if (req.percentiles)
    s.percentiles = req.percentiles.map((p, i) => ({
      percentile: p,
      value: r.percentiles ? val(n, r.percentiles[i]) : null,
    }));
  if (req.histogram && r.bins) s.histogram = r.bins;
  if (r.reasons) s.reasons = r.reasons;
  if (r.fieldWeight !== undefined) s.field_weight = r.fieldWeight;
  return s;
}

/** The cached statistics of every capture for one boundary and formula (one LRU entry). */
function group(deps: IndexDeps, state: FieldState, fHash: string, create: true): Map<string, CachedStats>;
function group(deps: IndexDeps, state: FieldState, fHash: string, create: false): Map<string, CachedStats> | undefined;
function group(
  deps: IndexDeps,
  state: FieldState,
  fHash: string,
  create: boolean,
): Map<string, CachedStats> | undefined {
  const lru = cacheFor(deps.db).stats;
  const key = `${state.boundaryHash}|${fHash}`;
  let g = lru.get(key);
  if (!g && create) {
    g = new Map();
    lru.set(key, g);
  }
  return g;
}

function keep(deps: IndexDeps, state: FieldState, fHash: string, imageryId: string, s: CachedStats): void {
  const g = group(deps, state, fHash, true);
  g.set(imageryId, s);
  const lru = cacheFor(deps.db).stats;
  const key = `${state.boundaryHash}|${fHash}`;
  lru.delete(key); // re-measured: lru-cache sizes the same object once
  lru.set(key, g);
}

const enough = (s: CachedStats | undefined, order: boolean, reasons = false): s is CachedStats =>
  !!s && (!order || s.order !== undefined) && (!reasons || s.reasons !== undefined);

/** Stores a freshly computed entry in process and in index_stats (order statistics win). */
export async function rememberStats(
  deps: IndexDeps,
  fieldId: string,
  state: FieldState,
  imageryId: string,
  fHash: string,
  s: CachedStats,
): Promise<void> {
  keep(deps, state, fHash, imageryId, s);
  await deps.db.query(
    `INSERT INTO index_stats (imagery_id, field_id, boundary_hash, formula_hash, stats) VALUES ($1, $2, $3, $4, $5::jsonb)
     ON CONFLICT (imagery_id, field_id, boundary_hash, formula_hash) DO ${s.order !== undefined ? 'UPDATE SET stats = EXCLUDED.stats' : 'NOTHING'}`,
    [imageryId, fieldId, state.boundaryHash, fHash, JSON.stringify(s)],
    { cacheWrite: true }, // field states do not read it: no reason to re-check their stamps
  );
}

/** Statistics of each capture over the field: cached, or computed (in parallel across the pool). */
export async function statsFor(
  deps: IndexDeps,
  fieldId: string,
  state: FieldState,
  ids: string[],
  program: Program,
  opts: { order: boolean; reasons?: boolean; options?: StatsOptions },
): Promise<Map<string, CachedStats>> {
  const cache = cacheFor(deps.db);
  const options = opts.options ?? DEFAULT_OPTIONS;
  const fHash = statsHash(program, options);
  const known = group(deps, state, fHash, false);
  const out = new Map<string, CachedStats>();
  let missing: string[] = [];
  for (const id of ids) {
    const s = known?.get(id);
    if (enough(s, opts.order, opts.reasons)) out.set(id, s);
    else missing.push(id);
  }
  if (!missing.length) return out;
  const rows = await deps.db.query<{ imagery_id: string; stats: CachedStats }>(
    'SELECT imagery_id, stats FROM index_stats WHERE field_id = $1 AND boundary_hash = $2 AND formula_hash = $3 AND imagery_id = ANY($4)',
    [fieldId, state.boundaryHash, fHash, missing],
  );
  for (const r of rows) {
    if (!enough(r.stats, opts.order, opts.reasons)) continue;
    keep(deps, state, fHash, r.imagery_id, r.stats);
    out.set(r.imagery_id, r.stats);
  }
  missing = missing.filter((id) => !out.has(id));
  await Promise.all(
    missing.map(async (id) => {
      const s = await cache.once(`stats|${id}|${state.boundaryHash}|${fHash}|${opts.order}`, async () => {
        const r = await deps.compute.runFieldIndex({
          capture: state.sources.get(id)!,
          boundary: state.boundary,
          program,
          roots: deps.roots,
          orderStats: opts.order,
          ...(options.key ? { stats: options.stats, mask: options.mask } : {}),
        });
        const computed = toCached(r, opts.order, options.stats);
        await rememberStats(deps, fieldId, state, id, fHash, computed);
        return computed;
      });
      out.set(id, s);
    }),
  );
  return out;
}

/** A field's statistics to look up or store in bulk (batch statistics). */
export interface FieldStatsKey {
  fieldId: string;
  state: Pick<FieldState, 'boundaryHash'>;
}

/**
 * The cached statistics of many fields for one statistics hash (statsHash): in process, then
 * index_stats in one query for all the fields. Per field id, by capture id.
 */
export async function cachedStatsMany(
  deps: Pick<IndexDeps, 'db'>,
  fields: FieldStatsKey[],
  sHash: string,
): Promise<Map<string, Map<string, CachedStats>>> {
  const lru = cacheFor(deps.db).stats;
  const out = new Map<string, Map<string, CachedStats>>();
  for (const f of fields) {
    const g = lru.get(`${f.state.boundaryHash}|${sHash}`);
    out.set(f.fieldId, new Map(g ?? []));
  }
  if (!fields.length) return out;
  const rows = await deps.db.query<{ imagery_id: string; field_id: string; boundary_hash: string; stats: CachedStats }>(
    'SELECT imagery_id, field_id, boundary_hash, stats FROM index_stats WHERE field_id = ANY($1) AND formula_hash = $2',
    [fields.map((f) => f.fieldId), sHash],
  );
  const hashes = new Map(fields.map((f) => [f.fieldId, f.state.boundaryHash]));
  for (const r of rows) {
    if (hashes.get(r.field_id) !== r.boundary_hash) continue;
    const m = out.get(r.field_id)!;
    if (!m.has(r.imagery_id)) m.set(r.imagery_id, r.stats);
  }
  return out;
}

/** Stores many freshly computed entries in process and in index_stats, in one statement. */
export async function rememberStatsMany(
  deps: Pick<IndexDeps, 'db'>,
  entries: Array<FieldStatsKey & { imageryId: string; stats: CachedStats }>,
  sHash: string,
): Promise<void> {
  if (!entries.length) return;
  for (const e of entries) keep(deps as IndexDeps, e.state as FieldState, sHash, e.imageryId, e.stats);
  await deps.db.query(
    `INSERT INTO index_stats (imagery_id, field_id, boundary_hash, formula_hash, stats)
     SELECT i, f, b, $4, s::jsonb FROM unnest($1::text[], $2::text[], $3::text[], $5::text[]) AS x(i, f, b, s)
     WHERE EXISTS (SELECT 1 FROM imagery WHERE id = x.i) AND EXISTS (SELECT 1 FROM fields WHERE id = x.f)
     ON CONFLICT (imagery_id, field_id, boundary_hash, formula_hash) DO NOTHING`,
    [
      entries.map((e) => e.imageryId),
      entries.map((e) => e.fieldId),
      entries.map((e) => e.state.boundaryHash),
      sHash,
      entries.map((e) => JSON.stringify(e.stats)),
    ],
    { cacheWrite: true },
  );
}
