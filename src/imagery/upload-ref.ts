/**
 * `upload://<file id>`: how a capture names an uploaded file (stored in the database by
 * platform/file-store.ts, so that it names no machine's disk). This module is the part the compute
 * threads load: they have no database, so the process copies each uploaded file of a capture into
 * its local read cache (platform/file-cache.ts, DATA_DIR/cache/uploads/<id>.tif) before the task is
 * sent to a thread (upload-files.ts, the compute pool's prepare hook), and a thread resolves the
 * reference to that path. The thread entry sets the directory (setUploadCacheDir).
 */
import { existsSync } from 'node:fs';
import path from 'node:path';

export const UPLOAD_SCHEME = 'upload://';
export const UPLOAD_CACHE_SUFFIX = '.tif';
const UPLOAD_REF = /^upload:\/\/(upl_[A-Za-z0-9_-]{1,60})$/;

export const uploadRef = (fileId: string): string => UPLOAD_SCHEME + fileId;

/** True for any href of the upload scheme, well-formed or not. */
export const isUploadHref = (href: string): boolean => href.toLowerCase().startsWith(UPLOAD_SCHEME);

/** The file id an `upload://` href names; null for another href or a malformed one. */
export function uploadIdOf(href: string): string | null {
  return UPLOAD_REF.exec(href)?.[1] ?? null;
}

/** The uploaded file ids a capture's bands and mask name. */
export function captureUploadIds(capture: {
  bands: Record<string, { href: string } | undefined>;
  mask?: { href: string };
}): string[] {
  const hrefs = [...Object.values(capture.bands).map((b) => b?.href), capture.mask?.href];
  return [...new Set(hrefs.map((h) => (h ? uploadIdOf(h) : null)).filter((id): id is string => id !== null))];
}

let cacheDir: string | undefined;

/** Where this thread finds the cached uploads (the compute pool's thread data; tests). */
export function setUploadCacheDir(dir: string | undefined): void {
  cacheDir = dir;
}

/** The local path of a cached upload, for a reader in this thread. */
export function cachedUploadPath(href: string): string {
  const id = uploadIdOf(href);
  if (!id) throw new Error(`${JSON.stringify(href)} is not an upload:// reference to a file id`);
  if (!cacheDir) throw new Error(`uploaded file ${id} cannot be read here: no upload cache is configured`);
  const p = path.join(cacheDir, id + UPLOAD_CACHE_SUFFIX);
  if (!existsSync(p))
    throw new Error(`uploaded file ${id} is not in the local read cache (${cacheDir}): it was not prepared`);
  return p;
}
