import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fromArrayBuffer, fromFile } from 'geotiff';
import { afterAll, describe, expect, it } from 'vitest';
import { indexProgram } from '../../../src/compute/catalog.js';
import { BANDS } from '../../../src/compute/formula.js';
import { Kernel } from '../../../src/compute/kernel-host.js';
import { datesEvery, growth, sceneField, writeSyntheticSeason } from '../../../src/imagery/synthetic.js';
import { writeGeoTiff } from '../../../src/imagery/tiff-writer.js';
import { readFieldWindow, type CaptureBand } from '../../../src/imagery/window-reader.js';

const dir = mkdtempSync(path.join(os.tmpdir(), 'synthetic-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

describe('GeoTIFF writer', () => {
  it.each([[false], [true]])(
    'tiled DEFLATE (predictor %s) reads back identically through geotiff.js, georeferenced',
    async (predictor) => {
      const w = 300,
        h = 217;
      const data = Uint16Array.from({ length: w * h }, (_, i) => ((i * 37) % 60000) + 1);
      const buf = writeGeoTiff({
        width: w,
        height: h,
        data,
        epsg: 32631,
        originX: 600000,
        originY: 5650000,
        resolution: 10,
        tileSize: 128,
        predictor,
        nodata: 0,
      });
      const file = path.join(dir, `t${predictor}.tif`);
      writeFileSync(file, buf);
      const bytes = readFileSync(file);
      const tiff = await fromArrayBuffer(bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength));
      const img = await tiff.getImage();
      expect([img.getWidth(), img.getHeight(), img.getTileWidth()]).toEqual([w, h, 128]);
      expect(img.getOrigin().slice(0, 2)).toEqual([600000, 5650000]);
      expect(img.getResolution().slice(0, 2)).toEqual([10, -10]);
      expect((img.getGeoKeys() as Record<string, number>).ProjectedCSTypeGeoKey).toBe(32631);
      expect(img.getGDALNoData()).toBe(0);
      const [back] = (await img.readRasters()) as unknown as Uint16Array[];
      expect(Buffer.from(back!.buffer).equals(Buffer.from(data.buffer))).toBe(true);
    },
  );
});

describe('synthetic season', () => {
  it('grows and senesces; clouds in SCL; field windows read on the 10 m grid with 20 m bands repeated', async () => {
    expect(growth(0, 160)).toBeLessThan(0.1);
    expect(growth(95, 160)).toBeGreaterThan(0.9);
    expect(growth(160, 160)).toBeLessThan(0.2);
    const spec = { epsg: 32631, originX: 640000, originY: 5660000, size: 120, seed: 7 };
    const dates = datesEvery('2025-04-01', '2025-09-15', 30);
    const caps = writeSyntheticSeason(dir, spec, dates, '2025-04-01', '2025-09-15');
    expect(caps).toHaveLength(dates.length);
    const field = sceneField(spec);
    const kernel = new Kernel();
    const means: number[] = [];
    for (const c of caps) {
      const capture = {
        bands: Object.fromEntries(Object.entries(c.files).map(([b, href]) => [b, { href }])),
        mask: { href: c.scl, kind: 'scl' as const },
        scale: 0.0001,
        offset: -0.1,
      };
      const win = await readFieldWindow(capture, field, ['B04', 'B08', 'B05'] as CaptureBand[], { roots: [dir] });
      expect(win.fieldPixels).toBe(60 * 60);
      expect(win.resX).toBe(10);
      const p = indexProgram('NDVI');
      const prep = kernel.prepare(
        win.width * win.height,
        p.bands.map(() => ({ dtype: 'u16' as const, scale: 0.0001, offset: -0.1, nodata: 0 })),
        { mask: true },
      );
      for (const [j, b] of p.bands.entries()) prep.bands[j]!.set(win.bands[b as CaptureBand]!.data as Uint16Array);
      prep.mask!.set(win.valid);
      means.push(kernel.run(p).mean);
      if (c.cloudiness === 0) expect(win.validPixels).toBe(win.fieldPixels);
    }
    const peak = means.indexOf(Math.max(...means.filter((m) => !Number.isNaN(m))));
    expect(peak).toBeGreaterThan(0);
    expect(peak).toBeLessThan(means.length - 1);
    expect(Math.max(...means.filter((m) => !Number.isNaN(m)))).toBeGreaterThan(0.6);
  });
});

describe('synthetic bands', () => {
  const spec = { epsg: 32631, originX: 640000, originY: 5660000, size: 120, seed: 7 };
  /** Sentinel-2 L2A native resolutions (m); B10 (cirrus) is L1C only. */
  const NATIVE: Record<string, number> = {
    B01: 60,
    B02: 10,
    B03: 10,
    B04: 10,
    B05: 20,
    B06: 20,
    B07: 20,
    B08: 10,
    B8A: 20,
    B09: 60,
    B11: 20,
    B12: 20,
    SCL: 20,
  };

  it('writes every band formulas accept, each at its native resolution over the whole scene', async () => {
    const [c] = writeSyntheticSeason(path.join(dir, 'bands'), spec, ['2025-07-01'], '2025-04-01', '2025-09-15');
    expect(Object.keys(c!.files).sort()).toEqual([...BANDS].sort());
    for (const [band, file] of [...Object.entries(c!.files), ['SCL', c!.scl]] as Array<[string, string]>) {
      const tiff = await fromFile(file);
      const img = await tiff.getImage();
      const res = NATIVE[band]!;
      expect(img.getResolution().slice(0, 2), band).toEqual([res, -res]);
      expect(img.getOrigin().slice(0, 2), band).toEqual([spec.originX, spec.originY]);
      expect([img.getWidth(), img.getHeight()], band).toEqual([
        Math.ceil((spec.size * 10) / res),
        Math.ceil((spec.size * 10) / res),
      ]);
      tiff.close();
    }
  });

  it('has plausible reflectances: the red edge lies between red and NIR and climbs with the canopy', async () => {
    // Before planting (bare soil) and near the peak of the season, both read on the 10 m grid.
    const caps = writeSyntheticSeason(
      path.join(dir, 'refl'),
      spec,
      ['2025-03-15', '2025-07-05'],
      '2025-04-01',
      '2025-09-15',
    );
    const means: Array<Record<string, number>> = [];
    for (const c of caps) {
      const capture = {
        bands: Object.fromEntries(Object.entries(c.files).map(([b, href]) => [b, { href }])),
        mask: { href: c.scl, kind: 'scl' as const },
        scale: 0.0001,
        offset: -0.1,
      };
      const win = await readFieldWindow(capture, sceneField(spec), [...BANDS] as CaptureBand[], { roots: [dir] });
      const m: Record<string, number> = {};
      for (const b of BANDS) {
        let sum = 0;
        let n = 0;
        win.bands[b]!.data.forEach((dn, k) => {
          if (!win.valid[k]) return;
          sum += dn * 0.0001 - 0.1;
          n++;
        });
        m[b] = sum / n;
      }
      means.push(m);
    }
    const [soil, canopy] = means as [Record<string, number>, Record<string, number>];
    for (const [b, r] of [...Object.entries(soil), ...Object.entries(canopy)]) {
      expect(r, b).toBeGreaterThan(0);
      expect(r, b).toBeLessThan(0.6);
    }
    for (const m of [soil, canopy]) {
      expect(m.B04).toBeLessThan(m.B05!);
      expect(m.B05).toBeLessThan(m.B06!);
      expect(m.B06).toBeLessThan(m.B07!);
      expect(m.B07).toBeLessThan(m.B08!);
      expect(Math.abs(m.B8A! - m.B08!)).toBeLessThan(0.03);
      expect(m.B11).toBeGreaterThan(m.B12!);
    }
    // The canopy darkens red and brightens NIR; the red-edge bands follow NIR.
    expect(canopy.B04).toBeLessThan(soil.B04! - 0.03);
    expect(canopy.B08).toBeGreaterThan(soil.B08! + 0.2);
    for (const b of ['B06', 'B07', 'B8A', 'B09']) expect(canopy[b]! - soil[b]!, b).toBeGreaterThan(0.1);
    expect(canopy.B03).toBeGreaterThan(canopy.B02!); // the green peak
  });
});
