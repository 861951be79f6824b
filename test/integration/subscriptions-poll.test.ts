/**
 * Subscription polling end to end, on PGlite and PostgreSQL: a small STAC API (Item Search as the
 * spec defines it: landing page, conformance, POST /search with `intersects`, `datetime`,
 * `collections`, `limit`, the Query extension, `next` links with `body`/`merge`) serving the real
 * Earth Search Item of tile 29RKH, its assets on a local range server over the real COG files.
 */
import { createReadStream, readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { registry } from '../../src/platform/metrics.js';
import { claimSubscription, pollSubscription, type PollDeps } from '../../src/subscriptions/poller.js';
import { startSubscriptionScheduler } from '../../src/subscriptions/scheduler.js';
import { StacClient } from '../../src/subscriptions/stac-client.js';
import { dbBackends } from '../helpers/backends.js';
import { buildTestApp, square, type TestApp } from '../helpers/app.js';
import { hasRealData, polygonOf, realDataDir, referenceResults } from '../helpers/real-data.js';

const RKH = path.join(realDataDir, 's2_l2a_29RKH_20200219_riotilerpds');
process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS = 'true';

type Item = Record<string, unknown> & { id: string; properties: Record<string, unknown> };

/** Range server over the scene's COG files; a name that does not exist answers 404. */
async function cogServer(): Promise<{ server: http.Server; base: string }> {
  const server = http.createServer((req, res) => {
    const file = path.join(RKH, path.basename(req.url ?? ''));
    let size: number;
    try {
      size = statSync(file).size;
    } catch {
      res.writeHead(404).end();
      return;
    }
    const m = /bytes=(\d+)-(\d*)/.exec(req.headers.range ?? '');
    const start = m ? Number(m[1]) : 0;
    const end = m?.[2] ? Math.min(Number(m[2]), size - 1) : size - 1;
    res.writeHead(m ? 206 : 200, {
      'content-length': end - start + 1,
      ...(m ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}),
    });
    createReadStream(file, { start, end }).pipe(res);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  return { server, base: `http://127.0.0.1:${(server.address() as AddressInfo).port}` };
}

interface StacApi {
  server: http.Server;
  root: string;
  items: Item[];
  /** 'ok', or how the API fails: 500 to everything, 429 with Retry-After: 120. */
  mode: 'ok' | '500' | '429';
  searches: number;
}

const overlaps = (a: number[], b: number[]) => a[0]! <= b[2]! && a[2]! >= b[0]! && a[1]! <= b[3]! && a[3]! >= b[1]!;

/** A STAC API (Item Search with POST and GET, Query extension, paging by `next` with body/merge, 2 Items a page). */
async function stacApi(): Promise<StacApi> {
  const api: StacApi = { server: http.createServer(), root: '', items: [], mode: 'ok', searches: 0 };
  api.server.on('request', (req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const send = (status: number, body: unknown, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));
      };
      if (api.mode === '500') return send(500, { code: 'InternalError' });
      if (api.mode === '429') return send(429, { code: 'TooManyRequests' }, { 'retry-after': '120' });
      const url = new URL(req.url ?? '/', api.root);
      if (url.pathname === '/') {
        return send(200, {
          type: 'Catalog',
          id: 'test',
          stac_version: '1.0.0',
          conformsTo: [
            'https://api.stacspec.org/v1.0.0/core',
            'https://api.stacspec.org/v1.0.0/item-search',
            'https://api.stacspec.org/v1.0.0-rc.1/item-search#query',
          ],
          links: [
            { rel: 'search', href: `${api.root}/search`, type: 'application/geo+json', method: 'GET' },
            { rel: 'search', href: `${api.root}/search`, type: 'application/geo+json', method: 'POST' },
          ],
        });
      }
      if (url.pathname !== '/search' || req.method !== 'POST') return send(404, { code: 'NotFound' });
      api.searches++;
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}');
      const boxes: number[][] = body.intersects.coordinates.map((poly: number[][][]) => {
        const xs = poly[0]!.map((p) => p[0]!);
        const ys = poly[0]!.map((p) => p[1]!);
        return [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)];
      });
      const from = Date.parse(String(body.datetime).split('/')[0]!);
      const maxCloud = body.query?.['eo:cloud_cover']?.lte;
      const hits = api.items.filter((it) => {
        const dt = it.properties.datetime;
        return (
          body.collections.includes(it.collection) &&
          boxes.some((b) => overlaps(b, it.bbox as number[])) &&
          (typeof dt !== 'string' || Date.parse(dt) >= from) &&
          (maxCloud === undefined || Number(it.properties['eo:cloud_cover']) <= maxCloud)
        );
      });
      const pageNo = Number(body.page ?? 1);
      const size = 2;
      const slice = hits.slice((pageNo - 1) * size, pageNo * size);
      const links =
        pageNo * size < hits.length
          ? [{ rel: 'next', href: `${api.root}/search`, method: 'POST', body: { page: pageNo + 1 }, merge: true }]
          : [];
      send(200, { type: 'FeatureCollection', features: slice, links });
    });
  });
  await new Promise<void>((r) => api.server.listen(0, '127.0.0.1', () => r()));
  api.root = `http://127.0.0.1:${(api.server.address() as AddressInfo).port}`;
  return api;
}

/** The real Earth Search Item, as another acquisition: its assets on the COG server. */
function realItem(cogBase: string, id: string, datetime: string | undefined): Item {
  const item = JSON.parse(readFileSync(path.join(RKH, 'S2A_29RKH_20200219_0_L2A.json'), 'utf8')) as Item;
  const files: Record<string, string> = {
    blue: 'B02',
    green: 'B03',
    red: 'B04',
    rededge1: 'B05',
    nir: 'B08',
    swir16: 'B11',
    scl: 'SCL',
  };
  const assets = item.assets as Record<string, Record<string, unknown>>;
  item.assets = Object.fromEntries(
    Object.entries(files).map(([k, f]) => [k, { ...assets[k], href: `${cogBase}/${f}.tif` }]),
  );
  item.id = id;
  if (datetime) item.properties.datetime = datetime;
  else delete item.properties.datetime;
  return item;
}

const closeServer = (s: http.Server) => new Promise<void>((r) => s.close(() => r()));

async function metricValue(name: string, labels: Record<string, string>): Promise<number> {
  const m = (await registry.getSingleMetric(name)?.get())?.values ?? [];
  const hit = m.find((v) => Object.entries(labels).every(([k, x]) => v.labels[k] === x));
  return hit?.value ?? 0;
}

describe.runIf(hasRealData).each(dbBackends)('subscription polling on $name', (backend) => {
  let t: TestApp;
  let cogs: { server: http.Server; base: string };
  let api: StacApi;
  let subId: string;
  let refField: string;
  let otherField: string;

  beforeAll(async () => {
    cogs = await cogServer();
    api = await stacApi();
    api.items.push(realItem(cogs.base, 'S2A_29RKH_20200219_0_L2A', '2020-02-19T11:34:25.405000Z'));
    t = await buildTestApp(backend, {
      env: { SUBSCRIPTIONS_ALLOW_PRIVATE_NETWORKS: 'true', SUBSCRIPTION_CONCURRENCY: '4' },
      runtime: { subscriptionTickMs: 0, subscriptionLeaseMs: 5000 },
    });
    const rkh = referenceResults().find((r) => r.scene.startsWith('EH_29RKH'))!;
    refField = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'Sahara reference', boundary: polygonOf(rkh) },
      })
    ).json().id;
    otherField = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'Sahara square', boundary: square(-11.5, 24.8, 0.01) },
      })
    ).json().id;
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery/subscriptions',
      headers: t.auth(),
      payload: { stac_api_url: api.root, start_date: '2020-02-01', max_cloud_cover: 50 },
    });
    expect(res.statusCode, res.body).toBe(201);
    subId = res.json().id;
  });
  afterAll(async () => {
    await t?.close();
    await closeServer(api.server);
    await closeServer(cogs.server);
  });

  const scheduler = () => t.runtime.subscriptions!;
  const events = async () =>
    (await listOutbox(t.db, t.accountId, 'imagery.available')).map((e) => e.data as Record<string, unknown>);
  const subscription = async () =>
    (await t.app.inject({ method: 'GET', url: `/v1/imagery/subscriptions/${subId}`, headers: t.auth() })).json();
  const requestPoll = async () =>
    expect(
      (await t.app.inject({ method: 'POST', url: `/v1/imagery/subscriptions/${subId}/poll`, headers: t.auth() }))
        .statusCode,
    ).toBe(202);
  const pollDeps = (extra: Partial<PollDeps> = {}): PollDeps => ({
    db: t.db,
    imagery: t.runtime.imagery,
    client: new StacClient({ allowPrivateNetworks: true }),
    settings: { intervalMs: 600_000, lookbackMs: 3 * 86_400_000, maxPages: 50, leaseMs: 5000 },
    ...extra,
  });

  it('a new subscription backfills the fields: captures, their cloud cover, one imagery.available per field', async () => {
    const [result] = await scheduler().tick();
    expect(result).toMatchObject({ outcome: 'ok', seen: 1, registered: 1, duplicate: 0, skipped: 0, failed: 0 });
    const [img] = await t.db.query<{
      id: string;
      stac_collection: string;
      stac_item_id: string;
      subscription_id: string;
    }>('SELECT id, stac_collection, stac_item_id, subscription_id FROM imagery');
    expect(img).toMatchObject({
      stac_collection: 'sentinel-2-l2a',
      stac_item_id: 'S2A_29RKH_20200219_0_L2A',
      subscription_id: subId,
    });
    // The reference field: 1380 pixels, 943 clear in the real SCL (as registered by hand).
    const list = (
      await t.app.inject({ method: 'GET', url: `/v1/fields/${refField}/imagery`, headers: t.auth() })
    ).json();
    expect(list.data).toEqual([
      expect.objectContaining({
        id: img!.id,
        capture_date: '2020-02-19',
        cloud_cover: 31.67,
        scene_cloud_cover: 4.051854,
      }),
    ]);
    const evs = await events();
    expect(evs.map((e) => e.field_id).sort()).toEqual([refField, otherField].sort());
    for (const e of evs) expect(e).toMatchObject({ imagery_id: img!.id, subscription_id: subId, backfill: true });
    expect(await subscription()).toMatchObject({ items_registered: 1, last_error: null });
    expect((await subscription()).last_polled_at).not.toBeNull();
    // Both fields are marked as backfilled; the cursor is the Item's datetime.
    const [row] = await t.db.query<{ cursor: Date; n: number }>(
      `SELECT cursor, (SELECT count(*)::int FROM imagery_subscription_fields WHERE subscription_id = $1) AS n
         FROM imagery_subscriptions WHERE id = $1`,
      [subId],
    );
    expect(row!.cursor.toISOString()).toBe('2020-02-19T11:34:25.405Z');
    expect(row!.n).toBe(2);
    // Polled now: not due again before SUBSCRIPTION_POLL_INTERVAL.
    expect(await scheduler().tick()).toEqual([]);
  });

  it('a newly published Item is registered by the next poll and announced once (backfill false)', async () => {
    api.items.push(realItem(cogs.base, 'S2B_29RKH_20200224_0_L2A', '2020-02-24T11:34:20.000000Z'));
    // Too cloudy for max_cloud_cover 50: the API filters it out (Query extension).
    const cloudy = realItem(cogs.base, 'S2B_29RKH_20200223_0_L2A', '2020-02-23T11:34:20.000000Z');
    cloudy.properties['eo:cloud_cover'] = 80;
    api.items.push(cloudy);
    const before = (await events()).length;
    await requestPoll();
    const [result] = await scheduler().tick();
    // The first Item is in the look-back window again: seen, not registered twice.
    expect(result).toMatchObject({ outcome: 'ok', seen: 2, registered: 1, duplicate: 1 });
    const evs = (await events()).slice(before);
    expect(evs).toHaveLength(2);
    for (const e of evs) expect(e).toMatchObject({ capture_date: '2020-02-24', backfill: false });
    await requestPoll();
    const [again] = await scheduler().tick();
    expect(again).toMatchObject({ registered: 0, duplicate: 1 });
    expect(await events()).toHaveLength(before + 2);
    expect(await subscription()).toMatchObject({ items_registered: 2 });
  });

  it('two pollers at once: one claims the subscription; two polls racing still announce each capture once per field', async () => {
    api.items.push(realItem(cogs.base, 'S2A_29RKH_20200226_0_L2A', '2020-02-26T11:34:20.000000Z'));
    const before = (await events()).length;
    const a = startSubscriptionScheduler(pollDeps(), { tickMs: 0, concurrency: 2, owner: 'worker-a' });
    const b = startSubscriptionScheduler(pollDeps(), { tickMs: 0, concurrency: 2, owner: 'worker-b' });
    await requestPoll();
    const [ra, rb] = await Promise.all([a.tick(), b.tick()]);
    expect(ra!.length + rb!.length).toBe(1);
    expect((await events()).length).toBe(before + 2);
    // A lease taken over while the first holder still runs (it was too slow): both register the
    // same new Item at once; the unique index lets one insert, and only it emits.
    api.items.push(realItem(cogs.base, 'S2B_29RKH_20200228_0_L2A', '2020-02-28T11:34:20.000000Z'));
    const sub1 = await claimSubscription(t.db, subId, 'worker-a', 1);
    await new Promise((r) => setTimeout(r, 20));
    const sub2 = await claimSubscription(t.db, subId, 'worker-b', 5000);
    expect(sub1 && sub2).toBeTruthy();
    const [p1, p2] = await Promise.all([
      pollSubscription(pollDeps(), sub1!, 'worker-a'),
      pollSubscription(pollDeps(), sub2!, 'worker-b'),
    ]);
    expect(p1.registered + p2.registered).toBe(1);
    expect(p1.failed + p2.failed).toBe(0); // the loser found the row taken: no error, no event
    expect(p2.outcome).toBe('ok');
    expect(p1.outcome).toBe('lease_lost');
    const evs = (await events()).slice(before + 2);
    expect(evs.map((e) => e.field_id).sort()).toEqual([refField, otherField].sort());
    expect(new Set(evs.map((e) => e.capture_date))).toEqual(new Set(['2020-02-28']));
    await Promise.all([a.stop(), b.stop()]);
  });

  it('a poll killed after its first registration: the next holder of the lease loses and duplicates nothing', async () => {
    api.items.push(
      realItem(cogs.base, 'S2A_29RKH_20200301_0_L2A', '2020-03-01T11:34:20.000000Z'),
      realItem(cogs.base, 'S2B_29RKH_20200303_0_L2A', '2020-03-03T11:34:20.000000Z'),
    );
    const before = (await events()).length;
    const [cursorBefore] = await t.db.query<{ cursor: Date }>(
      'SELECT cursor FROM imagery_subscriptions WHERE id = $1',
      [subId],
    );
    // The killed worker: it stops for good after its first registration, holding a short lease.
    let hang!: () => void;
    const hung = new Promise<void>((r) => (hang = r));
    const sub = await claimSubscription(t.db, subId, 'killed', 300);
    const killed = pollSubscription(
      pollDeps({ onItem: async (o) => (o === 'registered' ? hung : undefined) }),
      sub!,
      'killed',
    );
    await expect.poll(async () => (await events()).length, { timeout: 30_000 }).toBe(before + 2);
    // Nothing recorded: the cursor did not move.
    const [mid] = await t.db.query<{ cursor: Date }>('SELECT cursor FROM imagery_subscriptions WHERE id = $1', [subId]);
    expect(mid!.cursor.getTime()).toBe(cursorBefore!.cursor.getTime());
    await new Promise((r) => setTimeout(r, 350)); // the lease runs out
    await requestPoll();
    const [rerun] = await scheduler().tick();
    expect(rerun).toMatchObject({ outcome: 'ok', registered: 1 });
    const evs = (await events()).slice(before);
    expect(evs).toHaveLength(4); // two Items, two fields, once each
    expect(new Set(evs.map((e) => `${e.capture_date} ${e.field_id}`)).size).toBe(4);
    hang();
    expect((await killed).outcome).toBe('lease_lost');
  });

  it('malformed Items are skipped with a metric, and the poll goes on', async () => {
    const skippedBefore = await metricValue('subscription_items_total', { subscription: subId, outcome: 'skipped' });
    const noAssets = realItem(cogs.base, 'S2A_29RKH_20200305_0_L2A', '2020-03-05T11:34:20.000000Z');
    noAssets.assets = { thumbnail: { href: `${cogs.base}/thumbnail.jpg` } };
    const missingFile = realItem(cogs.base, 'S2A_29RKH_20200306_0_L2A', '2020-03-06T11:34:20.000000Z');
    (missingFile.assets as Record<string, { href: string }>).red!.href = `${cogs.base}/missing.tif`;
    api.items.push(
      realItem(cogs.base, 'S2A_29RKH_20200304_0_L2A', undefined),
      noAssets,
      missingFile,
      realItem(cogs.base, 'S2B_29RKH_20200307_0_L2A', '2020-03-07T11:34:20.000000Z'),
    );
    await requestPoll();
    const [result] = await scheduler().tick();
    expect(result).toMatchObject({ outcome: 'ok', registered: 1, skipped: 3, failed: 0 });
    expect(await metricValue('subscription_items_total', { subscription: subId, outcome: 'skipped' })).toBe(
      skippedBefore + 3,
    );
    expect(await subscription()).toMatchObject({ last_error: null });
    const [row] = await t.db.query<{ cursor: Date }>('SELECT cursor FROM imagery_subscriptions WHERE id = $1', [subId]);
    expect(row!.cursor.toISOString()).toBe('2020-03-07T11:34:20.000Z');
  });

  it('STAC APIs that are down are backed off with last_error; the others are polled; the service stays ready', async () => {
    const down = await stacApi();
    const limited = await stacApi();
    down.mode = '500';
    limited.mode = '429';
    const refused = await stacApi();
    const refusedRoot = refused.root;
    await closeServer(refused.server); // nothing listens there any more
    const ids: Record<string, string> = {};
    for (const [name, url] of [
      ['down', down.root],
      ['limited', limited.root],
      ['refused', refusedRoot],
    ]) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/v1/imagery/subscriptions',
        headers: t.auth(),
        payload: { stac_api_url: url, start_date: '2020-02-01' },
      });
      expect(res.statusCode, res.body).toBe(201);
      ids[name!] = res.json().id;
    }
    api.items.push(realItem(cogs.base, 'S2A_29RKH_20200309_0_L2A', '2020-03-09T11:34:20.000000Z'));
    await requestPoll();
    const results = await scheduler().tick();
    expect(results.map((r) => r.outcome).sort()).toEqual(['error', 'error', 'ok', 'rate_limited']);
    expect(results.find((r) => r.outcome === 'ok')).toMatchObject({ registered: 1 });
    const rows = await t.db.query<{ id: string; last_error: string; failures: number; wait: number }>(
      `SELECT id, last_error, failures, extract(epoch FROM next_poll_at - now())::float8 AS wait
         FROM imagery_subscriptions WHERE id = ANY($1::text[])`,
      [Object.values(ids)],
    );
    const by = Object.fromEntries(rows.map((r) => [r.id, r]));
    expect(by[ids.down!]!.last_error).toMatch(/HTTP 500/);
    expect(by[ids.refused!]!.last_error).toMatch(/ECONNREFUSED/);
    expect(by[ids.limited!]!.last_error).toMatch(/429/);
    for (const r of rows) expect(r.failures).toBe(1);
    // 429: Retry-After (120 s); the others: SUBSCRIPTION_POLL_INTERVAL × 2^0 (600 s).
    expect(by[ids.limited!]!.wait).toBeGreaterThan(100);
    expect(by[ids.limited!]!.wait).toBeLessThanOrEqual(120);
    expect(by[ids.down!]!.wait).toBeGreaterThan(500);
    // Backing off: not due, even on request.
    expect(
      (await t.app.inject({ method: 'GET', url: `/v1/imagery/subscriptions/${ids.down}`, headers: t.auth() })).json(),
    ).toMatchObject({ last_error: expect.stringMatching(/HTTP 500/) });
    expect((await t.app.inject({ method: 'GET', url: '/readyz' })).statusCode).toBe(200);
    expect(await metricValue('subscription_polls_total', { subscription: ids.limited!, outcome: 'rate_limited' })).toBe(
      1,
    );
    await closeServer(down.server);
    await closeServer(limited.server);
  });
});
