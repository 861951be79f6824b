/**
 * Report generation on the `reports` queue, as small steps: claim (pending/processing →
 * processing, counting the attempt), generate with a heartbeat, then store the file and emit
 * `report.ready` in one transaction, or record why it failed. A worker that dies leaves a
 * report in `processing` with a stale heartbeat: the queue runs the job again (lease / stalled
 * job), and the sweeper re-queues or fails any report whose job is gone, so none stays unfinished.
 */
import { Counter, Histogram } from 'prom-client';
import { emit } from '../events/index.js';
import { AppError } from '../platform/errors.js';
import { registry } from '../platform/metrics.js';
import type { JobContext } from '../platform/queue/job-queues.js';
import { generateReport, ReportFailure } from './generate.js';
import {
  expiryFrom,
  jobIdFor,
  REPORT_COLUMNS,
  REPORT_QUEUE,
  toReport,
  type ReportDeps,
  type ReportRow,
} from './service.js';

export const reportsGenerated = new Counter({
  name: 'reports_generated_total',
  help: 'Reports finished, by type, format and outcome (ready or failed)',
  labelNames: ['type', 'format', 'outcome'] as const,
  registers: [registry],
});

export const reportDuration = new Histogram({
  name: 'report_generation_duration_seconds',
  help: 'Time to generate a report (data, content and rendering), by type and format',
  labelNames: ['type', 'format'] as const,
  buckets: [0.05, 0.1, 0.25, 0.5, 1, 2, 5, 10, 30, 60, 120],
  registers: [registry],
});

export interface ReportJob {
  report_id: string;
}

async function fail(deps: ReportDeps, row: Pick<ReportRow, 'id' | 'type' | 'format'>, reason: string): Promise<void> {
  const done = await deps.db.query(
    `UPDATE reports SET status = 'failed', error = $2, heartbeat_at = NULL, completed_at = now(), updated_at = now()
      WHERE id = $1 AND status IN ('pending', 'processing') RETURNING id`,
    [row.id, reason],
  );
  if (done.length) reportsGenerated.inc({ type: row.type, format: row.format, outcome: 'failed' });
}

export async function processReportJob(deps: ReportDeps, job: ReportJob, ctx?: JobContext): Promise<void> {
  const [row] = await deps.db.query<ReportRow>(
    `UPDATE reports SET status = 'processing', attempts = attempts + 1, heartbeat_at = now(), started_at = now(), updated_at = now()
      WHERE id = $1 AND status IN ('pending', 'processing') AND ($2::text IS NULL OR job_id = $2) RETURNING ${REPORT_COLUMNS}`,
    [job.report_id, ctx?.id ?? null],
  );
  // Deleted, already finished, or handed to a newer job by the sweeper: nothing to do.
  if (!row) return;
  if (row.attempts > deps.maxAttempts) {
    await fail(
      deps,
      row,
      `generation was interrupted ${row.attempts - 1} times (the worker stopped before finishing); request the report again`,
    );
    return;
  }
  const beat = setInterval(
    () => {
      void deps.db
        .query(`UPDATE reports SET heartbeat_at = now() WHERE id = $1 AND status = 'processing'`, [row.id])
        .catch(() => {});
    },
    Math.max(250, Math.floor(deps.stallMs / 4)),
  );
  beat.unref();
  const timer = reportDuration.startTimer({ type: row.type, format: row.format });
  try {
    const file = await generateReport(deps, row);
    await deps.onStage?.('store', row.id);
    const ready = await deps.db.transaction(async (tx) => {
      const expiresAt = expiryFrom(Date.now(), deps.urlTtlMs);
      const [updated] = await tx.query<ReportRow>(
        `UPDATE reports SET status = 'ready', error = NULL, heartbeat_at = NULL, completed_at = now(), updated_at = now(),
                expires_at = $2, filename = $3, content_type = $4, size_bytes = $5
          WHERE id = $1 AND status = 'processing' RETURNING ${REPORT_COLUMNS}`,
        [row.id, expiresAt, file.filename, file.contentType, file.content.length],
      );
      if (!updated) return null;
      await tx.query(
        'INSERT INTO report_files (report_id, content) VALUES ($1, $2::bytea) ON CONFLICT (report_id) DO UPDATE SET content = EXCLUDED.content',
        [row.id, file.content],
      );
      const r = toReport(deps, updated);
      await emit(tx, row.account_id, 'report.ready', {
        field_id: r.field_id,
        report_id: r.id,
        type: r.type,
        format: r.format,
        download_url: r.download_url,
        expires_at: r.expires_at,
      });
      return r;
    });
    if (ready) {
      timer();
      reportsGenerated.inc({ type: row.type, format: row.format, outcome: 'ready' });
    }
  } catch (err) {
    if (err instanceof ReportFailure || (err instanceof AppError && err.status < 500)) {
      await fail(deps, row, err.message);
      return;
    }
    const message = err instanceof Error ? err.message : String(err);
    if (row.attempts < deps.maxAttempts) {
      // An unexpected error (database or file hiccup): try again shortly under a new job.
      const next = jobIdFor(row.id, row.attempts + 1);
      const moved = await deps.db.query(
        `UPDATE reports SET status = 'pending', job_id = $2, heartbeat_at = NULL, updated_at = now() WHERE id = $1 AND status = 'processing' RETURNING id`,
        [row.id, next],
      );
      if (moved.length)
        await deps.queues.enqueue(REPORT_QUEUE, { report_id: row.id }, { jobId: next, delayMs: 1000 * row.attempts });
      return;
    }
    await fail(deps, row, `generation failed after ${row.attempts} attempts: ${message}`);
  } finally {
    clearInterval(beat);
  }
}

/**
 * Reports pending or processing with no heartbeat for `stallMs` whose job is no longer queued or
 * running (lost with Redis, failed by the queue after repeated stalls, never enqueued): queued
 * again under a new job, or failed once they have used their attempts. Returns how many it moved.
 */
export async function sweepStalledReports(deps: ReportDeps): Promise<number> {
  const stale = await deps.db.query<Pick<ReportRow, 'id' | 'type' | 'format' | 'job_id' | 'attempts' | 'status'>>(
    `SELECT id, type, format, job_id, attempts, status FROM reports
      WHERE status IN ('pending', 'processing') AND COALESCE(heartbeat_at, updated_at) < now() - ($1 || ' milliseconds')::interval
      ORDER BY updated_at LIMIT 100`,
    [String(deps.stallMs)],
  );
  let moved = 0;
  for (const r of stale) {
    if (r.job_id && (await deps.queues.pending(REPORT_QUEUE, r.job_id))) continue;
    if (r.attempts >= deps.maxAttempts) {
      await fail(
        deps,
        r,
        `generation was interrupted ${r.attempts} times (the worker stopped before finishing); request the report again`,
      );
    } else {
      const next = jobIdFor(r.id, r.attempts + 1);
      const hit = await deps.db.query(
        `UPDATE reports SET status = 'pending', job_id = $2, heartbeat_at = NULL, updated_at = now() WHERE id = $1 AND job_id IS NOT DISTINCT FROM $3 AND status IN ('pending', 'processing') RETURNING id`,
        [r.id, next, r.job_id],
      );
      if (hit.length) await deps.queues.enqueue(REPORT_QUEUE, { report_id: r.id }, { jobId: next });
    }
    moved++;
  }
  return moved;
}

export function startReportSweeper(deps: ReportDeps, onError: (err: unknown) => void): () => void {
  let running = false;
  const t = setInterval(
    () => {
      if (running) return;
      running = true;
      sweepStalledReports(deps)
        .catch(onError)
        .finally(() => (running = false));
    },
    Math.max(200, Math.min(30_000, Math.floor(deps.stallMs / 2))),
  );
  t.unref();
  return () => clearInterval(t);
}
