/**
 * Real Sentinel-2 scenes (../shared/data/real): for every reference polygon, the field window's
 * pixel counts equal the reference counts exactly, and each index computed by the kernel from the
 * window matches the independent numpy/GDAL statistics within 1e-4. (A path outside the allowed
 * roots is refused in test/unit/imagery/window-reader.test.ts, on synthetic rasters.)
 */
import { describe, expect, it } from 'vitest';
import { indexProgram } from '../../src/compute/catalog.js';
import { Kernel } from '../../src/compute/kernel-host.js';
import { readFieldWindow, type CaptureBand } from '../../src/imagery/window-reader.js';
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
