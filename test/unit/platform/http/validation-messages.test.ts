/**
 * Validation messages a person can act on: a union of literals (TypeBox's Type.Union of
 * Type.Literal, as `weighting` and `interval` are) names the values it allows instead of ajv's
 * "must be equal to constant"; a union of a literal and another type keeps ajv's first message;
 * an enum names its values as before. Real Fastify validation through the service's problem handler.
 */
import Fastify from 'fastify';
import { Type } from 'typebox';
import { describe, expect, it } from 'vitest';
import { registerProblemHandlers } from '../../../../src/platform/http/problems.js';

async function app() {
  const a = Fastify();
  registerProblemHandlers(a);
  a.get(
    '/q',
    {
      schema: {
        querystring: Type.Object({
          weighting: Type.Optional(Type.Union([Type.Literal('centre'), Type.Literal('coverage')])),
          only: Type.Optional(Type.Union([Type.Literal('all')])),
          level: Type.Optional(Type.String({ enum: ['low', 'high'] })),
        }),
      },
    },
    async () => ({ ok: true }),
  );
  a.post(
    '/b',
    {
      schema: {
        body: Type.Object({
          fields: Type.Union([Type.Literal('all'), Type.Array(Type.String(), { minItems: 1 })]),
          nested: Type.Optional(Type.Object({ interval: Type.Union([Type.Literal('daily'), Type.Literal('weekly')]) })),
          // nullable, as a subscription's scl_exclude in a PATCH
          classes: Type.Optional(Type.Union([Type.Array(Type.Integer()), Type.Null()])),
          limit: Type.Optional(Type.Union([Type.Number({ maximum: 100 }), Type.Null()])),
        }),
      },
    },
    async () => ({ ok: true }),
  );
  await a.ready();
  return a;
}

describe('validation messages', () => {
  it('a union of literals names its values, at the member, with the code it had', async () => {
    const a = await app();
    const res = await a.inject({ method: 'GET', url: '/q?weighting=foo' });
    expect(res.statusCode).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json().errors).toEqual([
      { path: '/query/weighting', code: 'const', message: 'must be one of: centre, coverage' },
    ]);
    expect(res.json().detail).toBe('/query/weighting must be one of: centre, coverage');
    const one = await a.inject({ method: 'GET', url: '/q?only=some' });
    expect(one.json().errors[0].message).toBe('must be "all"');
    const nested = await a.inject({
      method: 'POST',
      url: '/b',
      payload: { fields: 'all', nested: { interval: 'hourly' } },
    });
    expect(nested.json().errors).toEqual([
      { path: '/body/nested/interval', code: 'const', message: 'must be one of: daily, weekly' },
    ]);
    expect((await a.inject({ method: 'GET', url: '/q?weighting=coverage' })).statusCode).toBe(200);
    await a.close();
  });

  it("a union of a literal and an array keeps ajv's first message; an enum names its values", async () => {
    const a = await app();
    const mixed = await a.inject({ method: 'POST', url: '/b', payload: { fields: { some: 1 } } });
    expect(mixed.statusCode).toBe(400);
    expect(mixed.json().errors).toHaveLength(1);
    expect(mixed.json().errors[0].path).toBe('/body/fields');
    expect(mixed.json().errors[0].message).not.toMatch(/^must be "all"$/);
    const level = await a.inject({ method: 'GET', url: '/q?level=mid' });
    expect(level.json().errors[0].message).toBe('must be one of: low, high');
    await a.close();
  });
});

describe('a nullable member', () => {
  it('whose item fails names the item, without "must be null" for the member', async () => {
    const a = await app();
    const res = await a.inject({ method: 'POST', url: '/b', payload: { fields: 'all', classes: [3, 1.5, 'x'] } });
    expect(res.statusCode).toBe(400);
    // ajv stops at an array's first bad item
    expect(res.json().errors).toEqual([{ path: '/body/classes/1', code: 'type', message: 'must be integer' }]);
    expect(res.json().detail).toBe('/body/classes/1 must be integer');
    // the member itself wrong: ajv's first branch, as for any union (a string would be coerced to
    // a one-item array, Fastify's coerceTypes: 'array')
    const whole = await a.inject({ method: 'POST', url: '/b', payload: { fields: 'all', classes: { a: 1 } } });
    expect(whole.json().errors).toEqual([{ path: '/body/classes', code: 'type', message: 'must be array' }]);
    const over = await a.inject({ method: 'POST', url: '/b', payload: { fields: 'all', limit: 101 } });
    expect(over.json().errors).toEqual([{ path: '/body/limit', code: 'maximum', message: 'must be <= 100' }]);
    for (const payload of [{ classes: null }, { classes: [1, 2] }, { limit: null }])
      expect((await a.inject({ method: 'POST', url: '/b', payload: { fields: 'all', ...payload } })).statusCode).toBe(
        200,
      );
    await a.close();
  });
});

describe('a query parameter given more than once', () => {
  it('is named as repeated, whatever its schema, not "must be string"', async () => {
    const a = await app();
    for (const [url, path, times] of [
      ['/q?level=low&level=high', '/query/level', 2],
      ['/q?weighting=centre&weighting=coverage&weighting=centre', '/query/weighting', 3],
    ] as const) {
      const res = await a.inject({ method: 'GET', url });
      expect(res.statusCode).toBe(400);
      expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
      expect(res.json().errors).toEqual([
        {
          path,
          code: 'repeated',
          message: `is given ${times} times: give it once (a list is one comma-separated value, as in name=a,b)`,
        },
      ]);
    }
    // given once, the schema's own message as before
    const once = await a.inject({ method: 'GET', url: '/q?level=mid' });
    expect(once.json().errors).toEqual([{ path: '/query/level', code: 'enum', message: 'must be one of: low, high' }]);
  });

  it('a body field that is an array where a string is wanted keeps the schema message', async () => {
    const a = await app();
    const res = await a.inject({
      method: 'POST',
      url: '/b',
      payload: { fields: 'all', nested: { interval: ['daily', 'weekly'] } },
    });
    expect(res.statusCode).toBe(400);
    expect(res.json().errors[0].code).not.toBe('repeated');
  });
});
