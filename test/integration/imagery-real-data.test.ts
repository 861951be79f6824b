/**
 * Real Sentinel-2 scenes (../shared/data/real): for every reference polygon, the field window's
 * pixel counts equal the reference counts exactly, and each index computed by the kernel from the
 * window matches the independent numpy/GDAL statistics within 1e-4. (A path outside the allowed
 * roots is refused in test/unit/imagery/window-reader.test.ts, on synthetic rasters.) The coverage
 * of a group of fields (one read of their union window, as registration computes it) equals each
 * field's own window's counts, for the reference polygons and shifted copies of them (some across
 * the scene's edge or outside it).
 */
import { describe, expect, it } from 'vitest';
import { indexProgram } from '../../src/compute/catalog.js';
import { Kernel } from '../../src/compute/kernel-host.js';
import {
  coverageBands,
  readFieldCoverages,
  readFieldWindow,
  type CaptureBand,
} from '../../src/imagery/window-reader.js';
import { hasRealData, polygonOf, realDataDir, referenceResults, REF_INDEX, scenes } from '../helpers/real-data.js';

describe.runIf(hasRealData)('real Sentinel-2 windows against the reference statistics', () => {
  const kernel = new Kernel();
  const roots = [realDataDir];
  const results = hasRealData ? referenceResults() : [];

  it.each(results.map((r) => [r.scene, r] as const))('%s', async (_name, ref) => {
    const scene = scenes[ref.scene];
    expect(scene, `scene ${ref.scene} is described in test/helpers/real-data.ts`).toBeDefined();
    for (const [refName, stats] of Object.entries(ref.indices)) {
      const name = REF_INDEX[refName]!;
      const program = indexProgram(name);
      const win = await readFieldWindow(scene!.capture, polygonOf(ref), program.bands as CaptureBand[], { roots });
      expect(win.fieldPixels, `${ref.scene} pixels in polygon`).toBe(ref.pixels_centre_in_polygon);
      const prep = kernel.prepare(
        win.width * win.height,
        program.bands.map((b) => {
          const wb = win.bands[b as CaptureBand]!;
          return { dtype: wb.dtype, scale: wb.scale, offset: wb.offset, nodata: wb.nodata };
        }),
        { mask: true },
      );
      for (const [j, b] of program.bands.entries()) prep.bands[j]!.set(win.bands[b as CaptureBand]!.data as never);
      prep.mask!.set(win.valid);
      const got = kernel.run(program);
      expect(got.count, `${ref.scene} ${name} valid pixel count`).toBe(stats.count);
      expect(win.validPixels, `${ref.scene} ${name} window valid pixels`).toBe(stats.count);
      for (const k of ['min', 'max', 'mean', 'std'] as const) {
        expect(Math.abs(got[k] - stats[k]), `${ref.scene} ${name} ${k}: ${got[k]} vs ${stats[k]}`).toBeLessThan(1e-4);
      }
    }
  });
});

describe.runIf(hasRealData)('real Sentinel-2 coverage of a group of fields', () => {
  const roots = [realDataDir];
  const results = hasRealData ? referenceResults() : [];
  const sceneNames = [...new Set(results.map((r) => r.scene))];

  it.each(sceneNames)('%s: the group counts what each field window counts', async (name) => {
    const scene = scenes[name]!;
    const shift = (g: ReturnType<typeof polygonOf>, dx: number, dy: number) => {
      const move = (ring: Array<[number, number]>) => ring.map(([x, y]) => [x + dx, y + dy]);
      const c = g.coordinates as unknown as Array<Array<[number, number]>> | Array<Array<Array<[number, number]>>>;
      return {
        type: g.type,
        coordinates: (g.type === 'Polygon'
          ? (c as Array<Array<[number, number]>>).map(move)
          : (c as Array<Array<Array<[number, number]>>>).map((p) => p.map(move))) as never,
      };
    };
    const boundaries = results
      .filter((r) => r.scene === name)
      .flatMap((r) => {
        const g = polygonOf(r);
        const pts = JSON.stringify(g.coordinates)
          .match(/-?[\d.]+(e-?\d+)?/g)!
          .map(Number);
        const xs = pts.filter((_, i) => i % 2 === 0);
        const ys = pts.filter((_, i) => i % 2 === 1);
        const w = Math.max(...xs) - Math.min(...xs);
        const h = Math.max(...ys) - Math.min(...ys);
        // Overlapping copies (a shared union window), one far off in the scene or past it, one outside
        return [g, shift(g, 0.3 * w, -0.2 * h), shift(g, -0.6 * w, 0.5 * h), shift(g, 0.5, 0), shift(g, 40, 0)];
      });
    const bands = coverageBands(scene.capture);
    const one = [];
    for (const b of boundaries) {
      one.push(
        await readFieldWindow(scene.capture, b, bands, { roots }).then(
          (w) => ({ fieldPixels: w.fieldPixels, validPixels: w.validPixels }),
          (err: Error) => ({ error: err.message }),
        ),
      );
    }
    const group = await readFieldCoverages(scene.capture, boundaries, bands, { roots });
    expect(group).toEqual(one);
    const ref = results.find((r) => r.scene === name)!;
    expect(group[0]).toMatchObject({ fieldPixels: ref.pixels_centre_in_polygon });
    expect(group.filter((c) => 'fieldPixels' in c).length).toBeGreaterThanOrEqual(3);
  });
});
