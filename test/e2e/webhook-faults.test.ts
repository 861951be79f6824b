/**
 * No event lost and none delivered twice (after de-duplication on X-Service-Delivery) when the
 * process running the queue is SIGKILLed during a burst of 1,000 events and restarted: on the
 * embedded default (one process, PGlite, the database queue) and on PostgreSQL + Redis (BullMQ)
 * with separate api and worker processes.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/platform/paths.js';
import { TEST_DATABASE_URL, TEST_REDIS_URL } from '../helpers/backends.js';
import { makePki, startReceiver, type Receiver } from '../helpers/tls.js';

const EVENTS = 1000;

interface Proc {
  child: ChildProcess;
  out: () => string;
}

function start(env: Record<string, string>): Proc {
  const child = spawn(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  return { child, out: () => out };
}

async function waitReady(base: string, p: Proc): Promise<void> {
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${base}/readyz`)).ok) return;
    } catch {
      /* starting */
    }
    if (p.child.exitCode !== null) throw new Error(`exited:\n${p.out()}`);
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`not ready:\n${p.out()}`);
}

const kill9 = async (p: Proc) => {
  p.child.kill('SIGKILL');
  if (p.child.exitCode === null) await new Promise((r) => p.child.once('exit', r));
};

async function until(what: string, cond: () => boolean | Promise<boolean>, ms: number): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** PATCHes the field until `EVENTS` PATCHes have succeeded; `midway` runs once after `at` successes. */
async function burst(
  base: () => string,
  key: string,
  fieldId: string,
  at: number,
  midway: () => Promise<void>,
): Promise<number> {
  let ok = 0;
  let i = 0;
  let fired = false;
  while (ok < EVENTS) {
    const batch = Array.from({ length: 10 }, () =>
      fetch(`${base()}/v1/fields/${fieldId}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
        body: JSON.stringify({ name: `n${i++}` }),
      })
        .then((r) => r.status === 200)
        .catch(() => false),
    );
    ok += (await Promise.all(batch)).filter(Boolean).length;
    if (!fired && ok >= at) {
      fired = true;
      await midway();
    }
  }
  return ok;
}

describe('webhook deliveries survive a killed worker', () => {
  let rx: Receiver;
  let scratch: string;
  let caFile: string;
  beforeAll(async () => {
    const pki = makePki();
    scratch = mkdtempSync(path.join(os.tmpdir(), 'faults-'));
    caFile = path.join(scratch, 'ca.pem');
    writeFileSync(caFile, pki.ca);
    rx = await startReceiver(pki);
  });
  afterAll(async () => {
    await rx.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  const common = () => ({
    NODE_EXTRA_CA_CERTS: caFile,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    WEBHOOK_RETRY_DELAYS: '200ms,500ms,1s,2s,3s',
    // The receiver answers at once; the default 5 s timeout keeps a starved machine (load 10–20)
    // from timing out five attempts in a row and disabling the webhook mid-burst, which is not
    // what this test is about (test/e2e/webhook-disabling.test.ts is).
    WEBHOOK_TIMEOUT_MS: '5000',
    WEBHOOK_SWEEP_GRACE_MS: '3000',
    QUEUE_LEASE_MS: '3000',
    LOG_LEVEL: 'warn',
    DEMO: 'false',
    COMPUTE_THREADS: '1',
  });

  async function check(base: string, key: string, webhookId: string, sent: number): Promise<void> {
    const auth = { authorization: `Bearer ${key}` };
    const delivered = () =>
      new Set(rx.received.filter((r) => r.body?.event === 'field.updated').map((r) => r.headers['x-service-delivery']))
        .size;
    await until(`${sent} distinct deliveries (have ${delivered()})`, () => delivered() >= sent, 120_000);
    const log = (await (
      await fetch(`${base}/v1/webhooks/${webhookId}/deliveries?per_page=1`, { headers: auth })
    ).json()) as { total: number };
    expect(log.total).toBe(sent); // one delivery per committed event, no more
    expect(delivered()).toBe(sent);
    const failed = (await (
      await fetch(`${base}/v1/webhooks/${webhookId}/deliveries?status=failed&per_page=1`, { headers: auth })
    ).json()) as { total: number };
    expect(failed.total).toBe(0);
  }

  it('embedded default: the single process killed mid-burst and restarted', async () => {
    rx.received.length = 0;
    rx.respond = () => ({ status: 200 });
    const dataDir = path.join(scratch, 'embedded');
    const port = 22_000 + Math.floor(Math.random() * 5000);
    const base = `http://127.0.0.1:${port}`;
    const env = { ...common(), DATA_DIR: dataDir, PORT: String(port), DATABASE_URL: '', REDIS_URL: '' };
    let p = start(env);
    await waitReady(base, p);
    const key = /\b(fak_[A-Za-z0-9_-]{43})\b/.exec(p.out())![1]!;
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const wh = (await (
      await fetch(`${base}/v1/webhooks`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ url: rx.url, events: ['field.updated'] }),
      })
    ).json()) as { id: string };
    const field = (await (
      await fetch(`${base}/v1/fields`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({
          name: 'f',
          boundary: {
            type: 'Polygon',
            coordinates: [
              [
                [5, 51],
                [5.01, 51],
                [5.01, 51.01],
                [5, 51.01],
                [5, 51],
              ],
            ],
          },
        }),
      })
    ).json()) as { id: string };
    const sent = await burst(
      () => base,
      key,
      field.id,
      300,
      async () => {
        await kill9(p);
        p = start(env);
        await waitReady(base, p);
      },
    );
    try {
      await check(base, key, wh.id, sent);
    } finally {
      await kill9(p);
    }
  }, 300_000);

  it.runIf(TEST_DATABASE_URL && TEST_REDIS_URL)(
    'PostgreSQL + Redis: the worker process killed mid-burst and restarted',
    async () => {
      rx.received.length = 0;
      rx.respond = () => ({ status: 200 });
      const dbName = `fa_faults_${Date.now()}`;
      const admin = postgres(TEST_DATABASE_URL!, { max: 1, onnotice: () => {} });
      await admin.unsafe(`CREATE DATABASE ${dbName}`);
      const url = new URL(TEST_DATABASE_URL!);
      url.pathname = `/${dbName}`;
      const port = 27_000 + Math.floor(Math.random() * 5000);
      const base = `http://127.0.0.1:${port}`;
      const env = {
        ...common(),
        DATABASE_URL: url.toString(),
        REDIS_URL: TEST_REDIS_URL!,
        DEV_BOOTSTRAP: 'true',
        SIGNING_KEY: 'fault-drill-signing-key-0123456789abcdef',
        QUEUE_PREFIX: dbName,
      };
      const api = start({ ...env, ROLE: 'api', PORT: String(port) });
      let worker: Proc | null = null;
      try {
        await waitReady(base, api);
        const key = /\b(fak_[A-Za-z0-9_-]{43})\b/.exec(api.out())![1]!;
        worker = start({ ...env, ROLE: 'worker', PORT: '0' });
        const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
        const wh = (await (
          await fetch(`${base}/v1/webhooks`, {
            method: 'POST',
            headers: auth,
            body: JSON.stringify({ url: rx.url, events: ['field.updated'] }),
          })
        ).json()) as { id: string };
        const field = (await (
          await fetch(`${base}/v1/fields`, {
            method: 'POST',
            headers: auth,
            body: JSON.stringify({
              name: 'f',
              boundary: {
                type: 'Polygon',
                coordinates: [
                  [
                    [5, 51],
                    [5.01, 51],
                    [5.01, 51.01],
                    [5, 51.01],
                    [5, 51],
                  ],
                ],
              },
            }),
          })
        ).json()) as { id: string };
        const sent = await burst(
          () => base,
          key,
          field.id,
          300,
          async () => {
            await until('deliveries under way', () => rx.received.length > 50, 30_000);
            await kill9(worker!);
            worker = start({ ...env, ROLE: 'worker', PORT: '0' });
          },
        );
        expect(sent).toBe(EVENTS); // the api process never went down
        await check(base, key, wh.id, sent);
      } finally {
        await kill9(api);
        if (worker) await kill9(worker);
        await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
        await admin.end();
        const { Redis } = await import('ioredis');
        const redis = new Redis(TEST_REDIS_URL!);
        const keys = await redis.keys(`fa:${dbName}:*`);
        if (keys.length) await redis.del(...keys);
        await redis.quit();
      }
    },
    300_000,
  );
});
