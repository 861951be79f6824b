/**
 * Reports: request (with Idempotency-Key), read (re-signing an expired link), list, delete, and
 * the signed download. Generation itself runs on the `reports` queue (worker.ts).
 */
import { createHash } from 'node:crypto';
import type { ComputePool } from '../compute/pool.js';
import { getField } from '../fields/index.js';
import type { Database } from '../platform/database.js';
import { AppError, notFound } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import type { JobQueues } from '../platform/queue/job-queues.js';
import { resolveOptions } from './options.js';
import type { Report, ReportCreate, ReportListQuery } from './schemas.js';
import { checkDownload, downloadUrl } from './signing.js';

export const REPORT_QUEUE = 'reports';
const IDEMPOTENCY_WINDOW_MS = 24 * 3_600_000;
const IDEMPOTENCY_KEY_RE = /^[\x21-\x7e]{1,255}$/;

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

/** Links carry whole seconds; the stored expiry is cut to the same second so both agree. */
export function expiryFrom(now: number, ttlMs: number): Date {
  return new Date(Math.floor((now + ttlMs) / 1000) * 1000);
}

export function jobIdFor(reportId: string, run: number): string {
  return `${reportId}.${run}`;
}

function canonical(x: unknown): string {
  if (Array.isArray(x)) return `[${x.map(canonical).join(',')}]`;
  if (x && typeof x === 'object') {
    return `{${Object.keys(x)
      .sort()
      .filter((k) => (x as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${canonical((x as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(x);
}

class IdempotencyRace extends Error {}

export async function createReport(
  deps: ReportDeps,
  accountId: string,
  fieldId: string,
  body: ReportCreate,
  idempotencyKey?: string,
): Promise<{ report: Report; replayed: boolean }> {
  if (idempotencyKey !== undefined && !IDEMPOTENCY_KEY_RE.test(idempotencyKey)) {
    throw new AppError('validation_failed', 'Idempotency-Key must be 1-255 visible ASCII characters', {
      errors: [
        { path: '/headers/idempotency-key', code: 'invalid', message: 'must be 1-255 visible ASCII characters' },
      ],
    });
  }
  await getField(deps.db, accountId, fieldId);
  const options = resolveOptions(body.type, body.options, body.format);
  const bodyHash = createHash('sha256')
    .update(canonical({ field_id: fieldId, type: body.type, format: body.format, options: body.options ?? {} }))
    .digest('base64url');
  for (let round = 0; ; round++) {
    try {
      const out = await deps.db.transaction(async (tx) => {
        if (idempotencyKey !== undefined) {
          const [prior] = await tx.query<{ body_hash: string; report_id: string; created_at: Date }>(
            'SELECT body_hash, report_id, created_at FROM report_idempotency WHERE account_id = $1 AND key = $2 FOR UPDATE',
            [accountId, idempotencyKey],
          );
          if (prior && Date.now() - prior.created_at.getTime() < IDEMPOTENCY_WINDOW_MS) {
            if (prior.body_hash !== bodyHash) {
              throw new AppError(
                'idempotency_key_reused',
                `Idempotency-Key "${idempotencyKey}" was used within 24 h with a different request body; use a new key`,
              );
            }
            const [row] = await tx.query<ReportRow>(
              `SELECT ${REPORT_COLUMNS} FROM reports WHERE id = $1 AND account_id = $2`,
              [prior.report_id, accountId],
            );
            if (row) return { row, replayed: true };
          }
          if (prior)
            await tx.query('DELETE FROM report_idempotency WHERE account_id = $1 AND key = $2', [
              accountId,
              idempotencyKey,
            ]);
        }
        const id = newId('rpt');
        const [row] = await tx.query<ReportRow>(
          `INSERT INTO reports (id, account_id, field_id, type, format, options, status, job_id)
           VALUES ($1, $2, $3, $4, $5, $6::jsonb, 'pending', $7) RETURNING ${REPORT_COLUMNS}`,
          [id, accountId, fieldId, body.type, body.format, JSON.stringify(options), jobIdFor(id, 1)],
        );
        if (idempotencyKey !== undefined) {
          const claimed = await tx.query(
            'INSERT INTO report_idempotency (account_id, key, body_hash, report_id) VALUES ($1, $2, $3, $4) ON CONFLICT DO NOTHING RETURNING key',
            [accountId, idempotencyKey, bodyHash, id],
          );
          // A concurrent request with the same key won: roll back and answer with its report.
          if (!claimed.length) throw new IdempotencyRace();
        }
        return { row: row!, replayed: false };
      });
      if (!out.replayed) {
        // If this fails (queue unreachable) the report stays pending and the sweeper queues it.
        await deps.queues.enqueue(REPORT_QUEUE, { report_id: out.row.id }, { jobId: out.row.job_id! }).catch(() => {});
      }
      return { report: toReport(deps, out.row), replayed: out.replayed };
    } catch (err) {
      if (err instanceof IdempotencyRace && round < 3) continue;
      throw err;
    }
  }
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
  const check =
    expires !== undefined && /^\d{1,15}$/.test(expires) && signature
      ? checkDownload(deps.signingKey, id, Number(expires), signature)
      : 'tampered';
  if (check === 'tampered')
    throw new AppError(
      'invalid_signature',
      'The download link is not valid (its signature does not match); ask GET /v1/reports/{id} for a fresh one',
    );
  if (check === 'expired')
    throw new AppError(
      'link_expired',
      'The download link has expired; GET /v1/reports/{id} returns a freshly signed one',
    );
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
