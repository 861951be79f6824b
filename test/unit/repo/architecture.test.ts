/**
 * The layering rule (docs/architecture.md, .dependency-cruiser.cjs) is what `npm test` runs as
 * `npm run lint:deps`. Here: the real tree passes it, and each kind of bad import written into a
 * throw-away tree (in the system's temp folder, never in src/) is reported by its rule.
 *
 * dependency-cruiser runs in this process through its API (the same rule file, tsconfig and `err`
 * reporter as the command line): it is loaded once for the eleven cruises instead of once per
 * child process, which was most of this file's time.
 */
import { copyFileSync, mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cruise as depcruise } from 'dependency-cruiser';
import extractDepcruiseOptions from 'dependency-cruiser/config-utl/extract-depcruise-options';
import extractTSConfig from 'dependency-cruiser/config-utl/extract-ts-config';
import { afterAll, describe, expect, it } from 'vitest';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

/**
 * `depcruise src --config .dependency-cruiser.cjs` run from `cwd`: the rule file and tsconfig read
 * from there, `src` cruised relative to it, the `err` reporter's text and its exit code.
 */
async function cruise(cwd: string): Promise<{ code: number; out: string }> {
  const options = await extractDepcruiseOptions(path.join(cwd, '.dependency-cruiser.cjs'));
  const tsConfigFile = path.join(cwd, 'tsconfig.json');
  const result = await depcruise(
    ['src'],
    {
      ...options,
      baseDir: cwd,
      outputType: 'err',
      tsConfig: { fileName: tsConfigFile },
    },
    {},
    { tsConfig: extractTSConfig(tsConfigFile) },
  );
  return { code: result.exitCode, out: String(result.output) };
}

const tmp: string[] = [];
afterAll(() => {
  for (const d of tmp) rmSync(d, { recursive: true, force: true });
});

/** A small tree with the project's rule and tsconfig, and the given files (path → source). */
function tree(files: Record<string, string>): string {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'depcruise-'));
  tmp.push(dir);
  copyFileSync(path.join(root, '.dependency-cruiser.cjs'), path.join(dir, '.dependency-cruiser.cjs'));
  copyFileSync(path.join(root, 'tsconfig.json'), path.join(dir, 'tsconfig.json'));
  const base: Record<string, string> = {
    'src/main.ts': "import { app } from './app.js';\napp();\n",
    'src/app.ts':
      "import { routes } from './fields/routes.js';\nimport { pool } from './compute/pool.js';\nexport const app = () => [routes, pool];\n",
    'src/platform/config.ts': 'export const config = {};\n',
    'src/compute/pool.ts': "import { config } from '../platform/config.js';\nexport const pool = config;\n",
    'src/events/index.ts': "export { emit } from './outbox.js';\n",
    'src/events/outbox.ts': "import { config } from '../platform/config.js';\nexport const emit = () => config;\n",
    'src/fields/routes.ts':
      "import { emit } from '../events/index.js';\nimport { pool } from '../compute/pool.js';\nexport const routes = [emit, pool];\n",
  };
  for (const [file, text] of Object.entries({ ...base, ...files })) {
    mkdirSync(path.dirname(path.join(dir, file)), { recursive: true });
    writeFileSync(path.join(dir, file), text);
  }
  return dir;
}

describe('dependency rule', () => {
  it('the source tree has no violation', async () => {
    const r = await cruise(root);
    expect(r.out).toMatch(/no dependency violations found \(\d+ modules, \d+ dependencies cruised\)/);
    expect(r.code).toBe(0);
  }, 120_000);

  it('a well-layered tree passes', async () => {
    const r = await cruise(tree({}));
    expect(r.out).toContain('no dependency violations found');
    expect(r.code).toBe(0);
  }, 120_000);

  it.each([
    [
      'platform-imports-no-feature-or-compute',
      {
        'src/platform/config.ts':
          "import type { emit } from '../events/index.js';\nexport const config: { e?: typeof emit } = {};\n",
      },
    ],
    [
      'platform-imports-no-feature-or-compute',
      {
        'src/platform/config.ts':
          "import type { pool } from '../compute/pool.js';\nexport const config: { p?: typeof pool } = {};\n",
      },
    ],
    [
      'compute-imports-no-feature',
      { 'src/compute/pool.ts': "import { emit } from '../events/index.js';\nexport const pool = emit;\n" },
    ],
    [
      'features-only-public-entry-of-other-features',
      { 'src/fields/routes.ts': "import { emit } from '../events/outbox.js';\nexport const routes = [emit];\n" },
    ],
    [
      'features-import-no-composition',
      { 'src/events/outbox.ts': "import { app } from '../app.js';\nexport const emit = () => app;\n" },
    ],
    ['no-circular', { 'src/events/outbox.ts': "export const emit = async () => (await import('./index.js')).emit;\n" }],
    [
      'workers-import-no-http',
      {
        'src/platform/http/problems.ts': 'export const problem = 1;\n',
        'src/webhooks/delivery.ts':
          "import { problem } from '../platform/http/problems.js';\nexport const deliver = problem;\n",
      },
    ],
    [
      'not-to-test-from-src',
      {
        'src/events/outbox.ts': "import { helper } from '../../test/helper.js';\nexport const emit = helper;\n",
        'test/helper.ts': 'export const helper = 1;\n',
      },
    ],
    ['no-orphans', { 'src/fields/unused.ts': 'export const nobody = 1;\n' }],
  ])(
    'a bad import is reported: %s',
    async (rule, files) => {
      const r = await cruise(tree(files));
      expect(r.code).not.toBe(0);
      expect(r.out).toContain(`error ${rule}:`);
    },
    120_000,
  );
});
