/**
 * `npm run render-reports` on a machine without poppler: the script says what to install and
 * exits non-zero before doing any work, without a stack trace.
 */
import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, symlinkSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/platform/paths.js';

const run = promisify(execFile);
// A PATH with node on it and nothing else: no pdftoppm.
const bin = mkdtempSync(path.join(os.tmpdir(), 'no-poppler-'));
symlinkSync(process.execPath, path.join(bin, 'node'));
afterAll(() => rmSync(bin, { recursive: true, force: true }));

describe('render-reports without pdftoppm', () => {
  it('names the package to install and exits 69, with no stack trace', async () => {
    const out = mkdtempSync(path.join(os.tmpdir(), 'rendered-'));
    try {
      const r = await run(process.execPath, [path.join(packageRoot, 'scripts/render-reports.mjs'), out], {
        cwd: packageRoot,
        env: { ...process.env, PATH: bin },
        timeout: 240_000,
      }).catch((e) => e);
      expect(r.code, r.stderr).toBe(69);
      expect(r.stderr).toMatch(
        /^render-reports: pdftoppm, which turns the PDF pages into PNG, is not installed \(not found on PATH\)\./,
      );
      expect(r.stderr).toContain('sudo apt-get install poppler-utils');
      expect(r.stderr).toContain('brew install poppler');
      expect(r.stderr).not.toMatch(/\n\s+at |ENOENT|Error:/);
      expect(r.stdout).toBe('');
    } finally {
      rmSync(out, { recursive: true, force: true });
    }
  }, 300_000);
});
