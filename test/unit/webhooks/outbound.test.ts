import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isPublicAddress } from '../../../src/platform/net/address.js';
import {
  RESOLVE_TTL_MS,
  clearResolveCache,
  postJson,
  resolveTarget,
  resolveTargetCached,
} from '../../../src/webhooks/outbound.js';
import {
  SecretBox,
  generateSecret,
  signDelivery,
  standardSignature,
  verifyServiceSignature,
} from '../../../src/webhooks/signing.js';
import { createHmac } from 'node:crypto';
import https from 'node:https';
import type { AddressInfo } from 'node:net';
import { makePki, startReceiver, type Receiver, type TestPki } from '../../helpers/tls.js';
import { EMBEDDED_PRIVATE, answering } from '../../helpers/addresses.js';

describe('address checks', () => {
  it.each([
    ['127.0.0.1', false],
    ['10.1.2.3', false],
    ['172.16.0.1', false],
    ['192.168.1.1', false],
    ['169.254.169.254', false],
    ['100.64.0.1', false],
    ['0.0.0.0', false],
    ['224.0.0.1', false],
    ['255.255.255.255', false],
    ['::1', false],
    ['fe80::1', false],
    ['fc00::1', false],
    ['ff02::1', false],
    ['::ffff:127.0.0.1', false],
    ['::ffff:10.0.0.1', false],
    ['8.8.8.8', true],
    ['1.1.1.1', true],
    ['2606:4700:4700::1111', true],
    ['::ffff:8.8.8.8', true],
    ['not-an-ip', false],
  ])('%s public=%s', (addr, pub) => expect(isPublicAddress(addr)).toBe(pub));

  it('refuses non-https, credentials, private literals and names resolving to loopback', async () => {
    await expect(resolveTarget('http://example.com/x', false)).rejects.toMatchObject({ kind: 'invalid_url' });
    await expect(resolveTarget('https://u:p@example.com/x', false)).rejects.toMatchObject({ kind: 'invalid_url' });
    await expect(resolveTarget('https://127.0.0.1/x', false)).rejects.toMatchObject({ kind: 'blocked_address' });
    await expect(resolveTarget('https://[::1]/x', false)).rejects.toMatchObject({ kind: 'blocked_address' });
    await expect(resolveTarget('https://169.254.169.254/latest/meta-data', false)).rejects.toMatchObject({
      kind: 'blocked_address',
    });
    await expect(resolveTarget('https://localhost/x', false)).rejects.toMatchObject({ kind: 'blocked_address' });
    await expect(resolveTarget('https://no-such-host.invalid/x', false)).rejects.toMatchObject({ kind: 'dns' });
    await expect(resolveTarget('https://localhost/x', true)).resolves.toBeTruthy();
  });

  it.each(EMBEDDED_PRIVATE)(
    'refuses %s (%s) as a literal host and as a DNS answer, unless private networks are allowed',
    async (_form, addr) => {
      await expect(resolveTarget(`https://[${addr}]/hook`, false)).rejects.toMatchObject({ kind: 'blocked_address' });
      await expect(
        resolveTarget('https://hooks.example/hook', false, answering('203.0.114.1', addr)),
      ).rejects.toMatchObject({ kind: 'blocked_address', message: expect.stringContaining('not a public address') });
      await expect(resolveTarget(`https://[${addr}]/hook`, true)).resolves.toBeTruthy();
      await expect(resolveTarget('https://hooks.example/hook', true, answering(addr))).resolves.toMatchObject({
        addresses: [{ address: addr }],
      });
    },
  );

  it('a refused literal is never connected to', async () => {
    expect(await postJson('https://[::127.0.0.1]/hook', '{}', {}, { timeoutMs: 1000 })).toMatchObject({
      ok: false,
      error: { kind: 'blocked_address' },
    });
  });
});

describe('cached resolution at delivery', () => {
  it('keeps only checked answers: the URL rules and the private-address check still apply to every call', async () => {
    clearResolveCache();
    const t0 = 1_000_000;
    await expect(resolveTargetCached('https://localhost/x', true, t0)).resolves.toMatchObject({
      addresses: [expect.objectContaining({ address: expect.any(String) })],
    });
    // The answer cached for "private allowed" is not used when private networks are refused.
    await expect(resolveTargetCached('https://localhost/x', false, t0 + 1)).rejects.toMatchObject({
      kind: 'blocked_address',
    });
    await expect(resolveTargetCached('https://localhost/y', false, t0 + 2)).rejects.toMatchObject({
      kind: 'blocked_address',
    });
    // A cached host does not let a URL past the https and no-credentials rules.
    await expect(resolveTargetCached('https://u:p@localhost/x', true, t0 + 3)).rejects.toMatchObject({
      kind: 'invalid_url',
    });
    await expect(resolveTargetCached('http://localhost/x', true, t0 + 4)).rejects.toMatchObject({
      kind: 'invalid_url',
    });
    // Failures are not kept: each call resolves again and fails again.
    for (let i = 0; i < 2; i++)
      await expect(resolveTargetCached('https://no-such-host.invalid/x', true, t0 + i)).rejects.toMatchObject({
        kind: 'dns',
      });
    // Within the TTL the path may change; the cached checked addresses are used for the new URL.
    const a = await resolveTargetCached('https://localhost/other?q=1', true, t0 + RESOLVE_TTL_MS - 1);
    expect(a.url.pathname).toBe('/other');
    expect(a.addresses).toEqual((await resolveTarget('https://localhost/x', true)).addresses);
    // The answer's age is that of the lookup, so caches built on it expire with it.
    expect(a.at).toBe(t0);
    clearResolveCache();
  });
});

describe('signing', () => {
  it('X-Service-Signature is the lowercase hex HMAC-SHA256 of the raw body with the secret', () => {
    const raw = Buffer.from(
      '{"event":"webhook.test","timestamp":"2025-01-01T00:00:00.000Z","data":{"challenge":"abc"}}',
    );
    const h = signDelivery({
      secret: 's3cret',
      event: 'webhook.test',
      deliveryId: 'dlv_1',
      rawBody: raw,
      now: new Date(1_700_000_000_000),
    });
    expect(h['x-service-signature']).toBe(createHmac('sha256', 's3cret').update(raw).digest('hex'));
    expect(h['x-service-signature']).toMatch(/^[0-9a-f]{64}$/);
    expect(h['x-service-timestamp']).toBe('1700000000');
    expect(h['webhook-timestamp']).toBe('1700000000');
    expect(h['webhook-id']).toBe('dlv_1');
    expect(verifyServiceSignature('s3cret', raw, h['x-service-signature'])).toBe(true);
    expect(verifyServiceSignature('other', raw, h['x-service-signature'])).toBe(false);
    expect(verifyServiceSignature('s3cret', Buffer.concat([raw, Buffer.from(' ')]), h['x-service-signature'])).toBe(
      false,
    );
    expect(verifyServiceSignature('s3cret', raw, 'zz')).toBe(false);
  });

  it('Standard Webhooks signature decodes whsec_ secrets (the published test vector)', () => {
    // Vector from the Standard Webhooks specification's reference libraries.
    const secret = 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw';
    const sig = standardSignature(secret, 'msg_p5jXN8AQM9LWM0D4loKWxJek', 1614265330, '{"test": 2432232314}');
    expect(sig).toBe('v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE=');
  });

  it('secrets are sealed with AES-GCM and open only with the same key', () => {
    const box = new SecretBox('k'.repeat(32));
    const s = generateSecret();
    expect(s).toMatch(/^whsec_/);
    const sealed = box.seal(s);
    expect(sealed).not.toContain(s);
    expect(box.open(sealed)).toBe(s);
    expect(() => new SecretBox('j'.repeat(32)).open(sealed)).toThrow();
  });
});

describe('postJson against a real HTTPS receiver', () => {
  let pki: TestPki;
  let rx: Receiver;
  let rogue: Receiver;
  beforeAll(async () => {
    pki = makePki();
    rx = await startReceiver(pki);
    rogue = await startReceiver({ key: pki.untrustedKey, cert: pki.untrustedCert });
  });
  afterAll(async () => {
    await rx.close();
    await rogue.close();
  });
  const opts = () => ({ allowPrivateNetworks: true, ca: [pki.ca], timeoutMs: 1000 });

  it('delivers headers and raw body; 2xx is ok', async () => {
    rx.respond = () => ({ status: 204 });
    const r = await postJson(
      rx.url,
      Buffer.from('{"a":1}'),
      { 'content-type': 'application/json', 'x-test': '1' },
      opts(),
    );
    expect(r).toMatchObject({ ok: true, status: 204, address: '127.0.0.1' });
    const got = rx.received.at(-1)!;
    expect(got.raw.toString()).toBe('{"a":1}');
    expect(got.headers['x-test']).toBe('1');
  });

  it('non-2xx, redirects, timeouts, TLS failures and blocked addresses are failures with a kind', async () => {
    rx.respond = () => ({ status: 500 });
    expect(await postJson(rx.url, Buffer.from('{}'), {}, opts())).toMatchObject({ ok: false, status: 500 });
    rx.respond = () => ({ status: 302 });
    expect(await postJson(rx.url, Buffer.from('{}'), {}, opts())).toMatchObject({ ok: false, status: 302 });
    rx.respond = () => ({ status: 200, delayMs: 1500 });
    const slow = await postJson(rx.url, Buffer.from('{}'), {}, opts());
    expect(slow).toMatchObject({ ok: false, error: { kind: 'timeout' } });
    expect(slow.latencyMs).toBeLessThan(1400);
    rx.respond = () => ({ status: 200 });
    expect(await postJson(rogue.url, Buffer.from('{}'), {}, opts())).toMatchObject({
      ok: false,
      error: { kind: 'tls' },
    });
    expect(await postJson(rx.url, Buffer.from('{}'), {}, { ...opts(), allowPrivateNetworks: false })).toMatchObject({
      ok: false,
      error: { kind: 'blocked_address' },
    });
    expect(await postJson(rx.url.replace('https', 'http'), Buffer.from('{}'), {}, opts())).toMatchObject({
      ok: false,
      error: { kind: 'invalid_url' },
    });
  });

  it('a kept-alive connection the receiver resets as it is reused: sent again on a new one, within the same attempt', async () => {
    // The receiver keeps connections alive but resets one the moment a second request arrives on
    // it (as a receiver closing an idle connection while the request is on its way).
    const seen: Array<{ socket: number; n: number }> = [];
    const sockets = new WeakMap<object, { id: number; n: number }>();
    let next = 0;
    const server = https.createServer({ key: pki.key, cert: pki.cert }, (req, res) => {
      const s = sockets.get(req.socket) ?? { id: ++next, n: 0 };
      sockets.set(req.socket, s);
      s.n++;
      seen.push({ socket: s.id, n: s.n });
      if (s.n > 1) {
        req.socket.destroy();
        return;
      }
      req.resume();
      req.on('end', () => res.writeHead(200).end('ok'));
    });
    server.keepAliveTimeout = 5000;
    await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
    const url = `https://127.0.0.1:${(server.address() as AddressInfo).port}/hook`;
    try {
      const o = { ...opts(), cacheResolution: true };
      expect(await postJson(url, '{"n":1}', {}, o)).toMatchObject({ ok: true, status: 200 });
      await new Promise((r) => setTimeout(r, 50)); // the connection is back in the agent's pool
      expect(await postJson(url, '{"n":2}', {}, o)).toMatchObject({ ok: true, status: 200 });
      // The second went out on the first connection (reset), then on a new one.
      expect(seen).toEqual([
        { socket: 1, n: 1 },
        { socket: 1, n: 2 },
        { socket: 2, n: 1 },
      ]);
    } finally {
      server.closeAllConnections();
      await new Promise<void>((r) => server.close(() => r()));
    }
  });
});
