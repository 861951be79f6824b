/**
 * The demo created on the first start of an empty embedded database: a field and a season of
 * synthetic Sentinel-2-like captures (every L2A band formulas accept, at its native resolution),
 * so that every index and time-series call in the README works on a fresh machine.
 */
import path from 'node:path';
import type { Database } from '../platform/database.js';
import { createField } from '../fields/service.js';
import type { ComputePool } from '../compute/pool.js';
import { registerImagery } from './service.js';
import { datesEvery, sceneField, writeSyntheticSeason } from './synthetic.js';

export interface DemoResult {
  fieldId: string;
  captures: number;
  bands: number;
  firstDate: string;
  lastDate: string;
}

export async function createDemo(deps: { db: Database; compute: ComputePool; roots: string[]; maxAreaHa: number }, accountId: string): Promise<DemoResult> {
  const dir = path.join(deps.roots[0]!, 'demo');
  // Near Gembloux (BE), UTM 31N: 1.6 km square scene, the field is its central 64 ha.
  const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 160, seed: 2025 };
  const dates = datesEvery('2025-03-26', '2025-10-07', 6);
  // DEFLATE level 1: the season is written on a first start, where time counts more than 5 % of disk.
  const captures = writeSyntheticSeason(dir, spec, dates, '2025-04-10', '2025-09-20', { deflateLevel: 1 });
  const field = await createField(
    deps.db,
    accountId,
    { name: 'Demo field (synthetic)', boundary: sceneField(spec) as never, crop_type: 'maize', planting_date: '2025-04-10', harvest_date: '2025-09-20' },
    { maxAreaHa: deps.maxAreaHa },
  );
  for (const c of captures) {
    await registerImagery({ db: deps.db, compute: deps.compute, roots: deps.roots }, accountId, {
      source: 'sentinel-2-l2a',
      capture_date: c.date,
      cloud_cover: Math.round(c.cloudiness * 1000) / 10,
      bands: c.files,
      mask: { href: c.scl, kind: 'scl' },
      scale: 0.0001,
      offset: -0.1,
    });
  }
  return { fieldId: field.id, captures: captures.length, bands: Object.keys(captures[0]!.files).length, firstDate: dates[0]!, lastDate: dates.at(-1)! };
}
