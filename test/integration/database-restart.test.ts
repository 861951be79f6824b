/**
 * PostgreSQL restarts and terminated connections cost only the requests made while the server is
 * really down (bench/faults: 46 of 400 requests failed and the service needed 9 s after the
 * server was back). Reads on a connection that died under them are retried once on a fresh one,
 * and the pool reconnects as soon as the server accepts connections again instead of backing off
 * for up to 20 s after failed attempts.
 */
import { execFileSync } from 'node:child_process';
import net from 'node:net';
import { afterAll, describe, expect, it } from 'vitest';
import { openDatabase, type Database } from '../../src/platform/database.js';
import { TEST_DATABASE_URL } from '../helpers/backends.js';

/**
 * Terminates backends from another process, synchronously: this thread reads nothing meanwhile,
 * so its pool still holds the dead connections as open ones when the next statement is sent.
 */
function terminateElsewhere(url: string, pids: number[]): void {
  const script = `
    import postgres from 'postgres';
    const sql = postgres(process.argv[1], { max: 1, onnotice: () => {} });
    const pids = JSON.parse(process.argv[2]);
    await sql\`SELECT pg_terminate_backend(pid) FROM unnest(\${pids}::int[]) AS pid\`;
    for (let i = 0; i < 100 && (await sql\`SELECT 1 FROM pg_stat_activity WHERE pid = ANY(\${pids}::int[])\`).length; i++) await new Promise((r) => setTimeout(r, 50));
    await sql.end();`;
  execFileSync(process.execPath, ['--input-type=module', '-e', script, url, JSON.stringify(pids)], {
    stdio: ['ignore', 'inherit', 'inherit'],
  });
}

/** A TCP proxy to the test server, whose connections the test may cut and whose port it may close. */
async function startProxy(opts: { cutWhen?: (fromClient: Buffer) => boolean } = {}) {
  const target = new URL(TEST_DATABASE_URL!);
  const sockets = new Set<net.Socket>();
  const proxy = net.createServer((client) => {
    const server = net.connect(Number(target.port || 5432), target.hostname);
    for (const s of [client, server]) {
      sockets.add(s);
      s.on('error', () => {});
      s.on('close', () => sockets.delete(s));
    }
    client.on('data', (chunk: Buffer) => {
      if (!opts.cutWhen?.(chunk)) return void server.write(chunk);
      client.resetAndDestroy();
      server.destroy();
    });
    server.pipe(client);
  });
  await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', () => r()));
  const port = (proxy.address() as net.AddressInfo).port;
  const url = new URL(TEST_DATABASE_URL!);
  url.hostname = '127.0.0.1';
  url.port = String(port);
  return {
    url: url.toString(),
    sockets,
    listen: () => new Promise<void>((r) => proxy.listen(port, '127.0.0.1', () => r())),
    /** Cuts every connection and stops listening. */
    close: async () => {
      const closed = new Promise((r) => proxy.close(() => r(undefined)));
      for (const s of sockets) s.destroy();
      await closed;
    },
  };
}

describe.skipIf(!TEST_DATABASE_URL)('PostgreSQL connections terminated and restarted', () => {
  const opened: Database[] = [];
  afterAll(async () => {
    for (const db of opened) await db.close();
  });

  /** A pool with both of its connections open, and their backend pids. */
  async function poolOfTwo(): Promise<{ db: Database; pids: number[] }> {
    const db = await openDatabase({ url: TEST_DATABASE_URL, maxConnections: 2 });
    opened.push(db);
    const rows = await Promise.all(
      [0, 1].map(() => db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid, pg_sleep(0.1)')),
    );
    const pids = [...new Set(rows.map((r) => r[0]!.pid))];
    expect(pids).toHaveLength(2);
    return { db, pids };
  }

  it('the next reads after the connections were terminated succeed, on fresh connections', async () => {
    const { db, pids } = await poolOfTwo();
    terminateElsewhere(TEST_DATABASE_URL!, pids);
    for (let i = 0; i < 4; i++) {
      const [row] = await db.query<{ pid: number }>('SELECT pg_backend_pid() AS pid');
      expect(pids).not.toContain(row!.pid);
    }
  }, 30_000);

  it('a transaction whose BEGIN met a terminated connection runs once more (nothing of it ran)', async () => {
    const { db, pids } = await poolOfTwo();
    terminateElsewhere(TEST_DATABASE_URL!, pids);
    let runs = 0;
    const pid = await db.transaction(async (tx) => {
      runs++;
      return (await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid'))[0]!.pid;
    });
    expect(runs).toBe(1);
    expect(pids).not.toContain(pid);
  }, 30_000);

  it('a write on a terminated connection is not retried (it may have been applied)', async () => {
    const { db, pids } = await poolOfTwo();
    terminateElsewhere(TEST_DATABASE_URL!, pids);
    await expect(db.query('CREATE TEMP TABLE never_retried (x int)')).rejects.toMatchObject({
      code: 'CONNECTION_CLOSED',
    });
    expect((await db.query<{ one: number }>('SELECT 1 AS one'))[0]!.one).toBe(1);
  }, 30_000);

  it('a statement sent in reaction to a reset connection is answered, not left hanging', async () => {
    const p = await startProxy();
    const db = await openDatabase({ url: p.url, maxConnections: 1 });
    opened.push(db);
    try {
      expect((await db.query<{ one: number }>('SELECT 1 AS one'))[0]!.one).toBe(1);
      // Statements starting with WITH count as writes: not retried, so their errors reach the caller.
      let second: Promise<unknown> | undefined;
      const first = db.query('WITH s AS (SELECT pg_sleep(2)) SELECT 1 FROM s').catch((err: { code?: string }) => {
        second = db.query('WITH s AS (SELECT 1) SELECT 2 FROM s').then(
          () => 'answered',
          (e: { code?: string }) => e.code,
        );
        return err.code;
      });
      await new Promise((r) => setTimeout(r, 200));
      for (const s of p.sockets) s.resetAndDestroy();
      expect(await first).toBe('ECONNRESET');
      // postgres.js 3.4.9 never settled it: the connection's close after a socket error rejected
      // nothing (patches/postgres+3.4.9.patch); this test then ran out of time.
      expect(await second).toBe('CONNECTION_CLOSED');
      expect((await db.query<{ one: number }>('SELECT 1 AS one'))[0]!.one).toBe(1);
    } finally {
      await p.close();
    }
  }, 15_000);

  it('a connection lost during its first statement (the type query) ends nothing but that statement', async () => {
    let cut = true;
    const p = await startProxy({ cutWhen: (chunk) => cut && chunk.includes('pg_catalog.pg_type') });
    const db = await openDatabase({ url: p.url, maxConnections: 1 });
    opened.push(db);
    const unhandled: unknown[] = [];
    const onUnhandled = (err: unknown) => unhandled.push(err);
    process.on('unhandledRejection', onUnhandled);
    try {
      await expect(db.query('SELECT 1')).rejects.toMatchObject({ code: 'ECONNRESET' });
      await new Promise((r) => setTimeout(r, 100));
      // postgres.js 3.4.9 left the type query's rejection unhandled, which ends a Node process.
      expect(unhandled).toEqual([]);
      cut = false;
      expect((await db.query<{ one: number }>('SELECT 1 AS one'))[0]!.one).toBe(1);
    } finally {
      process.off('unhandledRejection', onUnhandled);
      await p.close();
    }
  }, 15_000);

  it('reads fail at once while the server refuses connections, and succeed as soon as it accepts them again', async () => {
    const p = await startProxy();
    const db = await openDatabase({ url: p.url, maxConnections: 2 });
    opened.push(db);
    try {
      expect((await db.query<{ one: number }>('SELECT 1 AS one'))[0]!.one).toBe(1);

      // Down: every connection cut, nothing listens (a restarting server).
      await p.close();
      const codes: string[] = [];
      for (let i = 0; i < 12; i++) {
        const err = (await db.query('SELECT 1').then(
          () => null,
          (e: { code?: string }) => e,
        )) as { code?: string } | null;
        codes.push(err?.code ?? 'ok');
      }
      // Each read fails on its own connection attempt; with postgres.js's default backoff the
      // later ones waited 7 s, then 20 s, for their attempt (and this test ran out of time).
      expect(codes.filter((c) => c === 'ECONNREFUSED').length).toBeGreaterThanOrEqual(10);

      // Back: the first read succeeds.
      await p.listen();
      expect((await db.query<{ one: number }>('SELECT 1 AS one'))[0]!.one).toBe(1);
    } finally {
      await p.close();
    }
  }, 20_000);
});
