/**
 * The coverage-batch task on the pool, over HTTP range reads: a group of nearby fields gets the
 * counts each field's own coverage task gets, and its thread opens each file once (one request
 * for the header prefix per file, whatever the number of fields) and reads fewer bytes than the
 * fields one by one.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ComputePool } from '../../../src/compute/pool.js';
import { toWgs84 } from '../../../src/imagery/crs.js';
import { DEMO_SEASON } from '../../../src/imagery/demo.js';
import { writeSyntheticSeason, type SceneSpec } from '../../../src/imagery/synthetic.js';
import type { CaptureSource } from '../../../src/imagery/window-reader.js';
import { startRangeServer, type RangeServer } from '../../helpers/range-server.js';

describe('coverage of a group of fields on the pool', () => {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pool-coverage-'));
  const spec: SceneSpec = { epsg: 32631, originX: 600_000, originY: 5_620_000, size: 800, seed: 7 };
  let pool: ComputePool;
  let range: RangeServer;
  let scene: ReturnType<typeof writeSyntheticSeason>[number];
  const previous = process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS;

  beforeAll(async () => {
    // The files are on loopback; the threads read the setting when the pool starts
    process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS = 'true';
    pool = new ComputePool({ size: 1 });
    range = await startRangeServer();
    [scene] = writeSyntheticSeason(dir, spec, ['2025-06-01'], DEMO_SEASON.planting, DEMO_SEASON.harvest);
  });
  afterAll(async () => {
    if (previous === undefined) delete process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS;
    else process.env.IMAGERY_ALLOW_PRIVATE_NETWORKS = previous;
    await pool.close();
    await range.close();
    rmSync(dir, { recursive: true, force: true });
  });

  /** The capture's red, NIR and SCL served under a mount of its own (the thread has not opened them). */
  function captureAt(mount: string): CaptureSource {
    range.mount(mount, dir);
    const href = (f: string) => range.href(mount, path.basename(f));
    return {
      bands: { B04: { href: href(scene!.files.B04!) }, B08: { href: href(scene!.files.B08!) } },
      mask: { href: href(scene!.scl), kind: 'scl' },
      scale: 0.0001,
      offset: 0,
    };
  }

  it('counts what per-field tasks count, one header read per file, fewer bytes', async () => {
    const inv = toWgs84(spec.epsg);
    // 6 × 6 fields of 700 m × 600 m from 300 m west of the scene (the first column across its edge)
    const boundaries = Array.from({ length: 36 }, (_, k) => {
      const x0 = spec.originX - 300 + (k % 6) * 700;
      const y1 = spec.originY - 100 - Math.floor(k / 6) * 600;
      const ring = [inv([x0, y1 - 600]), inv([x0 + 700, y1 - 600]), inv([x0 + 700, y1]), inv([x0, y1])];
      return { type: 'Polygon' as const, coordinates: [[...ring, ring[0]!]] };
    });
    const roots = [dir];
    const bands = ['B04', 'B08'];

    const single = captureAt('single');
    range.resetCounters();
    const one = [];
    for (const boundary of boundaries) one.push(await pool.coverage({ capture: single, boundary, bands, roots }));
    const singleRead = { ...range.mounts.get('single')! };

    const grouped = captureAt('grouped');
    range.resetCounters();
    const { fields } = await pool.coverageBatch({ capture: grouped, boundaries, bands, roots });
    expect(fields).toEqual(one);
    expect(one.every((c) => c.fieldPixels > 0 && c.validPixels > 0)).toBe(true);
    // The header prefix (bytes 0-65535) once per file: B04, B08 and SCL
    expect(range.ranges.filter((r) => r.startsWith('bytes=0-'))).toHaveLength(3);
    const groupedRead = range.mounts.get('grouped')!;
    expect(groupedRead.bytes).toBeLessThan(singleRead.bytes / 2);
    expect(groupedRead.requests).toBeLessThan(singleRead.requests / 2);
  });

  it('a field outside the raster gets its own error, the others their counts', async () => {
    const inv = toWgs84(spec.epsg);
    const square = (x0: number, y1: number) => {
      const ring = [inv([x0, y1 - 500]), inv([x0 + 500, y1 - 500]), inv([x0 + 500, y1]), inv([x0, y1])];
      return { type: 'Polygon' as const, coordinates: [[...ring, ring[0]!]] };
    };
    const { fields } = await pool.coverageBatch({
      capture: captureAt('mixed'),
      boundaries: [square(spec.originX + 1000, spec.originY - 1000), square(spec.originX + 50_000, spec.originY)],
      bands: ['B04', 'B08'],
      roots: [dir],
    });
    expect(fields[0]).toMatchObject({ fieldPixels: 2500 });
    expect(fields[1]).toEqual({ error: expect.stringMatching(/outside the raster/) });
  });
});
