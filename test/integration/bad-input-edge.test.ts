/**
 * Hostile input at the edge of the HTTP API, each answered 4xx application/problem+json, never a
 * 5xx, a reset or a hang:
 * - a revoked and an unknown API key, which must be indistinguishable.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApiKey, revokeApiKey } from '../../src/accounts/api-keys.js';
import { datesEvery, sceneField, writeSyntheticSeason, type SyntheticCapture } from '../../src/imagery/synthetic.js';
import { dbBackends } from '../helpers/backends.js';
import { buildTestApp, square, type TestApp } from '../helpers/app.js';

interface Answer {
  status: number;
  contentType: string;
  body: string;
}

function expectProblem(res: Answer, status: number, code: string): Record<string, any> {
  expect(res.status, res.body).toBe(status);
  expect(res.contentType).toMatch(/^application\/problem\+json/);
  const body = JSON.parse(res.body);
  expect(body).toMatchObject({ status, code, type: `/problems/${code}` });
  expect(typeof body.title).toBe('string');
  expect(typeof body.detail).toBe('string');
  expect(typeof body.request_id).toBe('string');
  return body;
}

const fromInject = (r: { statusCode: number; headers: Record<string, unknown>; body: string }): Answer => ({ status: r.statusCode, contentType: String(r.headers['content-type'] ?? ''), body: r.body });

describe.each(dbBackends)('a revoked and an unknown key on $name', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('get the same 401: byte-identical bodies but for request_id, the same headers', async () => {
    const { key, id } = await createApiKey(t.db, t.accountId);
    expect((await t.app.inject({ method: 'GET', url: '/v1/fields', headers: t.auth(key) })).statusCode).toBe(200);
    expect(await revokeApiKey(t.db, id)).toBe(true);
    const unknownKey = 'fak_' + 'A'.repeat(43);
    const ask = (k: string) => t.app.inject({ method: 'GET', url: '/v1/fields', headers: { ...t.auth(k), 'x-request-id': 'same-id' } });
    const [revoked, unknown] = [await ask(key), await ask(unknownKey)];
    expectProblem(fromInject(revoked), 401, 'unauthorized');
    expect(revoked.body).toBe(unknown.body);
    const headers = (r: typeof revoked) => {
      const { date: _date, ...rest } = r.headers;
      return rest;
    };
    expect(headers(revoked)).toEqual(headers(unknown));
  });
});
