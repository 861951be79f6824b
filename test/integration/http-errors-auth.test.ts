import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { revokeApiKey, createApiKey } from '../../src/accounts/api-keys.js';
import { dbBackends } from '../helpers/backends.js';
import { buildTestApp, square, type TestApp } from '../helpers/app.js';

function expectProblem(
  res: { statusCode: number; headers: Record<string, unknown>; json(): any },
  status: number,
  code: string,
) {
  expect(res.statusCode).toBe(status);
  expect(String(res.headers['content-type'])).toMatch(/^application\/problem\+json/);
  const body = res.json();
  expect(body).toMatchObject({ status, code, type: `/problems/${code}` });
  expect(typeof body.title).toBe('string');
  expect(typeof body.detail).toBe('string');
  expect(JSON.stringify(body)).not.toMatch(/\bat .*\.(ts|js):\d+/); // no stack traces
  expect(res.headers['x-request-id']).toBeTruthy();
  expect(body.request_id).toBe(res.headers['x-request-id']);
  return body;
}

describe.each(dbBackends)('errors and auth on $name', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, { env: { BODY_LIMIT_BYTES: '4096' } });
  });
  afterAll(async () => t.close());

  it('unknown route → 404 problem', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/nothing-here', headers: t.auth() });
    expectProblem(res, 404, 'route_not_found');
    const res2 = await t.app.inject({ method: 'GET', url: '/nope' });
    expectProblem(res2, 404, 'route_not_found');
  });

  it('a path served under other methods → 405 problem with Allow (it was a 404: the resource exists)', async () => {
    for (const [method, url, allow] of [
      ['PUT', '/v1/fields/fld_x', 'DELETE, GET, HEAD, PATCH'],
      ['DELETE', '/v1/fields', 'GET, HEAD, POST'],
      ['POST', '/v1/fields/fld_x/indices/tiles/14/8412/5517.png', 'GET, HEAD'],
      ['PATCH', '/v1/fields/fld_x/indices/', 'GET, HEAD'],
      ['GET', '/v1/indices/validate', 'POST'],
      ['POST', '/healthz', 'GET, HEAD'],
    ] as const) {
      const res = await t.app.inject({ method, url, headers: t.auth() });
      const body = expectProblem(res, 405, 'method_not_allowed');
      expect(res.headers.allow, `${method} ${url}`).toBe(allow);
      expect(body.detail).toContain(`not ${method}`);
    }
    // a path no route serves stays a 404, a parameter never spans a slash
    for (const url of ['/v1/fields/a/b', '/v1/fields/fld_x/indices/tiles/14/8412.png', '/v1/fieldsx']) {
      expectProblem(await t.app.inject({ method: 'PUT', url, headers: t.auth() }), 404, 'route_not_found');
    }
  });

  it('missing, malformed, unknown and revoked keys → 401 problem with WWW-Authenticate', async () => {
    const missing = await t.app.inject({ method: 'GET', url: '/v1/fields' });
    expect(expectProblem(missing, 401, 'unauthorized').detail).toMatch(/Authorization: Bearer/);
    expect(missing.headers['www-authenticate']).toMatch(/^Bearer/);

    for (const header of ['Basic abc', 'Bearer', 'Bearer not-a-key', `Token ${t.key}`, `Bearer ${t.key}x`]) {
      const res = await t.app.inject({ method: 'GET', url: '/v1/fields', headers: { authorization: header } });
      expectProblem(res, 401, 'unauthorized');
    }
    const unknown = await t.app.inject({ method: 'GET', url: '/v1/fields', headers: t.auth(`fak_${'A'.repeat(43)}`) });
    expect(expectProblem(unknown, 401, 'unauthorized').detail).toMatch(/not valid/);

    const { key, id } = await createApiKey(t.db, t.accountId);
    const ok = await t.app.inject({ method: 'GET', url: '/v1/fields', headers: t.auth(key) });
    expect(ok.statusCode).toBe(200);
    expect(await revokeApiKey(t.db, id)).toBe(true);
    const revoked = await t.app.inject({ method: 'GET', url: '/v1/fields', headers: t.auth(key) });
    // Not "revoked": the answer does not tell a revoked key from one that never existed.
    expect(expectProblem(revoked, 401, 'unauthorized').detail).toBe(expectProblem(unknown, 401, 'unauthorized').detail);
  });

  it('malformed JSON → 400 malformed_json', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: { ...t.auth(), 'content-type': 'application/json' },
      payload: '{"name": "x",',
    });
    expectProblem(res, 400, 'malformed_json');
  });

  it('empty JSON body → 400', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: { ...t.auth(), 'content-type': 'application/json' },
      payload: '',
    });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/problem\+json/);
  });

  it('unsupported media type → 415', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: { ...t.auth(), 'content-type': 'text/plain' },
      payload: 'name=x',
    });
    expectProblem(res, 415, 'unsupported_media_type');
    const xml = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: { ...t.auth(), 'content-type': 'application/xml' },
      payload: '<a/>',
    });
    expectProblem(xml, 415, 'unsupported_media_type');
  });

  it('oversized body → 413', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: { ...t.auth(), 'content-type': 'application/json' },
      payload: JSON.stringify({ name: 'x'.repeat(10_000), boundary: square(5, 51) }),
    });
    expectProblem(res, 413, 'payload_too_large');
  });

  it('schema validation → 400 with errors[] pointing at each bad member', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: t.auth(),
      payload: { name: 42, boundary: square(5, 51), crop_type: '', planting_date: 'tomorrow', color: 'red' },
    });
    const body = expectProblem(res, 400, 'validation_failed');
    const paths = body.errors.map((e: { path: string }) => e.path);
    expect(paths).toEqual(
      expect.arrayContaining(['/body/name', '/body/crop_type', '/body/planting_date', '/body/color']),
    );
    const missing = await t.app.inject({ method: 'POST', url: '/v1/fields', headers: t.auth(), payload: {} });
    const mb = expectProblem(missing, 400, 'validation_failed');
    expect(mb.errors.map((e: { path: string }) => e.path)).toEqual(
      expect.arrayContaining(['/body/name', '/body/boundary']),
    );
  });

  it('query validation → 400 (per_page above 100 is an error, not a clamp)', async () => {
    for (const q of ['per_page=101', 'per_page=0', 'page=0', 'page=abc', 'per_page=1.5']) {
      const res = await t.app.inject({ method: 'GET', url: `/v1/fields?${q}`, headers: t.auth() });
      const body = expectProblem(res, 400, 'validation_failed');
      expect(body.errors[0].path).toMatch(/^\/query\//);
    }
  });

  it('a caller-supplied X-Request-Id is echoed; an unsafe one is replaced', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'abc-123' } });
    expect(res.headers['x-request-id']).toBe('abc-123');
    const bad = await t.app.inject({ method: 'GET', url: '/healthz', headers: { 'x-request-id': 'a b<script>' } });
    expect(bad.headers['x-request-id']).not.toBe('a b<script>');
  });

  it('problem types resolve to a description', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/problems/unauthorized' });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({ code: 'unauthorized', status: 401 });
  });

  it('health, readiness, OpenAPI and docs need no key', async () => {
    expect((await t.app.inject({ method: 'GET', url: '/healthz' })).json()).toEqual({ status: 'ok' });
    const ready = await t.app.inject({ method: 'GET', url: '/readyz' });
    expect(ready.statusCode).toBe(200);
    expect(ready.json().checks.database).toBe('ok');
    const spec = await t.app.inject({ method: 'GET', url: '/openapi.json' });
    expect(spec.statusCode).toBe(200);
    const doc = spec.json();
    expect(doc.openapi).toMatch(/^3\./);
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining(['/v1/fields', '/v1/fields/{id}']));
    const docs = await t.app.inject({ method: 'GET', url: '/docs/' });
    expect(docs.statusCode).toBe(200);
    expect(docs.headers['content-type']).toMatch(/text\/html/);
  });
});

describe('unexpected errors', () => {
  it('a 5xx has an opaque problem body and is logged with the request id the response carries', async () => {
    const lines: string[] = [];
    const { buildApp } = await import('../../src/app.js');
    const t = await buildTestApp({ name: 'pglite' });
    const app = await buildApp(t.runtime, {
      logger: { level: 'info', stream: { write: (l: string) => void lines.push(l) } } as never,
    });
    app.get('/boom', async () => {
      throw new Error('secret internal detail at /srv/app/x.js:12');
    });
    await app.ready();
    try {
      const res = await app.inject({ method: 'GET', url: '/boom' });
      expect(res.statusCode).toBe(500);
      expect(res.headers['content-type']).toMatch(/problem\+json/);
      const body = res.json();
      expect(body.code).toBe('internal_error');
      expect(JSON.stringify(body)).not.toContain('secret internal detail');
      const reqId = res.headers['x-request-id'];
      expect(body.request_id).toBe(reqId);
      const logged = lines.map((l) => JSON.parse(l)).find((l) => l.level === 50);
      expect(logged).toBeDefined();
      expect(logged.reqId ?? logged.request_id).toBe(reqId);
      expect(logged.err.message).toContain('secret internal detail');
    } finally {
      await app.close();
      await t.close();
    }
  }, 120_000); // builds a whole service (PGlite, compute pool) inside the test
});
