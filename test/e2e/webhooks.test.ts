/**
 * Webhooks end to end through the HTTP API, with real HTTPS receivers on 127.0.0.1 (a CA made
 * for the test), the real queue backends and shortened retry delays.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHmac } from 'node:crypto';
import { emit } from '../../src/events/outbox.js';
import { until } from '../helpers/wait.js';
import { makePki, startReceiver, type Receiver, type TestPki } from '../helpers/tls.js';
import { buildServiceApp, queueBackends, square, type TestApp as ServiceApp } from '../helpers/app.js';

describe.each(queueBackends)('webhooks on $name', (backend) => {
  let pki: TestPki;
  let svc: ServiceApp;
  let rx: Receiver;
  beforeAll(async () => {
    pki = makePki();
    svc = await buildServiceApp(backend, {
      env: { WEBHOOK_RETRY_DELAYS: '100ms,200ms,300ms,400ms,500ms', WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
      ca: [pki.ca],
    });
    // (svc.key / svc.auth() / svc.accountId come from the test app helper)
    rx = await startReceiver(pki);
  });
  afterAll(async () => {
    await rx?.close();
    await svc?.close();
  });

  const register = (payload: Record<string, unknown>, key = svc.key) =>
    svc.app.inject({ method: 'POST', url: '/v1/webhooks', headers: { authorization: `Bearer ${key}` }, payload });

  it('registration sends webhook.test; 200 activates and returns a generated secret once', async () => {
    rx.respond = () => ({ status: 200 });
    const before = rx.received.length;
    const res = await register({ url: rx.url, events: ['field.updated'] });
    expect(res.statusCode).toBe(201);
    const wh = res.json();
    expect(wh).toMatchObject({ url: rx.url, events: ['field.updated'], status: 'active' });
    expect(wh.id).toMatch(/^wh_/);
    expect(wh.secret).toMatch(/^whsec_/);
    const test = rx.received[before]!;
    expect(test.headers['x-service-event']).toBe('webhook.test');
    expect(test.body.event).toBe('webhook.test');
    expect(typeof test.body.data.challenge).toBe('string');
    expect(test.body.data.challenge.length).toBeGreaterThanOrEqual(16);
    expect(test.headers['x-service-signature']).toBe(createHmac('sha256', wh.secret).update(test.raw).digest('hex'));
    const got = (await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() })).json();
    expect(got.secret).toBeUndefined();
    expect(got.status).toBe('active');
  });

  it('a refused (500), slow (6 s: timeout), untrusted-TLS or plain-http endpoint is not registered', async () => {
    const count = async () =>
      (await svc.app.inject({ method: 'GET', url: '/v1/webhooks', headers: svc.auth() })).json().total;
    const n0 = await count();
    rx.respond = () => ({ status: 500 });
    let res = await register({ url: rx.url, events: ['*'] });
    expect(res.statusCode).toBe(422);
    expect(res.json()).toMatchObject({ code: 'webhook_test_failed', test_delivery: { status_code: 500 } });
    expect(res.json().detail).toMatch(/answered 500/);

    rx.respond = () => ({ status: 200, delayMs: 6000 }); // the spec's limit is 5 s
    res = await register({ url: rx.url, events: ['*'] });
    expect(res.statusCode).toBe(422);
    expect(res.json().test_delivery.error).toBe('timeout');
    expect(res.json().test_delivery.latency_ms).toBeGreaterThanOrEqual(4900);
    expect(res.json().test_delivery.latency_ms).toBeLessThan(5900);

    const rogue = await startReceiver({ key: pki.untrustedKey, cert: pki.untrustedCert });
    try {
      res = await register({ url: rogue.url, events: ['*'] });
      expect(res.statusCode).toBe(422);
      expect(res.json().test_delivery.error).toBe('tls');
    } finally {
      await rogue.close();
    }
    rx.respond = () => ({ status: 202 });
    res = await register({ url: rx.url, events: ['*'] });
    expect(res.statusCode).toBe(422); // the test delivery must get exactly 200

    res = await register({ url: rx.url.replace('https:', 'http:'), events: ['*'] });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0]).toMatchObject({ path: '/body/url', code: 'invalid_url' });
    res = await register({ url: rx.url, events: ['field.exploded'] });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].path).toBe('/body/events/0');
    res = await register({ url: rx.url, events: [] });
    expect(res.statusCode).toBe(400);
    expect(await count()).toBe(n0);
  });

  it('deliveries are signed over the raw body with the spec and Standard Webhooks headers; * gets every type', async () => {
    // A receiver of its own: the earlier tests' webhooks (other secrets) point at `rx`.
    const rx = await startReceiver(pki);
    const secret = 'a-very-secret-string-0123456789';
    const wh = (await register({ url: rx.url, events: ['*'], secret })).json();
    expect(wh.secret).toBeUndefined();
    const f = (
      await svc.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: svc.auth(),
        payload: { name: 'F', boundary: square(5, 51) },
      })
    ).json();
    const before = rx.received.length;
    await svc.app.inject({ method: 'PATCH', url: `/v1/fields/${f.id}`, headers: svc.auth(), payload: { name: 'G' } });
    // A type nobody subscribed to by name still reaches `*`.
    await svc.db.transaction((tx) =>
      emit(tx, svc.accountId, 'season.started', { field_id: f.id, crop_type: null, planting_date: '2025-04-01' }),
    );
    svc.wake();
    await until(
      'two deliveries',
      () => rx.received.slice(before).filter((r) => r.headers['x-service-event'] !== 'webhook.test').length >= 2,
    );
    const got = rx.received.slice(before).filter((r) => r.headers['x-service-event'] !== 'webhook.test');
    const upd = got.find((r) => r.headers['x-service-event'] === 'field.updated')!;
    expect(upd.headers['content-type']).toBe('application/json');
    expect(upd.headers['x-service-signature']).toBe(createHmac('sha256', secret).update(upd.raw).digest('hex'));
    expect(Number(upd.headers['x-service-timestamp'])).toBeGreaterThan(Date.now() / 1000 - 60);
    expect(upd.headers['x-service-delivery']).toMatch(/^dlv_/);
    expect(upd.headers['webhook-id']).toBe(upd.headers['x-service-delivery']);
    const sig = createHmac('sha256', secret)
      .update(`${upd.headers['webhook-id']}.${upd.headers['webhook-timestamp']}.`)
      .update(upd.raw)
      .digest('base64');
    expect(upd.headers['webhook-signature']).toBe(`v1,${sig}`);
    expect(Object.keys(upd.body).sort()).toEqual(['data', 'event', 'timestamp']);
    expect(upd.body.event).toBe('field.updated');
    expect(upd.body.data).toEqual({ field_id: f.id, changed_fields: ['name'], updated_at: expect.any(String) });
    expect(got.some((r) => r.body.event === 'season.started')).toBe(true);
    await svc.app.inject({ method: 'DELETE', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() });
    await rx.close();
  });

  it('retries on the configured schedule in order; the 5th failure in a row disables (the 5th retry is never sent); PATCH re-enables and replays', async () => {
    const failing = await startReceiver(pki);
    try {
      failing.respond = (r) => ({ status: r.headers['x-service-event'] === 'webhook.test' ? 200 : 503 });
      const wh = (await register({ url: failing.url, events: ['season.ended'] })).json();
      await svc.db.transaction((tx) =>
        emit(tx, svc.accountId, 'season.ended', { field_id: 'fld_x', crop_type: 'wheat', harvest_date: '2025-08-01' }),
      );
      svc.wake();
      await until(
        'five attempts',
        () => failing.received.filter((r) => r.body?.event === 'season.ended').length >= 5,
        15_000,
      );
      const times = failing.received.filter((r) => r.body?.event === 'season.ended').map((r) => r.at);
      const gaps = times.slice(1).map((t, i) => t - times[i]!);
      for (const [i, d] of [100, 200, 300, 400].entries()) expect(gaps[i]!).toBeGreaterThanOrEqual(d - 20);
      const ids = new Set(
        failing.received.filter((r) => r.body?.event === 'season.ended').map((r) => r.headers['x-service-delivery']),
      );
      expect(ids.size).toBe(1); // one delivery id across all retries
      await until(
        'disabled',
        async () =>
          (await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() })).json().status ===
          'disabled',
      );
      const log = (
        await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries`, headers: svc.auth() })
      ).json();
      expect(log.data[0]).toMatchObject({ status: 'cancelled', stopped_reason: 'webhook_disabled', attempt_count: 5 });
      expect(log.data[0].attempts.map((a: { status_code: number }) => a.status_code)).toEqual([
        503, 503, 503, 503, 503,
      ]);
      await new Promise((r) => setTimeout(r, 800));
      expect(failing.received.filter((r) => r.body?.event === 'season.ended')).toHaveLength(5); // retries stopped

      // While disabled, new events are not delivered (nor kept for it); re-enabling with replay
      // sends the stopped delivery again.
      await svc.db.transaction((tx) =>
        emit(tx, svc.accountId, 'season.ended', { field_id: 'fld_y', crop_type: 'wheat', harvest_date: '2025-08-02' }),
      );
      svc.wake();
      await new Promise((r) => setTimeout(r, 500));
      expect(failing.received.filter((r) => r.body?.data?.field_id === 'fld_y')).toHaveLength(0);
      failing.respond = () => ({ status: 200 });
      const res = await svc.app.inject({
        method: 'PATCH',
        url: `/v1/webhooks/${wh.id}`,
        headers: svc.auth(),
        payload: { status: 'active', replay: true },
      });
      expect(res.json()).toMatchObject({ status: 'active', consecutive_failures: 0 });
      await until('replayed delivery', () =>
        failing.received.some((r) => r.body?.data?.field_id === 'fld_x' && r.at > times.at(-1)!),
      );
    } finally {
      await failing.close();
    }
  });

  it('a success between failures resets the count: a delivery can use up all its retries and the webhook stays active; 410 disables at once', async () => {
    const flaky = await startReceiver(pki);
    try {
      flaky.respond = (r) => ({
        status: r.headers['x-service-event'] === 'webhook.test' || r.body?.data?.field_id === 'ok' ? 200 : 500,
      });
      const wh = (await register({ url: flaky.url, events: ['season.ended'] })).json();
      const bad = () => flaky.received.filter((r) => r.body?.data?.field_id === 'bad').length;
      await svc.db.transaction((tx) =>
        emit(tx, svc.accountId, 'season.ended', { field_id: 'bad', crop_type: null, harvest_date: '2025-08-01' }),
      );
      svc.wake();
      // After its 3rd failure (its 4th attempt is 300 ms later), a success resets the count.
      await until('three failures of bad', () => bad() >= 3);
      await svc.db.transaction((tx) =>
        emit(tx, svc.accountId, 'season.ended', { field_id: 'ok', crop_type: null, harvest_date: '2025-08-01' }),
      );
      svc.wake();
      await until('six failures of bad', () => bad() >= 6, 15_000);
      await new Promise((r) => setTimeout(r, 300));
      const got = (await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() })).json();
      expect(got.status).toBe('active');
      expect(got.consecutive_failures).toBeGreaterThanOrEqual(1);
      expect(got.consecutive_failures).toBeLessThan(5);
      const log = (
        await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries`, headers: svc.auth() })
      ).json();
      expect(log.data.find((d: { attempts: unknown[] }) => d.attempts.length === 6)).toMatchObject({
        status: 'failed',
        next_attempt_at: null,
      });

      flaky.respond = () => ({ status: 410 });
      await svc.db.transaction((tx) =>
        emit(tx, svc.accountId, 'season.ended', { field_id: 'gone', crop_type: null, harvest_date: '2025-08-01' }),
      );
      svc.wake();
      await until(
        'disabled by 410',
        async () =>
          (await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() })).json().status ===
          'disabled',
      );
      expect(flaky.received.filter((r) => r.body?.data?.field_id === 'gone')).toHaveLength(1);
      expect(
        (await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() })).json()
          .disabled_reason,
      ).toBe('the endpoint answered 410 Gone');
    } finally {
      await flaky.close();
    }
  });

  it('DELETE stops pending deliveries at once', async () => {
    const slow = await startReceiver(pki);
    try {
      slow.respond = (r) => ({ status: r.headers['x-service-event'] === 'webhook.test' ? 200 : 500 });
      const wh = (await register({ url: slow.url, events: ['season.ended'] })).json();
      await svc.db.transaction((tx) =>
        emit(tx, svc.accountId, 'season.ended', { field_id: 'del', crop_type: null, harvest_date: '2025-08-01' }),
      );
      svc.wake();
      await until('first attempt', () => slow.received.some((r) => r.body?.data?.field_id === 'del'));
      const del = await svc.app.inject({ method: 'DELETE', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() });
      expect(del.statusCode).toBe(204);
      const n = slow.received.length;
      await new Promise((r) => setTimeout(r, 1000));
      expect(slow.received.length).toBe(n);
      expect(
        (await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() })).statusCode,
      ).toBe(404);
    } finally {
      await slow.close();
    }
  });

  it("another account's webhook answers 404", async () => {
    rx.respond = () => ({ status: 200 });
    const wh = (await register({ url: rx.url, events: ['*'] })).json();
    const other = await svc.otherAccount();
    for (const [method, url] of [
      ['GET', `/v1/webhooks/${wh.id}`],
      ['DELETE', `/v1/webhooks/${wh.id}`],
      ['GET', `/v1/webhooks/${wh.id}/deliveries`],
    ] as const) {
      expect(
        (await svc.app.inject({ method, url, headers: { authorization: `Bearer ${other.key}` } })).statusCode,
      ).toBe(404);
    }
  });
});

describe('webhook conflicts', () => {
  it('409 past the per-account limit, and when retrying a delivery of a disabled webhook', async () => {
    const pki = makePki();
    const rx = await startReceiver(pki);
    const svc = await buildServiceApp(queueBackends[0]!, {
      env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true', WEBHOOK_MAX_PER_ACCOUNT: '1' },
      ca: [pki.ca],
    });
    try {
      const first = await svc.app.inject({
        method: 'POST',
        url: '/v1/webhooks',
        headers: svc.auth(),
        payload: { url: rx.url, events: ['*'] },
      });
      expect(first.statusCode).toBe(201);
      const second = await svc.app.inject({
        method: 'POST',
        url: '/v1/webhooks',
        headers: svc.auth(),
        payload: { url: rx.url, events: ['*'] },
      });
      expect(second.statusCode).toBe(409);
      expect(second.headers['content-type']).toMatch(/problem\+json/);
      expect(second.json().code).toBe('webhook_limit_reached');
      const wh = first.json();
      await svc.db.transaction((tx) =>
        emit(tx, svc.accountId, 'season.ended', { field_id: 'fld_c', crop_type: null, harvest_date: '2025-08-01' }),
      );
      svc.wake();
      await until('delivered', () => rx.received.some((r) => r.body?.event === 'season.ended'));
      const log = (
        await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}/deliveries`, headers: svc.auth() })
      ).json();
      await svc.app.inject({
        method: 'PATCH',
        url: `/v1/webhooks/${wh.id}`,
        headers: svc.auth(),
        payload: { status: 'disabled' },
      });
      const retry = await svc.app.inject({
        method: 'POST',
        url: `/v1/webhooks/${wh.id}/deliveries/${log.data[0].id}/retry`,
        headers: svc.auth(),
      });
      expect(retry.statusCode).toBe(409);
      expect(retry.json().code).toBe('webhook_disabled');
    } finally {
      await rx.close();
      await svc.close();
    }
  });
});
