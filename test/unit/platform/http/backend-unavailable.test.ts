/**
 * A request that fails because the database is not reachable (a restart, an outage) answers
 * 503 service_unavailable with Retry-After, not an opaque 500: the PostgreSQL restart drill of
 * bench/faults showed 500s. The database here is real postgres.js against a port nobody listens on.
 */
import net from 'node:net';
import Fastify from 'fastify';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../../../src/platform/database.js';
import { backendUnavailable, registerProblemHandlers } from '../../../../src/platform/http/problems.js';

async function closedPort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise((r) => s.close(r));
  return port;
}

describe('backing service unavailable', () => {
  let db: Database | undefined;
  afterAll(async () => {
    await db?.close();
  });

  it('answers 503 problem+json with Retry-After when PostgreSQL refuses the connection', async () => {
    db = await openDatabase({ url: `postgres://postgres@127.0.0.1:${await closedPort()}/postgres`, maxConnections: 1 });
    const app = Fastify();
    registerProblemHandlers(app);
    app.get('/x', async () => db!.query('SELECT 1'));
    app.get('/bug', async () => {
      throw new TypeError('a genuine bug');
    });
    const res = await app.inject({ method: 'GET', url: '/x' });
    expect(res.statusCode).toBe(503);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.headers['retry-after']).toBe('2');
    expect(res.json()).toMatchObject({ status: 503, code: 'service_unavailable' });
    // Anything else stays an opaque 500.
    const bug = await app.inject({ method: 'GET', url: '/bug' });
    expect(bug.statusCode).toBe(500);
    expect(bug.json().code).toBe('internal_error');
    await app.close();
  });

  it('recognises connection errors and shutdown SQLSTATEs, and nothing else', () => {
    for (const code of [
      'CONNECTION_CLOSED',
      'CONNECTION_DESTROYED',
      'CONNECT_TIMEOUT',
      'ECONNREFUSED',
      'ECONNRESET',
      '57P01',
      '57P03',
      '08006',
    ]) {
      expect(backendUnavailable(Object.assign(new Error(code), { code })), code).toBe(true);
    }
    for (const code of ['23505', '42P01', '22P02', 'FST_ERR_VALIDATION', undefined]) {
      expect(backendUnavailable(Object.assign(new Error('x'), { code })), String(code)).toBe(false);
    }
  });
});
