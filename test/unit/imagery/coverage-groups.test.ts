/**
 * Groups of nearby fields for one coverage task each (src/imagery/coverage-groups.ts): every field
 * in exactly one group, a group of several fields never wider than MAX_PIXELS (its union window
 * recomputed here from the fields' own windows), and at least one group per thread.
 */
import { describe, expect, it } from 'vitest';
import type { Boundary } from '../../../src/fields/index.js';
import { coverageGroups, MAX_PIXELS, WHOLE } from '../../../src/imagery/coverage-groups.js';
import { fromWgs84, toWgs84 } from '../../../src/imagery/crs.js';

const grid = { epsg: 32631, originX: 600_000, originY: 5_620_000, resX: 10, resY: -10 };
const inv = toWgs84(32631);
const square = (x0: number, y1: number, side: number): Boundary => {
  const ring = [inv([x0, y1 - side]), inv([x0 + side, y1 - side]), inv([x0 + side, y1]), inv([x0, y1])] as Array<
    [number, number]
  >;
  return { type: 'Polygon', coordinates: [[...ring, ring[0]!]] };
};

/** The reader's window of a field (one pixel of margin), on the grid. */
function windowOf(b: Boundary): [number, number, number, number] {
  const fwd = fromWgs84(32631);
  const pts = (b.coordinates as Array<Array<[number, number]>>)[0]!.map((p) => fwd(p));
  const cs = pts.map(([x]) => (x! - grid.originX) / grid.resX);
  const rs = pts.map(([, y]) => (y! - grid.originY) / grid.resY);
  return [
    Math.floor(Math.min(...cs)) - 1,
    Math.floor(Math.min(...rs)) - 1,
    Math.ceil(Math.max(...cs)) + 1,
    Math.ceil(Math.max(...rs)) + 1,
  ];
}

describe('coverage groups', () => {
  // 1,000 fields of 100 ha edge to edge (the bench's layout) and 30 large overlapping ones
  const boundaries: Boundary[] = [];
  for (let k = 0; k < 1000; k++)
    boundaries.push(square(600_000 + (k % 32) * 1000, 5_620_000 - Math.floor(k / 32) * 1000, 1000));
  for (let k = 0; k < 30; k++) boundaries.push(square(600_000 + k * 900, 5_620_000 - k * 700, 3000 + k * 400));

  it.each([1, 2, 8])('every field once, groups within MAX_PIXELS, at least %i groups', (threads) => {
    const groups = coverageGroups(boundaries, grid, threads);
    expect(groups.flat().sort((a, b) => a - b)).toEqual(boundaries.map((_, i) => i));
    expect(groups.length).toBeGreaterThanOrEqual(threads);
    for (const g of groups) {
      if (g.length < 2) continue;
      const wins = g.map((i) => windowOf(boundaries[i]!));
      const w = Math.max(...wins.map((x) => x[2])) - Math.min(...wins.map((x) => x[0]));
      const h = Math.max(...wins.map((x) => x[3])) - Math.min(...wins.map((x) => x[1]));
      expect(w * h).toBeLessThanOrEqual(MAX_PIXELS);
    }
  });

  /** The 256² tiles of the grid a group's union window meets. */
  const tilesOf = (g: number[]): string[] => {
    const wins = g.map((i) => windowOf(boundaries[i]!));
    const [x0, y0] = [Math.max(0, Math.min(...wins.map((x) => x[0]))), Math.max(0, Math.min(...wins.map((x) => x[1])))];
    const [x1, y1] = [Math.max(...wins.map((x) => x[2])), Math.max(...wins.map((x) => x[3]))];
    const out: string[] = [];
    for (let ty = Math.floor(y0 / 256); ty <= Math.floor((y1 - 1) / 256); ty++)
      for (let tx = Math.floor(x0 / 256); tx <= Math.floor((x1 - 1) / 256); tx++) out.push(`${tx},${ty}`);
    return out;
  };

  it('with the WHOLE limits and one thread, the 1,000 fields are one group: no tile read twice', () => {
    const bench = boundaries.slice(0, 1000).map((_, i) => i);
    const split = coverageGroups(boundaries.slice(0, 1000), grid, 2);
    const whole = coverageGroups(boundaries.slice(0, 1000), grid, 1, WHOLE);
    expect(whole).toHaveLength(1);
    expect([...whole[0]!].sort((a, b) => a - b)).toEqual(bench);
    const once = new Set(tilesOf(bench)).size;
    // the default groups read the tiles under the fields straddling their cells twice
    expect(split.flatMap(tilesOf).length).toBeGreaterThan(once);
    expect(whole.flatMap(tilesOf).length).toBe(once);
  });

  it('with the WHOLE limits, every field once and groups within WHOLE.maxPixels, large fields included', () => {
    const groups = coverageGroups(boundaries, grid, 1, WHOLE);
    expect(groups.flat().sort((a, b) => a - b)).toEqual(boundaries.map((_, i) => i));
    for (const g of groups) {
      if (g.length < 2) continue;
      const wins = g.map((i) => windowOf(boundaries[i]!));
      const w = Math.max(...wins.map((x) => x[2])) - Math.min(...wins.map((x) => x[0]));
      const h = Math.max(...wins.map((x) => x[3])) - Math.min(...wins.map((x) => x[1]));
      expect(w * h).toBeLessThanOrEqual(WHOLE.maxPixels);
    }
  });

  it('groups 150,000 fields, more than a spread into Math.min takes', () => {
    // 1 ha squares edge to edge: 150,000 of them cover 387 × 388 of them (a 38.7 km square).
    const many: Boundary[] = [];
    for (let k = 0; k < 150_000; k++)
      many.push(square(600_000 + (k % 387) * 100, 5_620_000 - Math.floor(k / 387) * 100, 100));
    const groups = coverageGroups(many, grid, 2);
    const seen = new Set(groups.flat());
    expect(seen.size).toBe(150_000);
    expect(groups.flat().length).toBe(150_000);
  }, 60_000);
});
