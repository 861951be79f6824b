/**
 * Read-time href signing (IMAGERY_HREF_SIGNER=planetary-computer) against a real HTTP server on
 * 127.0.0.1 that plays both parts of Planetary Computer: a SAS token endpoint
 * (`/token/{account}/{container}` → `{"token", "msft:expiry"}`) and a blob store that answers range
 * requests only with the current token in the query (403 otherwise, as Azure does).
 */
import http, { type Server } from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { HttpRangeSource } from '../../../src/imagery/http-source.js';
import { type HrefSigner, noSigning, SasTokenSigner } from '../../../src/imagery/href-signing.js';
import { TimedFetchClient } from '../../../src/imagery/http-client.js';
import { systemLookup } from '../../../src/platform/net/address.js';

describe('href signing at read time', () => {
  let server: Server;
  let base: string;
  const body = Buffer.from(Array.from({ length: 256 }, (_, i) => i));
  let tokenRequests: string[] = [];
  let blobQueries: string[] = [];
  let token = 'st=2026-01-01&se=2026-01-01&sp=rl&sig=first';
  let tokenStatus = 200;
  let expiry = new Date(Date.now() + 3_600_000).toISOString();
  beforeAll(async () => {
    server = http.createServer((req, res) => {
      const u = new URL(req.url ?? '/', 'http://x');
      if (u.pathname.startsWith('/token/')) {
        tokenRequests.push(u.pathname);
        if (tokenStatus !== 200) return void res.writeHead(tokenStatus).end('no');
        return void res
          .writeHead(200, { 'content-type': 'application/json' })
          .end(JSON.stringify({ 'msft:expiry': expiry, token }));
      }
      blobQueries.push(u.search);
      if (u.search !== `?${token}`) return void res.writeHead(403).end('AuthenticationFailed');
      const r = /bytes=(\d+)-(\d+)/.exec(req.headers.range ?? '');
      if (!r) return void res.writeHead(200).end(body);
      const part = body.subarray(Number(r[1]), Number(r[2]) + 1);
      res.writeHead(206, { 'content-range': `bytes ${r[1]}-${r[2]}/${body.length}` }).end(part);
    });
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise<void>((r) => server.close(() => r()));
  });

  const client = (signer: HrefSigner = new SasTokenSigner(`${base}/token`, ['127.0.0.1'], 2000)) =>
    new TimedFetchClient(`${base}/sentinel2-l2/29/R/KH/B04.tif`, 2000, true, systemLookup, signer);

  it('an unsigned read of the blob is refused (403)', async () => {
    const res = await client(noSigning).request({ headers: { range: 'bytes=0-3' } });
    expect(res.status).toBe(403);
  });

  it('a signed read gets the bytes; the token is asked once per account and container, then cached', async () => {
    tokenRequests = [];
    blobQueries = [];
    const signer = new SasTokenSigner(`${base}/token`, ['127.0.0.1'], 2000);
    const src = new HttpRangeSource(`${base}/sentinel2-l2/29/R/KH/B04.tif`, client(signer));
    const [a] = await src.read([{ offset: 10, length: 6 }]);
    expect([...a!]).toEqual([10, 11, 12, 13, 14, 15]);
    const res = await client(signer).request({ headers: { range: 'bytes=100-103' } });
    expect(res.status).toBe(206);
    expect([...new Uint8Array(await res.getData())]).toEqual([100, 101, 102, 103]);
    // host 127.0.0.1 → storage account "127"; the first path segment is the container
    expect(tokenRequests).toEqual(['/token/127/sentinel2-l2']);
    expect(blobQueries.every((q) => q === `?${token}`)).toBe(true);
  });

  it('a token about to expire is fetched again; the stored href never carries one', async () => {
    tokenRequests = [];
    let now = Date.now();
    expiry = new Date(now + 10 * 60_000).toISOString();
    const signer = new SasTokenSigner(`${base}/token`, ['127.0.0.1'], 2000, () => now);
    const url = new URL(`${base}/sentinel2-l2/a.tif`);
    expect((await signer.sign(url)).search).toBe(`?${token}`);
    expect(url.search).toBe('');
    now += 4 * 60_000; // 6 min left: still used
    await signer.sign(url);
    expect(tokenRequests.length).toBe(1);
    now += 2 * 60_000; // 4 min left: within the 5 min margin
    token = 'st=2026-01-01&sp=rl&sig=second';
    expect((await signer.sign(url)).search).toBe(`?${token}`);
    expect(tokenRequests.length).toBe(2);
  });

  it('hosts outside IMAGERY_HREF_SIGNER_HOSTS are not signed', async () => {
    const signer = new SasTokenSigner(`${base}/token`, ['.blob.core.windows.net'], 2000);
    const url = new URL(`${base}/sentinel2-l2/a.tif`);
    expect((await signer.sign(url)).href).toBe(url.href);
  });

  it('a failing token endpoint fails the read with a clear message, and the next read asks again', async () => {
    tokenRequests = [];
    tokenStatus = 503;
    const signer = new SasTokenSigner(`${base}/token`, ['127.0.0.1'], 2000);
    await expect(client(signer).request({ headers: { range: 'bytes=0-3' } })).rejects.toThrow(
      /href signing: the token endpoint .* answered HTTP 503/,
    );
    tokenStatus = 200;
    const res = await client(signer).request({ headers: { range: 'bytes=0-3' } });
    expect(res.status).toBe(206);
    expect(tokenRequests.length).toBe(2);
  });
});
