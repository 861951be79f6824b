/**
 * The COG writer read back by GDAL (gdalinfo -json, GDAL's Python API and its COG validator from
 * Debian python3-gdal): layout, georeferencing, metadata, every pixel, and the overviews against a
 * float64 mean written here.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { writeCog } from '../../../src/imagery/cog-writer.js';
import { gdalRaster, hasGdal, hasPythonGdal } from '../../helpers/tools.js';

const gdal = hasGdal() && hasPythonGdal();
const dir = mkdtempSync(path.join(os.tmpdir(), 'cog-writer-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** A deterministic field of values with holes (NaN), some negative, some large. */
function values(w: number, h: number): Float32Array {
  const d = new Float32Array(w * h);
  for (let y = 0; y < h; y++)
    for (let x = 0; x < w; x++) {
      const k = y * w + x;
      d[k] =
        (x * 7 + y * 13) % 29 === 0 || (x > 40 && x < 90 && y > 10 && y < 70)
          ? Number.NaN
          : Math.sin(x / 17) * Math.cos(y / 23) + (k % 5 === 0 ? 1e4 : 0);
    }
  return d;
}

describe.skipIf(!gdal)('writeCog read back by GDAL', () => {
  it.each([
    [80, 80, 0],
    [700, 530, 2],
    [257, 40, 1],
  ])('%i × %i: valid COG with %i overviews, the grid, CRS, nodata and metadata, every pixel', (w, h, levels) => {
    const data = values(w, h);
    const file = path.join(dir, `${w}x${h}.tif`);
    writeFileSync(
      file,
      writeCog({
        width: w,
        height: h,
        data: data.slice(),
        epsg: 32633,
        originX: 399_960,
        originY: 5_800_020,
        resX: 10,
        resY: -10,
        metadata: { INDEX: 'custom', FORMULA: 'B08 < & > "x"' },
        description: 'custom <&>',
      }),
    );
    const v = gdalRaster<{ errors: string[]; warnings: string[] }>('validate', file);
    expect(v.errors).toEqual([]);
    expect(v.warnings).toEqual([]);
    const info = JSON.parse(execFileSync('gdalinfo', ['-json', '-mdd', 'all', file], { encoding: 'utf8' }));
    expect(info.size).toEqual([w, h]);
    expect(info.geoTransform).toEqual([399_960, 10, 0, 5_800_020, 0, -10]);
    expect(info.coordinateSystem.wkt).toContain('ID["EPSG",32633]');
    expect(info.metadata['']).toMatchObject({ INDEX: 'custom', FORMULA: 'B08 < & > "x"' });
    expect(info.metadata.IMAGE_STRUCTURE).toMatchObject({ COMPRESSION: 'DEFLATE', PREDICTOR: '3', LAYOUT: 'COG' });
    const band = info.bands[0];
    expect(band).toMatchObject({ type: 'Float32', noDataValue: 'NaN', description: 'custom <&>' });
    expect(band.block).toEqual(
      Math.max(w, h) > 256 ? [256, 256] : [Math.ceil(Math.max(w, h) / 16) * 16, Math.ceil(Math.max(w, h) / 16) * 16],
    );
    expect((band.overviews ?? []).length).toBe(levels);
    const read = gdalRaster<{ bands: Array<Array<number | null>> }>('read', file);
    const got = read.bands[0]!;
    let differ = 0;
    for (let k = 0; k < data.length; k++) if (got[k] !== (Number.isNaN(data[k]!) ? null : data[k])) differ++;
    expect(differ).toBe(0);
    // Overviews: each pixel the float64 mean of the values among the 2 × 2 it covers.
    let prev = Array.from(data, (x) => (Number.isNaN(x) ? null : x));
    let pw = w;
    let ph = h;
    for (const o of gdalRaster<Array<{ width: number; height: number; values: Array<number | null> }>>(
      'overviews',
      file,
    )) {
      expect([o.width, o.height]).toEqual([Math.ceil(pw / 2), Math.ceil(ph / 2)]);
      const next: Array<number | null> = [];
      for (let y = 0; y < o.height; y++)
        for (let x = 0; x < o.width; x++) {
          const vals: number[] = [];
          for (let dy = 0; dy < 2; dy++)
            for (let dx = 0; dx < 2; dx++) {
              const sx = 2 * x + dx;
              const sy = 2 * y + dy;
              const s = sx < pw && sy < ph ? prev[sy * pw + sx] : null;
              if (s !== null && s !== undefined) vals.push(s);
            }
          const want = vals.length ? Math.fround(vals.reduce((a, b) => a + b, 0) / vals.length) : null;
          next.push(want);
          const g = o.values[y * o.width + x]!;
          if (want === null ? g !== null : g === null || Math.abs(g - want) > Math.abs(want) * 1e-6) differ++;
        }
      expect(differ).toBe(0);
      prev = next.map((x, i) => (x === null ? null : o.values[i]!));
      pw = o.width;
      ph = o.height;
    }
  });
});
