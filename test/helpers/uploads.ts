import { existsSync, readdirSync } from 'node:fs';
import path from 'node:path';

/** Upload folders kept under DATA_DIR/imagery/uploads/<account id>/upl_…, as `<account>/<upload>`. */
export function storedUploads(uploadsDir: string): string[] {
  if (!existsSync(uploadsDir)) return [];
  return readdirSync(uploadsDir).flatMap((a) => readdirSync(path.join(uploadsDir, a)).map((u) => `${a}/${u}`));
}
