/**
 * Hostile network and file-system references through the API, every answer a 4xx problem+json:
 * - SSRF: webhook URLs and imagery URLs whose host is an IPv6 form carrying a loopback or
 *   metadata IPv4 address are refused before anything is sent (the resolver path is covered in
 *   test/unit/platform/net/address.test.ts and the two clients' unit tests);
 * - path oracle: every local path outside IMAGERY_ROOTS gets one answer, byte for byte (modulo
 *   request_id), whether it exists or not, reached by `..`, a symlink or a file: URL; a path into
 *   another account's upload folder (written by an earlier version) gets that same answer, the
 *   owner's own path is accepted;
 * - uploads: another account's upload://<file id> gets the answer of an id that does not exist,
 *   the owner's own is accepted.
 */
import { mkdirSync, mkdtempSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { writeGeoTiff } from '../../src/imagery/tiff-writer.js';
import { EMBEDDED_PRIVATE } from '../helpers/addresses.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { dbBackends } from '../helpers/backends.js';

// The compute threads read this when the pool starts: remote imagery must be checked here.
delete process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS;

const tiff = () =>
  writeGeoTiff({
    width: 16,
    height: 16,
    data: new Uint16Array(256).fill(1200),
    epsg: 32631,
    originX: 630_000,
    originY: 5_602_000,
    resolution: 10,
  });

describe.each(dbBackends)('hostile network and path references on $name', (backend) => {
  let t: TestApp;
  let scratch: string;
  let root: string;
  let outside: string;
  let base: string;

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'bad-net-'));
    root = path.join(scratch, 'root');
    outside = path.join(scratch, 'outside');
    mkdirSync(root);
    mkdirSync(outside);
    writeFileSync(path.join(root, 'inside.tif'), tiff());
    writeFileSync(path.join(outside, 'real.tif'), tiff());
    symlinkSync(path.join(outside, 'real.tif'), path.join(root, 'link.tif'));
    symlinkSync(outside, path.join(root, 'linkdir'));
    symlinkSync(path.join(outside, 'missing.tif'), path.join(root, 'dangling.tif'));
    t = await buildTestApp(backend, { env: { DATA_DIR: path.join(scratch, 'data'), IMAGERY_ROOTS: root } });
    base = await t.app.listen({ port: 0, host: '127.0.0.1' });
  }, 180_000);
  afterAll(async () => {
    await t?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const registerBands = (bands: Record<string, unknown>, key = t.key) =>
    t.app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: t.auth(key),
      payload: { source: 'drone', capture_date: '2025-06-01', bands },
    });
  const problem = (res: { statusCode: number; headers: Record<string, unknown>; body: string }, why: string) => {
    expect(res.statusCode, `${why}: ${res.body}`).toBeGreaterThanOrEqual(400);
    expect(res.statusCode, `${why}: ${res.body}`).toBeLessThan(500);
    expect(String(res.headers['content-type']), why).toMatch(/application\/problem\+json/);
    const { request_id: _, ...body } = JSON.parse(res.body) as Record<string, unknown>;
    return body;
  };

  it.each(EMBEDDED_PRIVATE)('a webhook URL on %s (%s) is refused as blocked_address', async (_form, addr) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/webhooks',
      headers: t.auth(),
      payload: { url: `https://[${addr}]/hook`, events: ['*'] },
    });
    const body = problem(res, addr);
    expect(res.statusCode).toBe(400);
    expect(body).toMatchObject({ code: 'validation_failed', errors: [{ path: '/body/url', code: 'blocked_address' }] });
  });

  it.each(EMBEDDED_PRIVATE)('an imagery URL on %s (%s) is refused without a request', async (_form, addr) => {
    const res = await registerBands({ B04: `https://[${addr}]/B04.tif` });
    const body = problem(res, addr);
    expect(res.statusCode).toBe(400);
    expect(body).toMatchObject({ code: 'invalid_imagery', errors: [{ path: '/body/bands/B04' }] });
    expect(body.detail).toMatch(/not a public address/);
  });

  it('every local path outside IMAGERY_ROOTS gets the same answer, whether it exists or not', async () => {
    const cases: Array<[string, string]> = [
      ['an existing file outside', path.join(outside, 'real.tif')],
      ['a missing file outside', path.join(outside, 'missing.tif')],
      ['a missing directory outside', '/no/such/dir/B04.tif'],
      ['/etc/passwd', '/etc/passwd'],
      ['`..` out of the root to an existing file', `${root}/../outside/real.tif`],
      ['`..` out of the root to a missing file', `${root}/../outside/missing.tif`],
      ['`..` after a missing directory', `${root}/nope/../../outside/real.tif`],
      ['a relative path', '../../../../../../etc/passwd'],
      ['a symlink in the root to a file outside', path.join(root, 'link.tif')],
      ['a symlinked directory in the root, existing file', path.join(root, 'linkdir', 'real.tif')],
      ['a symlinked directory in the root, missing file', path.join(root, 'linkdir', 'missing.tif')],
      ['a dangling symlink in the root pointing outside', path.join(root, 'dangling.tif')],
      ['a file: URL outside', pathToFileURL(path.join(outside, 'real.tif')).href],
      ['a file: URL outside, missing', pathToFileURL(path.join(outside, 'missing.tif')).href],
      ['a file: URL with an encoded separator', 'file:///etc%2Fpasswd'],
      ['a file: URL naming another host', 'file://fileserver/share/B04.tif'],
    ];
    const bodies = new Map<string, string>();
    for (const [why, href] of cases) bodies.set(why, JSON.stringify(problem(await registerBands({ B04: href }), why)));
    expect(new Set(bodies.values()).size, [...bodies].map(([why, b]) => `${why}: ${b}`).join('\n')).toBe(1);
    expect(JSON.parse(bodies.values().next().value!)).toMatchObject({
      status: 400,
      code: 'invalid_imagery',
      detail: 'B04: the path is outside the allowed imagery directories (IMAGERY_ROOTS)',
      errors: [{ path: '/body/bands/B04', code: 'path_not_allowed' }],
    });
    // Inside the root: a missing file is named as missing, an existing one registers.
    expect(problem(await registerBands({ B04: path.join(root, 'missing.tif') }), 'missing inside').detail).toMatch(
      /file not found/,
    );
    expect((await registerBands({ B04: `${root}/sub/../inside.tif` })).statusCode).toBe(201);
  });

  it("an account's upload is its own: another account's upload:// reference is answered as a missing one", async () => {
    const form = new FormData();
    form.append('metadata', JSON.stringify({ source: 'drone', capture_date: '2025-06-01', bands: { B04: 'red' } }));
    form.append('red', new Blob([tiff()]), 'red.tif');
    const up = await fetch(`${base}/v1/imagery/upload`, { method: 'POST', headers: t.auth(), body: form });
    const img = (await up.json()) as { id: string };
    expect(up.status, JSON.stringify(img)).toBe(201);
    const [row] = await t.db.query<{ bands: Record<string, { href: string }> }>(
      'SELECT bands FROM imagery WHERE id = $1',
      [img.id],
    );
    const stored = row!.bands.B04!.href;
    expect(stored).toMatch(/^upload:\/\/upl_/);
    const b = await t.otherAccount();
    const bodies = new Map<string, string>();
    for (const [why, href] of [
      ["A's upload", stored],
      ['an upload that does not exist', 'upload://upl_AAAAAAAAAAAAAAAAAAAAAA'],
      ['a malformed upload reference', 'upload://../../etc/passwd'],
    ] as const)
      bodies.set(why, JSON.stringify(problem(await registerBands({ B04: href }, b.key), why)));
    expect(new Set(bodies.values()).size, [...bodies].map(([why, x]) => `${why}: ${x}`).join('\n')).toBe(1);
    expect(JSON.parse(bodies.values().next().value!)).toMatchObject({
      status: 400,
      code: 'invalid_imagery',
      errors: [{ path: '/body/bands/B04', code: 'unknown_upload' }],
    });
    expect(await t.db.query('SELECT 1 FROM imagery WHERE account_id = $1', [b.accountId])).toHaveLength(0);
    // The owner may name its own upload again.
    const own = await registerBands({ B04: stored });
    expect(own.statusCode, own.body).toBe(201);
  });

  it("an upload folder of an earlier version is its account's own: another account's path gets the outsider's answer", async () => {
    // Earlier versions kept uploads in DATA_DIR/imagery/uploads/<account>/upl_…/ and named them by path.
    const stored = path.join(t.config.imageryUploadDir, t.accountId, 'upl_earlier', '1-red.tif');
    mkdirSync(path.dirname(stored), { recursive: true });
    writeFileSync(stored, tiff());
    const outsider = JSON.stringify(problem(await registerBands({ B04: path.join(outside, 'real.tif') }), 'outside'));

    const b = await t.otherAccount();
    const uploads = t.config.imageryUploadDir;
    for (const [why, href] of [
      ["A's uploaded file", stored],
      ["A's uploaded file as a file: URL", pathToFileURL(stored).href],
      ["a missing file in A's upload folder", path.join(path.dirname(stored), 'missing.tif')],
      ["A's folder reached by `..` from B's", `${uploads}/${b.accountId}/../${path.relative(uploads, stored)}`],
      ['an upload folder of no account', path.join(uploads, 'upl_legacy', '1-red.tif')],
    ] as const) {
      const res = await registerBands({ B04: href }, b.key);
      expect(JSON.stringify(problem(res, why)), why).toBe(outsider);
    }
    expect(await t.db.query('SELECT 1 FROM imagery WHERE account_id = $1', [b.accountId])).toHaveLength(0);
    expect(stored.startsWith(path.join(uploads, t.accountId) + path.sep), stored).toBe(true);
    // The owner may name its own upload.
    const own = await registerBands({ B04: stored });
    expect(own.statusCode, own.body).toBe(201);
  });
});
