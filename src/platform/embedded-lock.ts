/**
 * PGlite keeps its files in DATA_DIR and is not safe to open from two processes at once. The
 * service holds DATA_DIR/service.pid while it runs; a second service or the keys CLI on the same
 * directory refuses with a clear message instead of corrupting the database.
 */
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM';
  }
}

export function holderOf(dataDir: string): number | null {
  try {
    const pid = Number(readFileSync(path.join(dataDir, 'service.pid'), 'utf8').trim());
    return Number.isInteger(pid) && pid > 0 && pid !== process.pid && alive(pid) ? pid : null;
  } catch {
    return null;
  }
}

export function lockDataDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const holder = holderOf(dataDir);
  if (holder) {
    throw new Error(
      `DATA_DIR ${dataDir} is in use by process ${holder}; the embedded database allows one process (set DATABASE_URL to share PostgreSQL)`,
    );
  }
  const file = path.join(dataDir, 'service.pid');
  writeFileSync(file, String(process.pid));
  return () => rmSync(file, { force: true });
}
