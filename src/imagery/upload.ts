/**
 * Registration of uploaded files (POST /v1/imagery/upload). The route has streamed each file part
 * into the file store (the database, in chunks: every process reads it); here the metadata's hrefs
 * that name uploaded parts become those files' references (`upload://<file id>`, upload-ref.ts),
 * every href of the capture must be one of them, and the capture is registered exactly as
 * POST /v1/imagery does (its compute tasks read the files through the local read cache). On any
 * failure the files are deleted: a refused upload leaves neither a record nor a file behind.
 */
import { AppError, type FieldIssue } from '../platform/errors.js';
import type { FileStore } from '../platform/file-store.js';
import type { Imagery, ImageryCreate } from './schemas.js';
import { normalise, registerImagery, type ImageryDeps } from './service.js';
import { uploadRef } from './upload-ref.js';

export interface UploadedFile {
  /** The multipart field name the metadata's hrefs refer to. */
  part: string;
  filename: string;
  /** The stored file's id (upload://<fileId>). */
  fileId: string;
  bytes: number;
}

type Ref = string | { href: string; [k: string]: unknown };

/** The metadata with every href that names an uploaded part replaced by the stored file's path. */
function resolveParts(meta: ImageryCreate, files: Map<string, UploadedFile>, used: Set<string>): ImageryCreate {
  const swap = (href: string): string => {
    const f = files.get(href);
    if (!f) return href;
    used.add(href);
    return uploadRef(f.fileId);
  };
  const ref = (r: Ref): Ref => (typeof r === 'string' ? swap(r) : { ...r, href: swap(r.href) });
  const out: ImageryCreate = { ...meta };
  if (meta.bands)
    out.bands = Object.fromEntries(
      Object.entries(meta.bands).map(([b, r]) => [b, ref(r as Ref)]),
    ) as ImageryCreate['bands'];
  if (meta.mask) out.mask = { ...meta.mask, href: swap(meta.mask.href) };
  const item = meta.stac_item as { assets?: Record<string, { href?: unknown }> } | undefined;
  if (item?.assets && typeof item.assets === 'object') {
    out.stac_item = {
      ...item,
      assets: Object.fromEntries(
        Object.entries(item.assets).map(([k, a]) => [
          k,
          a && typeof a.href === 'string' ? { ...a, href: swap(a.href) } : a,
        ]),
      ),
    };
  }
  return out;
}

export async function registerUpload(
  deps: ImageryDeps,
  accountId: string,
  meta: ImageryCreate,
  files: UploadedFile[],
  store: FileStore,
): Promise<Imagery> {
  try {
    if (!files.length)
      throw new AppError('validation_failed', 'no file was uploaded: send each GeoTIFF as a file part', {
        errors: [{ path: '/body', code: 'required', message: 'at least one file part is required' }],
      });
    const byPart = new Map(files.map((f) => [f.part, f]));
    const used = new Set<string>();
    const resolved = resolveParts(meta, byPart, used);
    const { capture } = normalise(resolved);
    const stored = new Set(files.map((f) => uploadRef(f.fileId)));
    const issues: FieldIssue[] = [];
    for (const [band, src] of Object.entries(capture.bands)) {
      if (!stored.has(src!.href))
        issues.push({
          path: `/body/bands/${band}`,
          code: 'unknown_part',
          message: `"${src!.href}" names no uploaded file part (parts: ${[...byPart.keys()].join(', ')})`,
        });
    }
    if (capture.mask && !stored.has(capture.mask.href))
      issues.push({
        path: '/body/mask',
        code: 'unknown_part',
        message: `"${capture.mask.href}" names no uploaded file part`,
      });
    for (const f of files) {
      if (!used.has(f.part))
        issues.push({
          path: `/parts/${f.part}`,
          code: 'unused_part',
          message: `the file part "${f.part}" (${f.filename}) is not referenced by any band or mask`,
        });
    }
    if (issues.length)
      throw new AppError('validation_failed', issues.map((i) => `${i.path}: ${i.message}`).join('; '), {
        errors: issues,
      });
    return await registerImagery(deps, accountId, resolved);
  } catch (err) {
    await store.delete(files.map((f) => f.fileId));
    throw err;
  }
}
