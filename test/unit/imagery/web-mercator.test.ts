/**
 * The WebMercatorQuad tile matrix against GDAL's own transformation (gdaltransform, EPSG:4326 →
 * EPSG:3857), and tile mappings against an exact per-pixel reprojection written here.
 */
import { execFileSync } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { fromWgs84, toWgs84 } from '../../../src/imagery/crs.js';
import { lonLatToPixel, pixelToLonLat, tileBounds, tileMap } from '../../../src/imagery/web-mercator.js';
import { hasGdal } from '../../helpers/tools.js';

const R = 6378137;
const points: Array<[number, number]> = [
  [5.0123, 51.0045],
  [-122.4194, 37.7749],
  [151.2093, -33.8688],
  [0, 0],
  [179.9, 84.9],
];

describe.skipIf(!hasGdal())('WebMercatorQuad against gdaltransform', () => {
  it('global pixel positions: Web Mercator metres as GDAL computes them, at zooms 0, 12 and 21', () => {
    const out = execFileSync('gdaltransform', ['-s_srs', 'EPSG:4326', '-t_srs', 'EPSG:3857', '-output_xy'], {
      input: points.map(([lon, lat]) => `${lon} ${lat}`).join('\n'),
      encoding: 'utf8',
    })
      .trim()
      .split('\n')
      .map((l) => l.trim().split(/\s+/).map(Number));
    for (const z of [0, 12, 21]) {
      const size = 256 * 2 ** z;
      for (const [k, [lon, lat]] of points.entries()) {
        const [px, py] = lonLatToPixel(lon, lat, z);
        const [mx, my] = out[k]!;
        // 1e-6 of a pixel at zoom 21 is under a micrometre.
        expect(Math.abs(px - ((mx! + Math.PI * R) / (2 * Math.PI * R)) * size)).toBeLessThan(
          1e-6 * 2 ** (z - 21) + 1e-6,
        );
        expect(Math.abs(py - ((Math.PI * R - my!) / (2 * Math.PI * R)) * size)).toBeLessThan(
          1e-6 * 2 ** (z - 21) + 1e-6,
        );
        const [lon2, lat2] = pixelToLonLat(px, py, z);
        expect(Math.abs(lon2 - lon)).toBeLessThan(1e-9);
        expect(Math.abs(lat2 - lat)).toBeLessThan(1e-9);
      }
    }
  });

  it('tile bounds: tile 0/0/0 is the world, and neighbours share edges', () => {
    const [w, s, e, n] = tileBounds(0, 0, 0);
    expect(w).toBeCloseTo(-180, 9);
    expect(e).toBeCloseTo(180, 9);
    expect(n).toBeCloseTo(85.0511287798, 9);
    expect(s).toBeCloseTo(-85.0511287798, 9);
    const a = tileBounds(17, 67_000, 43_000);
    const b = tileBounds(17, 67_001, 43_001);
    expect(b[0]).toBeCloseTo(a[2], 12);
    expect(b[3]).toBeCloseTo(a[1], 12);
  });
});

describe('tile mappings', () => {
  it('every pixel takes the window pixel its centre falls in (exact proj4 per pixel, here)', () => {
    const grid = { width: 100, height: 90, epsg: 32631, originX: 630_000, originY: 5_602_000, resX: 10, resY: -10 };
    const fwd = fromWgs84(32631);
    for (const z of [14, 17, 20]) {
      // The tile over the window's centre.
      const inv = pixelToLonLat;
      const [lon, lat] = toWgs84(32631)([grid.originX + 500, grid.originY - 450]);
      const [px, py] = lonLatToPixel(lon, lat, z);
      const tx = Math.floor(px / 256);
      const ty = Math.floor(py / 256);
      const m = tileMap(grid, z, tx, ty);
      expect(m).not.toBe(false);
      if (!m) continue;
      let off = 0;
      let inside = 0;
      for (let j = 0; j < 256; j++)
        for (let i = 0; i < 256; i++) {
          const [x, y] = fwd(inv(tx * 256 + i + 0.5, ty * 256 + j + 0.5, z));
          const c = Math.floor((x - grid.originX) / grid.resX);
          const r = Math.floor((y - grid.originY) / grid.resY);
          const want = c >= 0 && c < grid.width && r >= 0 && r < grid.height ? r * grid.width + c : -1;
          const li = i - m.x0;
          const lj = j - m.y0;
          const got = li >= 0 && li < m.width && lj >= 0 && lj < m.height ? m.idx[lj * m.width + li]! : -1;
          if (got !== want) off++;
          if (want >= 0) inside++;
        }
      expect(inside, `zoom ${z}`).toBeGreaterThan(1000);
      expect(off / inside, `zoom ${z}: ${off} of ${inside}`).toBeLessThan(1e-3);
    }
  });

  it('a tile far from the window maps nothing', () => {
    const grid = { width: 10, height: 10, epsg: 32631, originX: 630_000, originY: 5_602_000, resX: 10, resY: -10 };
    expect(tileMap(grid, 16, 0, 0)).toBe(false);
  });
});
