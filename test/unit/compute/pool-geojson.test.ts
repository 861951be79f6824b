/**
 * Per-pixel GeoJSON is written in the compute thread that holds the values, never on the API
 * thread (a 100 ha field is 2 MB of text: tens of ms that stalled every other request): a
 * field-index task asked for `geojson` answers the FeatureCollection's bytes, transferred, equal
 * to the writer applied to the values the same task computes, within the room asked for (where
 * the API thread writes the response's head), and no values.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { indexProgram } from '../../../src/compute/catalog.js';
import { pixelGeoJson } from '../../../src/imagery/pixel-geojson.js';
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
    const [cap] = writeSyntheticSeason(
      dir,
      spec,
      datesEvery('2025-06-02', '2025-06-02', 7),
      '2025-04-01',
      '2025-09-30',
    );
    const task = {
      capture: {
        bands: Object.fromEntries(Object.entries(cap!.files).map(([b, href]) => [b, { href }])),
        mask: { href: cap!.scl, kind: 'scl' as const },
        scale: 0.0001,
        offset: -0.1,
      },
      boundary: sceneField(spec, 0.5),
      program: indexProgram('NDVI'),
      roots: [dir],
      orderStats: true,
    };
    const withValues = await pool.runFieldIndex({ ...task, values: true });
    const room = { before: 16, after: 1 };
    const withGeo = await pool.runFieldIndex({ ...task, geojson: room });
    expect(withGeo.geojson).toBeInstanceOf(Uint8Array);
    expect(withGeo.values).toBeUndefined();
    expect(withGeo.stats).toEqual(withValues.stats);
    const expected = pixelGeoJson(withValues.window, withValues.values!, withValues.inside!);
    const fcBytes = Buffer.from(withGeo.geojson!).subarray(room.before, -room.after); // the room is the caller's
    expect(fcBytes.equals(expected)).toBe(true);
    const fc = JSON.parse(fcBytes.toString());
    expect(fc.features.length).toBe(withValues.inside!.reduce((a, b) => a + b, 0));
  }, 60_000);
});

/** Scheduling policy (SCHED_IDLE = 5) and nice value of each thread of this process (Linux). */
function threadSchedule(): Map<number, { policy: number; nice: number }> {
  const out = new Map<number, { policy: number; nice: number }>();
  for (const tid of readdirSync('/proc/self/task')) {
    const fields = readFileSync(`/proc/self/task/${tid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    out.set(Number(tid), { nice: Number(fields[16]), policy: Number(fields[38]) });
  }
  return out;
}

const hasChrt = (() => {
  try {
    execFileSync('chrt', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
})();

describe.runIf(process.platform === 'linux')('compute pool for background work', () => {
  it(`runs its threads ${hasChrt ? 'under SCHED_IDLE' : 'at nice 19'}, and only them`, async () => {
    const before = threadSchedule();
    const pool = new ComputePool({ size: 2, background: true });
    try {
      await Promise.all([pool.ping(), pool.ping()]);
      const added = [...threadSchedule()].filter(([tid]) => !before.has(tid)).map(([, s]) => s);
      expect(added.filter((s) => (hasChrt ? s.policy === 5 : s.nice === 19)).length).toBeGreaterThanOrEqual(2);
      expect(threadSchedule().get(process.pid)).toEqual(before.get(process.pid)); // this thread is untouched
    } finally {
      await pool.close();
    }
  }, 60_000);
});
