/**
 * The outbox dispatcher alone (issue 18's subscriptions poll writes 1,000 `imagery.available` per
 * Item, most often for an account without webhooks). In this process, on the embedded database
 * (or PostgreSQL with BENCH_DATABASE_URL) and the database queue (no consumer: deliveries are
 * created and queued, not sent). BENCH_DISPATCH_ROUNDS (10) rounds of 1,000 events, each written in
 * one transaction by `emitMany` as a registration writes them, are dispatched with
 * `dispatchBatch` (batches of 500, as the worker's dispatcher takes them) for three accounts:
 *   quiet   no webhook;
 *   other   two webhooks subscribed to other event types (`report.ready`, `field.updated`);
 *   lapsed  one webhook subscribed to `*`, active when the events are written and disabled before
 *           they are dispatched (the dispatcher claims them and creates nothing);
 *   hooked  one webhook subscribed to `*` (every event becomes a delivery and a queue job slot).
 * Printed per account, per 1,000 events written: CPU ms of this process (the embedded database
 * runs on this thread, so its work is included; with PostgreSQL the server's share is not) and
 * wall ms and statements of the dispatch (until a batch finds nothing), the events the dispatcher
 * claimed, the deliveries it created, and the ratio of the dispatch's CPU to the emits' CPU of the same events
 * (the baseline measured in the same run: how much the dispatch adds to writing the events).
 */
import os from 'node:os';
import { findOrCreateAccount } from '../src/accounts/api-keys.js';
import { emitMany } from '../src/events/outbox.js';
import { migrate, openDatabase, type Database, type Sql } from '../src/platform/database.js';
import { newId } from '../src/platform/ids.js';
import { createJobQueues } from '../src/platform/queue/job-queues.js';
import { dispatchBatch } from '../src/webhooks/dispatcher.js';

const ROUNDS = Number(process.env.BENCH_DISPATCH_ROUNDS ?? 10);
const PER_ROUND = 1000;

let statements = 0;
function counted(db: Database): Database {
  const count = (sql: Sql): Sql => ({
    ...sql,
    query: (text, params, opts) => {
      statements++;
      return sql.query(text, params, opts);
    },
  });
  const out = Object.create(db) as Database;
  out.query = count(db).query;
  out.transaction = (fn) => db.transaction((tx) => fn(count(tx)));
  return out;
}

const cpuMs = (c: NodeJS.CpuUsage) => (c.user + c.system) / 1000;

export default async function dispatchBench(): Promise<void> {
  const url = process.env.BENCH_DATABASE_URL;
  const raw = await openDatabase(url ? { url, schema: `bench_dispatch_${process.pid}` } : {});
  await migrate(raw);
  const db = counted(raw);
  const queues = await createJobQueues({ db: raw, prefix: `bench-dispatch-${process.pid}` });
  try {
    const accounts: Record<'quiet' | 'other' | 'lapsed' | 'hooked', string> = {
      quiet: '',
      other: '',
      lapsed: '',
      hooked: '',
    };
    for (const k of Object.keys(accounts) as Array<keyof typeof accounts>)
      accounts[k] = (await findOrCreateAccount(raw, `bench-dispatch-${k}-${process.pid}`)).id;
    const hook = (account: string, events: string[]) =>
      raw.query(
        `INSERT INTO webhooks (id, account_id, url, events, secret_sealed, status) VALUES ($1, $2, 'https://127.0.0.1:9/', $3, 'sealed', 'active')`,
        [newId('wh'), account, events],
      );
    await hook(accounts.other, ['report.ready']);
    await hook(accounts.other, ['field.updated']);
    await hook(accounts.lapsed, ['*']);
    await hook(accounts.hooked, ['*']);
    // lapsed: its webhook is active when the events are written and disabled before the dispatch.
    const lapse = (status: 'active' | 'disabled') =>
      raw.query(`UPDATE webhooks SET status = $2 WHERE account_id = $1`, [accounts.lapsed, status]);
    console.log(
      `${url ? 'PostgreSQL' : 'embedded database (PGlite)'}, ${ROUNDS} rounds of ${PER_ROUND} imagery.available per account, batches of 500; load average ${os.loadavg()[0]!.toFixed(1)}`,
    );
    console.log(
      'account   emit CPU ms/1k   dispatch CPU ms/1k   wall ms/1k   statements/1k   claimed   deliveries   dispatch/emit',
    );
    for (const [name, account] of Object.entries(accounts)) {
      let emitCpu = 0;
      let cpu = 0;
      let wall = 0;
      let stmts = 0;
      let deliveries = 0;
      let events = 0;
      // A first round unmeasured (JIT, plans, caches).
      for (let r = -1; r < ROUNDS; r++) {
        const measured = r >= 0;
        const imageryId = newId('img');
        const data = Array.from({ length: PER_ROUND }, (_, k) => ({
          field_id: `fld_${String(k).padStart(20, '0')}`,
          imagery_id: imageryId,
          source: 'sentinel-2-l2a',
          capture_date: '2025-06-01',
          cloud_cover: 3.25,
          subscription_id: 'isub_00000000000000000000',
          backfill: false,
        }));
        if (name === 'lapsed') await lapse('active');
        const e0 = process.cpuUsage();
        await raw.transaction((tx) => emitMany(tx, account, 'imagery.available', data));
        const emitted = cpuMs(process.cpuUsage(e0));
        if (name === 'lapsed') await lapse('disabled');
        const s0 = statements;
        const c0 = process.cpuUsage();
        const t0 = performance.now();
        let claimed = 0;
        let fanned = 0;
        for (;;) {
          const got = await dispatchBatch(db, queues, 500, 50);
          claimed += got.events;
          fanned += got.deliveries;
          if (!got.events) break;
        }
        if (!measured) continue;
        wall += performance.now() - t0;
        cpu += cpuMs(process.cpuUsage(c0));
        emitCpu += emitted;
        stmts += statements - s0;
        events += claimed;
        deliveries += fanned;
      }
      const k = (ROUNDS * PER_ROUND) / 1000;
      console.log(
        `${name.padEnd(8)}  ${(emitCpu / k).toFixed(0).padStart(14)}   ${(cpu / k).toFixed(0).padStart(18)}   ${(wall / k).toFixed(0).padStart(10)}   ${(stmts / k).toFixed(1).padStart(13)}   ${String(events).padStart(7)}   ${String(deliveries).padStart(10)}   ${(cpu / emitCpu).toFixed(2).padStart(13)}`,
      );
    }
    console.log(`load average at the end ${os.loadavg()[0]!.toFixed(1)}`);
  } finally {
    await queues.close(1000);
    if (url) await raw.query(`DROP SCHEMA ${raw.schema} CASCADE`).catch(() => {});
    await raw.close();
  }
}
