import type { Database } from '../../src/platform/database.js';

/** Uploaded files stored in the database (complete or not) and their chunks, as `<file id>` and `<file id>#<n>`. */
export async function storedUploads(db: Database): Promise<string[]> {
  const rows = await db.query<{ name: string }>(
    `SELECT id AS name FROM upload_files UNION ALL SELECT file_id || '#' || n FROM upload_chunks ORDER BY 1`,
  );
  return rows.map((r) => r.name);
}
