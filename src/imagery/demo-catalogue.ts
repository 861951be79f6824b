/**
 * The demo's STAC API: the last captures of the demo season (demo.ts) are not registered directly
 * but written as Earth Search-shaped STAC Items (synthetic.ts: syntheticItem; their asset hrefs are
 * the files in DATA_DIR/demo, inside IMAGERY_ROOTS) to a static catalogue file, which the service
 * serves as a read-only STAC API (stac-api.ts: landing page, conformance, collections, Item Search
 * by GET and POST) under /demo/stac on its own HTTP server, without an API key. The demo account's
 * subscription points at it (src/main.ts), so that those captures arrive through the same code path
 * as from Earth Search: search, registration, imagery.available. Nothing leaves the machine.
 */
import { mkdir, readFile, rename, stat, writeFile } from 'node:fs/promises';
import path from 'node:path';
import type { FastifyReply, FastifyRequest } from 'fastify';
import type { Config } from '../platform/config.js';
import { routePlugin } from '../platform/http/context.js';
import { answerStacApi, sortItems, type StacApiOptions, type StacItem } from './stac-api.js';

export const DEMO_STAC_PATH = '/demo/stac';

const OPTIONS: StacApiOptions = {
  id: 'demo',
  title: 'Demo season catalogue',
  description: 'Synthetic Sentinel-2 L2A Items of the demo season, served by the service itself',
  collections: { 'sentinel-2-l2a': 'Sentinel-2 L2A (synthetic demo season)' },
};

/** Where the demo catalogue's Items are kept: DATA_DIR/demo/stac/items.json (the first imagery root). */
export function demoCatalogueFile(roots: readonly string[]): string {
  return path.join(roots[0]!, 'demo', 'stac', 'items.json');
}

/** Writes the catalogue's Items as an ItemCollection (to a temporary file renamed over the old one). */
export async function writeDemoCatalogue(file: string, items: StacItem[]): Promise<void> {
  await mkdir(path.dirname(file), { recursive: true });
  const tmp = `${file}.${process.pid}.tmp`;
  await writeFile(tmp, JSON.stringify({ type: 'FeatureCollection', features: items }));
  await rename(tmp, file);
}

/**
 * The demo catalogue's API root as the worker reaches it: the API's own listener, on loopback when
 * it listens on every address.
 */
export function demoStacUrl(config: Pick<Config, 'host' | 'port'>): string {
  const h = config.host;
  const host =
    h === '0.0.0.0' || h === '' || h === 'localhost'
      ? '127.0.0.1'
      : h === '::' || h.includes(':')
        ? `[${h === '::' ? '::1' : h}]`
        : h;
  return `http://${host}:${config.port}${DEMO_STAC_PATH}`;
}

/** GET/POST /demo/stac[/…]: the demo catalogue as a STAC API; 404 until the demo has written it. */
export const demoCatalogueRoutes = routePlugin(
  'demo-catalogue',
  async (app) => {
    const file = demoCatalogueFile(app.imagery.roots);
    let cache: { mtimeMs: number; items: StacItem[] } | undefined;
    const load = async (): Promise<StacItem[] | undefined> => {
      const st = await stat(file).catch(() => undefined);
      if (!st) return undefined;
      if (cache?.mtimeMs !== st.mtimeMs) {
        const fc = JSON.parse(await readFile(file, 'utf8')) as { features?: StacItem[] };
        cache = { mtimeMs: st.mtimeMs, items: sortItems(fc.features ?? []) };
      }
      return cache.items;
    };
    const handler = async (req: FastifyRequest, reply: FastifyReply) => {
      const items = await load();
      if (!items) {
        return reply.code(404).send({
          code: 'NotFound',
          description: 'no demo catalogue: it is written by the demo on the first start of an empty embedded database',
        });
      }
      const u = new URL(req.raw.url ?? '/', 'http://x');
      const parts = u.pathname.slice(DEMO_STAC_PATH.length).split('/').filter(Boolean).map(decodeURIComponent);
      // Links point back where the request came from (the worker reaches the API on loopback).
      const root = `${req.protocol}://${req.host}${DEMO_STAC_PATH}`;
      const a = answerStacApi(items, root, OPTIONS, {
        method: req.method,
        parts,
        query: u.searchParams,
        body: req.body,
      });
      return reply
        .code(a.status)
        .type(a.headers?.['content-type'] ?? 'application/json')
        .send(a.json);
    };
    for (const url of [DEMO_STAC_PATH, `${DEMO_STAC_PATH}/*`])
      app.route({ method: ['GET', 'POST'], url, handler, schema: { hide: true } });
  },
  { public: true },
);
