/**
 * Webhook fan-out: 10,000 events to 10 subscribed HTTPS receivers on loopback (100,000
 * deliveries) through a worker process on PostgreSQL + Redis (BENCH_DATABASE_URL / BENCH_REDIS_URL,
 * default the local services). Prints deliveries per second and p50/p99 from emit (the event's
 * outbox time) to receipt. Events are written straight into the outbox, in batches, as the
 * service's own emit does.
 */
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { createApiKey, findOrCreateAccount } from '../src/accounts/api-keys.js';
import { migrate, openDatabase } from '../src/platform/database.js';
import { newId } from '../src/platform/ids.js';
import { packageRoot } from '../src/platform/paths.js';
import { makePki, startReceiver } from '../test/helpers/tls.js';

const EVENTS = Number(process.env.BENCH_EVENTS ?? 10_000);
const RECEIVERS = 10;

export default async function webhookBench(): Promise<void> {
  const pgUrl = process.env.BENCH_DATABASE_URL ?? 'postgres://postgres@127.0.0.1:5432/postgres';
  const redisUrl = process.env.BENCH_REDIS_URL ?? 'redis://127.0.0.1:6379';
  const dbName = `fa_bench_${Date.now()}`;
  const admin = postgres(pgUrl, { max: 1, onnotice: () => {} });
  try {
    await admin.unsafe(`CREATE DATABASE ${dbName}`);
  } catch (err) {
    console.log(`webhooks bench skipped: PostgreSQL at ${pgUrl} is not available (${(err as Error).message})`);
    await admin.end();
    return;
  }
  const url = new URL(pgUrl);
  url.pathname = `/${dbName}`;
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'whbench-'));
  const pki = makePki();
  const caFile = path.join(scratch, 'ca.pem');
  writeFileSync(caFile, pki.ca);
  const receivers = await Promise.all(Array.from({ length: RECEIVERS }, () => startReceiver(pki)));
  const db = await openDatabase({ url: url.toString(), maxConnections: 4 });
  await migrate(db);
  const account = await findOrCreateAccount(db, 'bench');
  const { key } = await createApiKey(db, account.id);
  const port = 30_000 + Math.floor(Math.random() * 5000);
  const env = {
    ...process.env,
    DATABASE_URL: url.toString(),
    REDIS_URL: redisUrl,
    NODE_EXTRA_CA_CERTS: caFile,
    WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    SIGNING_KEY: 'webhook-bench-signing-key-0123456789abcdef',
    LOG_LEVEL: 'warn',
    COMPUTE_THREADS: '1',
    QUEUE_PREFIX: dbName,
  };
  const api = spawn(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], { env: { ...env, ROLE: 'api', PORT: String(port) }, stdio: 'inherit' });
  const worker = spawn(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], { env: { ...env, ROLE: 'worker', PORT: '0' }, stdio: 'inherit' });
  try {
    const base = `http://127.0.0.1:${port}`;
    for (let i = 0; i < 300; i++) {
      try {
        if ((await fetch(`${base}/readyz`)).ok) break;
      } catch {
        /* starting */
      }
      await new Promise((r) => setTimeout(r, 100));
    }
    for (const rx of receivers) {
      const r = await fetch(`${base}/v1/webhooks`, { method: 'POST', headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' }, body: JSON.stringify({ url: rx.url, events: ['*'] }) });
      if (r.status !== 201) throw new Error(`webhook registration failed: ${r.status} ${await r.text()}`);
    }
    for (const rx of receivers) rx.received.length = 0;
    const t0 = Date.now();
    const BATCH = 500;
    for (let i = 0; i < EVENTS; i += BATCH) {
      const n = Math.min(BATCH, EVENTS - i);
      const ids = Array.from({ length: n }, () => newId('evt'));
      const data = Array.from({ length: n }, (_, k) => JSON.stringify({ field_id: `fld_bench${i + k}`, crop_type: 'wheat', harvest_date: '2025-08-01' }));
      await db.query(
        `INSERT INTO outbox (id, account_id, type, data) SELECT u.id, $1, 'season.ended', u.data::jsonb FROM unnest($2::text[], $3::text[]) AS u(id, data)`,
        [account.id, ids, data],
      );
    }
    const total = EVENTS * RECEIVERS;
    const count = () => receivers.reduce((a, r) => a + r.received.length, 0);
    const deadline = Date.now() + 20 * 60_000;
    while (count() < total && Date.now() < deadline) await new Promise((r) => setTimeout(r, 200));
    const elapsed = (Math.max(...receivers.flatMap((r) => r.received.map((x) => x.at))) - t0) / 1000;
    const lat = receivers.flatMap((r) => r.received.map((x) => x.at - Date.parse(x.body.timestamp))).sort((a, b) => a - b);
    const distinct = new Set(receivers.flatMap((r) => r.received.map((x) => x.headers['x-service-delivery']))).size;
    console.table([
      {
        events: EVENTS,
        receivers: RECEIVERS,
        deliveries: count(),
        distinct: distinct,
        'deliveries/s': (count() / elapsed).toFixed(0),
        'p50 emit→receipt ms': lat[Math.floor(lat.length * 0.5)],
        'p99 emit→receipt ms': lat[Math.floor(lat.length * 0.99)],
      },
    ]);
  } finally {
    api.kill('SIGTERM');
    worker.kill('SIGTERM');
    await Promise.all([new Promise((r) => api.once('exit', r)), new Promise((r) => worker.once('exit', r))]);
    for (const rx of receivers) await rx.close();
    await db.close();
    await admin.unsafe(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
    await admin.end();
    rmSync(scratch, { recursive: true, force: true });
  }
}
