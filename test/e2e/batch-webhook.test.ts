/**
 * batch.completed end to end: a webhook subscribed to `*` at a real HTTPS receiver on 127.0.0.1 (a
 * CA made for the test) receives it signed when a batch statistics job is ready, on every queue
 * backend; its payload is the job's; a webhook may subscribe to batch.completed by name.
 */
import { createHmac } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildServiceApp, queueBackends, type TestApp } from '../helpers/app.js';
import { waitBatch } from '../helpers/batch.js';
import { seedSeason } from '../helpers/reports.js';
import { makePki, startReceiver, type Receiver } from '../helpers/tls.js';
import { until } from '../helpers/wait.js';

describe.each(queueBackends)('batch.completed on $name', (backend) => {
  let svc: TestApp;
  let rx: Receiver;
  let dir: string;
  beforeAll(async () => {
    const pki = makePki();
    dir = mkdtempSync(path.join(os.tmpdir(), 'batch-wh-'));
    svc = await buildServiceApp(backend, {
      env: { IMAGERY_ROOTS: dir, WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true' },
      ca: [pki.ca],
    });
    rx = await startReceiver(pki);
    await seedSeason(svc, dir, { size: 60, step: 14 });
  }, 120_000);
  afterAll(async () => {
    await rx?.close();
    await svc?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it("a `*` subscriber receives batch.completed, signed, with the job's link and counts", async () => {
    const wh = await svc.app.inject({
      method: 'POST',
      url: '/v1/webhooks',
      headers: svc.auth(),
      payload: { url: rx.url, events: ['*'] },
    });
    expect(wh.statusCode, wh.body).toBe(201);
    const secret = wh.json().secret as string;
    const res = await svc.app.inject({
      method: 'POST',
      url: '/v1/batch/statistics',
      headers: svc.auth(),
      payload: { fields: 'all', indices: ['NDVI'], start_date: '2025-04-01', end_date: '2025-09-30' },
    });
    expect(res.statusCode, res.body).toBe(202);
    const job = await waitBatch(svc, res.json().id);
    expect(job.status).toBe('ready');
    const isBatch = (r: Receiver['received'][number]) => r.headers['x-service-event'] === 'batch.completed';
    await until('the batch.completed delivery', () => rx.received.some(isBatch), 30_000);
    const got = rx.received.filter(isBatch);
    expect(got).toHaveLength(1);
    const d = got[0]!;
    expect(d.headers['x-service-signature']).toBe(createHmac('sha256', secret).update(d.raw).digest('hex'));
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64');
    const sig = createHmac('sha256', key)
      .update(`${d.headers['webhook-id']}.${d.headers['webhook-timestamp']}.`)
      .update(d.raw)
      .digest('base64');
    expect(d.headers['webhook-signature']).toBe(`v1,${sig}`);
    expect(d.body.event).toBe('batch.completed');
    expect(d.body.data).toEqual({
      batch_id: job.id,
      status: 'ready',
      format: 'csv',
      feature_count: 1,
      error_count: 0,
      download_url: job.download_url,
      expires_at: job.expires_at,
      size_bytes: job.size_bytes,
    });
    // The link in the event downloads the file.
    const u = new URL(d.body.data.download_url);
    const file = await svc.app.inject({ method: 'GET', url: u.pathname + u.search });
    expect(file.statusCode).toBe(200);
    expect(Buffer.byteLength(file.body)).toBe(job.size_bytes);
    // batch.completed is a type one may subscribe to by name
    const named = await svc.app.inject({
      method: 'POST',
      url: '/v1/webhooks',
      headers: svc.auth(),
      payload: { url: rx.url, events: ['batch.completed'] },
    });
    expect(named.statusCode, named.body).toBe(201);
  });
});
