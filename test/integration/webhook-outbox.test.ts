/**
 * Who receives an outbox event, on every database backend with the real database queue and a real
 * HTTPS receiver: an event that no active webhook of its account subscribes to (by type or `*`)
 * when it is written is written already dispatched (the dispatcher never takes it, nothing is
 * notified), and a webhook created, subscribed or re-enabled afterwards does not receive it; one
 * whose webhook lapsed between the write and the dispatch is claimed, marked and fanned out to
 * nobody; a subscribed webhook receives each event exactly once, with two dispatchers at once.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateAccount } from '../../src/accounts/api-keys.js';
import { emit, emitMany, onOutboxCommit } from '../../src/events/outbox.js';
import type { Database } from '../../src/platform/database.js';
import { newId } from '../../src/platform/ids.js';
import { createJobQueues, type JobQueues } from '../../src/platform/queue/job-queues.js';
import { processDeliveryJob } from '../../src/webhooks/delivery.js';
import type { DirectSink } from '../../src/webhooks/direct-sink.js';
import { dispatchBatch, sweepOverdue } from '../../src/webhooks/dispatcher.js';
import type { WebhookDeps } from '../../src/webhooks/service.js';
import { SecretBox } from '../../src/webhooks/signing.js';
import { dbBackends, disposeDatabase, freshDatabase, uniqueName } from '../helpers/backends.js';
import { makePki, startReceiver, type Receiver } from '../helpers/tls.js';

const imagery = (k: number) => ({
  field_id: `fld_${k}`,
  imagery_id: 'img_1',
  source: 'sentinel-2-l2a',
  capture_date: '2025-06-01',
  cloud_cover: 1.5,
});

describe.each(dbBackends)('outbox events and their receivers on $name', (backend) => {
  let db: Database;
  let queues: JobQueues;
  let receiver: Receiver;
  let deps: WebhookDeps;
  const box = new SecretBox('outbox-test-key-0123456789abcdef');

  beforeAll(async () => {
    const pki = makePki();
    receiver = await startReceiver(pki);
    db = await freshDatabase(backend);
    queues = await createJobQueues({ db, prefix: uniqueName('q') });
    deps = {
      db,
      queues,
      box,
      retryDelaysMs: [60_000],
      timeoutMs: 3000,
      allowPrivateNetworks: true,
      maxPerAccount: 50,
      ca: [pki.ca],
    };
  });
  afterAll(async () => {
    await queues?.close(1000);
    await receiver?.close();
    if (db) await disposeDatabase(db);
  });

  const account = async (name: string) => (await findOrCreateAccount(db, uniqueName(name))).id;
  const addHook = async (accountId: string, events: string[]) => {
    const id = newId('wh');
    await db.query(
      `INSERT INTO webhooks (id, account_id, url, events, secret_sealed, status) VALUES ($1, $2, $3, $4, $5, 'active')`,
      [id, accountId, receiver.url, events, box.seal('s'.repeat(24))],
    );
    return id;
  };
  const pendingOf = async (accountId: string) =>
    (
      await db.query<{ n: number }>(
        'SELECT count(*)::int AS n FROM outbox WHERE account_id = $1 AND dispatched_at IS NULL',
        [accountId],
      )
    )[0]!.n;
  /** Dispatches until the outbox is empty; returns the sums. */
  const drain = async () => {
    const sum = { events: 0, deliveries: 0 };
    for (;;) {
      const r = await dispatchBatch(db, queues, 500, 50);
      if (!r.events) return sum;
      sum.events += r.events;
      sum.deliveries += r.deliveries;
    }
  };
  /** Runs every queued job of the deliveries of these events (as the delivery worker would). */
  const deliver = async (eventIds: string[]) => {
    const jobs = await db.query<{ ids: string[] }>(
      `SELECT array_agg(id ORDER BY id) AS ids FROM deliveries WHERE event_id = ANY($1) GROUP BY job_id`,
      [eventIds],
    );
    for (const j of jobs) await processDeliveryJob(deps, { delivery_ids: j.ids });
  };
  const fieldOf = (r: Receiver['received'][number]) => (r.body as { data: { field_id: string } }).data.field_id;

  it('an account without webhooks: its events are written dispatched, nobody is woken, and a webhook created afterwards receives none', async () => {
    const quiet = await account('quiet');
    let woken = 0;
    const off = onOutboxCommit(() => woken++);
    try {
      const one = await db.transaction((tx) => emit(tx, quiet, 'imagery.available', imagery(0)));
      const n = await db.transaction((tx) => emitMany(tx, quiet, 'imagery.available', [1, 2, 3].map(imagery)));
      expect(n).toBe(3);
      expect(one.id).toMatch(/^evt_/);
      await new Promise((r) => setTimeout(r, 50));
      expect(woken).toBe(0);
    } finally {
      off();
    }
    const rows = await db.query<{ dispatched_at: Date | null; data: { field_id: string } }>(
      'SELECT dispatched_at, data FROM outbox WHERE account_id = $1 ORDER BY seq',
      [quiet],
    );
    // Kept in the outbox in the order written, each marked dispatched at its write.
    expect(rows.map((r) => r.data.field_id)).toEqual(['fld_0', 'fld_1', 'fld_2', 'fld_3']);
    for (const r of rows) expect(r.dispatched_at).toBeInstanceOf(Date);
    expect(await pendingOf(quiet)).toBe(0);

    await addHook(quiet, ['*']);
    expect(await drain()).toEqual({ events: 0, deliveries: 0 });
    const [{ n: deliveries }] = (await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM deliveries WHERE account_id = $1',
      [quiet],
    )) as [{ n: number }];
    expect(deliveries).toBe(0);
  });

  it('events of types no webhook of the account subscribes to are written dispatched; subscribed ones wait for the dispatcher', async () => {
    const acc = await account('typed');
    await addHook(acc, ['report.ready']);
    let woken = 0;
    const off = onOutboxCommit(() => woken++);
    try {
      await db.transaction((tx) => emitMany(tx, acc, 'imagery.available', [10, 11].map(imagery)));
      await new Promise((r) => setTimeout(r, 50));
      expect(woken).toBe(0);
      expect(await pendingOf(acc)).toBe(0);
      await db.transaction((tx) =>
        emit(tx, acc, 'report.ready', {
          field_id: 'fld_r',
          report_id: 'rpt_1',
          type: 'scouting',
          format: 'pdf',
          download_url: 'https://example.test/r',
          expires_at: '2026-01-01T00:00:00Z',
        }),
      );
      await new Promise((r) => setTimeout(r, 50));
      expect(woken).toBe(1);
      expect(await pendingOf(acc)).toBe(1);
    } finally {
      off();
    }
    expect(await drain()).toEqual({ events: 1, deliveries: 1 });
  });

  it('a webhook disabled between the write and the dispatch: the events are claimed and marked, nothing is created, and re-enabling sends none', async () => {
    const acc = await account('lapsed');
    const hook = await addHook(acc, ['*']);
    await db.transaction((tx) => emitMany(tx, acc, 'imagery.available', [20, 21, 22].map(imagery)));
    expect(await pendingOf(acc)).toBe(3);
    await db.query(`UPDATE webhooks SET status = 'disabled' WHERE id = $1`, [hook]);
    expect(await drain()).toEqual({ events: 3, deliveries: 0 });
    expect(await pendingOf(acc)).toBe(0);
    await db.query(`UPDATE webhooks SET status = 'active' WHERE id = $1`, [hook]);
    expect(await drain()).toEqual({ events: 0, deliveries: 0 });
    const [{ n }] = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM deliveries WHERE webhook_id = $1', [
      hook,
    ])) as [{ n: number }];
    expect(n).toBe(0);
  });

  it('a subscribed webhook receives each event exactly once, with two dispatchers taking batches at once', async () => {
    const acc = await account('hooked');
    const hook = await addHook(acc, ['imagery.available']);
    const quiet = await account('quiet2'); // interleaved events nobody receives
    const ids: string[] = [];
    const fields: string[] = [];
    for (let b = 0; b < 4; b++) {
      await db.transaction(async (tx) => {
        for (let k = 0; k < 25; k++) {
          const e = await emit(tx, acc, 'imagery.available', imagery(100 + b * 25 + k));
          ids.push(e.id);
          fields.push(`fld_${100 + b * 25 + k}`);
        }
        await emitMany(tx, quiet, 'imagery.available', [1, 2, 3].map(imagery));
      });
    }
    // Two dispatchers at once, in batches of 7: on PostgreSQL they run side by side (SKIP LOCKED).
    const run = async () => {
      let events = 0;
      for (;;) {
        const r = await dispatchBatch(db, queues, 7, 10);
        if (!r.events) return events;
        events += r.events;
      }
    };
    const [a, b] = await Promise.all([run(), run()]);
    expect(a + b).toBe(100);
    const rows = await db.query<{ event_id: string; n: number }>(
      'SELECT event_id, count(*)::int AS n FROM deliveries WHERE webhook_id = $1 GROUP BY event_id',
      [hook],
    );
    expect(rows).toHaveLength(100);
    expect(new Set(rows.map((r) => r.event_id))).toEqual(new Set(ids));
    expect(rows.every((r) => r.n === 1)).toBe(true);

    await deliver(ids);
    await deliver(ids); // a job run twice sends nothing again
    const got = receiver.received.filter((r) => fields.includes(fieldOf(r)));
    expect(got).toHaveLength(100);
    expect(new Set(got.map(fieldOf))).toEqual(new Set(fields));
    expect(new Set(got.map((r) => r.headers['x-service-delivery'])).size).toBe(100);
    const first = got[0]!.body as { event: string; timestamp: string; data: Record<string, unknown> };
    expect(first.event).toBe('imagery.available');
    expect(Object.keys(first.data).sort()).toEqual(['capture_date', 'cloud_cover', 'field_id', 'imagery_id', 'source']);
  });

  it('60 events claimed in one batch for two webhooks; the process dies between the claim and the sending: once the claims lapse each event reaches each webhook exactly once', async () => {
    const acc = await account('crash');
    const hookA = await addHook(acc, ['field.updated']);
    const hookB = await addHook(acc, ['*']);
    const ids: string[] = [];
    await db.transaction(async (tx) => {
      for (let k = 0; k < 60; k++)
        ids.push((await emit(tx, acc, 'field.updated', { field_id: `fld_c${k}`, changed_fields: ['name'] })).id);
    });
    // A process that delivers: every delivery is handed to it, inserted claimed for 300 ms, and
    // it dies before sending any (the hand-over is dropped).
    const handed: string[] = [];
    const dying: DirectSink = {
      leaseMs: 300,
      room: () => 1000,
      totalRoom: () => 1000,
      whenRoom: () => {},
      deliver: (rows) => void handed.push(...rows.map((r) => r.id)),
      drain: async () => {},
    };
    const r = await dispatchBatch(db, queues, 500, 50, dying);
    expect(r).toMatchObject({ events: 60, deliveries: 120, jobs: 0, direct: 120 });
    expect(handed).toHaveLength(120);
    expect(await dispatchBatch(db, queues, 500, 50)).toMatchObject({ events: 0 }); // each event claimed once
    // While claimed, the sweeper leaves them alone; once lapsed, it queues every one.
    expect(await sweepOverdue(db, queues, 0)).toBe(0);
    await new Promise((res) => setTimeout(res, 400));
    expect(await sweepOverdue(db, queues, 0)).toBe(120);
    const before = receiver.received.length;
    await deliver(ids);
    await deliver(ids); // jobs run again send nothing more
    const got = receiver.received.slice(before).map((x) => String(x.headers['x-service-delivery']));
    expect(got).toHaveLength(120);
    expect(new Set(got)).toEqual(new Set(handed));
    const rows = await db.query<{ webhook_id: string; n: number; ok: number }>(
      `SELECT webhook_id, count(*)::int AS n, count(*) FILTER (WHERE status = 'succeeded')::int AS ok
         FROM deliveries WHERE event_id = ANY($1) GROUP BY webhook_id ORDER BY webhook_id`,
      [ids],
    );
    expect(rows).toEqual([hookA, hookB].sort().map((webhook_id) => ({ webhook_id, n: 60, ok: 60 })));
  });
});
