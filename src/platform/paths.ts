import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

// The package root, found from this file whether it runs from src/ (vitest) or dist/src/ (node):
// non-TypeScript assets (SQL migrations, the compiled kernel) are read relative to it.
function findRoot(): string {
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (;;) {
    if (existsSync(path.join(dir, 'package.json')) && existsSync(path.join(dir, 'asconfig.json'))) return dir;
    const up = path.dirname(dir);
    if (up === dir) throw new Error('package root not found');
    dir = up;
  }
}

export const packageRoot = findRoot();
export const migrationsDir = path.join(packageRoot, 'src', 'platform', 'migrations');
export const wasmDir = path.join(packageRoot, 'dist', 'wasm');
export const dashboardDir = path.join(packageRoot, 'dist', 'dashboard');
