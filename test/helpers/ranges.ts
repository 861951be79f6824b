/**
 * The byte ranges of a pre-signed download (platform/http/ranges.ts), checked against the whole
 * file as the same link serves it: every answer's bytes are the file's own slice.
 */
import { execFileSync } from 'node:child_process';
import { expect } from 'vitest';
import type { TestApp } from './app.js';
import { toolAvailable } from './tools.js';

export const hasCurl = (): boolean =>
  toolAvailable('curl', 'curl', () => execFileSync('curl', ['--version'], { stdio: 'ignore' }));

/** The link's path and query, the whole file, and its ETag (200, Accept-Ranges, Content-Length). */
export async function wholeFile(t: TestApp, link: string): Promise<{ url: string; full: Buffer; etag: string }> {
  const u = new URL(link);
  const url = u.pathname + u.search;
  const res = await t.app.inject({ method: 'GET', url });
  expect(res.statusCode, res.body).toBe(200);
  expect(res.headers['accept-ranges']).toBe('bytes');
  const full = res.rawPayload;
  expect(res.headers['content-length']).toBe(String(full.length));
  const etag = String(res.headers.etag);
  expect(etag).toMatch(/^"[^"]+"$/);
  return { url, full, etag };
}

/**
 * Ranges from each start in `starts` (open and of `width` bytes), suffixes, combined and separate
 * ranges, If-Range, a Range past the end (416) and ones that are ignored (200).
 */
export async function checkRanges(t: TestApp, link: string, starts: number[], width: number): Promise<void> {
  const { url, full, etag } = await wholeFile(t, link);
  const n = full.length;
  const get = (headers: Record<string, string>) => t.app.inject({ method: 'GET', url, headers });
  const partial = async (range: string, start: number, end: number, headers: Record<string, string> = {}) => {
    const res = await get({ range, ...headers });
    expect(res.statusCode, `${range}: ${res.body.slice(0, 200)}`).toBe(206);
    expect(res.headers['content-range'], range).toBe(`bytes ${start}-${end}/${n}`);
    expect(res.headers['content-length'], range).toBe(String(end - start + 1));
    expect(res.headers.etag).toBe(etag);
    expect(res.rawPayload.equals(full.subarray(start, end + 1)), range).toBe(true);
  };
  const whole = async (headers: Record<string, string>) => {
    const res = await get(headers);
    expect(res.statusCode, JSON.stringify(headers)).toBe(200);
    expect(res.rawPayload.equals(full), JSON.stringify(headers)).toBe(true);
  };
  for (const s of starts.filter((x) => x < n)) {
    await partial(`bytes=${s}-`, s, n - 1);
    await partial(`bytes=${s}-${s + width - 1}`, s, Math.min(n - 1, s + width - 1));
  }
  await partial('bytes=-10', n - 10, n - 1);
  await partial(`bytes=-${n + 5}`, 0, n - 1); // a suffix longer than the file: all of it
  await partial('bytes=0-5,3-9', 0, 9); // overlapping: combined into one
  await partial('bytes=2-4', 2, 4, { 'if-range': etag });
  await whole({ range: 'bytes=0-1,5-6' }); // two ranges: the whole file, not a multipart answer
  await whole({ range: 'bytes=2-4', 'if-range': '"another"' });
  await whole({ range: 'bytes=2-4', 'if-range': 'Sat, 28 Nov 2026 10:00:00 GMT' });
  await whole({ range: 'items=0-5' });
  await whole({ range: 'bytes 0-5' });
  await whole({ range: 'bytes=5-3' }); // last before first: the header is ignored
  await whole({ range: 'bytes=1-2x' });
  for (const range of [`bytes=${n}-`, `bytes=${n + 100}-${n + 200}`, 'bytes=-0']) {
    const res = await get({ range });
    expect(res.statusCode, range).toBe(416);
    expect(res.headers['content-type']).toContain('application/problem+json');
    expect(res.headers['content-range']).toBe(`bytes */${n}`);
    expect(res.json().code).toBe('range_not_satisfiable');
  }
  // A range does not get past the signature: an altered link is still 403.
  const bad = await t.app.inject({
    method: 'GET',
    url: url.replace(/signature=[^&]+/, 'signature=AAAA'),
    headers: { range: `bytes=${n}-` },
  });
  expect(bad.statusCode).toBe(403);
}
