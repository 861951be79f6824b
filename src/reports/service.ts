/**
 * Reports: request (with Idempotency-Key), read (re-signing an expired link), list, delete, and
 * the signed download. Generation itself runs on the `reports` queue (worker.ts).
 */
import type { ComputePool } from '../compute/pool.js';
import { getField } from '../fields/index.js';
import type { Database } from '../platform/database.js';
import { notFound } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { checkIdempotencyKey, idempotentCreate } from '../platform/idempotency.js';
import { assertDownloadLink, expiryFrom } from '../platform/signed-links.js';
import type { JobQueues } from '../platform/queue/job-queues.js';
import { resolveOptions } from './options.js';
import type { Report, ReportCreate, ReportListQuery } from './schemas.js';
import { downloadUrl } from './signing.js';

export const REPORT_QUEUE = 'reports';

export interface ReportDeps {
  db: Database;
  queues: Pick<JobQueues, 'enqueue' | 'remove' | 'pending'>;
  compute: ComputePool;
  roots: string[];
  signingKey: string;
  publicBaseUrl: string;
  urlTtlMs: number;
  stallMs: number;
  maxAttempts: number;
  /** Called at each generation stage (tests use it to stop a worker mid-generation). */
  onStage?: (stage: string, reportId: string) => Promise<void> | void;
}

export interface ReportRow {
  id: string;
  account_id: string;
  field_id: string;
  type: Report['type'];
  format: Report['format'];
  options: Record<string, unknown>;
  status: Report['status'];
  error: string | null;
  job_id: string | null;
  attempts: number;
  created_at: Date;
  updated_at: Date;
  completed_at: Date | null;
  expires_at: Date | null;
  filename: string | null;
  content_type: string | null;
  size_bytes: number | null;
}

export const REPORT_COLUMNS =
  'id, account_id, field_id, type, format, options, status, error, job_id, attempts, created_at, updated_at, completed_at, expires_at, filename, content_type, size_bytes';

export function toReport(deps: Pick<ReportDeps, 'publicBaseUrl' | 'signingKey'>, r: ReportRow): Report {
  const ready = r.status === 'ready' && r.expires_at !== null;
  return {
    id: r.id,
    field_id: r.field_id,
    type: r.type,
    format: r.format,
    status: r.status,
    created_at: r.created_at.toISOString(),
    download_url: ready ? downloadUrl(deps.publicBaseUrl, deps.signingKey, r.id, r.expires_at!) : null,
    expires_at: ready ? r.expires_at!.toISOString() : null,
    options: r.options,
    error: r.error,
    updated_at: r.updated_at.toISOString(),
    completed_at: r.completed_at?.toISOString() ?? null,
    size_bytes: r.size_bytes,
    filename: r.filename,
  };
}

export { expiryFrom };

export function jobIdFor(reportId: string, run: number): string {
  return `${reportId}.${run}`;
}

export async function createReport(
  deps: ReportDeps,
  accountId: string,
  fieldId: string,
  body: ReportCreate,
  idempotencyKey?: string,
): Promise<{ report: Report; replayed: boolean }> {
  checkIdempotencyKey(idempotencyKey);
  await getField(deps.db, accountId, fieldId);
  const options = resolveOptions(body.type, body.options, body.format);
  const out = await idempotentCreate<ReportRow>(deps.db, {
    table: 'report_idempotency',
    idColumn: 'report_id',
    accountId,
    key: idempotencyKey,
    body: { field_id: fieldId, type: body.type, format: body.format, options: body.options ?? {} },
    replay: async (tx, id) =>
      (
        await tx.query<ReportRow>(`SELECT ${REPORT_COLUMNS} FROM reports WHERE id = $1 AND account_id = $2`, [
          id,
          accountId,
        ])
      )[0],
    create: async (tx) => {
      const id = newId('rpt');
      const [row] = await tx.query<ReportRow>(
        `INSERT INTO reports (id, account_id, field_id, type, format, options, status, job_id)
         VALUES ($1, $2, $3, $4, $5, $6::jsonb, 'pending', $7) RETURNING ${REPORT_COLUMNS}`,
        [id, accountId, fieldId, body.type, body.format, JSON.stringify(options), jobIdFor(id, 1)],
      );
      return { row: row!, id };
    },
  });
  if (!out.replayed) {
    // If this fails (queue unreachable) the report stays pending and the sweeper queues it.
    await deps.queues.enqueue(REPORT_QUEUE, { report_id: out.row.id }, { jobId: out.row.job_id! }).catch(() => {});
  }
  return { report: toReport(deps, out.row), replayed: out.replayed };
}

/**
 * The spec: an expired link is replaced by a freshly signed one valid another full lifetime, and
 * the new expiry is kept (one statement for all the expired ones among `rows`).
 */
async function renewExpired(deps: ReportDeps, accountId: string, rows: ReportRow[]): Promise<ReportRow[]> {
  const now = Date.now();
  const expired = rows
    .filter((r) => r.status === 'ready' && r.expires_at && r.expires_at.getTime() <= now)
    .map((r) => r.id);
  if (!expired.length) return rows;
  const renewed = await deps.db.query<ReportRow>(
    `UPDATE reports SET expires_at = $3 WHERE id = ANY($1) AND account_id = $2 AND status = 'ready' RETURNING ${REPORT_COLUMNS}`,
    [expired, accountId, expiryFrom(now, deps.urlTtlMs)],
  );
  const byId = new Map(renewed.map((r) => [r.id, r]));
  return rows.map((r) => byId.get(r.id) ?? r);
}

export async function getReport(deps: ReportDeps, accountId: string, id: string): Promise<Report> {
  const [row] = await deps.db.query<ReportRow>(
    `SELECT ${REPORT_COLUMNS} FROM reports WHERE id = $1 AND account_id = $2`,
    [id, accountId],
    { prepare: true }, // the poll: parsed and planned once per connection
  );
  if (!row) throw notFound('Report', id);
  return toReport(deps, (await renewExpired(deps, accountId, [row]))[0]!);
}

export async function listReports(
  deps: ReportDeps,
  accountId: string,
  q: ReportListQuery,
): Promise<{ data: Report[]; total: number }> {
  const params = [accountId, q.field_id ?? null, q.type ?? null, q.status ?? null];
  const where =
    'account_id = $1 AND ($2::text IS NULL OR field_id = $2) AND ($3::text IS NULL OR type = $3) AND ($4::text IS NULL OR status = $4)';
  const [count] = await deps.db.query<{ n: number }>(`SELECT count(*)::int AS n FROM reports WHERE ${where}`, params);
  const rows = await deps.db.query<ReportRow>(
    `SELECT ${REPORT_COLUMNS} FROM reports WHERE ${where} ORDER BY created_at DESC, id LIMIT $5 OFFSET $6`,
    [...params, q.per_page, (q.page - 1) * q.per_page],
  );
  // Expired links are re-signed as by GET /reports/{id}: every listed link works.
  return { data: (await renewExpired(deps, accountId, rows)).map((r) => toReport(deps, r)), total: count!.n };
}

/** Deletes the report and its file (cascade); a queued job finds nothing and does nothing. */
export async function deleteReport(deps: ReportDeps, accountId: string, id: string): Promise<void> {
  const rows = await deps.db.query<{ job_id: string | null }>(
    'DELETE FROM reports WHERE id = $1 AND account_id = $2 RETURNING job_id',
    [id, accountId],
  );
  if (!rows.length) throw notFound('Report', id);
  if (rows[0]!.job_id) await deps.queues.remove(REPORT_QUEUE, rows[0]!.job_id).catch(() => false);
}

export interface Download {
  content: Buffer;
  filename: string;
  contentType: string;
}

export async function openDownload(
  deps: ReportDeps,
  id: string,
  expires: string | undefined,
  signature: string | undefined,
): Promise<Download> {
  assertDownloadLink(deps.signingKey, id, expires, signature, 'GET /v1/reports/{id}');
  const [row] = await deps.db.query<{ content: Uint8Array; filename: string; content_type: string }>(
    `SELECT f.content, r.filename, r.content_type FROM reports r JOIN report_files f ON f.report_id = r.id WHERE r.id = $1 AND r.status = 'ready'`,
    [id],
  );
  if (!row) throw notFound('Report', id);
  return {
    content: Buffer.from(row.content.buffer, row.content.byteOffset, row.content.byteLength),
    filename: row.filename,
    contentType: row.content_type,
  };
}
