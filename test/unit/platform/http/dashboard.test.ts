/**
 * The dashboard's static files: content types, caching, gzip, revalidation, and a problem (never a
 * blank page) for a missing file or a missing build. Built here from a folder written by the test.
 */
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import type { Api } from '../../../../src/platform/http/context.js';
import { dashboardRoutes } from '../../../../src/platform/http/dashboard.js';
import { registerProblemHandlers } from '../../../../src/platform/http/problems.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'dash-'));
const empty = mkdtempSync(path.join(os.tmpdir(), 'dash-empty-'));
afterAll(() => {
  rmSync(dir, { recursive: true, force: true });
  rmSync(empty, { recursive: true, force: true });
});
const script = `console.log(${JSON.stringify('x'.repeat(4000))});`;
writeFileSync(path.join(dir, 'index.html'), '<!doctype html><script src="/dashboard/main-ABC.js"></script>');
writeFileSync(path.join(dir, 'main-ABC.js'), script);
writeFileSync(path.join(dir, 'main-ABC.css'), 'body{margin:0}');
writeFileSync(path.join(dir, 'notes.txt'), 'not served');

async function app(folder: string) {
  const a = Fastify();
  registerProblemHandlers(a);
  dashboardRoutes(a as unknown as Api, folder);
  await a.ready();
  return a;
}

describe('dashboard routes', () => {
  it('serves the page revalidated and the hashed files immutable, gzip when accepted, 304 on a match', async () => {
    const a = await app(dir);
    const html = await a.inject({ url: '/dashboard' });
    expect(html.statusCode).toBe(200);
    expect(html.headers['content-type']).toBe('text/html; charset=utf-8');
    expect(html.headers['cache-control']).toBe('no-cache');
    expect(html.headers['content-security-policy']).toContain("script-src 'self'");
    expect(html.body).toContain('main-ABC.js');
    const js = await a.inject({ url: '/dashboard/main-ABC.js', headers: { 'accept-encoding': 'gzip, br' } });
    expect(js.headers['content-type']).toBe('text/javascript; charset=utf-8');
    expect(js.headers['cache-control']).toBe('public, max-age=31536000, immutable');
    expect(js.headers['content-encoding']).toBe('gzip');
    expect(js.headers.vary).toBe('Accept-Encoding');
    expect(gunzipSync(js.rawPayload).toString()).toBe(script);
    const plain = await a.inject({ url: '/dashboard/main-ABC.js', headers: { 'accept-encoding': 'gzip;q=0' } });
    expect(plain.headers['content-encoding']).toBeUndefined();
    expect(plain.body).toBe(script);
    const css = await a.inject({ url: '/dashboard/main-ABC.css' });
    expect(css.headers['content-type']).toBe('text/css; charset=utf-8');
    const again = await a.inject({
      url: '/dashboard/main-ABC.js',
      headers: { 'if-none-match': js.headers.etag as string },
    });
    expect(again.statusCode).toBe(304);
    expect(again.body).toBe('');
    const root = await a.inject({ url: '/' });
    expect([root.statusCode, root.headers.location]).toEqual([302, '/dashboard/']);
    await a.close();
  });

  it('answers a problem for a file it does not serve, a path outside the folder, and a missing build', async () => {
    const a = await app(dir);
    for (const url of ['/dashboard/nothing.js', '/dashboard/notes.txt', '/dashboard/..%2Fpackage.json']) {
      const res = await a.inject({ url });
      expect(res.statusCode, url).toBeGreaterThanOrEqual(400);
      expect(res.statusCode, url).toBeLessThan(500);
      expect(res.headers['content-type'], url).toContain('application/problem+json');
    }
    await a.close();
    const b = await app(empty);
    const res = await b.inject({ url: '/dashboard' });
    expect(res.statusCode).toBe(404);
    expect(res.json()).toMatchObject({ code: 'not_found', detail: expect.stringContaining('npm run build') });
    await b.close();
  });
});
