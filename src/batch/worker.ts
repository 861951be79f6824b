/**
 * Batch statistics on the `batch` queue. A chunk job computes its features (execute.ts) and stores
 * its rows in one statement keyed by (job, chunk), only while the chunk is not done: a chunk run
 * again (its worker died, the queue took it back) replaces nothing that was stored and stores its
 * rows once. The chunk that finds every chunk done queues the file job (one job id per batch job,
 * so queuing it twice is one job); the file job copies the chunks' rows into the file's parts in
 * the database (a statement a chunk, no row through this process), then marks the job ready and
 * emits `batch.completed` in one transaction. A worker killed mid-chunk loses nothing: the queue
 * runs the chunk again (lease / stalled job), and a chunk whose runs are used up fails the job.
 */
import { setImmediate as nextTurn } from 'node:timers/promises';
import { Counter } from 'prom-client';
import { emit } from '../events/index.js';
import { registry } from '../platform/metrics.js';
import type { JobContext } from '../platform/queue/job-queues.js';
import { expiryFrom, signedDownloadUrl } from '../platform/signed-links.js';
import { compileRequest, executeChunk, extraColumns, header, type ChunkFeature } from './execute.js';
import { assembleJobId, BATCH_COLUMNS, BATCH_QUEUE, chunkJobId, type BatchDeps, type BatchRow } from './service.js';

export const batchChunks = new Counter({
  name: 'batch_chunks_total',
  help: 'Batch statistics chunks, by outcome (stored; replaced nothing: already done; requeued: its queue job was lost)',
  labelNames: ['outcome'] as const,
  registers: [registry],
});

export type BatchQueueJob = { job_id: string; chunk: number } | { job_id: string; file: true };

const CONTENT_TYPES = { csv: 'text/csv; charset=utf-8', ndjson: 'application/x-ndjson' } as const;

async function failJob(deps: BatchDeps, id: string, reason: string): Promise<void> {
  await deps.db.query(
    `UPDATE batch_jobs SET status = 'failed', error = $2, completed_at = now(), updated_at = now()
      WHERE id = $1 AND status IN ('pending', 'running')`,
    [id, reason],
  );
}

export async function processBatchJob(deps: BatchDeps, job: BatchQueueJob, ctx?: JobContext): Promise<void> {
  if ('file' in job) return writeFile(deps, job.job_id);
  const [row] = await deps.db.query<
    Pick<BatchRow, 'id' | 'account_id' | 'status' | 'request' | 'total' | 'feature_count'>
  >(
    `UPDATE batch_jobs SET status = CASE WHEN status = 'pending' THEN 'running' ELSE status END,
            updated_at = now() WHERE id = $1 RETURNING id, account_id, status, request, total, feature_count`,
    [job.job_id],
  );
  // Deleted, cancelled or finished: nothing to do.
  if (row?.status !== 'running') return;
  const [chunk] = await deps.db.query<{ first_seq: number; end_seq: number; done: boolean }>(
    'UPDATE batch_chunks SET attempts = attempts + 1 WHERE job_id = $1 AND chunk = $2 RETURNING first_seq, end_seq, done',
    [job.job_id, job.chunk],
  );
  if (!chunk) return;
  if (!chunk.done) {
    await deps.onChunk?.('start', job.job_id, job.chunk);
    const features = await deps.db.query<ChunkFeature>(
      'SELECT seq, feature_id, field_id, boundary, error FROM batch_features WHERE job_id = $1 AND seq >= $2 AND seq < $3 ORDER BY seq',
      [job.job_id, chunk.first_seq, chunk.end_seq],
    );
    let stored: unknown[];
    try {
      const result = await executeChunk(deps, row.account_id, row.request, features);
      await deps.onChunk?.('computed', job.job_id, job.chunk);
      const units = (chunk.end_seq - chunk.first_seq) * (Number(row.total) / Math.max(1, row.feature_count));
      stored = await deps.db.query(
        `UPDATE batch_chunks SET done = true, body = $3::text[], row_count = $4, errors = $5::jsonb, units = $6
          WHERE job_id = $1 AND chunk = $2 AND NOT done
            AND EXISTS (SELECT 1 FROM batch_jobs WHERE id = $1 AND status = 'running') RETURNING chunk`,
        [job.job_id, job.chunk, result.parts, result.rows, JSON.stringify(result.errors), String(units)],
      );
    } catch (err) {
      // The queue runs the chunk again; once its runs are used up, the job fails with the reason,
      // whether computing or storing the rows failed (a store that failed on every run left the
      // job running for ever).
      if (!ctx || ctx.attempt >= deps.maxAttempts)
        await failJob(
          deps,
          job.job_id,
          `chunk ${job.chunk} failed after ${ctx?.attempt ?? 1} attempts: ${(err as Error).message}`,
        );
      throw err;
    }
    batchChunks.inc({ outcome: stored.length ? 'stored' : 'already_done' });
    if (stored.length) await deps.onChunk?.('stored', job.job_id, job.chunk);
  }
  const [left] = await deps.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM batch_chunks WHERE job_id = $1 AND NOT done',
    [job.job_id],
  );
  if (left!.n === 0)
    await deps.queues.enqueue(
      BATCH_QUEUE,
      { job_id: job.job_id, file: true },
      { jobId: assembleJobId(job.job_id), attempts: deps.maxAttempts, backoffMs: [1000, 5000] },
    );
}

async function writeFile(deps: BatchDeps, id: string): Promise<void> {
  const [row] = await deps.db.query<BatchRow>(`SELECT ${BATCH_COLUMNS} FROM batch_jobs WHERE id = $1`, [id]);
  if (row?.status !== 'running') return;
  const [left] = await deps.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM batch_chunks WHERE job_id = $1 AND NOT done',
    [id],
  );
  if (left!.n > 0) return;
  const head = header(row.format, extraColumns(compileRequest(row.request).options));
  // The file: the header (part 0), then every chunk's rows in chunk order, copied inside the
  // database, a part per stored part of a chunk (about BATCH_PART_BYTES each: the download holds
  // one), numbered from the parts of the chunks before. One statement a chunk, with a turn of the
  // event loop before each: the embedded database runs a statement on the event loop, and the
  // whole copy of a 1.15 GB file in one statement held every request for about 80 s. A chunk's
  // rows never change once stored, so the numbering is the same on every run and a run after one
  // that stopped part way adds only the parts missing.
  const chunks = await deps.db.query<{ chunk: number; parts: number }>(
    `SELECT chunk, coalesce(array_length(body, 1), 0)::int AS parts FROM batch_chunks
      WHERE job_id = $1 AND row_count > 0 ORDER BY chunk`,
    [id],
  );
  await deps.db.query(
    'INSERT INTO batch_files (job_id, part, content) VALUES ($1, 0, $2::bytea) ON CONFLICT (job_id, part) DO NOTHING',
    [id, Buffer.from(head)],
  );
  let before = 0;
  for (const c of chunks) {
    await nextTurn();
    await deps.db.query(
      `INSERT INTO batch_files (job_id, part, content)
       SELECT job_id, $3 + u.ord, convert_to(u.piece, 'UTF8')
         FROM batch_chunks, unnest(body) WITH ORDINALITY AS u(piece, ord)
        WHERE job_id = $1 AND chunk = $2
       ON CONFLICT (job_id, part) DO NOTHING`,
      [id, c.chunk, before],
    );
    before += c.parts;
  }
  await deps.db.transaction(async (tx) => {
    const [locked] = await tx.query<{ status: string }>('SELECT status FROM batch_jobs WHERE id = $1 FOR UPDATE', [id]);
    if (locked?.status !== 'running') {
      // cancelled or failed while its parts were copied: they go (a ready job keeps its file)
      if (locked && locked.status !== 'ready') await tx.query('DELETE FROM batch_files WHERE job_id = $1', [id]);
      return;
    }
    const [size] = await tx.query<{ n: string }>(
      'SELECT coalesce(sum(octet_length(content)), 0)::text AS n FROM batch_files WHERE job_id = $1',
      [id],
    );
    await tx.query('UPDATE batch_chunks SET body = NULL WHERE job_id = $1', [id]);
    const [updated] = await tx.query<BatchRow>(
      `UPDATE batch_jobs SET status = 'ready', error = NULL, completed_at = now(), updated_at = now(),
              expires_at = $2, filename = $3, content_type = $4, size_bytes = $5
        WHERE id = $1 RETURNING ${BATCH_COLUMNS}`,
      [id, expiryFrom(Date.now(), deps.urlTtlMs), `${id}.${row.format}`, CONTENT_TYPES[row.format], size!.n],
    );
    const [errors] = await tx.query<{ n: number }>(
      `SELECT (SELECT coalesce(sum(jsonb_array_length(errors)), 0)::int FROM batch_chunks WHERE job_id = $1)
            + (SELECT count(*)::int FROM batch_features WHERE job_id = $1 AND error IS NOT NULL) AS n`,
      [id],
    );
    // In the same transaction: the event exists exactly when the job is ready.
    await emit(tx, row.account_id, 'batch.completed', {
      batch_id: id,
      status: 'ready',
      format: row.format,
      feature_count: row.feature_count,
      error_count: errors!.n,
      download_url: signedDownloadUrl(
        deps.publicBaseUrl,
        deps.signingKey,
        'batch/statistics',
        id,
        updated!.expires_at!,
      ),
      expires_at: updated!.expires_at!.toISOString(),
      size_bytes: Number(size!.n),
    });
  });
}

/**
 * Chunks of unfinished jobs whose queue job is gone (Redis restarted without its data, its keys
 * deleted, a queue job removed by hand): a job none of whose chunks has started for `stallMs`
 * (its updated_at) gets each chunk that is not done and not waiting, delayed or running on the
 * queue enqueued again under the same id, and its file job when every chunk is done. A chunk
 * stores its rows once whichever run stores them first, so a chunk enqueued again that was not
 * lost after all stores nothing twice. Returns how many queue jobs it enqueued.
 */
export async function sweepLostChunks(deps: BatchDeps & { stallMs: number }): Promise<number> {
  const stale = await deps.db.query<{ id: string; left: number }>(
    `SELECT j.id, (SELECT count(*)::int FROM batch_chunks c WHERE c.job_id = j.id AND NOT c.done) AS left
       FROM batch_jobs j
      WHERE j.status IN ('pending', 'running') AND j.updated_at < now() - ($1 || ' milliseconds')::interval
      ORDER BY j.updated_at LIMIT 20`,
    [String(deps.stallMs)],
  );
  let enqueued = 0;
  for (const j of stale) {
    // Not swept again before another stallMs (unless a chunk starts meanwhile, which also moves it).
    await deps.db.query(`UPDATE batch_jobs SET updated_at = now() WHERE id = $1`, [j.id]);
    if (j.left === 0) {
      if (!(await deps.queues.pending(BATCH_QUEUE, assembleJobId(j.id)))) {
        await deps.queues.enqueue(
          BATCH_QUEUE,
          { job_id: j.id, file: true },
          { jobId: assembleJobId(j.id), attempts: deps.maxAttempts, backoffMs: [1000, 5000] },
        );
        enqueued++;
      }
      continue;
    }
    const open = await deps.db.query<{ chunk: number }>(
      'SELECT chunk FROM batch_chunks WHERE job_id = $1 AND NOT done ORDER BY chunk LIMIT 10000',
      [j.id],
    );
    const lost: number[] = [];
    for (const c of open) if (!(await deps.queues.pending(BATCH_QUEUE, chunkJobId(j.id, c.chunk)))) lost.push(c.chunk);
    if (!lost.length) continue;
    await deps.queues.enqueueMany(
      BATCH_QUEUE,
      lost.map((chunk) => ({
        data: { job_id: j.id, chunk },
        opts: { jobId: chunkJobId(j.id, chunk), attempts: deps.maxAttempts, backoffMs: [1000, 5000] },
      })),
    );
    batchChunks.inc({ outcome: 'requeued' }, lost.length);
    enqueued += lost.length;
  }
  return enqueued;
}

export function startBatchSweeper(deps: BatchDeps & { stallMs: number }, onError: (err: unknown) => void): () => void {
  let running = false;
  const t = setInterval(
    () => {
      if (running) return;
      running = true;
      sweepLostChunks(deps)
        .catch(onError)
        .finally(() => (running = false));
    },
    Math.max(200, Math.min(30_000, Math.floor(deps.stallMs / 2))),
  );
  t.unref();
  return () => clearInterval(t);
}
