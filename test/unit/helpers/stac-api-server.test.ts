/**
 * The test STAC API (test/helpers/stac-api-server.ts) against the STAC API v1.0.0 specification:
 * landing page and conformance, GET and POST Item Search agreeing, paging through `next` links
 * (GET href, POST body + merge) returning every Item once, the datetime/bbox/intersects/query/
 * filter parameters, 400s the spec asks for, and the test controls (429, failures, down and up).
 * Also the fixtures: the real Earth Search Item's assets answer Range requests from the range
 * server, and both kinds of Item read as captures the way registration reads them.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { captureFromStac } from '../../../src/imagery/stac.js';
import { startRangeServer, type RangeServer } from '../../helpers/range-server.js';
import { hasRealData } from '../../helpers/real-data.js';
import { CONFORMANCE, startStacApiServer, type StacApiServer, type StacItem } from '../../helpers/stac-api-server.js';
import { demoSeasonItems, RKH_DIR, RKH_ITEM_ID, realRkhItem } from '../../helpers/stac-items.js';

type Json = Record<string, any>;

let api: StacApiServer;
let range: RangeServer;
let scratch: string;
let demo: StacItem[];
let real: StacItem;
const DATES = ['2025-04-01', '2025-04-07', '2025-04-13', '2025-04-19', '2025-04-25', '2025-05-01', '2025-05-07'];

async function get(url: string): Promise<{ status: number; json: Json; headers: Headers }> {
  const r = await fetch(url);
  return { status: r.status, json: (await r.json()) as Json, headers: r.headers };
}
async function post(url: string, body: unknown): Promise<{ status: number; json: Json; headers: Headers }> {
  const r = await fetch(url, {
    method: 'POST',
    headers: { 'content-type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: r.status, json: (await r.json()) as Json, headers: r.headers };
}
const qs = (p: Json) =>
  new URLSearchParams(
    Object.entries(p).map(([k, v]): [string, string] => [
      k,
      Array.isArray(v) ? v.join(',') : typeof v === 'object' ? JSON.stringify(v) : String(v),
    ]),
  ).toString();
const idsOf = (fc: Json) => (fc.features as Json[]).map((f) => f.id as string);

/** Every Item of a search, following next links as a client must (GET href; POST body, merged when asked). */
async function all(method: 'GET' | 'POST', params: Json): Promise<{ ids: string[]; pages: number }> {
  let res = method === 'GET' ? await get(`${api.url}/search?${qs(params)}`) : await post(`${api.url}/search`, params);
  const ids: string[] = [];
  let pages = 0;
  for (;;) {
    expect(res.status).toBe(200);
    pages++;
    ids.push(...idsOf(res.json));
    const next = (res.json.links as Json[]).find((l) => l.rel === 'next');
    if (!next) return { ids, pages };
    if ((next.method ?? 'GET') === 'GET') res = await get(next.href);
    else res = await post(next.href, next.merge ? { ...params, ...next.body } : next.body);
  }
}

beforeAll(async () => {
  scratch = mkdtempSync(path.join(os.tmpdir(), 'stac-api-'));
  range = await startRangeServer();
  api = await startStacApiServer();
  demo = demoSeasonItems(range, scratch, { dates: DATES });
  api.publish(...demo);
  if (hasRealData) {
    real = realRkhItem(range);
    api.publish(real);
  }
});
afterAll(async () => {
  await api?.close();
  await range?.close();
  rmSync(scratch, { recursive: true, force: true });
});

describe('landing page, conformance, collections', () => {
  it('the landing page links conformance, data and search by GET and POST; /conformance agrees', async () => {
    const { status, json } = await get(`${api.url}/`);
    expect(status).toBe(200);
    expect(json).toMatchObject({ type: 'Catalog', stac_version: '1.0.0' });
    expect(json.conformsTo).toEqual(
      expect.arrayContaining([CONFORMANCE.core, CONFORMANCE.itemSearch, CONFORMANCE.collections, CONFORMANCE.query]),
    );
    const rels = (json.links as Json[]).map((l) => `${l.rel} ${l.method ?? ''}`.trim());
    expect(rels).toEqual(expect.arrayContaining(['self', 'root', 'conformance', 'data', 'search GET', 'search POST']));
    for (const l of (json.links as Json[]).filter((x) => x.rel === 'search')) {
      expect(l.type).toBe('application/geo+json');
      expect(l.href).toBe(`${api.url}/search`);
    }
    const conf = await get(`${api.url}/conformance`);
    expect(conf.json.conformsTo).toEqual(json.conformsTo);
  });

  it('collections list the Items’ collection, an unknown one is 404, an Item reads by its link', async () => {
    const { json } = await get(`${api.url}/collections`);
    expect((json.collections as Json[]).map((c) => c.id)).toEqual(['sentinel-2-l2a']);
    expect((await get(`${api.url}/collections/sentinel-2-l2a`)).json).toMatchObject({
      type: 'Collection',
      id: 'sentinel-2-l2a',
    });
    expect((await get(`${api.url}/collections/nope`)).status).toBe(404);
    const one = (await get(`${api.url}/search?limit=1`)).json.features[0];
    const self = (one.links as Json[]).find((l) => l.rel === 'self')!.href;
    expect((await get(self)).json.id).toBe(one.id);
  });

  it('without POST and Query: no POST link, POST /search answers 405, query is neither advertised nor applied', async () => {
    const bare = await startStacApiServer({ post: false, query: false });
    try {
      bare.publish(...demo);
      const landing = (await get(`${bare.url}/`)).json;
      expect((landing.links as Json[]).filter((l) => l.rel === 'search').map((l) => l.method)).toEqual(['GET']);
      expect(landing.conformsTo).not.toContain(CONFORMANCE.query);
      expect((await post(`${bare.url}/search`, {})).status).toBe(405);
      const q = qs({ query: { 'eo:cloud_cover': { lt: -1 } }, limit: 100 });
      expect(idsOf((await get(`${bare.url}/search?${q}`)).json)).toHaveLength(demo.length);
    } finally {
      await bare.close();
    }
  });

  it('with filter: CQL2 JSON (POST) and text (GET) select the same Items as query', async () => {
    const f = await startStacApiServer({ filter: true });
    try {
      f.publish(...demo);
      expect((await get(`${f.url}/conformance`)).json.conformsTo).toContain(CONFORMANCE.cql2Json);
      const byQuery = idsOf(
        (await post(`${f.url}/search`, { query: { 'eo:cloud_cover': { lte: 10 } }, limit: 100 })).json,
      );
      const json = idsOf(
        (
          await post(`${f.url}/search`, {
            'filter-lang': 'cql2-json',
            filter: { op: '<=', args: [{ property: 'eo:cloud_cover' }, 10] },
            limit: 100,
          })
        ).json,
      );
      const text = idsOf((await get(`${f.url}/search?${qs({ filter: 'eo:cloud_cover <= 10', limit: 100 })}`)).json);
      expect(byQuery.length).toBeGreaterThan(0);
      expect(byQuery.length).toBeLessThan(demo.length);
      expect(json).toEqual(byQuery);
      expect(text).toEqual(byQuery);
    } finally {
      await f.close();
    }
  });
});

describe('Item Search', () => {
  it('GET and POST answer the same Items for the same parameters', async () => {
    const field = demo[0]!.geometry as Json;
    const cases: Json[] = [
      {},
      { limit: 3 },
      { collections: ['sentinel-2-l2a'], datetime: `${DATES[1]}T00:00:00Z/${DATES[4]}T23:59:59Z` },
      { intersects: field, query: { 'eo:cloud_cover': { lte: 20 } } },
      { bbox: [4.7, 50.5, 4.8, 50.6], ids: [demo[2]!.id, demo[3]!.id, 'nope'] },
    ];
    for (const c of cases) {
      const g = await get(`${api.url}/search?${qs(c)}`);
      const p = await post(`${api.url}/search`, c);
      expect(g.status).toBe(200);
      expect(g.headers.get('content-type')).toBe('application/geo+json');
      expect(g.json.type).toBe('FeatureCollection');
      expect(idsOf(p.json)).toEqual(idsOf(g.json));
      expect(idsOf(g.json).length).toBeLessThanOrEqual(c.limit ?? 10);
    }
  });

  it('paging through next links returns every Item once, sorted by datetime then id, by GET and by POST', async () => {
    const expected = api.items().map((i) => i.id);
    expect(expected.length).toBe(DATES.length + (hasRealData ? 1 : 0));
    for (const method of ['GET', 'POST'] as const) {
      const { ids, pages } = await all(method, { limit: 2, collections: ['sentinel-2-l2a'] });
      expect(ids).toEqual(expected);
      expect(pages).toBe(Math.ceil(expected.length / 2));
    }
    // The POST next link carries a token to merge into the original body, as the spec's example does.
    const first = await post(`${api.url}/search`, { limit: 2 });
    expect((first.json.links as Json[]).find((l) => l.rel === 'next')).toMatchObject({
      method: 'POST',
      merge: true,
      body: { token: expect.any(String) },
    });
  });

  it('an Item published between two pages is neither repeated nor skipped when it sorts after the page', async () => {
    const page1 = await get(`${api.url}/search?limit=3`);
    const later: Json = { ...structuredClone(demo.at(-1)!), id: 'S2B_31UFS_20250601_0_L2A' };
    (later.properties as Json).datetime = '2025-06-01T10:46:19.024Z';
    api.publish(later as StacItem);
    try {
      let res = page1;
      const ids = idsOf(page1.json);
      for (let next = (res.json.links as Json[]).find((l) => l.rel === 'next'); next; ) {
        res = await get(next.href);
        ids.push(...idsOf(res.json));
        next = (res.json.links as Json[]).find((l) => l.rel === 'next');
      }
      expect(ids).toEqual(api.items().map((i) => i.id));
      expect(ids.filter((i) => i === later.id)).toHaveLength(1);
    } finally {
      expect(api.remove(later.id)).toBe(true);
    }
  });

  it('datetime: an instant, a date, closed and open intervals', async () => {
    const ids = async (datetime: string) => (await all('GET', { datetime, limit: 100 })).ids;
    const d = (k: number) => demo[k]!.id;
    expect(await ids('2025-04-07T10:46:19.024Z')).toEqual([d(1)]);
    expect(await ids('2025-04-07')).toEqual([d(1)]);
    expect(await ids('2025-04-06T00:00:00Z/2025-04-14T00:00:00Z')).toEqual([d(1), d(2)]);
    expect(await ids('2025-04-20T00:00:00Z/..')).toEqual([d(4), d(5), d(6)]);
    expect(await ids('../2025-04-02T00:00:00Z')).toEqual([...(hasRealData ? [RKH_ITEM_ID] : []), d(0)]);
    expect(await ids('/2025-04-02T00:00:00Z')).toEqual(await ids('../2025-04-02T00:00:00Z'));
    // not RFC 3339: V8's Date.parse took the last four (2025-02-30 as 2 March, hour 24 as the next day)
    for (const bad of [
      'yesterday',
      '../..',
      '2025-04-10T00:00:00Z/2025-04-01T00:00:00Z',
      '2025-13-01T00:00:00Z',
      '2025-02-30',
      '2025-02-30T10:00:00Z/..',
      '2025-04-31T00:00:00Z',
      '2025-04-07T24:00:00Z',
    ])
      expect((await get(`${api.url}/search?${qs({ datetime: bad })}`)).status).toBe(400);
  });

  it.runIf(hasRealData)('bbox and intersects test the footprint itself, not its bounding box', async () => {
    // A small square inside the real Item's bbox but east of its slanted eastern edge.
    const sq = (x: number, y: number, r: number) => ({
      type: 'Polygon',
      coordinates: [
        [
          [x - r, y - r],
          [x + r, y - r],
          [x + r, y + r],
          [x - r, y + r],
          [x - r, y - r],
        ],
      ],
    });
    const outside = sq(-10.878, 25.3, 0.001);
    const inside = sq(-11.4, 24.8, 0.001);
    const ids = async (p: Json) => idsOf((await post(`${api.url}/search`, { ...p, limit: 100 })).json);
    expect(await ids({ intersects: outside })).toEqual([]);
    expect(await ids({ bbox: [-10.879, 25.299, -10.877, 25.301] })).toEqual([]);
    expect(await ids({ intersects: inside })).toEqual([RKH_ITEM_ID]);
    expect(
      await ids({ intersects: { type: 'MultiPolygon', coordinates: [outside.coordinates, inside.coordinates] } }),
    ).toEqual([RKH_ITEM_ID]);
    // A box wholly containing the footprint, a point inside it, a line across it, a degenerate bbox.
    expect(await ids({ bbox: [-13, 23, -10, 26] })).toEqual([RKH_ITEM_ID]);
    expect(await ids({ intersects: { type: 'Point', coordinates: [-11.4, 24.8] } })).toEqual([RKH_ITEM_ID]);
    expect(
      await ids({
        intersects: {
          type: 'LineString',
          coordinates: [
            [-13, 24.8],
            [-9, 24.8],
          ],
        },
      }),
    ).toEqual([RKH_ITEM_ID]);
    expect(await ids({ bbox: [-11.4, 24.8, -11.4, 24.8] })).toEqual([RKH_ITEM_ID]);
    // The demo's field sits in Belgium: its own footprint answers every demo Item and not the Sahara one.
    expect(await ids({ intersects: demo[0]!.geometry })).toEqual(demo.map((i) => i.id));
  });

  it('query: comparison operators on eo:cloud_cover; ids and collections', async () => {
    const cc = (i: StacItem) => (i.properties as Json)['eo:cloud_cover'] as number;
    const items = api.items();
    const ids = async (p: Json) => (await all('POST', { ...p, limit: 100 })).ids;
    const pick = (f: (x: number) => boolean) => items.filter((i) => f(cc(i))).map((i) => i.id);
    expect(await ids({ query: { 'eo:cloud_cover': { lte: 10 } } })).toEqual(pick((x) => x <= 10));
    expect(await ids({ query: { 'eo:cloud_cover': { gt: 0, lt: 50 } } })).toEqual(pick((x) => x > 0 && x < 50));
    expect(await ids({ query: { 'eo:cloud_cover': { gte: 0 } } })).toEqual(items.map((i) => i.id));
    expect(await ids({ ids: [demo[3]!.id, demo[1]!.id] })).toEqual([demo[1]!.id, demo[3]!.id]);
    expect(await ids({ collections: ['landsat-c2-l2'] })).toEqual([]);
    expect((await post(`${api.url}/search`, { query: { 'eo:cloud_cover': { below: 3 } } })).status).toBe(400);
  });

  it('limit: default 10, larger than the maximum acts as the maximum, below 1 is a 400; bbox with intersects is a 400', async () => {
    for (let k = 0; k < 12; k++)
      api.publish({ ...structuredClone(demo[0]!), id: `extra-${String(k).padStart(2, '0')}` });
    try {
      expect((await get(`${api.url}/search`)).json.features).toHaveLength(10);
      expect((await get(`${api.url}/search?limit=100000`)).json.features).toHaveLength(api.items().length);
      expect((await get(`${api.url}/search?limit=0`)).status).toBe(400);
    } finally {
      for (let k = 0; k < 12; k++) api.remove(`extra-${String(k).padStart(2, '0')}`);
    }
    const both = await post(`${api.url}/search`, { bbox: [0, 0, 1, 1], intersects: demo[0]!.geometry });
    expect(both.status).toBe(400);
    expect(both.json).toMatchObject({ code: 'BadRequest', description: expect.stringContaining('bbox') });
    expect((await post(`${api.url}/search`, { intersects: { type: 'Circle' } })).status).toBe(400);
  });
});

describe('test controls', () => {
  it('429 with Retry-After, injected 5xx, then normal answers; counted by kind and logged', async () => {
    api.resetLog();
    api.rateLimitNext(1, 7);
    api.failNext(1, 503);
    const r1 = await fetch(`${api.url}/search`);
    expect(r1.status).toBe(429);
    expect(r1.headers.get('retry-after')).toBe('7');
    expect((await post(`${api.url}/search`, {})).status).toBe(503);
    expect((await get(`${api.url}/`)).status).toBe(200); // faults take search requests only by default
    expect((await post(`${api.url}/search`, {})).status).toBe(200);
    expect([api.count('search-get'), api.count('search-post'), api.count('search'), api.count('landing')]).toEqual([
      1, 2, 3, 1,
    ]);
    expect(api.log.map((r) => r.status)).toEqual([429, 503, 200, 200]);
    expect(api.log[3]!.returned).toBeGreaterThan(0);
  });

  it('down refuses connections; up serves again on the same port', async () => {
    const port = api.port;
    await api.down();
    await expect(fetch(`${api.url}/`)).rejects.toThrow();
    await api.up();
    expect(api.port).toBe(port);
    expect((await get(`${api.url}/conformance`)).status).toBe(200);
  });
});

describe('fixtures', () => {
  it.runIf(hasRealData)(
    'the real Item: its remaining assets answer Range requests with the COG bytes, counted',
    async () => {
      const assets = (real.assets ?? {}) as Record<string, { href: string }>;
      expect(
        Object.keys(assets)
          .filter((k) => !k.includes('metadata') && k !== 'thumbnail')
          .sort(),
      ).toEqual(['blue', 'green', 'nir', 'red', 'rededge1', 'scl', 'swir16']);
      range.resetCounters();
      const r = await fetch(assets.red!.href, { headers: { range: 'bytes=100-199' } });
      expect(r.status).toBe(206);
      expect(r.headers.get('content-range')).toMatch(/^bytes 100-199\/\d+$/);
      const body = Buffer.from(await r.arrayBuffer());
      expect(body.equals(readFileSync(path.join(RKH_DIR, 'B04.tif')).subarray(100, 200))).toBe(true);
      expect(range.files.get(path.join(RKH_DIR, 'B04.tif'))).toEqual({ requests: 1, bytes: 100 });
      expect(range.mounts.get('rkh')).toEqual({ requests: 1, bytes: 100 });
      expect((await fetch(assets.red!.href, { headers: { range: 'bytes=99999999-' } })).status).toBe(416);
      expect((await fetch(`${range.url}/rkh/../../etc/passwd`)).status).toBe(404);
      // Read as registration reads it: bands by common name, SCL as the mask, no offset before baseline 04.00.
      const capture = captureFromStac(real);
      expect(Object.keys(capture.bands!).sort()).toEqual(['B02', 'B03', 'B04', 'B05', 'B08', 'B11']);
      expect(capture).toMatchObject({ capture_date: '2020-02-19', offset: 0, mask: { kind: 'scl' } });
    },
  );

  it('the synthetic Items: Earth Search asset keys, a reading as 12 bands + SCL with offset −0.1 on the range server', () => {
    const item = demo[0]!;
    expect(item.id).toBe('S2B_31UFS_20250401_0_L2A'); // the second date of the demo season: S2B
    expect(item.properties).toMatchObject({ 's2:processing_baseline': '05.10', 'proj:epsg': 32631 });
    const capture = captureFromStac(item);
    expect(Object.keys(capture.bands!)).toHaveLength(12);
    const red = capture.bands!.B04 as { href: string; offset: number };
    expect(red.offset).toBe(-0.1);
    expect(red.href.startsWith(`${range.url}/demo/`)).toBe(true);
    expect(capture.mask!.href.endsWith('_SCL.tif')).toBe(true);
  });
});
