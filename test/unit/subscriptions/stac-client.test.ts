/**
 * The STAC API client's edge cases against tiny in-test HTTP servers: GET fallback, both `next`
 * forms, cloud filters by conformance, typed errors, the address check and the size limit.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterEach, describe, expect, it } from 'vitest';
import {
  retryAfterMs,
  StacApiError,
  StacClient,
  StacRateLimitedError,
  StacRetryableError,
  type SearchParams,
} from '../../../src/subscriptions/stac-client.js';

interface Seen {
  method: string;
  url: string;
  body: Record<string, unknown> | null;
}

type Handler = (req: Seen, res: http.ServerResponse, root: string) => void;

const servers: http.Server[] = [];
afterEach(async () => {
  await Promise.all(servers.splice(0).map((s) => new Promise((r) => s.close(r))));
});

async function serve(handler: Handler): Promise<{ root: string; seen: Seen[] }> {
  const seen: Seen[] = [];
  let root = '';
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const text = Buffer.concat(chunks).toString('utf8');
      const s = { method: req.method!, url: req.url!, body: text ? JSON.parse(text) : null };
      seen.push(s);
      handler(s, res, root);
    });
  });
  servers.push(server);
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  root = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return { root, seen };
}

const json = (res: http.ServerResponse, status: number, body: unknown, headers: Record<string, string> = {}) =>
  res.writeHead(status, { 'content-type': 'application/json', ...headers }).end(JSON.stringify(body));

const landing = (root: string, conformsTo: string[], methods = ['GET', 'POST']) => ({
  type: 'Catalog',
  conformsTo,
  links: methods.map((method) => ({ rel: 'search', href: `${root}/search`, method })),
});

const params: SearchParams = {
  collections: ['sentinel-2-l2a'],
  intersects: {
    type: 'MultiPolygon',
    coordinates: [
      [
        [
          [0, 0],
          [1, 0],
          [1, 1],
          [0, 1],
          [0, 0],
        ],
      ],
    ],
  },
  datetime: '2025-01-01T00:00:00Z/..',
  limit: 100,
  maxCloudCover: 40,
};

const client = (o: Partial<ConstructorParameters<typeof StacClient>[0]> = {}) =>
  new StacClient({ allowPrivateNetworks: true, ...o });

async function pages(c: StacClient, root: string, maxPages = 50, state: { truncated?: boolean } = {}) {
  const out = [];
  for await (const p of c.search(root, params, maxPages, state)) out.push(p);
  return out;
}

const ITEM = (id: string) => ({ type: 'Feature', id, properties: { datetime: '2025-01-02T00:00:00Z' } });

describe('STAC API client', () => {
  it('POSTs with the Query extension and follows a POST next link, merging its body', async () => {
    const { root, seen } = await serve((req, res, r) => {
      if (req.url === '/')
        return json(res, 200, landing(r, ['https://api.stacspec.org/v1.0.0-rc.1/item-search#query']));
      if (!req.body?.token) {
        return json(res, 200, {
          features: [ITEM('a')],
          links: [{ rel: 'next', href: `${r}/search`, method: 'POST', body: { token: 't2' }, merge: true }],
        });
      }
      json(res, 200, { features: [ITEM('b')], links: [] });
    });
    const got = await pages(client(), root);
    expect(got.map((p) => p.items.map((i) => i.id))).toEqual([['a'], ['b']]);
    expect(got[0]!.cloudFiltered).toBe(true);
    const [, first, second] = seen;
    expect(first!.body).toMatchObject({
      collections: ['sentinel-2-l2a'],
      datetime: '2025-01-01T00:00:00Z/..',
      limit: 100,
      query: { 'eo:cloud_cover': { lte: 40 } },
    });
    // merge: the original body with the link's members
    expect(second!.body).toEqual({ ...first!.body, token: 't2' });
  });

  it('a POST next link without merge sends only its body', async () => {
    const { root, seen } = await serve((req, res, r) => {
      if (req.url === '/') return json(res, 200, landing(r, []));
      if (!req.body?.next)
        return json(res, 200, {
          features: [],
          links: [{ rel: 'next', href: `${r}/search`, method: 'POST', body: { next: 'x' } }],
        });
      json(res, 200, { features: [] });
    });
    await pages(client(), root);
    expect(seen.at(-1)!.body).toEqual({ next: 'x' }); // (seen[1]: /conformance, the landing page lists none)
  });

  it('uses GET when the landing page has no POST link, CQL2 text from the conformance page, and GET next hrefs', async () => {
    const { root, seen } = await serve((req, res, r) => {
      if (req.url === '/') return json(res, 200, { links: [{ rel: 'search', href: `${r}/search` }] });
      if (req.url === '/conformance')
        return json(res, 200, {
          conformsTo: [
            'https://api.stacspec.org/v1.0.0-rc.3/item-search#filter',
            'http://www.opengis.net/spec/cql2/1.0/conf/cql2-text',
          ],
        });
      if (req.url.includes('page=2')) return json(res, 200, { features: [ITEM('b')] });
      json(res, 200, { features: [ITEM('a')], links: [{ rel: 'next', href: `${r}/search?page=2` }] });
    });
    const got = await pages(client(), root);
    expect(got.flatMap((p) => p.items.map((i) => i.id))).toEqual(['a', 'b']);
    const search = new URL(seen[2]!.url, root);
    expect(seen[2]!.method).toBe('GET');
    expect(search.searchParams.get('collections')).toBe('sentinel-2-l2a');
    expect(JSON.parse(search.searchParams.get('intersects')!).type).toBe('MultiPolygon');
    expect(search.searchParams.get('filter-lang')).toBe('cql2-text');
    expect(search.searchParams.get('filter')).toBe('eo:cloud_cover <= 40');
    expect(seen[3]).toMatchObject({ method: 'GET', url: '/search?page=2' });
  });

  it('falls back to GET when POST answers 405, sends CQL2 JSON, and leaves filtering to the caller without either', async () => {
    const { root, seen } = await serve((req, res, r) => {
      if (req.url === '/')
        return json(
          res,
          200,
          landing(r, [
            'http://www.opengis.net/spec/ogcapi-features-3/1.0/conf/filter',
            'http://www.opengis.net/spec/cql2/1.0/conf/cql2-json',
          ]),
        );
      if (req.method === 'POST') return json(res, 405, { code: 'MethodNotAllowed' });
      json(res, 200, { features: [ITEM('a')] });
    });
    const c = client();
    await pages(c, root);
    expect(seen.map((s) => s.method)).toEqual(['GET', 'POST', 'GET']);
    const q = new URL(seen[2]!.url, root).searchParams;
    expect(q.get('filter-lang')).toBe('cql2-json');
    expect(JSON.parse(q.get('filter')!)).toEqual({ op: '<=', args: [{ property: 'eo:cloud_cover' }, 40] });
    await pages(c, root); // remembered: GET at once
    expect(seen.slice(3).map((s) => s.method)).toEqual(['GET']);

    const plain = await serve((req, res, r) => {
      if (req.url === '/') return json(res, 200, landing(r, ['https://api.stacspec.org/v1.0.0/item-search']));
      json(res, 200, { features: [ITEM('a')] });
    });
    const [p] = await pages(client(), plain.root);
    expect(p!.cloudFiltered).toBe(false);
    expect(plain.seen[1]!.body).not.toHaveProperty('query');
    expect(plain.seen[1]!.body).not.toHaveProperty('filter');
  });

  it('stops at maxPages and says so; a next link to the same page is not followed again', async () => {
    const { root } = await serve((req, res, r) => {
      if (req.url === '/') return json(res, 200, landing(r, []));
      json(res, 200, { features: [ITEM('a')], links: [{ rel: 'next', href: `${r}/search?p=1` }] });
    });
    const state: { truncated?: boolean } = {};
    expect(await pages(client(), root, 2, state)).toHaveLength(2);
    expect(state.truncated).toBe(true);
    const loop: { truncated?: boolean } = {};
    expect(await pages(client(), root, 50, loop)).toHaveLength(2);
    expect(loop.truncated).toBe(false);
  });

  it('types errors: 429 with its Retry-After, 5xx and refused connections retryable, others not', async () => {
    let status = 429;
    const { root } = await serve((req, res, r) => {
      if (req.url === '/') return json(res, 200, landing(r, []));
      if (status === 429) return json(res, 429, {}, { 'retry-after': '30' });
      if (status === 200) return res.writeHead(200).end('<html>not json</html>');
      json(res, status, { description: 'bad intersects' });
    });
    const c = client();
    const err = await pages(c, root).catch((e) => e);
    expect(err).toBeInstanceOf(StacRateLimitedError);
    expect(err.retryAfterMs).toBe(30_000);
    status = 503;
    await expect(pages(c, root)).rejects.toBeInstanceOf(StacRetryableError);
    status = 400;
    const bad = await pages(c, root).catch((e) => e);
    expect(bad).toBeInstanceOf(StacApiError);
    expect(bad).not.toBeInstanceOf(StacRetryableError);
    expect(bad.message).toMatch(/HTTP 400.*bad intersects/);
    status = 200;
    await expect(pages(c, root)).rejects.toThrow(/not JSON/);
    const gone = await serve(() => {});
    await new Promise((r) => servers.pop()!.close(r));
    await expect(pages(client(), gone.root)).rejects.toThrow(StacRetryableError);
  });

  it('times out, refuses oversized answers, and refuses private addresses unless allowed or trusted', async () => {
    const { root } = await serve((req, res, r) => {
      if (req.url === '/') return json(res, 200, landing(r, []));
      if (req.body?.limit === 100) return; // never answers
    });
    await expect(pages(client({ timeoutMs: 200 }), root)).rejects.toThrow(/no complete answer within 200 ms/);
    const big = await serve((_req, res) => json(res, 200, { pad: 'x'.repeat(10_000) }));
    await expect(pages(client({ maxResponseBytes: 1000 }), big.root)).rejects.toThrow(/larger than 1000 bytes/);
    await expect(pages(client({ allowPrivateNetworks: false }), big.root)).rejects.toThrow(
      /not a public address.*SUBSCRIPTIONS_ALLOW_PRIVATE_NETWORKS/,
    );
    const trusted = client({ allowPrivateNetworks: false });
    await expect(trusted.capabilitiesOf(big.root, true)).resolves.toMatchObject({ post: true, cloudFilter: null });
    // a name resolving to a private address is refused at connect time
    const named = new StacClient({
      allowPrivateNetworks: false,
      lookup: async () => [{ address: '127.0.0.1', family: 4 }],
    });
    await expect(named.capabilitiesOf(`http://stac.example.com:${new URL(big.root).port}`)).rejects.toThrow(
      /not a public address/,
    );
  });

  it('reads Retry-After as seconds or an HTTP date', () => {
    expect(retryAfterMs('120')).toBe(120_000);
    expect(retryAfterMs(new Date(Date.UTC(2030, 0, 1, 0, 1)).toUTCString(), Date.UTC(2030, 0, 1))).toBe(60_000);
    expect(retryAfterMs('soon')).toBeNull();
    expect(retryAfterMs(undefined)).toBeNull();
  });
});
