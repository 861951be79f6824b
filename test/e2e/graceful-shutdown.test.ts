/**
 * SIGTERM during load loses no accepted request and no job, on the embedded default and on
 * PostgreSQL + Redis: a real process (ROLE=all) under a loop of field creations and report requests
 * (one new connection per request), plus requests caught mid-body by the signal. Then:
 * - the process exits 0 within SHUTDOWN_GRACE_MS;
 * - every request that was sent before the signal completes: the mid-body ones get their 201;
 * - after a restart, every field whose creation got a 2xx exists, and no request that failed on the
 *   client (refused or reset) created one, i.e. none was done and then dropped;
 * - every report that was accepted (202) becomes ready: those running at the signal finished, the
 *   queued ones ran after the restart.
 */
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL, TEST_REDIS_URL, uniqueName } from '../helpers/backends.js';
import {
  demoField,
  devKey,
  dropRedisPrefix,
  freePort,
  privateDatabase,
  startService,
  stopService,
  waitReady,
  waitUntil,
  type Service,
} from '../helpers/processes.js';

interface Outcome {
  status?: number;
  body?: any;
  error?: string;
}

/** One request on a connection of its own; `pauseMs` holds the second half of the body back. */
function request(
  port: number,
  method: string,
  url: string,
  key: string,
  body?: unknown,
  opts: { pauseMs?: number; onHalf?: () => void; id?: string } = {},
): Promise<Outcome> {
  return new Promise((resolve) => {
    const payload = body === undefined ? undefined : Buffer.from(JSON.stringify(body));
    const req = http.request(
      {
        host: '127.0.0.1',
        port,
        method,
        path: url,
        agent: false,
        headers: {
          authorization: `Bearer ${key}`,
          ...(opts.id ? { 'x-request-id': opts.id } : {}),
          ...(payload ? { 'content-type': 'application/json', 'content-length': payload.length } : {}),
        },
      },
      (res) => {
        const chunks: Buffer[] = [];
        res.on('data', (c: Buffer) => chunks.push(c));
        res.on('end', () => {
          let parsed: unknown = null;
          try {
            parsed = JSON.parse(Buffer.concat(chunks).toString('utf8'));
          } catch {
            /* not JSON */
          }
          resolve({ status: res.statusCode, body: parsed });
        });
        res.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
      },
    );
    req.on('error', (e: NodeJS.ErrnoException) => resolve({ error: e.code ?? e.message }));
    if (!payload) return void req.end();
    if (!opts.pauseMs) return void req.end(payload);
    const half = payload.length >> 1;
    req.write(payload.subarray(0, half), () => {
      opts.onHalf?.();
      setTimeout(() => req.end(payload.subarray(half)), opts.pauseMs);
    });
  });
}

const boundary = (i: number) => {
  const lon = 4.6 + (i % 100) * 0.01;
  const lat = 50.5 + Math.floor(i / 100) * 0.01;
  return {
    type: 'Polygon',
    coordinates: [
      [
        [lon, lat],
        [lon + 0.004, lat],
        [lon + 0.004, lat + 0.004],
        [lon, lat + 0.004],
        [lon, lat],
      ],
    ],
  };
};

interface Backend {
  name: string;
  setup(): Promise<{ env: Record<string, string>; cleanup(): Promise<void> }>;
}

const backends: Backend[] = [
  { name: 'the embedded default (PGlite, database queue)', setup: async () => ({ env: {}, cleanup: async () => {} }) },
  ...(TEST_DATABASE_URL && TEST_REDIS_URL
    ? [
        {
          name: 'PostgreSQL and BullMQ on Redis',
          setup: async () => {
            const db = await privateDatabase(TEST_DATABASE_URL!);
            const prefix = uniqueName('sig');
            return {
              env: {
                DATABASE_URL: db.url,
                REDIS_URL: TEST_REDIS_URL!,
                QUEUE_PREFIX: prefix,
                DEV_BOOTSTRAP: 'true',
                SIGNING_KEY: 'shutdown-test-signing-key-0123456789ab',
              },
              cleanup: async () => {
                await db.drop();
                await dropRedisPrefix(TEST_REDIS_URL!, prefix);
              },
            };
          },
        },
      ]
    : []),
];

describe.each(backends)('SIGTERM during load on $name', (backend) => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fa-sigterm-'));
  let svc: Service | undefined;
  let cleanup = async () => {};
  afterAll(async () => {
    if (svc) await stopService(svc, 'SIGKILL');
    await cleanup();
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('finishes in-flight requests and running jobs, exits 0, and loses nothing it accepted', async () => {
    const setup = await backend.setup();
    cleanup = setup.cleanup;
    const port = await freePort();
    const env = {
      ...setup.env,
      LOG_LEVEL: 'debug',
      DATA_DIR: dataDir,
      PORT: String(port),
      SHUTDOWN_GRACE_MS: '15000',
      REPORT_CONCURRENCY: '2',
      RATE_LIMIT_PER_MINUTE: '0',
    };
    svc = startService(env);
    const base = `http://127.0.0.1:${port}`;
    await waitReady(svc, `${base}/readyz`);
    const key = devKey(svc)!;
    const fieldId = (await demoField(svc))!;
    expect(key && fieldId, svc.output()).toBeTruthy();

    const fields: Array<{ name: string; out: Outcome }> = [];
    const reports: Outcome[] = [];
    let n = 0;
    let stop = false;
    let refusedSince = 0;
    const loop = async () => {
      while (!stop) {
        const i = n++;
        if (i % 6 === 5) {
          reports.push(
            await request(port, 'POST', `/v1/fields/${fieldId}/reports`, key, { type: 'scouting', format: 'json' }),
          );
        } else {
          const name = `load ${i}`;
          const out = await request(port, 'POST', '/v1/fields', key, { name, boundary: boundary(i) });
          fields.push({ name, out });
          if (out.error === 'ECONNREFUSED') {
            refusedSince ||= Date.now();
            if (Date.now() - refusedSince > 1000) return; // the process has stopped listening for good
            await new Promise((r) => setTimeout(r, 20));
          }
        }
      }
    };
    const loops = Array.from({ length: 6 }, loop);
    await waitUntil(
      'load under way',
      () => fields.filter((f) => f.out.status === 201).length >= 30 && reports.length >= 4,
      60_000,
      20,
    );

    // Requests in flight at the signal: the service has read their headers (its debug log says so,
    // by the request id we gave) and waits for the rest of the body, sent 1.5 s later.
    const tag = uniqueName('slow');
    const slow = Array.from({ length: 3 }, (_, k) =>
      request(
        port,
        'POST',
        '/v1/fields',
        key,
        { name: `slow ${k}`, boundary: boundary(900 + k) },
        { pauseMs: 1500, id: `${tag}-${k}` },
      ),
    );
    await waitUntil(
      'the slow requests received',
      () =>
        [0, 1, 2].every((k) =>
          svc!.output().includes(`"reqId":"${tag}-${k}","method":"POST","path":"/v1/fields","msg":"request received"`),
        ),
      10_000,
      5,
    );
    const signalled = Date.now();
    svc.child.kill('SIGTERM');
    const code = await svc.exited;
    const tookMs = Date.now() - signalled;
    stop = true;
    await Promise.all(loops);
    expect(code, svc.output().slice(-3000)).toBe(0);
    expect(tookMs).toBeLessThan(15_000);
    const slowOut = await Promise.all(slow);
    for (const s of slowOut) expect(s.status, JSON.stringify(s)).toBe(201);

    // Only two kinds of failure are allowed: refused (not listening) or reset before a response.
    const failed = fields.filter((f) => f.out.error);
    expect(failed.filter((f) => !['ECONNREFUSED', 'ECONNRESET'].includes(f.out.error!))).toEqual([]);
    const statuses = new Set(fields.filter((f) => f.out.status).map((f) => f.out.status));
    for (const st of statuses) expect([201, 503]).toContain(st);
    const accepted = reports.filter((r) => r.status === 202);
    expect(accepted.length).toBeGreaterThanOrEqual(4);

    // Restart on the same storage and check.
    svc = startService(env);
    await waitReady(svc, `${base}/readyz`);
    const names = new Set<string>();
    for (let page = 1; ; page++) {
      const res = await request(port, 'GET', `/v1/fields?per_page=100&page=${page}`, key);
      for (const f of res.body.data as Array<{ name: string }>) names.add(f.name);
      if (page >= res.body.total_pages) break;
    }
    const created = fields.filter((f) => f.out.status === 201).map((f) => f.name);
    expect(created.filter((nm) => !names.has(nm))).toEqual([]);
    for (let k = 0; k < 3; k++) expect(names.has(`slow ${k}`)).toBe(true);
    // A request that failed on the client or was refused (503) was never done: nothing was done and
    // then dropped.
    expect(fields.filter((f) => f.out.status !== 201 && names.has(f.name)).map((f) => f.name)).toEqual([]);

    await waitUntil(
      'every accepted report ready',
      async () => {
        const states = await Promise.all(
          accepted.map(async (r) => (await request(port, 'GET', `/v1/reports/${r.body.id}`, key)).body.status),
        );
        return states.every((st) => st === 'ready');
      },
      120_000,
      500,
    );
    expect(await stopService(svc)).toBe(0);
    svc = undefined;
  }, 300_000);
});
