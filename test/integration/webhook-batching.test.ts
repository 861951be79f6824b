/**
 * The batched delivery path, on every database backend with the real database queue and a real
 * HTTPS receiver: the dispatcher fans events out into jobs of at most WEBHOOK_BATCH_SIZE
 * deliveries of one webhook (one bulk add, each delivery remembering its job); a batch job claims,
 * sends and records all of its deliveries (a second run finds nothing to send); failures schedule
 * individual retry jobs; the sweeper re-queues the deliveries of a lost batch job one by one and
 * leaves those of a live one alone.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateAccount } from '../../src/accounts/api-keys.js';
import { emit } from '../../src/events/outbox.js';
import type { Database } from '../../src/platform/database.js';
import { newId } from '../../src/platform/ids.js';
import { createJobQueues, type JobQueues } from '../../src/platform/queue/job-queues.js';
import { directSink, processDeliveryJob } from '../../src/webhooks/delivery.js';
import { recordAttempts } from '../../src/webhooks/delivery-store.js';
import { dispatchBatch, sweepOverdue } from '../../src/webhooks/dispatcher.js';
import { registry } from '../../src/platform/metrics.js';
import { WEBHOOK_QUEUE, type WebhookDeps } from '../../src/webhooks/service.js';
import { SecretBox } from '../../src/webhooks/signing.js';
import { dbBackends, disposeDatabase, freshDatabase, uniqueName } from '../helpers/backends.js';
import { makePki, startReceiver, type Receiver } from '../helpers/tls.js';

describe.each(dbBackends)('batched webhook deliveries on $name', (backend) => {
  let db: Database;
  let queues: JobQueues;
  let ok: Receiver;
  let failing: Receiver;
  let deps: WebhookDeps;
  let accountId: string;
  const box = new SecretBox('batching-test-key-0123456789abcdef');
  const hooks: Record<'all' | 'fails' | 'other', string> = { all: '', fails: '', other: '' };

  beforeAll(async () => {
    const pki = makePki();
    ok = await startReceiver(pki);
    failing = await startReceiver(pki);
    failing.respond = () => ({ status: 503 });
    db = await freshDatabase(backend);
    // No consumer: the test runs the jobs itself and looks at what is queued.
    queues = await createJobQueues({ db, prefix: uniqueName('q') });
    deps = {
      db,
      queues,
      box,
      retryDelaysMs: [60_000, 120_000],
      timeoutMs: 3000,
      allowPrivateNetworks: true,
      maxPerAccount: 50,
      ca: [pki.ca],
    };
    accountId = (await findOrCreateAccount(db, 'batching')).id;
    const add = async (url: string, events: string[]) => {
      const id = newId('wh');
      await db.query(
        `INSERT INTO webhooks (id, account_id, url, events, secret_sealed, status) VALUES ($1, $2, $3, $4, $5, 'active')`,
        [id, accountId, url, events, box.seal('s'.repeat(24))],
      );
      return id;
    };
    hooks.all = await add(ok.url, ['*']);
    hooks.fails = await add(failing.url, ['season.ended']);
    hooks.other = await add(ok.url, ['field.updated']); // not subscribed to season.ended
  });
  afterAll(async () => {
    await queues?.close(1000);
    await ok?.close();
    await failing?.close();
    if (db) await disposeDatabase(db);
  });

  const jobsOf = async () =>
    db.query<{ webhook_id: string; job_id: string; ids: string[] }>(
      `SELECT webhook_id, job_id, array_agg(id ORDER BY created_at, id) AS ids FROM deliveries GROUP BY webhook_id, job_id ORDER BY webhook_id, job_id`,
    );

  it('fans 7 events out into jobs of at most 3 deliveries of one webhook, each delivery knowing its job', async () => {
    await db.transaction(async (tx) => {
      for (let i = 0; i < 7; i++)
        await emit(tx, accountId, 'season.ended', {
          field_id: `fld_${i}`,
          crop_type: null,
          harvest_date: '2025-08-01',
        });
    });
    const r = await dispatchBatch(db, queues, 500, 3);
    expect(r).toEqual({ events: 7, deliveries: 14, jobs: 6, direct: 0 });
    const jobs = await jobsOf();
    expect(jobs.map((j) => j.ids.length).sort()).toEqual([1, 1, 3, 3, 3, 3]);
    expect(new Set(jobs.map((j) => j.webhook_id))).toEqual(new Set([hooks.all, hooks.fails]));
    for (const j of jobs) expect(await queues.pending(WEBHOOK_QUEUE, j.job_id)).toBe(true);
    expect((await queues.counts(WEBHOOK_QUEUE)).waiting).toBe(6);
    expect((await dispatchBatch(db, queues, 500, 3)).events).toBe(0); // each event once
  });

  it('a batch job sends and records all its deliveries in one go; running it again sends nothing', async () => {
    const job = (await jobsOf()).find((j) => j.webhook_id === hooks.all && j.ids.length === 3)!;
    const outcomes = await processDeliveryJob(deps, { delivery_ids: job.ids });
    expect(outcomes).toEqual(['succeeded', 'succeeded', 'succeeded']);
    expect(new Set(ok.received.map((x) => x.headers['x-service-delivery']))).toEqual(new Set(job.ids));
    const rows = await db.query<{ status: string; attempt_count: number; n: number; status_code: number }>(
      `SELECT d.status, d.attempt_count, count(a.*)::int AS n, max(a.status_code) AS status_code
         FROM deliveries d JOIN delivery_attempts a ON a.delivery_id = d.id WHERE d.id = ANY($1) GROUP BY d.id`,
      [job.ids],
    );
    expect(rows).toEqual(Array(3).fill({ status: 'succeeded', attempt_count: 1, n: 1, status_code: 200 }));
    const [wh] = await db.query<{ last_success_at: Date | null }>(
      'SELECT last_success_at FROM webhooks WHERE id = $1',
      [hooks.all],
    );
    expect(wh!.last_success_at).toBeInstanceOf(Date);
    expect(await processDeliveryJob(deps, { delivery_ids: job.ids })).toEqual(['skipped', 'skipped', 'skipped']);
    expect(ok.received).toHaveLength(3);
  });

  it('failures in a batch each get a retry job of their own, after the configured delay', async () => {
    const job = (await jobsOf()).find((j) => j.webhook_id === hooks.fails && j.ids.length === 3)!;
    const before = Date.now();
    expect(await processDeliveryJob(deps, { delivery_ids: job.ids })).toEqual([
      'retry_scheduled',
      'retry_scheduled',
      'retry_scheduled',
    ]);
    const rows = await db.query<{
      id: string;
      status: string;
      job_id: string;
      next_attempt_at: Date;
      last_error: string;
    }>('SELECT id, status, job_id, next_attempt_at, last_error FROM deliveries WHERE id = ANY($1)', [job.ids]);
    for (const d of rows) {
      expect(d).toMatchObject({ status: 'pending', job_id: `${d.id}.2`, last_error: 'HTTP 503' });
      expect(d.next_attempt_at.getTime()).toBeGreaterThanOrEqual(before + 59_000);
      expect(await queues.pending(WEBHOOK_QUEUE, d.job_id)).toBe(true);
    }
    const [wh] = await db.query<{ last_success_at: Date | null }>(
      'SELECT last_success_at FROM webhooks WHERE id = $1',
      [hooks.fails],
    );
    expect(wh!.last_success_at).toBeNull();
  });

  it('the sweeper re-queues the deliveries of a lost batch job one by one, and leaves a live job alone', async () => {
    const jobs = (await jobsOf()).filter((j) => j.webhook_id === hooks.all && j.job_id.endsWith('.batch'));
    const lost = jobs.find(
      (j) => j.ids.length === 3 && ok.received.every((x) => !j.ids.includes(x.headers['x-service-delivery'] as string)),
    )!;
    const live = jobs.find((j) => j.ids.length === 1)!;
    expect(await queues.remove(WEBHOOK_QUEUE, lost.job_id)).toBe(true);
    await db.query(`UPDATE deliveries SET next_attempt_at = now() - interval '1 hour' WHERE id = ANY($1)`, [
      [...lost.ids, ...live.ids],
    ]);
    expect(await sweepOverdue(db, queues, 1000)).toBe(3);
    const rows = await db.query<{ id: string; job_id: string }>(
      'SELECT id, job_id FROM deliveries WHERE id = ANY($1) ORDER BY id',
      [[...lost.ids, ...live.ids]],
    );
    for (const d of rows) {
      if (live.ids.includes(d.id)) expect(d.job_id).toBe(live.job_id);
      else {
        expect(d.job_id).toMatch(new RegExp(`^${d.id}\\.1\\.sweep\\d+$`));
        expect(await queues.pending(WEBHOOK_QUEUE, d.job_id)).toBe(true);
      }
    }
    expect(await sweepOverdue(db, queues, 1000)).toBe(0); // their new jobs are live
  });

  it('direct: the dispatcher hands first attempts to its own process, inserted claimed and without a job; each is sent once', async () => {
    const d2: WebhookDeps = { ...deps };
    const sink = directSink(d2);
    // The earlier batch left 3 failures in a row: 2 more would disable the webhook (a test of its own).
    await db.query('UPDATE webhooks SET consecutive_failures = 0 WHERE id = $1', [hooks.fails]);
    const received = ok.received.length;
    const events = await db.transaction(async (tx) => [
      await emit(tx, accountId, 'season.ended', {
        field_id: 'fld_direct1',
        crop_type: null,
        harvest_date: '2025-08-01',
      }),
      await emit(tx, accountId, 'season.ended', {
        field_id: 'fld_direct2',
        crop_type: null,
        harvest_date: '2025-08-01',
      }),
    ]);
    const r = await dispatchBatch(db, queues, 500, 3, sink);
    expect(r).toEqual({ events: 2, deliveries: 4, jobs: 0, direct: 4 });
    const ids = async () =>
      db.query<{ id: string; webhook_id: string; status: string; job_id: string | null; attempt_count: number }>(
        'SELECT id, webhook_id, status, job_id, attempt_count FROM deliveries WHERE event_id = ANY($1) ORDER BY id',
        [events.map((e) => e.id)],
      );
    const end = Date.now() + 10_000;
    while ((await ids()).some((d) => d.attempt_count === 0) && Date.now() < end)
      await new Promise((res) => setTimeout(res, 50));
    const rows = await ids();
    for (const d of rows) {
      if (d.webhook_id === hooks.all) expect(d).toMatchObject({ status: 'succeeded', job_id: null, attempt_count: 1 });
      else expect(d).toMatchObject({ status: 'pending', job_id: `${d.id}.2`, attempt_count: 1 }); // the 503: a retry job of its own
    }
    const sent = ok.received.slice(received).map((x) => x.headers['x-service-delivery']);
    expect(sent.sort()).toEqual(rows.filter((d) => d.webhook_id === hooks.all).map((d) => d.id));
    await sink.drain(1000);
  });

  it("direct: a delivery that waited past its lease renews the claim first, and is not sent when the claim is no longer the dispatcher's", async () => {
    const sink = directSink({ ...deps });
    const insert = async (token: Date) => {
      const id = newId('dlv');
      await db.query(
        `INSERT INTO deliveries (id, webhook_id, account_id, event_id, event_type, body, status, next_attempt_at, claimed_until)
         VALUES ($1, $2, $3, $4, 'season.ended', '{}', 'pending', now(), $5)`,
        [id, hooks.all, accountId, newId('evt'), token],
      );
      return {
        id,
        webhook_id: hooks.all,
        event_type: 'season.ended',
        body: '{}',
        attempt_count: 0,
        cycle_base: 0,
        first_attempt_at: null,
        url: ok.url,
        secret_sealed: box.seal('s'.repeat(24)),
        webhook_status: 'active',
        created_at: new Date(),
      };
    };
    const token = new Date(Date.now() + 60_000);
    const mine = await insert(token);
    const taken = await insert(new Date(Date.now() + 30_000)); // claimed by someone else meanwhile
    const before = ok.received.length;
    sink.deliver([mine, taken], token, Date.now() - 1); // both past their deadline: renewal first
    await sink.drain(10_000); // both have their slots already: drain waits until they are recorded
    expect(ok.received.slice(before).map((x) => x.headers['x-service-delivery'])).toEqual([mine.id]);
    const rows = await db.query<{ id: string; status: string }>(
      'SELECT id, status FROM deliveries WHERE id = ANY($1)',
      [[mine.id, taken.id]],
    );
    expect(Object.fromEntries(rows.map((r) => [r.id, r.status]))).toEqual({
      [mine.id]: 'succeeded',
      [taken.id]: 'pending',
    });
  });
  it('direct: webhook_direct_deliveries shows the deliveries a process holds, in flight while the receiver answers, none once recorded', async () => {
    const gauge = async () => {
      const m = await registry.getSingleMetric('webhook_direct_deliveries')!.get();
      return Object.fromEntries(m.values.map((v) => [v.labels.state, v.value]));
    };
    const sink = directSink({ ...deps });
    const respond = ok.respond;
    ok.respond = () => ({ status: 200, delayMs: 600 });
    try {
      await db.transaction(async (tx) =>
        emit(tx, accountId, 'season.ended', { field_id: 'fld_gauge', crop_type: null, harvest_date: '2025-08-01' }),
      );
      const r = await dispatchBatch(db, queues, 500, 3, sink);
      expect(r.direct).toBeGreaterThanOrEqual(1);
      const end = Date.now() + 5000;
      let seen = 0;
      while (Date.now() < end && !seen) {
        const g = await gauge();
        seen = (g.in_flight ?? 0) + (g.waiting ?? 0);
        if (!seen) await new Promise((res) => setTimeout(res, 20));
      }
      expect(seen).toBeGreaterThanOrEqual(1);
      await sink.drain(10_000);
      expect(await gauge()).toEqual({ waiting: 0, in_flight: 0 });
    } finally {
      ok.respond = respond;
    }
  });

  it('successes on a webhook with no failures leave its row alone within a second of its last success; a failure count is still reset', async () => {
    const wh = hooks.other;
    const delivery = async () => {
      const id = newId('dlv');
      await db.query(
        `INSERT INTO deliveries (id, webhook_id, account_id, event_id, event_type, body, status, next_attempt_at)
         VALUES ($1, $2, $3, $4, 'field.updated', '{}', 'pending', now())`,
        [id, wh, accountId, newId('evt')],
      );
      return id;
    };
    const succeed = async (id: string) => {
      const at = new Date();
      return recordAttempts(db, [
        {
          id,
          webhook_id: wh,
          attempt: 1,
          attempted_at: at,
          status_code: 200,
          error: null,
          latency_ms: 1,
          first_attempt_at: at,
          ok: true,
          next_attempt_at: null,
          job_id: null,
        },
      ]);
    };
    const row = async () =>
      (
        await db.query<{ v: string; n: number; last: Date | null; status: string }>(
          `SELECT xmin::text AS v, consecutive_failures AS n, last_success_at AS last, status FROM webhooks WHERE id = $1`,
          [wh],
        )
      )[0]!;
    // First success: the row is written.
    expect((await succeed(await delivery())).map((h) => h.id)).toEqual([wh]);
    const first = await row();
    expect(first.last).toBeInstanceOf(Date);
    // Another within the second: the delivery is recorded, the webhook's row is not rewritten.
    const d2 = await delivery();
    expect(await succeed(d2)).toEqual([]);
    expect((await row()).v).toBe(first.v);
    const [rec] = await db.query<{ status: string }>('SELECT status FROM deliveries WHERE id = $1', [d2]);
    expect(rec!.status).toBe('succeeded');
    // Failures counted: a success within the second resets them all the same.
    await db.query('UPDATE webhooks SET consecutive_failures = 3 WHERE id = $1', [wh]);
    expect((await succeed(await delivery())).map((h) => h.id)).toEqual([wh]);
    expect((await row()).n).toBe(0);
    // A last success more than a second old is moved forward.
    await db.query(`UPDATE webhooks SET last_success_at = now() - interval '5 seconds' WHERE id = $1`, [wh]);
    const before = (await row()).last!.getTime();
    await succeed(await delivery());
    expect((await row()).last!.getTime()).toBeGreaterThan(before + 4000);
    // A disabled webhook is always named (its direct deliveries stop).
    await db.query(`UPDATE webhooks SET status = 'disabled', last_success_at = now() WHERE id = $1`, [wh]);
    expect((await succeed(await delivery())).map((h) => [h.id, h.status])).toEqual([[wh, 'disabled']]);
    await db.query(`UPDATE webhooks SET status = 'active' WHERE id = $1`, [wh]);
  });
});
