/**
 * One chunk of a batch statistics job: its features' series for every index, as the time series
 * endpoint makes them (indices/timeseries.ts: the same intervals, best-capture rule and gaps),
 * computed together. Per capture, the chunk's fields that need it are put in groups of nearby
 * ones (imagery coverage-groups.ts) and each group is one compute task that reads every block of
 * every band once for all its fields and runs the kernel per field on the shared pixels.
 * Registered fields use the time series' statistics cache (index_stats) and fill it; their
 * captures and pixel counts are those registration linked (imagery_fields). Ad-hoc polygons are
 * linked as a new field would be (every capture in the range whose box meets theirs, with a field
 * pixel), their counts computed in the same read as their statistics.
 */
import type { ComputePool } from '../compute/pool.js';
import type { BatchFieldStats, CoverageResult } from '../compute/tasks.js';
import type { Boundary } from '../fields/index.js';
import { coverageGroups, fromWgs84, MAX_GROUP_PIXELS, type CaptureSource, type GridInfo } from '../imagery/index.js';
import {
  cachedStatsMany,
  chooseIntervals,
  contentHash,
  DEFAULT_OPTIONS,
  hasBands,
  intervalBounds,
  parseStatsOptions,
  rememberStatsMany,
  resolveProgram,
  seriesElements,
  seriesRange,
  statsHash,
  toCached,
  usedCaptureIds,
  weighed,
  type CachedStats,
  type Candidate,
  type RawStatsOptions,
  type SeriesElement,
  type StatsOptions,
} from '../indices/index.js';
import type { Database } from '../platform/database.js';
import { limit } from '../platform/limit.js';
import type { BatchFormat, BatchInterval } from './schemas.js';

/** The request as kept with the job (checked when it was made). */
export interface BatchRequest {
  indices: Array<{ name: string; formula?: string }>;
  start_date: string;
  end_date: string;
  interval: BatchInterval;
  format: BatchFormat;
  max_cloud_cover: number;
  options: RawStatsOptions;
}

export interface ChunkFeature {
  seq: number;
  feature_id: string;
  field_id: string | null;
  boundary: Boundary | null;
  error: string | null;
}

export interface ChunkResult {
  /** The rows as text, in parts of about `partBytes` (whole rows; their concatenation is the chunk's rows). */
  parts: string[];
  rows: number;
  errors: Array<{ feature_id: string; error: string }>;
}

export interface ExecuteDeps {
  db: Database;
  compute: ComputePool;
  roots: string[];
  /** UTF-8 bytes of rows per stored part (BATCH_PART_BYTES); a part holds whole rows, at least one. */
  partBytes?: number;
}

export const DEFAULT_PART_BYTES = 256 * 1024;

interface CaptureRow {
  id: string;
  capture_date: string;
  bands: CaptureSource['bands'];
  mask: CaptureSource['mask'] | null;
  scale: number;
  offset: number;
  bbox: [number, number, number, number];
}

/** A capture's counts over a field (a field with no pixel centre inside: the weights of the pixels touched). */
type Counts = Pick<Candidate, 'field_pixels' | 'valid_pixels' | 'field_weight' | 'valid_weight'>;

/** A chunk field as the series see it. */
interface Subject {
  feature: ChunkFeature;
  boundary: Boundary;
  boundaryHash: string;
  registered: boolean;
  /** Capture ids over it in the range; for ad-hoc ones (and any mask), counts come from the read. */
  captures: string[];
  /** The registered counts (imagery_fields), by capture id. */
  counts: Map<string, Counts>;
  /** Per program, statistics by capture id. */
  stats: Array<Map<string, CachedStats>>;
  error?: string;
}

const dayOf = (d: string) => Date.parse(`${d}T00:00:00Z`);

/** The resolved programs and options of a request (as checked when the job was made). */
export function compileRequest(req: BatchRequest) {
  const programs = req.indices.map((ix, i) => ({
    name: ix.name,
    program: resolveProgram(ix.formula !== undefined ? 'custom' : ix.name, ix.formula, `/body/indices/${i}/formula`)
      .program,
  }));
  const raw = req.options;
  const options: StatsOptions = Object.values(raw).some((v) => v !== undefined)
    ? parseStatsOptions(raw, (k) => `/body/${k}`)
    : DEFAULT_OPTIONS;
  const range = seriesRange(
    {
      start_date: req.start_date,
      end_date: req.end_date,
      interval: req.interval === 'capture' ? 'daily' : req.interval,
    },
    '/body',
  );
  return { programs, options, ...range };
}

// Grids of captures (the finest band's), per process: for the coverage groups.
const grids = new Map<string, Promise<GridInfo>>();
const MAX_GRIDS = 4096;

async function gridOf(compute: ComputePool, roots: string[], id: string, capture: CaptureSource): Promise<GridInfo> {
  let p = grids.get(id);
  if (!p) {
    p = compute.inspect({ capture, roots }).then((r) => {
      const fine = Object.values(r.bands).reduce((a, b) => (Math.abs(b.resX) < Math.abs(a.resX) ? b : a));
      return { epsg: fine.epsg, originX: fine.originX, originY: fine.originY, resX: fine.resX, resY: fine.resY };
    });
    p.catch(() => grids.delete(id));
    if (grids.size >= MAX_GRIDS) grids.delete(grids.keys().next().value!);
    grids.set(id, p);
  }
  return p;
}

function bboxOf(b: Boundary): [number, number, number, number] {
  let x0 = Infinity,
    y0 = Infinity,
    x1 = -Infinity,
    y1 = -Infinity;
  for (const ring of b.type === 'Polygon' ? b.coordinates : b.coordinates.flat()) {
    for (const [x, y] of ring) {
      if (x < x0) x0 = x;
      if (x > x1) x1 = x;
      if (y < y0) y0 = y;
      if (y > y1) y1 = y;
    }
  }
  return [x0, y0, x1, y1];
}

const meets = (a: number[], b: number[]) => a[0]! <= b[2]! && a[2]! >= b[0]! && a[1]! <= b[3]! && a[3]! >= b[1]!;

/** Work of one capture: which subjects need their counts, and which each program's statistics. */
interface CaptureWork {
  coverage: Set<number>;
  programs: Array<Set<number>>;
}

export async function executeChunk(
  deps: ExecuteDeps,
  accountId: string,
  req: BatchRequest,
  features: ChunkFeature[],
): Promise<ChunkResult> {
  const { programs, options, t0, t1, n, step } = compileRequest(req);
  const maxCloud = req.max_cloud_cover;
  const errors: ChunkResult['errors'] = [];
  const captures = new Map<string, CaptureRow & { source: CaptureSource; t: number }>();
  for (const r of await deps.db.query<CaptureRow>(
    `SELECT id, capture_date::text AS capture_date, bands, mask, scale, "offset", bbox FROM imagery
      WHERE account_id = $1 AND capture_date BETWEEN $2::date AND $3::date ORDER BY capture_date, id`,
    [accountId, req.start_date, req.end_date],
  )) {
    const source = { bands: r.bands, ...(r.mask ? { mask: r.mask } : {}), scale: r.scale, offset: r.offset };
    captures.set(r.id, { ...r, source, t: dayOf(r.capture_date) });
  }

  // The subjects: registered fields (one query for all) and valid ad-hoc polygons.
  const registered = features.filter((f) => f.field_id !== null);
  const fieldRows = registered.length
    ? await deps.db.query<{
        id: string;
        boundary: Boundary;
        links: Array<{ id: string } & Counts>;
      }>(
        `SELECT f.id, f.boundary, coalesce((SELECT json_agg(json_build_object('id', x.imagery_id, 'field_pixels', x.field_pixels,
                'valid_pixels', x.valid_pixels, 'field_weight', x.field_weight, 'valid_weight', x.valid_weight))
                FROM imagery_fields x WHERE x.field_id = f.id), '[]'::json) AS links
           FROM fields f WHERE f.id = ANY($1) AND f.account_id = $2`,
        [registered.map((f) => f.field_id), accountId],
      )
    : [];
  const byField = new Map(fieldRows.map((r) => [r.id, r]));
  const subjects: Subject[] = [];
  for (const f of features) {
    if (f.error !== null) continue; // refused when the job was made: listed from batch_features
    const stats = programs.map(() => new Map<string, CachedStats>());
    if (f.field_id !== null) {
      const row = byField.get(f.field_id);
      if (!row) {
        errors.push({ feature_id: f.feature_id, error: `field ${f.field_id} no longer exists` });
        continue;
      }
      const links = row.links.filter((l) => captures.has(l.id));
      subjects.push({
        feature: f,
        boundary: row.boundary,
        boundaryHash: contentHash(row.boundary),
        registered: true,
        captures: links.map((l) => l.id),
        counts: new Map(links.map((l) => [l.id, l])),
        stats,
      });
    } else {
      const box = bboxOf(f.boundary!);
      subjects.push({
        feature: f,
        boundary: f.boundary!,
        boundaryHash: contentHash(f.boundary),
        registered: false,
        captures: [...captures.values()].filter((c) => meets(c.bbox, box)).map((c) => c.id),
        counts: new Map(),
        stats,
      });
    }
  }

  // What to compute. Counts: ad-hoc subjects, and registered ones under a mask other than the
  // default (as the time series recomputes them). Statistics: every capture of those (the choice
  // needs their counts first, and the same read gives both); for registered fields under the
  // default mask, only the captures the series will show that the cache does not have.
  const work = new Map<string, CaptureWork>();
  const workOf = (id: string) => {
    let w = work.get(id);
    if (!w) {
      w = { coverage: new Set(), programs: programs.map(() => new Set()) };
      work.set(id, w);
    }
    return w;
  };
  const sHashes = programs.map((p) => statsHash(p.program, options));
  const cached = await Promise.all(
    sHashes.map((h) =>
      cachedStatsMany(
        deps,
        subjects
          .filter((s) => s.registered)
          .map((s) => ({ fieldId: s.feature.field_id!, state: { boundaryHash: s.boundaryHash } })),
        h,
      ),
    ),
  );
  const countsKnown = (s: Subject) => s.registered && !options.maskKey;
  for (const [i, s] of subjects.entries()) {
    if (s.registered) for (const [p, c] of cached.entries()) s.stats[p] = c.get(s.feature.field_id!) ?? new Map();
    if (!countsKnown(s)) {
      for (const id of s.captures) {
        const w = workOf(id);
        w.coverage.add(i);
        const bands = Object.keys(captures.get(id)!.bands);
        for (const [p, { program }] of programs.entries())
          if (hasBands({ bands }, program.bands) && !s.stats[p]!.has(id)) w.programs[p]!.add(i);
      }
      continue;
    }
    for (const [p, { program }] of programs.entries()) {
      const chosen = intervalsOf(s, program.bands);
      for (const id of usedCaptureIds(chosen, maxCloud)) if (!s.stats[p]!.has(id)) workOf(id).programs[p]!.add(i);
    }
  }

  /**
   * When the subjects' union window is small (their box on the capture's grid, with a margin, under
   * the coverage groups' pixel bound), one group per thread, cut along the chunk's Z-order: the
   * coverage groups' cell placement would cost more than it saves. Else null (coverage groups).
   */
  const boxes = subjects.map((s) => bboxOf(s.boundary));
  const compactGroups = (involved: number[], grid: GridInfo): number[][] | null => {
    let x0 = Infinity,
      y0 = Infinity,
      x1 = -Infinity,
      y1 = -Infinity;
    for (const i of involved) {
      const b = boxes[i]!;
      x0 = Math.min(x0, b[0]);
      y0 = Math.min(y0, b[1]);
      x1 = Math.max(x1, b[2]);
      y1 = Math.max(y1, b[3]);
    }
    const project = fromWgs84(grid.epsg) as (p: [number, number]) => number[];
    const cols: number[] = [];
    const rows: number[] = [];
    for (const p of [
      [x0, y0],
      [x0, y1],
      [x1, y0],
      [x1, y1],
    ] as Array<[number, number]>) {
      const [x, y] = project(p);
      cols.push((x! - grid.originX) / grid.resX);
      rows.push((y! - grid.originY) / grid.resY);
    }
    const px = (Math.max(...cols) - Math.min(...cols) + 4) * (Math.max(...rows) - Math.min(...rows) + 4);
    if (!Number.isFinite(px) || px * 1.25 > MAX_GROUP_PIXELS) return null;
    const k = Math.max(1, Math.min(deps.compute.size, involved.length));
    const size = Math.ceil(involved.length / k);
    return Array.from({ length: k }, (_, j) => involved.slice(j * size, (j + 1) * size)).filter((g) => g.length);
  };

  // Per capture, the groups of nearby subjects; each group one task, at most twice as many on the
  // pool at once as it has threads (enough to keep them busy): all at once, a chunk's tasks (captures
  // × groups, 66 on the demo's season with 2 threads) pushed the pool's queue past SHED_POOL_QUEUE,
  // and the API shed requests with 503 while a batch job ran (11 of 111 during a 10,000-feature job).
  const onPool = limit(Math.max(2, 2 * deps.compute.size));
  const fresh: Array<Array<{ s: Subject; imageryId: string; stats: CachedStats }>> = programs.map(() => []);
  await Promise.all(
    [...work.entries()].map(async ([id, w]) => {
      const c = captures.get(id)!;
      const involved = [...new Set([...w.coverage, ...w.programs.flatMap((set) => [...set])])].sort((a, b) => a - b);
      if (!involved.length) return;
      let groups: number[][];
      try {
        const grid = await onPool(() => gridOf(deps.compute, deps.roots, id, c.source));
        groups =
          compactGroups(involved, grid) ??
          coverageGroups(
            involved.map((i) => subjects[i]!.boundary),
            grid,
            deps.compute.size,
          ).map((g) => g.map((k) => involved[k]!));
      } catch {
        groups = [involved];
      }
      await Promise.all(
        groups.map(async (group) => {
          const local = new Map(group.map((i, k) => [i, k]));
          const task = {
            capture: c.source,
            boundaries: group.map((i) => subjects[i]!.boundary),
            coverage: group.filter((i) => w.coverage.has(i)).map((i) => local.get(i)!),
            programs: programs.map(({ program }, p) => ({
              program,
              fields: group.filter((i) => w.programs[p]!.has(i)).map((i) => local.get(i)!),
            })),
            roots: deps.roots,
            ...(options.key ? { stats: options.stats, mask: options.mask } : {}),
          };
          const r = await onPool(() => deps.compute.fieldStatsBatch(task)).catch((err: Error) => {
            const e = { error: err.message };
            return { coverage: group.map(() => e), stats: programs.map(() => group.map(() => e)) };
          });
          for (const [k, i] of group.entries()) {
            const s = subjects[i]!;
            const cov = r.coverage[k] as CoverageResult | { error: string } | null;
            // A capture whose coverage cannot be computed (outside the raster, unreadable) is left
            // out, as linking leaves it out; so is one with no pixel of the polygon.
            if (w.coverage.has(i)) {
              if (cov && !('error' in cov) && (cov.fieldPixels > 0 || cov.touched))
                s.counts.set(id, {
                  field_pixels: cov.fieldPixels,
                  valid_pixels: cov.validPixels,
                  field_weight: cov.touched?.fieldWeight ?? null,
                  valid_weight: cov.touched?.validWeight ?? null,
                });
              else if (s.registered && s.counts.has(id))
                // as the time series: a linked capture whose masked counts fail has no usable pixel
                s.counts.set(id, { ...s.counts.get(id)!, valid_pixels: 0, valid_weight: 0 });
              else s.counts.delete(id);
            }
            for (const p of programs.keys()) {
              const st = r.stats[p]![k] as BatchFieldStats | { error: string } | null;
              if (!st) continue;
              if ('error' in st) {
                if (!s.error && countsKnown(s)) s.error = `${id}: ${st.error}`;
                continue;
              }
              const entry = toCached(st as Parameters<typeof toCached>[0], false, options.stats);
              s.stats[p]!.set(id, entry);
              if (s.registered) fresh[p]!.push({ s, imageryId: id, stats: entry });
            }
          }
        }),
      );
    }),
  );
  // The time series' cache gets what was computed for registered fields (one statement per index).
  for (const [p, list] of fresh.entries()) {
    await rememberStatsMany(
      deps,
      list.map((e) => ({
        fieldId: e.s.feature.field_id!,
        state: { boundaryHash: e.s.boundaryHash },
        imageryId: e.imageryId,
        stats: e.stats,
      })),
      sHashes[p]!,
    );
  }

  // The rows, feature by feature in the job's order, then index by index, joined into parts of
  // about partBytes as they are made: the rows' short strings die young (a chunk's 28,000 row
  // strings kept to one join at the end were promoted and swelled the old generation).
  const parts = new RowParts(deps.partBytes ?? DEFAULT_PART_BYTES);
  let rows = 0;
  const extra = extraColumns(options);
  for (const s of subjects) {
    if (s.error) {
      errors.push({ feature_id: s.feature.feature_id, error: s.error });
      continue;
    }
    for (const [p, { name, program }] of programs.entries()) {
      const chosen = intervalsOf(s, program.bands);
      const elements = seriesElements(chosen, maxCloud, s.stats[p]!);
      for (const e of elements) {
        const st = e.imagery_id ? s.stats[p]!.get(e.imagery_id)! : undefined;
        parts.push(formatRow(req.format, s.feature.feature_id, name, e, st, extra));
        rows++;
      }
    }
  }
  return { parts: parts.finish(), rows, errors };

  /** The subject's intervals with their best capture, among the captures with the program's bands. */
  function intervalsOf(s: Subject, bands: readonly string[]) {
    const cands: Array<{ c: Candidate; t: number }> = [];
    for (const id of s.captures) {
      const counts = s.counts.get(id);
      if (!counts) continue;
      const c = captures.get(id)!;
      const bandNames = Object.keys(c.bands);
      if (!hasBands({ bands: bandNames }, bands)) continue;
      // a capture the field only touches: by its weights under coverage, left out by pixel centres
      const w = weighed({ id, capture_date: c.capture_date, ...counts, bands: bandNames }, options.stats.weighting);
      if (w) cands.push({ c: w, t: c.t });
    }
    cands.sort((a, b) => a.t - b.t);
    if (req.interval !== 'capture') return chooseIntervals(cands, intervalBounds(t0, t1, n, step));
    const days = [...new Set(cands.map((x) => x.t))];
    return chooseIntervals(
      cands,
      days.map((d): [number, number] => [d, d]),
    );
  }
}

/**
 * Rows joined into parts of at least `partBytes` UTF-8 bytes (the last may be shorter), whole rows
 * each: the parts' concatenation is the rows'. A part is joined as soon as it is full, so a row's
 * string lives only until its part is made.
 */
export class RowParts {
  private readonly parts: string[] = [];
  private lines: string[] = [];
  private bytes = 0;

  constructor(private readonly partBytes: number) {}

  push(line: string): void {
    this.lines.push(line);
    this.bytes += Buffer.byteLength(line);
    if (this.bytes >= this.partBytes) {
      this.parts.push(this.lines.join(''));
      this.lines = [];
      this.bytes = 0;
    }
  }

  finish(): string[] {
    if (this.lines.length) this.parts.push(this.lines.join(''));
    this.lines = [];
    this.bytes = 0;
    return this.parts;
  }
}

/**
 * A percentile's column (and NDJSON member): `p` and the number in decimal notation, the shortest
 * that reads back as it (p5, p99.9, p0.0000001: JavaScript writes numbers under 1e-6 as 1e-7).
 */
export function percentileColumn(p: number): string {
  const m = /^(\d)(?:\.(\d+))?e-(\d+)$/.exec(String(p));
  return m ? `p0.${'0'.repeat(Number(m[3]) - 1)}${m[1]}${m[2] ?? ''}` : `p${p}`;
}

/** The extra columns the statistics options add: a p<N> column per percentile, and the histogram. */
export function extraColumns(o: StatsOptions): { percentiles: number[]; histogram: boolean } {
  return { percentiles: o.stats.percentiles ?? [], histogram: !!o.stats.histogram };
}

export const BASE_COLUMNS = [
  'field_id',
  'index',
  'interval_start',
  'interval_end',
  'date',
  'imagery_id',
  'count',
  'min',
  'max',
  'mean',
  'std',
  'valid_fraction',
  'cloud_cover',
] as const;

export function header(format: BatchFormat, extra: ReturnType<typeof extraColumns>): string {
  if (format !== 'csv') return '';
  const cols: string[] = [...BASE_COLUMNS, ...extra.percentiles.map(percentileColumn)];
  if (extra.histogram) cols.push('histogram');
  return `${cols.join(',')}\n`;
}

/** RFC 4180: a field with a comma, quote or line break is quoted, its quotes doubled. */
const csvText = (s: string) => (/[",\r\n]/.test(s) ? `"${s.replace(/"/g, '""')}"` : s);
const csvNum = (x: number | null | undefined) => (x === null || x === undefined ? '' : String(x));

function formatRow(
  format: BatchFormat,
  featureId: string,
  index: string,
  e: SeriesElement,
  s: CachedStats | undefined,
  extra: ReturnType<typeof extraColumns>,
): string {
  const pct = extra.percentiles.map((_, i) => (s ? (s.percentiles?.[i]?.value ?? null) : null));
  const hist = extra.histogram ? (s?.histogram ?? null) : undefined;
  if (format === 'ndjson') {
    const row: Record<string, unknown> = {
      field_id: featureId,
      index,
      interval_start: e.interval_start,
      interval_end: e.interval_end,
      date: e.date,
      imagery_id: e.imagery_id,
      count: s ? s.count : null,
      min: e.min,
      max: e.max,
      mean: e.mean,
      std: e.std,
      valid_fraction: e.valid_fraction,
      cloud_cover: e.cloud_cover,
    };
    for (const [i, p] of extra.percentiles.entries()) row[percentileColumn(p)] = pct[i];
    if (hist !== undefined) row.histogram = hist;
    return `${JSON.stringify(row)}\n`;
  }
  let line = `${csvText(featureId)},${csvText(index)},${e.interval_start},${e.interval_end},${e.date},${e.imagery_id ?? ''},${csvNum(s ? s.count : null)},${csvNum(e.min)},${csvNum(e.max)},${csvNum(e.mean)},${csvNum(e.std)},${csvNum(e.valid_fraction)},${csvNum(e.cloud_cover)}`;
  for (const v of pct) line += `,${csvNum(v)}`;
  if (hist !== undefined) line += `,${hist === null ? '' : csvText(JSON.stringify(hist))}`;
  return `${line}\n`;
}

/**
 * The most UTF-8 bytes one row of the request can take, as an estimate from above: the ids, dates
 * and seven statistics (300), and 24 a number (a double's shortest form with its sign, exponent
 * and separator) for each percentile and each edge and count of the histogram.
 */
export function rowBytes(req: BatchRequest): number {
  const { percentiles = [], histogram: h } = compileRequest(req).options.stats;
  const bins = h === undefined ? 0 : 'bins' in h ? h.bins : h.edges.length - 1;
  return 300 + 24 * percentiles.length + (h === undefined ? 0 : 32 + 24 * (2 * bins + 1));
}

/** Indices × intervals: the rows of one feature (capture: indices × its capture days). */
export function unitsPer(req: BatchRequest, captureDays: number): number {
  if (req.interval === 'capture') return req.indices.length * captureDays;
  const { n } = compileRequest(req);
  return req.indices.length * n;
}
