/**
 * Local imagery paths as the compute worker resolves them (roots only) and as registration does
 * (roots, with only the caller's own upload folder): the lexical check comes before any file system
 * access, so a path outside answers the same whether it exists or not.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { OUTSIDE_ROOTS, accountUploadDir, registrationRules, resolveLocal } from '../../../src/imagery/local-path.js';

describe('resolveLocal', () => {
  let dir: string;
  let root: string;
  let uploads: string;
  beforeAll(() => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'local-path-'));
    root = path.join(dir, 'root');
    uploads = path.join(root, 'uploads');
    for (const d of [path.join(dir, 'outside'), path.join(uploads, 'acc_A', 'upl_1'), path.join(uploads, 'acc_B')])
      mkdirSync(d, { recursive: true });
    writeFileSync(path.join(dir, 'outside', 'f.tif'), 'x');
    writeFileSync(path.join(root, 'f.tif'), 'x');
    writeFileSync(path.join(uploads, 'acc_A', 'upl_1', 'f.tif'), 'x');
    symlinkSync(root, path.join(dir, 'root-link'));
    symlinkSync(path.join(dir, 'outside', 'gone.tif'), path.join(root, 'dangling.tif'));
  });
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  const outcome = (p: Promise<string>) =>
    p.then(
      (real) => `ok ${real}`,
      (e: Error & { kind?: string }) => `${e.kind}: ${e.message}`,
    );

  it('refuses every path outside the roots with one message, existing or not', async () => {
    const roots = [root];
    const answers = await Promise.all(
      [
        path.join(dir, 'outside', 'f.tif'),
        path.join(dir, 'outside', 'nope.tif'),
        `${root}/../outside/f.tif`,
        path.join(root, 'dangling.tif'),
        'file:///etc/passwd',
        '/etc/nope',
      ].map((h) => outcome(resolveLocal(h, roots))),
    );
    expect(new Set(answers)).toEqual(new Set([`outside: ${OUTSIDE_ROOTS}`]));
    expect(await outcome(resolveLocal(path.join(root, 'nope.tif'), roots))).toBe(
      `missing: file not found: ${path.join(root, 'nope.tif')}`,
    );
    expect(await outcome(resolveLocal(path.join(root, 'f.tif'), roots))).toBe(`ok ${path.join(root, 'f.tif')}`);
    // A root given through a symlink is also matched by its real path; a path that reaches a root
    // through a link outside the roots is judged by what it says, before the link is looked at.
    expect(await outcome(resolveLocal(path.join(root, 'f.tif'), [path.join(dir, 'root-link')]))).toBe(
      `ok ${path.join(root, 'f.tif')}`,
    );
    expect(await outcome(resolveLocal(path.join(dir, 'root-link', 'f.tif'), roots))).toBe(`outside: ${OUTSIDE_ROOTS}`);
  });

  it("at registration, of the uploads only the caller's own folder is allowed", async () => {
    const own = path.join(uploads, 'acc_A', 'upl_1', 'f.tif');
    expect(await outcome(resolveLocal(own, registrationRules([root], uploads, 'acc_A')))).toBe(`ok ${own}`);
    expect(await outcome(resolveLocal(own, registrationRules([root], uploads, 'acc_B')))).toBe(
      `outside: ${OUTSIDE_ROOTS}`,
    );
    expect(
      await outcome(
        resolveLocal(
          path.join(uploads, 'acc_B', '..', 'acc_A', 'upl_1', 'f.tif'),
          registrationRules([root], uploads, 'acc_B'),
        ),
      ),
    ).toBe(`outside: ${OUTSIDE_ROOTS}`);
    // The rest of the root stays allowed; the worker (roots only) reads every upload.
    expect(await outcome(resolveLocal(path.join(root, 'f.tif'), registrationRules([root], uploads, 'acc_B')))).toBe(
      `ok ${path.join(root, 'f.tif')}`,
    );
    expect(await outcome(resolveLocal(own, [root]))).toBe(`ok ${own}`);
    expect(() => accountUploadDir(uploads, '../acc_A')).toThrow(/cannot name an upload folder/);
  });
});
