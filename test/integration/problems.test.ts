/**
 * Every problem `type` resolves: GET /problems/{code} answers each catalogue entry and 404 for
 * anything else. Every /v1 operation in /openapi.json documents its error responses as problems,
 * 401 where the API key is needed, and names only catalogue codes, each under its own status.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { isProblemCode, problemCatalog, problemCodes } from '../../src/platform/errors.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';

const METHODS = ['get', 'put', 'post', 'patch', 'delete'];

interface Operation {
  security?: unknown[];
  responses: Record<
    string,
    { description?: string; content?: Record<string, { schema?: { properties?: Record<string, unknown> } }> }
  >;
}

describe('problem types and documented error responses', () => {
  let t: TestApp;
  let operations: Array<{ id: string; op: Operation }>;
  beforeAll(async () => {
    t = await buildTestApp({ name: 'pglite' });
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json() as {
      paths: Record<string, Record<string, Operation>>;
    };
    operations = Object.entries(doc.paths)
      .filter(([p]) => p.startsWith('/v1/'))
      .flatMap(([p, item]) =>
        METHODS.filter((m) => item[m]).map((m) => ({ id: `${m.toUpperCase()} ${p}`, op: item[m]! })),
      );
  });
  afterAll(async () => t.close());

  it('GET /problems/{code} answers every catalogue entry with its status and title', async () => {
    for (const code of problemCodes) {
      const res = await t.app.inject({ method: 'GET', url: `/problems/${code}` });
      expect(res.statusCode, code).toBe(200);
      expect(res.json()).toEqual({ code, status: problemCatalog[code].status, title: problemCatalog[code].title });
    }
  });

  it('an unknown code is a 404 problem', async () => {
    for (const code of ['no_such_code', 'toString', '__proto__']) {
      const res = await t.app.inject({ method: 'GET', url: `/problems/${code}` });
      expect(res.statusCode, code).toBe(404);
      expect(res.json()).toMatchObject({ status: 404, code: 'route_not_found' });
    }
  });

  it('every /v1 operation documents a 4xx problem response; the authenticated ones a 401', () => {
    expect(operations.length).toBeGreaterThanOrEqual(30);
    for (const { id, op } of operations) {
      const problems = Object.entries(op.responses).filter(([status, r]) => {
        const schema = r.content?.['application/problem+json']?.schema;
        return /^4/.test(status) && schema?.properties?.code && schema.properties.type && schema.properties.status;
      });
      expect(problems.length, id).toBeGreaterThan(0);
      expect(Object.keys(op.responses), id).toEqual(expect.arrayContaining(['400', '4XX', '5XX']));
      const open = Array.isArray(op.security) && op.security.length === 0;
      if (!open) expect(Object.keys(op.responses), id).toEqual(expect.arrayContaining(['401', '429', '503']));
    }
  });

  it('descriptions name only catalogue codes, each under its own status', () => {
    for (const { id, op } of operations) {
      for (const [status, r] of Object.entries(op.responses)) {
        if (!/^\d{3}$/.test(status) || Number(status) < 400) continue;
        const named = [...(r.description ?? '').matchAll(/`([a-z_]+)`/g)].map((m) => m[1]!);
        expect(named.length, `${id} ${status}`).toBeGreaterThan(0);
        for (const code of named) {
          expect(isProblemCode(code), `${id} ${status} ${code}`).toBe(true);
          if (isProblemCode(code)) expect(problemCatalog[code].status, `${id} ${code}`).toBe(Number(status));
        }
      }
    }
  });

  it('a documented error is served as the problem+json it documents, through its schema', async () => {
    const res = await t.app.inject({ method: 'GET', url: '/v1/reports/rpt_nothing/download?expires=1&signature=abc' });
    expect(res.statusCode).toBe(403);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json()).toMatchObject({
      type: '/problems/invalid_signature',
      code: 'invalid_signature',
      status: 403,
      title: problemCatalog.invalid_signature.title,
    });
    const schema = await t.app.inject({ method: 'GET', url: '/v1/reports/schemas/scouting', headers: t.auth() });
    expect(schema.statusCode).toBe(200);
    expect(schema.json()).toMatchObject({ type: 'object' });
  });

  it('the operations that answer feature codes document them', () => {
    const codes = (id: string) => {
      const op = operations.find((o) => o.id === id);
      expect(op, id).toBeDefined();
      return [
        ...Object.values(op!.op.responses)
          .map((r) => r.description ?? '')
          .join(' ')
          .matchAll(/`([a-z_]+)`/g),
      ].map((m) => m[1]);
    };
    expect(codes('GET /v1/reports/{id}/download')).toEqual(
      expect.arrayContaining(['not_found', 'invalid_signature', 'link_expired']),
    );
    expect(codes('GET /v1/reports/schemas/{type}')).toEqual(
      expect.arrayContaining(['validation_failed', 'unauthorized']),
    );
    expect(codes('POST /v1/fields/{id}/reports')).toEqual(expect.arrayContaining(['idempotency_key_reused']));
    expect(codes('POST /v1/webhooks')).toEqual(
      expect.arrayContaining(['webhook_limit_reached', 'webhook_test_failed']),
    );
    expect(codes('POST /v1/webhooks/{id}/deliveries/{delivery_id}/retry')).toEqual(
      expect.arrayContaining(['webhook_disabled']),
    );
    expect(codes('GET /v1/fields/{id}/indices')).toEqual(
      expect.arrayContaining([
        'no_imagery',
        'missing_bands',
        'no_usable_imagery',
        'imagery_does_not_cover_field',
        'invalid_formula',
      ]),
    );
    expect(codes('POST /v1/fields')).toEqual(expect.arrayContaining(['invalid_boundary']));
    expect(codes('POST /v1/imagery')).toEqual(expect.arrayContaining(['invalid_imagery']));
  });
});
