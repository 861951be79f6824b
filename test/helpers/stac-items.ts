/**
 * STAC Items for the test STAC API (stac-api-server.ts), their assets served by a range server
 * (range-server.ts):
 *
 * - the real Earth Search Item of ../shared/data/real/s2_l2a_29RKH_20200219_riotilerpds (tile
 *   29RKH, 2020-02-19) as published, its COG assets rewritten to the range server; the assets whose
 *   files were not copied into that folder (B01, B06, B07, B09, B12, B8A, AOT, WVP, TCI and every
 *   JP2 twin) are removed, so that every band an Item offers can be read. Copies with another id,
 *   datetime or cloud cover stand for later passes over the same tile.
 * - the synthetic demo season (src/imagery/demo.ts: DEMO_SCENE, DEMO_DATES) written to a directory
 *   and described in Earth Search's shape (src/imagery/synthetic.ts: syntheticItem).
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { DEMO_DATES, DEMO_SCENE, DEMO_SEASON } from '../../src/imagery/demo.js';
import { syntheticItem, writeSyntheticSeason } from '../../src/imagery/synthetic.js';
import type { RangeServer } from './range-server.js';
import { realDataDir } from './real-data.js';
import type { StacItem } from './stac-api-server.js';

export const RKH_DIR = path.join(realDataDir, 's2_l2a_29RKH_20200219_riotilerpds');
export const RKH_ITEM_ID = 'S2A_29RKH_20200219_0_L2A';

export interface RealItemOverrides {
  id?: string;
  datetime?: string;
  cloudCover?: number;
}

/**
 * The real Item with its assets on `range` (mounted as `rkh`); overrides make a new pass of the same
 * tile (same files, another id/datetime/cloud cover).
 */
export function realRkhItem(range: RangeServer, o: RealItemOverrides = {}): StacItem {
  const item = JSON.parse(readFileSync(path.join(RKH_DIR, `${RKH_ITEM_ID}.json`), 'utf8')) as StacItem & {
    properties: Record<string, unknown>;
    assets: Record<string, { href: string; roles?: string[]; 'eo:bands'?: unknown; 'raster:bands'?: unknown }>;
  };
  range.mount('rkh', RKH_DIR);
  const local = new Set(readdirSync(RKH_DIR));
  for (const [key, asset] of Object.entries(item.assets)) {
    const name = path.posix.basename(new URL(asset.href).pathname);
    const raster = asset['eo:bands'] !== undefined || asset['raster:bands'] !== undefined;
    if (asset.href.startsWith('https://') && local.has(name)) asset.href = range.href('rkh', name);
    else if (raster) delete item.assets[key];
  }
  if (o.id) item.id = o.id;
  if (o.datetime) item.properties.datetime = o.datetime;
  if (o.cloudCover !== undefined) item.properties['eo:cloud_cover'] = o.cloudCover;
  return item;
}

/**
 * Writes the demo season (or the dates given) to `dir` and answers its Items, assets on `range`
 * (mounted as `mount`, default `demo`).
 */
export function demoSeasonItems(
  range: RangeServer,
  dir: string,
  opts: { dates?: string[]; mount?: string } = {},
): StacItem[] {
  const mount = opts.mount ?? 'demo';
  range.mount(mount, dir);
  const dates = opts.dates ?? DEMO_DATES;
  return writeSyntheticSeason(dir, DEMO_SCENE, dates, DEMO_SEASON.planting, DEMO_SEASON.harvest, {
    deflateLevel: 1,
  }).map((c, k) =>
    syntheticItem(c, DEMO_SCENE, DEMO_DATES.includes(c.date) ? DEMO_DATES.indexOf(c.date) : k, {
      href: (f) => range.href(mount, path.relative(dir, f)),
    }),
  );
}
