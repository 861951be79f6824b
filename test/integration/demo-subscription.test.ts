/**
 * The demo as `npm start` creates it (src/main.ts): createDemo publishes the season's last four
 * captures in the demo catalogue instead of registering them, the development account is
 * subscribed to the service's own /demo/stac (subscribeToDemo), and the worker's first poll of it
 * registers them through the same path as any STAC API: search over HTTP, registration with the
 * Item's id, imagery.available once per field and capture, marked as a backfill. A second poll
 * registers nothing more; an account cannot point a subscription of its own at the loopback
 * catalogue. On PGlite only: the demo is created on the embedded database alone.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createDemo, DEMO_DATES, type DemoResult } from '../../src/imagery/demo.js';
import { subscribeToDemo } from '../../src/subscriptions/index.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';

async function freePort(): Promise<number> {
  const s = net.createServer();
  await new Promise<void>((r) => s.listen(0, '127.0.0.1', () => r()));
  const port = (s.address() as net.AddressInfo).port;
  await new Promise<void>((r) => s.close(() => r()));
  return port;
}

describe('demo subscription', () => {
  let t: TestApp;
  let scratch: string;
  let demo: DemoResult;
  let subId: string;
  const events = async () =>
    t.db.query<{ field_id: string; imagery_id: string; subscription_id: string; backfill: boolean }>(
      `SELECT data->>'field_id' AS field_id, data->>'imagery_id' AS imagery_id,
              data->>'subscription_id' AS subscription_id, (data->>'backfill')::boolean AS backfill
         FROM outbox WHERE type = 'imagery.available' AND data->>'subscription_id' IS NOT NULL`,
    );

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'demo-subscription-'));
    const port = await freePort();
    t = await buildTestApp(
      { name: 'pglite' },
      {
        env: { IMAGERY_ROOTS: scratch, DEMO: 'true', HOST: '127.0.0.1', PORT: String(port) },
        runtime: { subscriptionTickMs: 0 },
      },
    );
    // The worker reaches the catalogue over HTTP, on the API's own listener.
    await t.app.listen({ port, host: '127.0.0.1' });
    demo = await createDemo(
      { db: t.db, compute: t.runtime.compute, roots: t.config.imageryRoots, maxAreaHa: t.config.maxFieldAreaHa },
      t.accountId,
      { catalogue: { last: 4 } },
    );
    subId = (await subscribeToDemo(t.db, t.config, t.accountId, demo.catalogueFrom!)).id;
  }, 240_000);
  afterAll(async () => {
    await t?.close();
    rmSync(scratch, { recursive: true, force: true });
  });

  it('registers all but the last four captures directly and publishes those four', () => {
    expect(demo).toMatchObject({ captures: DEMO_DATES.length - 4, catalogued: 4, catalogueFrom: DEMO_DATES.at(-4) });
  });

  it('the first poll registers the four from /demo/stac and announces each once, as a backfill', async () => {
    const [result] = await t.runtime.subscriptions!.tick();
    expect(result).toMatchObject({ outcome: 'ok', registered: 4, skipped: 0, failed: 0 });
    const list = (
      await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${demo.fieldId}/imagery?per_page=100`,
        headers: t.auth(),
      })
    ).json().data as Array<{ capture_date: string }>;
    expect(list.map((c) => c.capture_date).sort()).toEqual(DEMO_DATES);
    const ev = await events();
    expect(ev).toHaveLength(4);
    expect(new Set(ev.map((e) => e.imagery_id)).size).toBe(4);
    expect(ev.every((e) => e.field_id === demo.fieldId && e.subscription_id === subId && e.backfill)).toBe(true);
    const sub = (
      await t.app.inject({ method: 'GET', url: `/v1/imagery/subscriptions/${subId}`, headers: t.auth() })
    ).json();
    expect(sub).toMatchObject({ items_registered: 4, last_error: null, default: false });
  });

  it('a second poll searches from the newest Item minus the lookback and registers nothing more', async () => {
    const asked = await t.app.inject({
      method: 'POST',
      url: `/v1/imagery/subscriptions/${subId}/poll`,
      headers: t.auth(),
    });
    expect(asked.statusCode).toBe(202);
    const [result] = await t.runtime.subscriptions!.tick();
    // From the newest Item (2025-10-04) minus SUBSCRIPTION_LOOKBACK (3 d): that Item alone, known already.
    expect(result).toMatchObject({ outcome: 'ok', searches: 1, registered: 0, duplicate: 1 });
    expect(await events()).toHaveLength(4);
  });

  it('an account cannot create a subscription of its own to the loopback catalogue', async () => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery/subscriptions',
      headers: t.auth(),
      payload: { stac_api_url: `http://127.0.0.1:${t.config.port}/demo/stac` },
    });
    expect(res.statusCode).toBe(400);
  });
});
