/**
 * Uploaded files on the main thread: which ones an account may name, the compute pool's prepare
 * hook that copies a capture's uploads into the local read cache, and the sweep of files no capture
 * names. The files themselves are in a FileStore (platform/file-store.ts: the database, in chunks).
 *
 * Lifetime: a file is stored while its upload is received and deleted at once when the upload is
 * refused. A registered capture keeps its files as long as the capture exists (captures are deleted
 * only with their account, and the files with it: ON DELETE CASCADE). The sweep deletes files
 * older than a grace period that no capture of their account names: incomplete ones of a process
 * that died mid-upload, and complete ones whose registration never finished.
 */
import type { LocalFileCache } from '../platform/file-cache.js';
import type { FileStore } from '../platform/file-store.js';
import type { Database } from '../platform/database.js';
import type { PrepareCapture } from '../compute/pool.js';
import { captureUploadIds } from './upload-ref.js';
import type { CaptureSource } from './window-reader.js';

/** Of `ids`, those that are no complete upload of the account. */
export async function foreignUploads(db: Database, accountId: string, ids: readonly string[]): Promise<string[]> {
  if (!ids.length) return [];
  const own = await db.query<{ id: string }>(
    'SELECT id FROM upload_files WHERE id = ANY($1::text[]) AND account_id = $2 AND completed_at IS NOT NULL',
    [ids, accountId],
  );
  const found = new Set(own.map((r) => r.id));
  return ids.filter((id) => !found.has(id));
}

/**
 * The compute pool's prepare hook: every uploaded file the capture names is in the local read cache
 * (copied from the store when it is not) and stays there until the task is done.
 */
export function uploadPreparer(cache: LocalFileCache): PrepareCapture {
  return async (capture) => {
    const c = capture as CaptureSource | undefined;
    const ids = c && typeof c === 'object' && c.bands ? captureUploadIds(c) : [];
    if (!ids.length) return () => {};
    const held: Array<() => void> = [];
    try {
      for (const id of ids) held.push((await cache.acquire(id)).release);
    } catch (err) {
      for (const r of held) r();
      throw err;
    }
    return () => {
      for (const r of held) r();
    };
  };
}

/** Files created before `graceMs` ago that no capture of their account names; returns how many were deleted. */
export async function sweepUploadFiles(db: Database, store: FileStore, graceMs: number): Promise<number> {
  const rows = await db.query<{ id: string }>(
    `SELECT f.id FROM upload_files f
      WHERE f.created_at < now() - make_interval(secs => $1)
        AND NOT EXISTS (
          SELECT 1 FROM imagery i
           WHERE i.account_id = f.account_id
             AND (i.mask->>'href' = 'upload://' || f.id
                  OR EXISTS (SELECT 1 FROM jsonb_each(i.bands) b WHERE b.value->>'href' = 'upload://' || f.id)))
      LIMIT 1000`,
    [graceMs / 1000],
  );
  return store.delete(rows.map((r) => r.id));
}

/** Sweeps every `everyMs` (the worker role); returns the stop function. */
export function startUploadSweeper(
  db: Database,
  store: FileStore,
  opts: { everyMs: number; graceMs: number },
  onError: (err: unknown) => void,
): () => void {
  let running = false;
  const t = setInterval(() => {
    if (running) return;
    running = true;
    sweepUploadFiles(db, store, opts.graceMs)
      .catch(onError)
      .finally(() => (running = false));
  }, opts.everyMs);
  t.unref();
  return () => clearInterval(t);
}
