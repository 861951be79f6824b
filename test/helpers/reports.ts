/** A field with a synthetic Sentinel-2 season registered through the API, for the report suites. */
import { datesEvery, sceneField, writeSyntheticSeason } from '../../src/imagery/synthetic.js';
import type { TestApp } from './app.js';
import { registerCaptures } from './captures.js';

export interface SeededField {
  fieldId: string;
  dates: string[];
  areaHa: number;
}

export async function seedSeason(
  t: TestApp,
  dir: string,
  opts: { size?: number; seed?: number; step?: number; name?: string; originX?: number } = {},
): Promise<SeededField> {
  const spec = {
    epsg: 32631,
    originX: opts.originX ?? 630_000,
    originY: 5_602_000,
    size: opts.size ?? 100,
    seed: opts.seed ?? 7,
  };
  const dates = datesEvery('2025-03-26', '2025-10-07', opts.step ?? 8);
  const caps = writeSyntheticSeason(dir, spec, dates, '2025-04-10', '2025-09-20');
  const f = await t.app.inject({
    method: 'POST',
    url: '/v1/fields',
    headers: t.auth(),
    payload: {
      name: opts.name ?? 'Synthetic maize',
      boundary: sceneField(spec),
      crop_type: 'maize',
      planting_date: '2025-04-10',
      harvest_date: '2025-09-20',
    },
  });
  if (f.statusCode !== 201) throw new Error(f.body);
  await registerCaptures(t, caps);
  return { fieldId: f.json().id, dates, areaHa: f.json().area_ha };
}

/** Polls GET /v1/reports/{id} until the report is ready or failed. */
export async function waitReport(t: TestApp, id: string, ms = 60_000): Promise<Record<string, any>> {
  const end = Date.now() + ms;
  for (;;) {
    const r = (await t.app.inject({ method: 'GET', url: `/v1/reports/${id}`, headers: t.auth() })).json();
    if (r.status === 'ready' || r.status === 'failed') return r;
    if (Date.now() > end) throw new Error(`report ${id} still ${r.status}`);
    await new Promise((res) => setTimeout(res, 50));
  }
}
