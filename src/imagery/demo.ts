/**
 * The demo created on the first start of an empty embedded database: a field and a season of
 * synthetic Sentinel-2-like captures (every L2A band formulas accept, at its native resolution),
 * so that every index and time-series call in the README works on a fresh machine. With
 * `catalogue`, the last captures are not registered here but published as STAC Items in the demo
 * catalogue (demo-catalogue.ts) for a subscription to find.
 */
import path from 'node:path';
import { setImmediate as nextTurn } from 'node:timers/promises';
import { createField } from '../fields/index.js';
import { demoCatalogueFile, writeDemoCatalogue } from './demo-catalogue.js';
import { registerImagery, type ImageryDeps } from './service.js';
import type { StacItem } from './stac-api.js';
import { datesEvery, sceneField, syntheticItem, syntheticSteps } from './synthetic.js';

export interface DemoResult {
  fieldId: string;
  /** Captures registered directly. */
  captures: number;
  bands: number;
  firstDate: string;
  lastDate: string;
  /** Captures published in the demo catalogue instead (0 without `catalogue`), from `catalogueFrom`. */
  catalogued: number;
  catalogueFrom?: string;
}

/** Near Gembloux (BE), UTM 31N: a 1.6 km square scene; the field is its central 64 ha. */
export const DEMO_SCENE = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 160, seed: 2025 };
export const DEMO_DATES = datesEvery('2025-03-26', '2025-10-07', 6);
/** The crop's planting and harvest dates (the synthetic growth curve follows them). */
export const DEMO_SEASON = { planting: '2025-04-10', harvest: '2025-09-20' };

/**
 * Writes and registers the demo season. Each capture is registered (its files inspected and its
 * cover of the field computed on the compute pool) while the next one is written on this thread,
 * a file at a time. With a signal, stops between captures once it is aborted (rejecting with its
 * reason).
 */
export async function createDemo(
  deps: ImageryDeps & { maxAreaHa: number },
  accountId: string,
  opts: {
    signal?: AbortSignal;
    /** Publish the last `last` captures in the demo catalogue instead of registering them. */
    catalogue?: { last: number };
  } = {},
): Promise<DemoResult> {
  const catalogued = Math.max(0, Math.min(DEMO_DATES.length, opts.catalogue?.last ?? 0));
  const cut = DEMO_DATES.length - catalogued;
  const items: StacItem[] = [];
  const dir = path.join(deps.roots[0]!, 'demo');
  const field = await createField(
    deps.db,
    accountId,
    {
      name: 'Demo field (synthetic)',
      boundary: sceneField(DEMO_SCENE) as never,
      crop_type: 'maize',
      planting_date: DEMO_SEASON.planting,
      harvest_date: DEMO_SEASON.harvest,
    },
    { maxAreaHa: deps.maxAreaHa },
  );
  let registering: Promise<unknown> = Promise.resolve();
  let bands = 0;
  // DEFLATE level 1: the season is written on a first start, where time counts more than 5 % of disk.
  for (const c of syntheticSteps(dir, DEMO_SCENE, DEMO_DATES, DEMO_SEASON.planting, DEMO_SEASON.harvest, {
    deflateLevel: 1,
  })) {
    // A turn of the event loop between files: requests are served while the demo is written.
    if (!c) {
      await nextTurn();
      continue;
    }
    await registering;
    opts.signal?.throwIfAborted();
    bands = Object.keys(c.files).length;
    const k = DEMO_DATES.indexOf(c.date);
    if (k >= cut) {
      items.push(syntheticItem(c, DEMO_SCENE, k));
      continue;
    }
    registering = registerImagery(
      {
        db: deps.db,
        compute: deps.compute,
        roots: deps.roots,
        evaluateAlerts: deps.evaluateAlerts,
        alertFields: deps.alertFields,
      },
      accountId,
      {
        source: 'sentinel-2-l2a',
        capture_date: c.date,
        cloud_cover: Math.round(c.cloudiness * 1000) / 10,
        bands: c.files,
        mask: { href: c.scl, kind: 'scl' },
        scale: 0.0001,
        offset: -0.1,
      },
    );
    registering.catch(() => {}); // awaited above; this only keeps a failure while writing the next capture from being unhandled
  }
  await registering;
  if (catalogued) await writeDemoCatalogue(demoCatalogueFile(deps.roots), items);
  return {
    fieldId: field.id,
    captures: cut,
    bands,
    firstDate: DEMO_DATES[0]!,
    lastDate: DEMO_DATES[cut - 1] ?? DEMO_DATES[0]!,
    catalogued,
    ...(catalogued ? { catalogueFrom: DEMO_DATES[cut]! } : {}),
  };
}
