/**
 * Disabling through the whole service on every queue backend, with a real HTTPS receiver: a burst
 * of events to a dead endpoint, with first attempts handed straight to the worker (direct) or sent
 * through queue jobs, stops at the webhook's 5th failure in a row: every attempt is counted, the
 * webhook is disabled and no retry is sent (short delays). And, with the real default
 * configuration, the retry schedule a single failing delivery goes through until the webhook is
 * disabled (each attempt run by the test rather than waited for).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emit } from '../../src/events/outbox.js';
import { attemptDelivery } from '../../src/webhooks/delivery.js';
import { jobIdFor, WEBHOOK_QUEUE } from '../../src/webhooks/service.js';
import { buildServiceApp, queueBackends, type TestApp } from '../helpers/app.js';
import { until } from '../helpers/wait.js';
import { makePki, startReceiver, type Receiver, type TestPki } from '../helpers/tls.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
// The first retry comes 1.5 s after a failure: the 5th failure is recorded well before that, even
// on a busy machine; the others are short.
const DELAYS = '1500ms,100ms,100ms,100ms,100ms';
// Every attempt is answered (503) after 100 ms: 2 s is ample, and it bounds how long an attempt in
// flight when the webhook was disabled can take, which is how long the test waits for quiet.
const TIMEOUT_MS = 2_000;

describe.each(queueBackends)('webhook disabling on $name', (backend) => {
  let pki: TestPki;
  let rx: Receiver;
  const apps: Record<'direct' | 'queued', TestApp | undefined> = { direct: undefined, queued: undefined };
  beforeAll(async () => {
    pki = makePki();
    rx = await startReceiver(pki);
    // Registration passes; every event fails after 100 ms (so that many are in flight at once).
    rx.respond = (r) =>
      r.headers['x-service-event'] === 'webhook.test' ? { status: 200 } : { status: 503, delayMs: 100 };
    const env = {
      WEBHOOK_RETRY_DELAYS: DELAYS,
      WEBHOOK_TIMEOUT_MS: String(TIMEOUT_MS),
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    };
    apps.direct = await buildServiceApp(backend, { env, ca: [pki.ca] });
    // Every first attempt a queue job of its own: the jobs run concurrently.
    apps.queued = await buildServiceApp(backend, {
      env: { ...env, WEBHOOK_DIRECT: 'false', WEBHOOK_BATCH_SIZE: '1' },
      ca: [pki.ca],
    });
  }, 180_000);
  afterAll(async () => {
    await apps.direct?.close();
    await apps.queued?.close();
    await rx?.close();
  });

  it.each(['direct', 'queued'] as const)(
    '%s: 40 events at once to a dead endpoint: disabled by the 5th failure in a row, every attempt counted, no retry sent',
    async (mode) => {
      const svc = apps[mode]!;
      const get = (url: string) => svc.app.inject({ method: 'GET', url, headers: svc.auth() }).then((r) => r.json());
      const wh = (
        await svc.app.inject({
          method: 'POST',
          url: '/v1/webhooks',
          headers: svc.auth(),
          payload: { url: rx.url, events: ['season.ended'] },
        })
      ).json();
      expect(wh.consecutive_failures).toBe(0);
      const mine = () => rx.received.filter((r) => String(r.body?.data?.field_id).startsWith(`${mode}_`));
      await svc.db.transaction(async (tx) => {
        for (let k = 0; k < 40; k++)
          await emit(tx, svc.accountId, 'season.ended', {
            field_id: `${mode}_${k}`,
            crop_type: null,
            harvest_date: '2025-08-01',
          });
      });
      svc.wake();
      await until('disabled', async () => (await get(`/v1/webhooks/${wh.id}`)).status === 'disabled', 15_000);
      // Attempts in flight when it was disabled finish and are recorded. Wait until nothing changes
      // for longer than the timeout (the slowest in flight is recorded by then) and the first retry
      // delay (a retry not stopped would have been sent by then): 1 s past the longer of the two.
      const quietMs = Math.max(TIMEOUT_MS, 1_500) + 1_000;
      type Log = {
        total: number;
        data: Array<{
          id: string;
          status: string;
          attempt_count: number;
          attempts: Array<{ attempted_at: string; status_code: number | null; error: string | null }>;
        }>;
      };
      let log: Log = { total: 0, data: [] };
      let seen = '';
      let since = Date.now();
      for (const end = Date.now() + 40_000; Date.now() - since < quietMs; await sleep(250)) {
        log = await get(`/v1/webhooks/${wh.id}/deliveries?per_page=100`);
        const now = `${log.data.reduce((n, d) => n + d.attempt_count, 0)}/${mine().length}`;
        if (now !== seen) [seen, since] = [now, Date.now()];
        if (Date.now() > end) throw new Error(`attempts/requests still changing: ${now}`);
      }
      const w = await get(`/v1/webhooks/${wh.id}`);
      expect(log.total).toBe(40);
      const sent = mine();
      const attempts = log.data.flatMap((d) => d.attempts.map((a) => a.error ?? `HTTP ${a.status_code}`));
      // No delivery was tried twice, and every request received is a recorded attempt (attempts
      // whose connection failed under load never reach the receiver).
      const odd = log.data
        .map((d) => ({
          id: d.id,
          attempts: d.attempts.map((a) => a.attempted_at),
          received: sent
            .filter((r) => r.headers['x-service-delivery'] === d.id)
            .map((r) => new Date(r.at).toISOString()),
        }))
        .filter((d) => d.attempts.length > 1 || d.received.length > d.attempts.length);
      expect(odd, `disabled at ${w.updated_at}`).toEqual([]);
      // Every attempt counted, and every delivery stopped, kept for replay.
      expect(w.consecutive_failures, JSON.stringify(attempts)).toBe(attempts.length);
      expect(attempts.length).toBeGreaterThanOrEqual(5);
      for (const d of log.data)
        expect(d).toMatchObject({ status: 'cancelled', stopped_reason: 'webhook_disabled', next_attempt_at: null });
      expect(w.disabled_reason).toMatch(/^\d+ consecutive failed delivery attempts \(last: .+\)$/);
    },
    60_000,
  );

  it('the default schedule (1 min, 5 min, 30 min, 2 h, 24 h) from the real configuration: one dead delivery disables its webhook at its 5th attempt, 2 h 36 min in, and the 24 h retry is never queued', async () => {
    const svc = await buildServiceApp(backend, { env: { WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' }, ca: [pki.ca] });
    try {
      const delays = svc.config.webhooks.retryDelaysMs;
      expect(delays).toEqual([60_000, 300_000, 1_800_000, 7_200_000, 86_400_000]);
      const wh = (
        await svc.app.inject({
          method: 'POST',
          url: '/v1/webhooks',
          headers: svc.auth(),
          payload: { url: rx.url, events: ['season.ended'] },
        })
      ).json();
      await svc.db.transaction((tx) =>
        emit(tx, svc.accountId, 'season.ended', {
          field_id: 'default_schedule',
          crop_type: null,
          harvest_date: '2025-08-01',
        }),
      );
      svc.wake();
      const row = async () =>
        (
          await svc.db.query<{
            id: string;
            status: string;
            attempt_count: number;
            next_attempt_at: Date | null;
            attempted_at: Date;
          }>(
            `SELECT d.id, d.status, d.attempt_count, d.next_attempt_at, a.attempted_at
             FROM deliveries d JOIN delivery_attempts a ON a.delivery_id = d.id AND a.attempt = d.attempt_count WHERE d.webhook_id = $1`,
            [wh.id],
          )
        )[0];
      await until('the first attempt recorded', async () => (await row())?.attempt_count === 1, 15_000);
      const scheduled: number[] = [];
      for (let attempt = 1; attempt <= 4; attempt++) {
        const d = (await row())!;
        expect(d).toMatchObject({ status: 'pending', attempt_count: attempt });
        // The retry is due one delay after the failed attempt, and its delayed job is queued (the
        // outcome is recorded before the job is added, so wait for the job rather than race it).
        scheduled.push(d.next_attempt_at!.getTime() - d.attempted_at.getTime());
        await until(
          'the retry job queued',
          () => svc.runtime.queues.pending(WEBHOOK_QUEUE, jobIdFor(d.id, attempt + 1)),
          15_000,
        );
        // Run that retry now instead of waiting for it.
        const outcome = await attemptDelivery(svc.runtime.webhooks, { delivery_id: d.id });
        expect(outcome).toBe(attempt < 4 ? 'retry_scheduled' : 'webhook_disabled');
      }
      for (const [k, ms] of scheduled.entries()) expect(Math.abs(ms - delays[k]!)).toBeLessThan(2_000);
      const d = (await row())!;
      expect(d).toMatchObject({ status: 'cancelled', attempt_count: 5, next_attempt_at: null });
      expect(await svc.runtime.queues.pending(WEBHOOK_QUEUE, jobIdFor(d.id, 6))).toBe(false);
      const w = (await svc.app.inject({ method: 'GET', url: `/v1/webhooks/${wh.id}`, headers: svc.auth() })).json();
      expect(w).toMatchObject({ status: 'disabled', consecutive_failures: 5 });
      // On this schedule a dead endpoint is disabled 1 + 5 + 30 + 120 min after its first failure.
      expect(delays.slice(0, 4).reduce((a, b) => a + b)).toBe(156 * 60_000);
    } finally {
      await svc.close();
    }
  }, 120_000);
});
