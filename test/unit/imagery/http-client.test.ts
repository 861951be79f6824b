/**
 * The remote-imagery client's SSRF defence and deadline, against a real HTTP server on 127.0.0.1:
 * loopback and other non-public addresses are refused (literal or by name) unless
 * IMAGERY_ALLOW_PRIVATE_NETWORKS; redirects are not followed; a stalled body fails at the deadline.
 */
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TimedFetchClient } from '../../../src/imagery/http-client.js';
import { EMBEDDED_PRIVATE, answering } from '../../helpers/addresses.js';

describe('remote imagery client', () => {
  let server: Server;
  let port: number;
  const hits: string[] = [];
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      hits.push(req.url ?? '');
      if (req.url === '/redirect') return void res.writeHead(302, { location: `http://127.0.0.1:${port}/data` }).end();
      if (req.url === '/stall') {
        res.writeHead(206, { 'content-length': 100 });
        res.write(Buffer.alloc(10)); // and never the rest
        return;
      }
      const range = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '');
      const body = Buffer.from('0123456789abcdef');
      if (range) {
        const part = body.subarray(Number(range[1]), Number(range[2]) + 1);
        res
          .writeHead(206, {
            'content-range': `bytes ${range[1]}-${range[2]}/${body.length}`,
            'content-length': part.length,
          })
          .end(part);
      } else res.writeHead(200, { 'content-length': body.length }).end(body);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    port = (server.address() as AddressInfo).port;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  it.each([
    ['a loopback literal', () => `http://127.0.0.1:${port}/data`],
    ['a name that resolves to loopback', () => `http://localhost:${port}/data`],
    ['the cloud metadata address', () => 'http://169.254.169.254/latest/meta-data/'],
    ['a private range', () => 'http://10.0.0.1/x.tif'],
    ['an IPv6 loopback', () => `http://[::1]:${port}/data`],
  ])('refuses %s without sending anything', async (_why, url) => {
    const before = hits.length;
    await expect(new TimedFetchClient(url(), 2000, false).request({ headers: { range: 'bytes=0-3' } })).rejects.toThrow(
      /not a public address/,
    );
    expect(hits.length).toBe(before);
  });

  it.each(EMBEDDED_PRIVATE)(
    'refuses %s (%s) as a literal host and as a DNS answer, without sending anything',
    async (_form, addr) => {
      const before = hits.length;
      await expect(new TimedFetchClient(`http://[${addr}]:${port}/data`, 2000, false).request()).rejects.toThrow(
        /not a public address \(IMAGERY_ALLOW_PRIVATE_NETWORKS\)/,
      );
      await expect(
        new TimedFetchClient(`http://cog.example:${port}/data`, 2000, false, answering(addr)).request(),
      ).rejects.toThrow(/not a public address/);
      expect(hits.length).toBe(before);
    },
  );

  it('reads ranges when private networks are allowed, and counts what it received', async () => {
    const r = await new TimedFetchClient(`http://127.0.0.1:${port}/data`, 2000, true).request({
      headers: { range: 'bytes=2-5' },
    });
    expect(r.status).toBe(206);
    expect(r.getHeader('Content-Range')).toBe('bytes 2-5/16');
    expect(Buffer.from(await r.getData()).toString()).toBe('2345');
  });

  it('does not follow redirects (a 3xx is the answer, not a hop)', async () => {
    const before = hits.length;
    const r = await new TimedFetchClient(`http://127.0.0.1:${port}/redirect`, 2000, true).request();
    expect(r.status).toBe(302);
    expect(hits.slice(before)).toEqual(['/redirect']);
  });

  it('fails a body that stalls at the deadline', async () => {
    await expect(new TimedFetchClient(`http://127.0.0.1:${port}/stall`, 300, true).request()).rejects.toThrow(
      /within 300 ms/,
    );
  });

  it('refuses other schemes', async () => {
    await expect(new TimedFetchClient('file:///etc/passwd', 300, true).request()).rejects.toThrow(/not read/);
  });
});
