/**
 * The ISOXML grid fill and the rate conversion (domain code): the scanline grid gives every cell
 * the value of the zone its centre lies in, as a plain point-in-polygon test over every cell does
 * (random zones with holes and several parts, cell centres on edges excepted); the process values
 * of every unit follow ISO 11783-11's DDI units and resolutions, written out here.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { processValue, RATE_DDI, ddiHex } from '../../../../src/reports/rate-ddi.js';
import { gridParams, scanlineGrid } from '../../../../src/reports/render/isoxml.js';
import { shapefileRings } from '../../../../src/reports/render/shapefile.js';
import { distanceToEdges, inMultiPolygon } from '../../../helpers/machine-files.js';

type Poly = number[][][];

/** A star-shaped ring around (cx, cy), counter-clockwise, closed. */
function star(cx: number, cy: number, radii: number[]): number[][] {
  const ring = radii.map((r, k) => {
    const a = (2 * Math.PI * k) / radii.length;
    return [cx + r * Math.cos(a), cy + r * Math.sin(a)];
  });
  return [...ring, ring[0]!];
}

describe('scanlineGrid', () => {
  it('fills each cell whose centre is inside a zone with its value, like point-in-polygon on every cell', () => {
    fc.assert(
      fc.property(
        fc.array(
          fc.record({
            parts: fc.array(
              fc.record({
                cx: fc.double({ min: 0, max: 0.001, noNaN: true }),
                cy: fc.double({ min: 48, max: 48.01, noNaN: true }),
                radii: fc.array(fc.double({ min: 0.0005, max: 0.004, noNaN: true }), { minLength: 3, maxLength: 12 }),
                hole: fc.boolean(),
              }),
              { minLength: 1, maxLength: 2 },
            ),
            rate: fc.integer({ min: 1, max: 2_000_000 }),
          }),
          { minLength: 1, maxLength: 3 },
        ),
        (zones) => {
          // Zones and parts do not overlap (as the traced zones): each part in a slot of its own, 0.01° wide.
          let slot = 0;
          const placed = zones.map((z) => ({
            ...z,
            parts: z.parts.map((p) => ({ ...p, cx: p.cx + 16 + 0.01 * slot++ })),
          }));
          const features = placed.map((z) => ({
            properties: { rate: z.rate },
            geometry: {
              type: 'MultiPolygon' as const,
              coordinates: z.parts.map((p): Poly => {
                const outer = star(p.cx, p.cy, p.radii);
                // A hole a third of the size, clockwise (star is convex enough around its centre for radii ≥ 1/3 of the max).
                const inner = star(
                  p.cx,
                  p.cy,
                  p.radii.map(() => Math.min(...p.radii) / 3),
                ).reverse();
                return p.hole ? [outer, inner] : [outer];
              }),
            },
          }));
          const g = gridParams({ features });
          const cells = new Int32Array(scanlineGrid({ features }, ['rate'], g));
          expect(cells.length).toBe(g.numCols * g.numRows);
          for (let r = 0; r < g.numRows; r++) {
            for (let c = 0; c < g.numCols; c++) {
              const x = g.minX + (c + 0.5) * g.cellWidth;
              const y = g.minY + (r + 0.5) * g.cellHeight;
              const hit = features.find((f) => inMultiPolygon(x, y, f.geometry.coordinates));
              const got = cells[r * g.numCols + c]!;
              const want = hit ? hit.properties.rate : 0;
              if (got !== want) {
                // Only a centre on an edge may go either way.
                const near = Math.min(...features.map((f) => distanceToEdges(x, y, f.geometry.coordinates)));
                expect(near, `cell ${r},${c}`).toBeLessThan(1e-9);
              }
            }
          }
        },
      ),
      { numRuns: 25 },
    );
  });

  it('cells of about 10 m: rows and columns from the extent on the WGS84 ellipsoid', () => {
    // 0.01° × 0.01° at 48° N: 1,111.9 m north-south (a meridian degree there is 111,190 m),
    // 746.3 m east-west (a parallel degree: 74,625 m), from geodesy tables.
    const g = gridParams({
      features: [
        {
          properties: {},
          geometry: { type: 'MultiPolygon', coordinates: [[star(16.005, 48.005, [0.005, 0.005, 0.005, 0.005])]] },
        },
      ],
    });
    const ring = star(16.005, 48.005, [0.005, 0.005, 0.005, 0.005]);
    expect(g.minX).toBeCloseTo(Math.min(...ring.map((p) => p[0]!)), 12);
    expect(Math.abs(g.numRows - 111.19)).toBeLessThanOrEqual(0.5);
    expect(Math.abs(g.numCols - 74.63)).toBeLessThanOrEqual(0.5);
    expect(g.cellHeight * 111_190).toBeCloseTo(10, 1);
  });
});

describe('rate DDIs', () => {
  it('every unit maps to the DDI and integer the standard gives', () => {
    expect(Object.keys(RATE_DDI).sort()).toEqual(['kg/ha', 'l/ha', 'seeds/ha', 't/ha']);
    // 150 kg/ha = 150 × 10^6 mg / 10^4 m² = 15,000 mg/m² (DDI 6, resolution 1).
    expect([ddiHex(RATE_DDI['kg/ha'].ddi), processValue(150, 'kg/ha')]).toEqual(['0006', 15_000]);
    expect(processValue(150.1, 'kg/ha')).toBe(15_010);
    // 2.35 t/ha = 235,000 mg/m².
    expect([ddiHex(RATE_DDI['t/ha'].ddi), processValue(2.35, 't/ha')]).toEqual(['0006', 235_000]);
    // 120.3 l/ha = 12,030 mm³/m² = 1,203,000 × 0.01 mm³/m² (DDI 1).
    expect([ddiHex(RATE_DDI['l/ha'].ddi), processValue(120.3, 'l/ha')]).toEqual(['0001', 1_203_000]);
    // 80,000 seeds/ha = 8 /m² = 8,000 × 0.001 /m² (DDI 11).
    expect([ddiHex(RATE_DDI['seeds/ha'].ddi), processValue(80_000, 'seeds/ha')]).toEqual(['000B', 8_000]);
    expect(processValue(85_300, 'seeds/ha')).toBe(8_530);
  });
});

describe('shapefileRings', () => {
  it('outer rings clockwise, holes counter-clockwise, whatever they came as', () => {
    const area2 = (r: number[][]) =>
      r.slice(0, -1).reduce((s, p, k) => s + p[0]! * r[k + 1]![1]! - r[k + 1]![0]! * p[1]!, 0);
    const ccw = star(0, 0, [1, 1, 1, 1, 1]);
    const hole = star(0, 0, [0.3, 0.3, 0.3, 0.3]);
    for (const input of [[[ccw, hole]], [[[...ccw].reverse(), [...hole].reverse()]]]) {
      const [[outer, inner]] = shapefileRings(input) as [[number[][], number[][]]];
      expect(area2(outer)).toBeLessThan(0);
      expect(area2(inner)).toBeGreaterThan(0);
    }
  });
});
