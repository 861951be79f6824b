/**
 * Batch statistics jobs: request (with Idempotency-Key, as reports), read with progress and the
 * features that failed, list, cancel, and the signed download. The work runs on the `batch` queue
 * in chunks of nearby features (worker.ts, execute.ts).
 */
import { Readable } from 'node:stream';
import { setImmediate as nextTurn } from 'node:timers/promises';
import type { ComputePool } from '../compute/pool.js';
import { findIndex } from '../compute/catalog.js';
import { BoundaryError, validateBoundary, type Boundary } from '../fields/index.js';
import type { Database, Sql } from '../platform/database.js';
import type { DownloadFile } from '../platform/http/downloads.js';
import type { ByteSpan } from '../platform/http/ranges.js';
import { AppError, notFound, type FieldIssue } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { checkIdempotencyKey, idempotentCreate } from '../platform/idempotency.js';
import type { JobQueues } from '../platform/queue/job-queues.js';
import { assertDownloadLink, expiryFrom, signedDownloadUrl } from '../platform/signed-links.js';
import { compileRequest, rowBytes, unitsPer, type BatchRequest } from './execute.js';
import type { BatchCreate, BatchFormat, BatchJob, BatchListQuery, BatchStatus } from './schemas.js';

export const BATCH_QUEUE = 'batch';

/**
 * A chunk holds its rows (and the statistics they come from) until it stores them in one
 * statement, so its features are as many as BATCH_CHUNK_FEATURES allows and their rows' estimated
 * bytes (execute.ts rowBytes) fit in CHUNK_BYTES; a feature whose rows alone would take more than
 * FEATURE_MAX_BYTES is refused (400 job_too_large). A histogram of 1,000 bins makes rows of about
 * 20 KB: 1,000 features × 3 indices × 25 weeks held 1.5 GB in one chunk, whose one statement then
 * failed on every run (docs/batch.md). A job whose rows would take more than BATCH_MAX_JOB_BYTES
 * (default 16 GiB) by the same estimate is refused as well: each feature within 64 MiB, 100,000 of
 * them would otherwise be stored (6 TiB; 2 TB without any statistics option: 20 indices × 3,660
 * days).
 */
export const CHUNK_BYTES = 32 * 2 ** 20;
export const FEATURE_MAX_BYTES = 64 * 2 ** 20;

/** Features per chunk for features of `featureBytes` rows each: at least one, at most `most`. */
export function chunkSize(most: number, featureBytes: number): number {
  return Math.max(1, Math.min(most, Math.floor(CHUNK_BYTES / Math.max(1, featureBytes))));
}

export interface BatchDeps {
  db: Database;
  queues: Pick<JobQueues, 'enqueue' | 'enqueueMany' | 'remove' | 'pending'>;
  compute: ComputePool;
  roots: string[];
  signingKey: string;
  publicBaseUrl: string;
  urlTtlMs: number;
  /** Features per chunk (one queue job each). */
  chunkFeatures: number;
  maxFeatures: number;
  /** Most bytes the job's rows may take by the estimate that sizes its chunks (BATCH_MAX_JOB_BYTES). */
  maxJobBytes: number;
  /** Runs of a chunk's queue job before the job fails (a worker that dies counts). */
  maxAttempts: number;
  /** UTF-8 bytes of rows per stored part of a chunk and of the file (BATCH_PART_BYTES). */
  partBytes?: number;
  /** Called as a chunk starts, has computed and has stored its rows (tests stop a worker there). */
  onChunk?: (stage: 'start' | 'computed' | 'stored', jobId: string, chunk: number) => Promise<void> | void;
}

export interface BatchRow {
  id: string;
  account_id: string;
  status: BatchStatus;
  request: BatchRequest;
  format: BatchFormat;
  feature_count: number;
  chunk_count: number;
  total: string | number;
  error: string | null;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  expires_at: Date | null;
  filename: string | null;
  content_type: string | null;
  size_bytes: string | number | null;
}

export const BATCH_COLUMNS =
  'id, account_id, status, request, format, feature_count, chunk_count, total, error, created_at, updated_at, completed_at, expires_at, filename, content_type, size_bytes';

export const chunkJobId = (jobId: string, chunk: number) => `${jobId}.c${chunk}`;
export const assembleJobId = (jobId: string) => `${jobId}.file`;

const MAX_LISTED_ERRORS = 100;

/** The job as the API shows it: progress and errors read with it. */
export async function toBatchJob(
  deps: Pick<BatchDeps, 'db' | 'publicBaseUrl' | 'signingKey'>,
  r: BatchRow,
): Promise<BatchJob> {
  const [p] = await deps.db.query<{
    chunks_done: number;
    done: string | null;
    chunk_errors: number;
    feature_errors: number;
  }>(
    `SELECT (SELECT count(*)::int FROM batch_chunks WHERE job_id = $1 AND done) AS chunks_done,
            (SELECT sum(units)::text FROM batch_chunks WHERE job_id = $1 AND done) AS done,
            (SELECT coalesce(sum(jsonb_array_length(errors)), 0)::int FROM batch_chunks WHERE job_id = $1) AS chunk_errors,
            (SELECT count(*)::int FROM batch_features WHERE job_id = $1 AND error IS NOT NULL) AS feature_errors`,
    [r.id],
  );
  const errors = await deps.db.query<{ feature_id: string; error: string }>(
    `(SELECT feature_id, error, seq FROM batch_features WHERE job_id = $1 AND error IS NOT NULL ORDER BY seq LIMIT $2)
     UNION ALL
     (SELECT e->>'feature_id', e->>'error', c.first_seq FROM batch_chunks c, jsonb_array_elements(c.errors) AS e
       WHERE c.job_id = $1 ORDER BY c.chunk LIMIT $2)
     ORDER BY seq LIMIT $2`,
    [r.id, MAX_LISTED_ERRORS],
  );
  const ready = r.status === 'ready' && r.expires_at !== null;
  const total = Number(r.total);
  return {
    id: r.id,
    status: r.status,
    format: r.format,
    interval: r.request.interval,
    start_date: r.request.start_date,
    end_date: r.request.end_date,
    indices: r.request.indices.map((i) => i.name),
    max_cloud_cover: r.request.max_cloud_cover,
    ...definedOptions(r.request.options),
    feature_count: r.feature_count,
    progress: {
      done: r.status === 'ready' ? total : Number(p!.done ?? 0),
      total,
      chunks_done: p!.chunks_done,
      chunks: r.chunk_count,
    },
    error_count: p!.chunk_errors + p!.feature_errors,
    errors: errors.map((e) => ({ feature_id: e.feature_id, error: e.error })),
    error: r.error,
    download_url: ready
      ? signedDownloadUrl(deps.publicBaseUrl, deps.signingKey, 'batch/statistics', r.id, r.expires_at!)
      : null,
    expires_at: ready ? r.expires_at!.toISOString() : null,
    size_bytes: r.size_bytes === null ? null : Number(r.size_bytes),
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
    completed_at: r.completed_at?.toISOString() ?? null,
  };
}

/** The statistics options the request gave (a job stored before they existed has none). */
function definedOptions(o: BatchRequest['options'] | undefined): Partial<BatchJob> {
  if (!o) return {};
  return Object.fromEntries(Object.entries(o).filter(([, v]) => v !== undefined && v !== null));
}

function invalid(issues: FieldIssue[]): AppError {
  return new AppError('validation_failed', issues.map((i) => `${i.path} ${i.message}`).join('; '), {
    errors: issues.slice(0, 20),
  });
}

const mib = (bytes: number) => Math.ceil(bytes / 2 ** 20).toLocaleString('en-US');

/** Interleaved bits of two 16-bit numbers: features close on the ground are close in this order. */
function morton(x: number, y: number): number {
  let z = 0;
  for (let b = 15; b >= 0; b--) z = z * 4 + ((y >> b) & 1) * 2 + ((x >> b) & 1);
  return z;
}

export interface NewFeature {
  feature_id: string;
  field_id: string | null;
  boundary: Boundary | null;
  error: string | null;
  /** Centre of its box (lon, lat), for the spatial order; null last. */
  centre: [number, number] | null;
}

/** Nearby features in the same chunk: sorted along a Z-order curve over their boxes' centres. */
export function spatialOrder(list: NewFeature[]): NewFeature[] {
  const placed = list.filter((f) => f.centre);
  if (!placed.length) return list;
  // A loop, not Math.min(...xs): spreading more than ~120,000 arguments overflows the stack.
  let [x0, x1, y0, y1] = [Infinity, -Infinity, Infinity, -Infinity];
  for (const f of placed) {
    const [x, y] = f.centre!;
    if (x < x0) x0 = x;
    if (x > x1) x1 = x;
    if (y < y0) y0 = y;
    if (y > y1) y1 = y;
  }
  const q = (v: number, a: number, b: number) => (b > a ? Math.min(65535, Math.floor(((v - a) / (b - a)) * 65535)) : 0);
  const keyed = placed.map((f) => ({ f, k: morton(q(f.centre![0], x0, x1), q(f.centre![1], y0, y1)) }));
  keyed.sort((a, b) => a.k - b.k);
  return [...keyed.map((e) => e.f), ...list.filter((f) => !f.centre)];
}

const boxCentre = (b: number[]): [number, number] => [(b[0]! + b[2]!) / 2, (b[1]! + b[3]!) / 2];

async function resolveFields(deps: BatchDeps, accountId: string, fields: BatchCreate['fields']): Promise<NewFeature[]> {
  if (fields === 'all') {
    const rows = await deps.db.query<{ id: string; bbox: number[] }>(
      'SELECT id, bbox FROM fields WHERE account_id = $1 ORDER BY id',
      [accountId],
    );
    if (!rows.length)
      throw invalid([{ path: '/body/fields', code: 'no_fields', message: 'the account has no field yet' }]);
    if (rows.length > deps.maxFeatures)
      throw invalid([
        {
          path: '/body/fields',
          code: 'too_many_features',
          message: `the account has ${rows.length} fields; a job takes at most ${deps.maxFeatures}`,
        },
      ]);
    return rows.map((r) => ({
      feature_id: r.id,
      field_id: r.id,
      boundary: null,
      error: null,
      centre: boxCentre(r.bbox),
    }));
  }
  const ids = fields!;
  if (ids.length > deps.maxFeatures)
    throw invalid([{ path: '/body/fields', code: 'too_many_features', message: `at most ${deps.maxFeatures} fields` }]);
  const seen = new Map<string, number>();
  const issues: FieldIssue[] = [];
  for (const [i, id] of ids.entries()) {
    if (seen.has(id))
      issues.push({ path: `/body/fields/${i}`, code: 'duplicate_id', message: `${id} is listed twice` });
    else seen.set(id, i);
  }
  if (issues.length) throw invalid(issues);
  const rows = await deps.db.query<{ id: string; bbox: number[] }>(
    'SELECT id, bbox FROM fields WHERE account_id = $1 AND id = ANY($2)',
    [accountId, ids],
  );
  const known = new Map(rows.map((r) => [r.id, r]));
  for (const [i, id] of ids.entries())
    if (!known.has(id))
      issues.push({ path: `/body/fields/${i}`, code: 'unknown_field', message: `no field ${id} in this account` });
  if (issues.length) throw invalid(issues);
  return ids.map((id) => ({
    feature_id: id,
    field_id: id,
    boundary: null,
    error: null,
    centre: boxCentre(known.get(id)!.bbox),
  }));
}

const isObject = (x: unknown): x is Record<string, unknown> => !!x && typeof x === 'object' && !Array.isArray(x);

/** Features validated between two turns of the event loop (~10 ms of work at 3×3-pixel squares). */
const FEATURES_A_TURN = 1_000;

/**
 * The ad-hoc polygons. The collection itself, a feature that is not a Feature object, a missing or
 * repeated id: 400. An invalid geometry (self-intersecting, not a polygon, …) fails that feature
 * only: it is listed with the reason in the job's errors and has no row. Gives the event loop a
 * turn every FEATURES_A_TURN features: validating 100,000 takes about a second, which other
 * requests would otherwise wait for.
 */
async function resolveFeatures(deps: BatchDeps, fc: Record<string, unknown>): Promise<NewFeature[]> {
  if (fc.type !== 'FeatureCollection' || !Array.isArray(fc.features))
    throw invalid([
      {
        path: '/body/features',
        code: 'invalid_geojson',
        message: 'must be a GeoJSON FeatureCollection with a features array',
      },
    ]);
  const list = fc.features as unknown[];
  if (!list.length)
    throw invalid([{ path: '/body/features/features', code: 'no_features', message: 'has no feature' }]);
  if (list.length > deps.maxFeatures)
    throw invalid([
      {
        path: '/body/features/features',
        code: 'too_many_features',
        message: `has ${list.length} features; a job takes at most ${deps.maxFeatures}`,
      },
    ]);
  const issues: FieldIssue[] = [];
  const seen = new Set<string>();
  const out: NewFeature[] = [];
  for (const [i, f] of list.entries()) {
    if (i > 0 && i % FEATURES_A_TURN === 0) await nextTurn();
    const at = `/body/features/features/${i}`;
    if (!isObject(f) || f.type !== 'Feature') {
      issues.push({ path: at, code: 'invalid_geojson', message: 'must be a GeoJSON Feature object' });
      continue;
    }
    const props = isObject(f.properties) ? f.properties : {};
    const raw = f.id ?? props.id;
    if (
      (typeof raw !== 'string' || !raw.length || raw.length > 256) &&
      !(typeof raw === 'number' && Number.isFinite(raw))
    ) {
      issues.push({
        path: `${at}/id`,
        code: 'missing_id',
        message: 'needs an id (the Feature member or an id property): a string of 1-256 characters or a number',
      });
      continue;
    }
    const idAt = f.id !== undefined && f.id !== null ? `${at}/id` : `${at}/properties/id`;
    if (typeof raw === 'number' && Number.isInteger(raw) && !Number.isSafeInteger(raw)) {
      // Beyond 2^53 - 1 the digits sent are not the number parsed (12345678901234567 reads as
      // ...568): the rows would carry another id than the feature's.
      issues.push({
        path: idAt,
        code: 'unsafe_id',
        message: 'is a whole number beyond 2^53 - 1, which JSON parsers round: send it as a string',
      });
      continue;
    }
    const id = String(raw);
    if (seen.has(id)) {
      issues.push({ path: idAt, code: 'duplicate_id', message: `id ${id} is used by another feature` });
      continue;
    }
    seen.add(id);
    try {
      const v = validateBoundary(f.geometry, { basePath: `${at}/geometry` });
      out.push({ feature_id: id, field_id: null, boundary: v.geometry, error: null, centre: boxCentre(v.bbox) });
    } catch (err) {
      if (!(err instanceof BoundaryError)) throw err;
      out.push({
        feature_id: id,
        field_id: null,
        boundary: null,
        error: `invalid geometry: ${err.issues.map((x) => `${x.message} (${x.code})`).join('; ')}`,
        centre: null,
      });
    }
    if (issues.length >= 20) break;
  }
  if (issues.length) throw invalid(issues);
  return out;
}

/** The request checked and resolved: 400 for any bad date, index, formula, option or interval. */
function resolveRequest(body: BatchCreate): BatchRequest {
  const issues: FieldIssue[] = [];
  const names = new Set<string>();
  const indices = body.indices.map((ix, i) => {
    const spec = typeof ix === 'string' ? { name: ix } : { name: ix.name, formula: ix.formula };
    if (spec.formula === undefined) {
      const known = findIndex(spec.name)?.name;
      if (!known)
        issues.push({
          path: `/body/indices/${i}`,
          code: 'unknown_index',
          message: `unknown index "${spec.name}"; use a name from GET /v1/indices/catalog, or {"name", "formula"}`,
        });
      else spec.name = known;
    }
    if (names.has(spec.name))
      issues.push({ path: `/body/indices/${i}`, code: 'duplicate_index', message: `${spec.name} is listed twice` });
    names.add(spec.name);
    return spec;
  });
  // one column each: p50 twice would be two columns of one name (and one NDJSON member)
  const ps = body.percentiles ?? [];
  for (const [i, p] of ps.entries())
    if (ps.indexOf(p) < i)
      issues.push({ path: `/body/percentiles/${i}`, code: 'duplicate_percentile', message: `${p} is listed twice` });
  if (issues.length) throw invalid(issues);
  const req: BatchRequest = {
    indices,
    start_date: body.start_date,
    end_date: body.end_date,
    interval: body.interval ?? 'weekly',
    format: body.format ?? 'csv',
    max_cloud_cover: body.max_cloud_cover ?? 20,
    options: {
      percentiles: body.percentiles,
      histogram: body.histogram,
      weighting: body.weighting,
      scl_exclude: body.scl_exclude,
      cloud_dilation_m: body.cloud_dilation_m,
    },
  };
  compileRequest(req); // dates, formulas, options: a 400 with the path of the first bad one
  return req;
}

/**
 * Rows of many values in one statement per slice (a large job is inserted in a few round trips),
 * with a turn of the event loop before each: the embedded database runs a statement on the event
 * loop, and its promises settle as microtasks, so the slices would otherwise run as one block
 * (the whole 100,000-feature insert, about 4 s) that no other request could break into.
 */
async function insertFeatures(tx: Sql, jobId: string, list: NewFeature[]): Promise<void> {
  const SLICE = 10_000;
  for (let a = 0; a < list.length; a += SLICE) {
    await nextTurn();
    const part = list.slice(a, a + SLICE);
    await tx.query(
      `INSERT INTO batch_features (job_id, seq, feature_id, field_id, boundary, error)
       SELECT $1, s, f, fi, b::jsonb, e FROM unnest($2::int[], $3::text[], $4::text[], $5::text[], $6::text[]) AS x(s, f, fi, b, e)`,
      [
        jobId,
        part.map((_, k) => a + k),
        part.map((f) => f.feature_id),
        part.map((f) => f.field_id),
        part.map((f) => (f.boundary ? JSON.stringify(f.boundary) : null)),
        part.map((f) => f.error),
      ],
    );
  }
}

export async function createBatch(
  deps: BatchDeps,
  accountId: string,
  body: BatchCreate,
  idempotencyKey?: string,
): Promise<{ job: BatchJob; replayed: boolean }> {
  checkIdempotencyKey(idempotencyKey);
  if ((body.fields === undefined) === (body.features === undefined))
    throw invalid([
      { path: '/body', code: 'fields_or_features', message: 'give either fields (ids or "all") or features' },
    ]);
  const req = resolveRequest(body);
  // Resolved (and so validated) before the idempotent replay is looked up: a replay of a large body
  // pays for validating it again (about 1 s at 100,000 features, docs/batch.md), never for a new job.
  const features = spatialOrder(
    body.fields !== undefined
      ? await resolveFields(deps, accountId, body.fields)
      : await resolveFeatures(deps, body.features as Record<string, unknown>),
  );
  let captureDays = 0;
  if (req.interval === 'capture') {
    const [c] = await deps.db.query<{ n: number }>(
      'SELECT count(DISTINCT capture_date)::int AS n FROM imagery WHERE account_id = $1 AND capture_date BETWEEN $2::date AND $3::date',
      [accountId, req.start_date, req.end_date],
    );
    captureDays = c!.n;
  }
  const per = unitsPer(req, captureDays);
  const featureBytes = per * rowBytes(req);
  if (featureBytes > FEATURE_MAX_BYTES)
    throw invalid([
      {
        path: '/body',
        code: 'job_too_large',
        message: `each feature's ${per.toLocaleString('en-US')} rows (indices × intervals) would take up to ${mib(featureBytes)} MiB, more than ${mib(FEATURE_MAX_BYTES)}: ask fewer histogram bins, percentiles, indices or intervals`,
      },
    ]);
  const jobBytes = featureBytes * features.length;
  if (jobBytes > deps.maxJobBytes)
    throw invalid([
      {
        path: '/body',
        code: 'job_too_large',
        message: `the job's ${(per * features.length).toLocaleString('en-US')} rows (features × indices × intervals) would take up to ${mib(jobBytes)} MiB, more than ${mib(deps.maxJobBytes)} (BATCH_MAX_JOB_BYTES): ask fewer features, histogram bins, percentiles, indices or intervals, or split the job`,
      },
    ]);
  const size = chunkSize(deps.chunkFeatures, featureBytes);
  const chunks = Math.ceil(features.length / size);
  const out = await idempotentCreate<BatchRow>(deps.db, {
    table: 'batch_idempotency',
    idColumn: 'job_id',
    accountId,
    key: idempotencyKey,
    body,
    replay: async (tx, id) =>
      (
        await tx.query<BatchRow>(`SELECT ${BATCH_COLUMNS} FROM batch_jobs WHERE id = $1 AND account_id = $2`, [
          id,
          accountId,
        ])
      )[0],
    create: async (tx) => {
      const id = newId('bat');
      const [row] = await tx.query<BatchRow>(
        `INSERT INTO batch_jobs (id, account_id, status, request, format, feature_count, chunk_count, total)
         VALUES ($1, $2, 'pending', $3::jsonb, $4, $5, $6, $7) RETURNING ${BATCH_COLUMNS}`,
        [id, accountId, JSON.stringify(req), req.format, features.length, chunks, String(per * features.length)],
      );
      await insertFeatures(tx, id, features);
      const ks = Array.from({ length: chunks }, (_, k) => k);
      await tx.query(
        `INSERT INTO batch_chunks (job_id, chunk, first_seq, end_seq) SELECT $1, k, k * $2, least((k + 1) * $2, $3)
           FROM unnest($4::int[]) AS k`,
        [id, size, features.length, ks],
      );
      return { row: row!, id };
    },
  });
  if (!out.replayed) {
    await deps.queues.enqueueMany(
      BATCH_QUEUE,
      Array.from({ length: chunks }, (_, k) => ({
        data: { job_id: out.row.id, chunk: k },
        opts: { jobId: chunkJobId(out.row.id, k), attempts: deps.maxAttempts, backoffMs: [1000, 5000] },
      })),
    );
  }
  return { job: await toBatchJob(deps, out.row), replayed: out.replayed };
}

async function renewExpired(deps: BatchDeps, r: BatchRow): Promise<BatchRow> {
  if (r.status !== 'ready' || !r.expires_at || r.expires_at.getTime() > Date.now()) return r;
  const [renewed] = await deps.db.query<BatchRow>(
    `UPDATE batch_jobs SET expires_at = $2 WHERE id = $1 AND status = 'ready' RETURNING ${BATCH_COLUMNS}`,
    [r.id, expiryFrom(Date.now(), deps.urlTtlMs)],
  );
  return renewed ?? r;
}

export async function getBatch(deps: BatchDeps, accountId: string, id: string): Promise<BatchJob> {
  const [row] = await deps.db.query<BatchRow>(
    `SELECT ${BATCH_COLUMNS} FROM batch_jobs WHERE id = $1 AND account_id = $2`,
    [id, accountId],
  );
  if (!row) throw notFound('Batch job', id);
  return toBatchJob(deps, await renewExpired(deps, row));
}

export async function listBatches(
  deps: BatchDeps,
  accountId: string,
  q: BatchListQuery,
): Promise<{ data: BatchJob[]; total: number }> {
  const params = [accountId, q.status ?? null];
  const where = 'account_id = $1 AND ($2::text IS NULL OR status = $2)';
  const [count] = await deps.db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM batch_jobs WHERE ${where}`,
    params,
  );
  const rows = await deps.db.query<BatchRow>(
    `SELECT ${BATCH_COLUMNS} FROM batch_jobs WHERE ${where} ORDER BY created_at DESC, id LIMIT $3 OFFSET $4`,
    [...params, q.per_page, (q.page - 1) * q.per_page],
  );
  const data: BatchJob[] = [];
  for (const r of rows) data.push(await toBatchJob(deps, await renewExpired(deps, r)));
  return { data, total: count!.n };
}

/**
 * An unfinished job is cancelled (its queued chunks removed, its partial results dropped) and
 * answered; a finished one (ready, failed, cancelled) is deleted with its file (null).
 */
export async function cancelBatch(deps: BatchDeps, accountId: string, id: string): Promise<BatchJob | null> {
  const [row] = await deps.db.query<BatchRow>(
    `UPDATE batch_jobs SET status = 'cancelled', error = 'cancelled by the client', completed_at = now(), updated_at = now()
      WHERE id = $1 AND account_id = $2 AND status IN ('pending', 'running') RETURNING ${BATCH_COLUMNS}`,
    [id, accountId],
  );
  if (row) {
    const open = await deps.db.query<{ chunk: number }>(
      'UPDATE batch_chunks SET body = NULL WHERE job_id = $1 RETURNING chunk, done',
      [id],
    );
    await Promise.all(open.map((c) => deps.queues.remove(BATCH_QUEUE, chunkJobId(id, c.chunk)).catch(() => false)));
    return toBatchJob(deps, row);
  }
  const gone = await deps.db.query('DELETE FROM batch_jobs WHERE id = $1 AND account_id = $2 RETURNING id', [
    id,
    accountId,
  ]);
  if (!gone.length) throw notFound('Batch job', id);
  return null;
}

export async function openBatchDownload(
  deps: BatchDeps,
  id: string,
  expires: string | undefined,
  signature: string | undefined,
): Promise<DownloadFile> {
  assertDownloadLink(deps.signingKey, id, expires, signature, 'GET /v1/batch/statistics/{id}');
  const [row] = await deps.db.query<{ filename: string; content_type: string; size_bytes: string }>(
    `SELECT filename, content_type, size_bytes FROM batch_jobs WHERE id = $1 AND status = 'ready'`,
    [id],
  );
  if (!row) throw notFound('Batch job', id);
  const db = deps.db;
  // The file's parts one at a time, as text (UTF-8 in the database: the rows' own bytes), not as
  // bytea, which both drivers decode through a hex string twice the part's size: memory bounded by
  // a part (BATCH_PART_BYTES of rows), not by the file. A range starts at the part holding its first
  // byte, found by the parts' lengths (octet_length reads a stored value's header, not the value).
  async function* parts(span: ByteSpan | null): AsyncGenerator<Buffer> {
    let after = -1;
    let skip = 0;
    let left = span ? span.end - span.start + 1 : Number.POSITIVE_INFINITY;
    if (span) {
      const [first] = await db.query<{ part: number; offset: string }>(
        `SELECT part, "offset" FROM (
           SELECT part, octet_length(content) AS n,
                  sum(octet_length(content)) OVER (ORDER BY part) - octet_length(content) AS "offset"
             FROM batch_files WHERE job_id = $1) p
          WHERE "offset" + n > $2 ORDER BY part LIMIT 1`,
        [id, span.start],
      );
      if (!first) return;
      after = first.part - 1;
      skip = span.start - Number(first.offset);
    }
    while (left > 0) {
      const rows = await db.query<{ part: number; content: string }>(
        // The part chosen first, converted after: in the target list of the same SELECT, the
        // conversion (cheap by its declared cost) ran on every remaining part below the sort.
        `SELECT part, convert_from(content, 'UTF8') AS content
           FROM (SELECT part, content FROM batch_files WHERE job_id = $1 AND part > $2 ORDER BY part LIMIT 1) p`,
        [id, after],
      );
      const r = rows[0];
      if (!r) return;
      let bytes = Buffer.from(r.content, 'utf8');
      if (skip) bytes = bytes.subarray(skip);
      skip = 0;
      if (bytes.length > left) bytes = bytes.subarray(0, left);
      left -= bytes.length;
      yield bytes;
      after = r.part;
    }
  }
  return {
    id,
    filename: row.filename,
    contentType: row.content_type,
    size: Number(row.size_bytes),
    body: (span) => Readable.from(parts(span)),
  };
}
