/**
 * Per-pixel GeoJSON is written in the compute thread that holds the values, never on the API
 * thread (a 100 ha field is 2 MB of text: tens of ms that stalled every other request): a
 * field-index task asked for `geojson` answers the FeatureCollection's bytes, transferred, equal
 * to the writer applied to the values the same task computes, and no values.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { indexProgram } from '../../../src/compute/catalog.js';
import { pixelGeoJson } from '../../../src/compute/pixel-geojson.js';
import { ComputePool } from '../../../src/compute/pool.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../../../src/imagery/synthetic.js';

describe('compute pool, per-pixel GeoJSON', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pool-geojson-'));
  const pool = new ComputePool({ size: 1 });
  afterAll(async () => {
    await pool.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('the worker writes the FeatureCollection and transfers its bytes', async () => {
    const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 60, seed: 5 };
    const [cap] = writeSyntheticSeason(dir, spec, datesEvery('2025-06-02', '2025-06-02', 7), '2025-04-01', '2025-09-30');
    const task = {
      capture: { bands: Object.fromEntries(Object.entries(cap!.files).map(([b, href]) => [b, { href }])), mask: { href: cap!.scl, kind: 'scl' as const }, scale: 0.0001, offset: -0.1 },
      boundary: sceneField(spec, 0.5),
      program: indexProgram('NDVI'),
      roots: [dir],
      orderStats: true,
    };
    const withValues = await pool.runFieldIndex({ ...task, values: true });
    const withGeo = await pool.runFieldIndex({ ...task, geojson: true });
    expect(withGeo.geojson).toBeInstanceOf(Uint8Array);
    expect(withGeo.values).toBeUndefined();
    expect(withGeo.stats).toEqual(withValues.stats);
    const expected = pixelGeoJson(withValues.window, withValues.values!, withValues.inside!);
    expect(Buffer.from(withGeo.geojson!).equals(expected)).toBe(true);
    const fc = JSON.parse(Buffer.from(withGeo.geojson!).toString());
    expect(fc.features.length).toBe(withValues.inside!.reduce((a, b) => a + b, 0));
  }, 60_000);
});
