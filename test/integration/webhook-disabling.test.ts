/**
 * Disabling a webhook after 5 consecutive failed delivery attempts, counted per webhook across all
 * its deliveries (reset by any 2xx), on every database backend with the real database queue and a
 * real HTTPS receiver. The test runs the attempts itself (no queue consumer), so the order of the
 * outcomes is exact; the retry delays are long so that no retry runs unless the test runs it.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { findOrCreateAccount } from '../../src/accounts/api-keys.js';
import type { Database } from '../../src/platform/database.js';
import { newId } from '../../src/platform/ids.js';
import { createJobQueues, type JobQueues } from '../../src/platform/queue/job-queues.js';
import { attemptDelivery, processDeliveryJob } from '../../src/webhooks/delivery.js';
import { listDeliveries } from '../../src/webhooks/deliveries.js';
import { getWebhook, jobIdFor, updateWebhook, WEBHOOK_QUEUE, type WebhookDeps } from '../../src/webhooks/service.js';
import { SecretBox } from '../../src/webhooks/signing.js';
import { dbBackends, disposeDatabase, freshDatabase, uniqueName } from '../helpers/backends.js';
import { makePki, startReceiver, type Receiver } from '../helpers/tls.js';

describe.each(dbBackends)('webhook disabling on $name', (backend) => {
  let db: Database;
  let queues: JobQueues;
  let rx: Receiver;
  let deps: WebhookDeps;
  let accountId: string;
  const box = new SecretBox('disabling-test-key-0123456789abcdef');

  beforeAll(async () => {
    const pki = makePki();
    rx = await startReceiver(pki);
    // Deliveries whose field_id starts with "ok" succeed, the others get a 503.
    rx.respond = (r) => ({ status: String(r.body?.data?.field_id).startsWith('ok') ? 200 : 503 });
    db = await freshDatabase(backend);
    queues = await createJobQueues({ db, prefix: uniqueName('q') });
    deps = {
      db,
      queues,
      box,
      retryDelaysMs: Array(5).fill(3_600_000),
      timeoutMs: 3000,
      allowPrivateNetworks: true,
      maxPerAccount: 50,
      ca: [pki.ca],
    };
    accountId = (await findOrCreateAccount(db, 'disabling')).id;
  });
  afterAll(async () => {
    await queues?.close(1000);
    await rx?.close();
    if (db) await disposeDatabase(db);
  });

  const addWebhook = async () => {
    const id = newId('wh');
    await db.query(
      `INSERT INTO webhooks (id, account_id, url, events, secret_sealed, status) VALUES ($1, $2, $3, $4, $5, 'active')`,
      [id, accountId, rx.url, ['*'], box.seal('s'.repeat(24))],
    );
    return id;
  };
  const addDelivery = async (webhookId: string, fieldId: string) => {
    const id = newId('dlv');
    const body = JSON.stringify({
      event: 'season.ended',
      timestamp: new Date().toISOString(),
      data: { field_id: fieldId, crop_type: null, harvest_date: '2025-08-01' },
    });
    await db.query(
      `INSERT INTO deliveries (id, webhook_id, account_id, event_id, event_type, body, status, next_attempt_at) VALUES ($1, $2, $3, $4, 'season.ended', $5, 'pending', now())`,
      [id, webhookId, accountId, newId('evt'), body],
    );
    return id;
  };
  const state = async (webhookId: string) => {
    const w = await getWebhook(db, accountId, webhookId);
    return { status: w.status, failures: w.consecutive_failures };
  };
  const sentTo = (id: string) => rx.received.filter((r) => r.headers['x-service-delivery'] === id).length;

  it('a 2xx resets the count; 5 failed attempts in a row across deliveries disable the webhook and stop its pending retries; re-enabling counts from 0 and replays them', async () => {
    const wh = await addWebhook();
    const bad = [
      await addDelivery(wh, 'bad1'),
      await addDelivery(wh, 'bad2'),
      await addDelivery(wh, 'bad3'),
      await addDelivery(wh, 'bad4'),
    ];
    for (const id of bad) expect(await attemptDelivery(deps, { delivery_id: id })).toBe('retry_scheduled');
    expect(await state(wh)).toEqual({ status: 'active', failures: 4 });
    expect(await attemptDelivery(deps, { delivery_id: await addDelivery(wh, 'ok1') })).toBe('succeeded');
    expect(await state(wh)).toEqual({ status: 'active', failures: 0 });

    // Retries of three of them and the first attempt of a new one: 4 in a row, still active.
    for (const id of bad.slice(0, 3)) expect(await attemptDelivery(deps, { delivery_id: id })).toBe('retry_scheduled');
    const bad5 = await addDelivery(wh, 'bad5');
    expect(await attemptDelivery(deps, { delivery_id: bad5 })).toBe('retry_scheduled');
    expect(await state(wh)).toEqual({ status: 'active', failures: 4 });

    // The 5th in a row disables it, though no delivery has used up its retries.
    expect(await attemptDelivery(deps, { delivery_id: bad[3]! })).toBe('webhook_disabled');
    expect(await state(wh)).toEqual({ status: 'disabled', failures: 5 });
    const w = await getWebhook(db, accountId, wh);
    expect(w.disabled_reason).toBe('5 consecutive failed delivery attempts (last: HTTP 503)');
    // Its pending deliveries are stopped, kept for replay; no retry job for the last failure.
    const log = await listDeliveries(db, accountId, wh, { page: 1, per_page: 100 });
    const byId = new Map(log.data.map((d) => [d.id, d]));
    for (const id of [...bad, bad5])
      expect(byId.get(id)).toMatchObject({
        status: 'cancelled',
        stopped_reason: 'webhook_disabled',
        next_attempt_at: null,
      });
    expect(byId.get(bad[3]!)!.attempt_count).toBe(2);
    expect(await queues.pending(WEBHOOK_QUEUE, jobIdFor(bad[3]!, 3))).toBe(false);
    // The retry jobs queued before run and send nothing.
    const before = rx.received.length;
    expect(await queues.pending(WEBHOOK_QUEUE, jobIdFor(bad[0]!, 3))).toBe(true);
    for (const id of [...bad, bad5]) expect(await attemptDelivery(deps, { delivery_id: id })).toBe('skipped');
    expect(rx.received.length).toBe(before);

    // Re-enabled with replay: the count starts from 0 and the stopped deliveries are sent again.
    rx.respond = () => ({ status: 200 });
    try {
      const back = await updateWebhook(deps, accountId, wh, { status: 'active', replay: true });
      expect(back).toMatchObject({ status: 'active', consecutive_failures: 0, disabled_reason: null });
      for (const id of [...bad, bad5]) expect(await attemptDelivery(deps, { delivery_id: id })).toBe('succeeded');
      expect(sentTo(bad5)).toBe(2);
      expect(await state(wh)).toEqual({ status: 'active', failures: 0 });
      // A new url that passes its test starts the count afresh too.
      rx.respond = (r) => ({ status: r.body?.event === 'webhook.test' ? 200 : 503 });
      expect(await attemptDelivery(deps, { delivery_id: await addDelivery(wh, 'bad6') })).toBe('retry_scheduled');
      expect(await state(wh)).toEqual({ status: 'active', failures: 1 });
      await updateWebhook(deps, accountId, wh, { url: `${rx.url}?v=2` });
      expect(await state(wh)).toEqual({ status: 'active', failures: 0 });
    } finally {
      rx.respond = (r) => ({ status: String(r.body?.data?.field_id).startsWith('ok') ? 200 : 503 });
    }
  });

  it('failures recorded by two workers at once are all counted; the webhook is disabled and its deliveries stopped', async () => {
    const wh = await addWebhook();
    const ids: string[] = [];
    for (let k = 0; k < 24; k++) ids.push(await addDelivery(wh, `bad_two_${k}`));
    const respond = rx.respond;
    rx.respond = () => ({ status: 503, delayMs: 100 }); // all 24 in flight together
    try {
      // Two deps objects: two workers with their own group commits, as two processes would have.
      const [a, b] = await Promise.all([
        processDeliveryJob(deps, { delivery_ids: ids.slice(0, 12) }),
        processDeliveryJob({ ...deps }, { delivery_ids: ids.slice(12) }),
      ]);
      const outcomes = [...a, ...b];
      expect(outcomes.every((o) => o === 'retry_scheduled' || o === 'webhook_disabled')).toBe(true);
      expect(outcomes).toContain('webhook_disabled');
    } finally {
      rx.respond = respond;
    }
    const [{ n }] = (await db.query<{ n: number }>(
      'SELECT count(*)::int AS n FROM delivery_attempts a JOIN deliveries d ON d.id = a.delivery_id WHERE d.webhook_id = $1',
      [wh],
    )) as [{ n: number }];
    expect(n).toBe(24);
    expect(await state(wh)).toEqual({ status: 'disabled', failures: 24 });
    // The reason gives the count the webhook was disabled at (the first write that reached 5).
    expect((await getWebhook(db, accountId, wh)).disabled_reason).toMatch(
      /^([5-9]|1\d|2[0-4]) consecutive failed delivery attempts \(last: HTTP 503\)$/,
    );
    const rows = await db.query<{ status: string; stopped_reason: string | null }>(
      'SELECT status, stopped_reason FROM deliveries WHERE webhook_id = $1',
      [wh],
    );
    expect(rows).toEqual(Array(24).fill({ status: 'cancelled', stopped_reason: 'webhook_disabled' }));
    // Failures seen after the webhook was disabled get no retry job.
    const jobs = await Promise.all(ids.map((id) => queues.pending(WEBHOOK_QUEUE, jobIdFor(id, 2))));
    expect(jobs.filter(Boolean).length).toBeLessThan(24);
  });
});
