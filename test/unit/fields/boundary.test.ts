import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BoundaryError, geodesicAreaHa, validateBoundary } from '../../../src/fields/boundary.js';

const sq = (lon: number, lat: number, d = 0.01) => [
  [lon, lat],
  [lon + d, lat],
  [lon + d, lat + d],
  [lon, lat + d],
  [lon, lat],
];
const poly = (...rings: number[][][]) => ({ type: 'Polygon', coordinates: rings });

function issue(input: unknown, opts = {}) {
  try {
    validateBoundary(input, { basePath: '/b', ...opts });
  } catch (e) {
    expect(e).toBeInstanceOf(BoundaryError);
    return (e as BoundaryError).issues[0]!;
  }
  throw new Error('validated');
}

// WGS84 area between the equator and latitude φ over Δλ, closed form on the ellipsoid (authalic):
// A = 2πb² [ sinφ / (2(1 − e² sin²φ)) + (1/(4e)) ln((1 + e sinφ)/(1 − e sinφ)) ] × Δλ/2π
function zoneArea(phiDeg: number, dLonDeg: number): number {
  const a = 6378137;
  const f = 1 / 298.257223563;
  const b = a * (1 - f);
  const e = Math.sqrt(f * (2 - f));
  const s = Math.sin((phiDeg * Math.PI) / 180);
  const q = s / (1 - e * e * s * s) + (1 / (2 * e)) * Math.log((1 + e * s) / (1 - e * s));
  return Math.PI * b * b * q * (dLonDeg / 360);
}

describe('validateBoundary', () => {
  it.each([
    ['a string', 'POLYGON((0 0,1 0,1 1,0 0))', 'invalid_geometry', '/b'],
    [
      'a LineString',
      {
        type: 'LineString',
        coordinates: [
          [0, 0],
          [1, 1],
        ],
      },
      'unsupported_geometry_type',
      '/b/type',
    ],
    ['no coordinates', { type: 'Polygon' }, 'missing_coordinates', '/b/coordinates'],
    ['unclosed ring', poly(sq(5, 51).slice(0, 4)), 'ring_not_closed', '/b/coordinates/0'],
    [
      'too few positions',
      poly([
        [5, 51],
        [5.01, 51],
        [5, 51],
      ]),
      'too_few_positions',
      '/b/coordinates/0',
    ],
    ['longitude out of range', poly(sq(185, 51)), 'longitude_out_of_range', '/b/coordinates/0/0/0'],
    ['latitude out of range', poly(sq(5, 95)), 'latitude_out_of_range', '/b/coordinates/0/0/1'],
    [
      'string numbers',
      poly([
        ['5', 51],
        [5.01, 51],
        [5.01, 51.01],
        ['5', 51],
      ] as never),
      'invalid_number',
      '/b/coordinates/0/0/0',
    ],
    [
      'a 4-number position',
      poly([
        [5, 51, 0, 1],
        [5.01, 51],
        [5.01, 51.01],
        [5, 51],
      ]),
      'invalid_position',
      '/b/coordinates/0/0',
    ],
    [
      'Infinity',
      poly([
        [5, 51],
        [Infinity, 51],
        [5.01, 51.01],
        [5, 51],
      ]),
      'invalid_number',
      '/b/coordinates/0/1/0',
    ],
    [
      'bow-tie',
      poly([
        [5, 51],
        [5.01, 51.01],
        [5.01, 51],
        [5, 51.01],
        [5, 51],
      ]),
      'self_intersection',
      '/b/coordinates/0',
    ],
    [
      'ring touching itself at a vertex',
      poly(
        [
          [0, 0],
          [2, 0],
          [2, 2],
          [1, 0],
          [0, 2],
          [0, 0],
        ].map(([x, y]) => [5 + x! * 0.001, 51 + y! * 0.001]),
      ),
      'self_intersection',
      '/b/coordinates/0',
    ],
    [
      'collinear ring',
      poly([
        [5, 51],
        [5.01, 51],
        [5.02, 51],
        [5, 51],
      ]),
      'zero_area',
      '/b/coordinates/0',
    ],
    ['hole outside its shell', poly(sq(5, 51), sq(6, 51, 0.001)), 'hole_outside_shell', '/b/coordinates/1'],
    ['hole crossing its shell', poly(sq(5, 51), sq(5.005, 51.005)), 'ring_intersection', '/b/coordinates/1'],
    [
      'overlapping parts',
      { type: 'MultiPolygon', coordinates: [[sq(5, 51)], [sq(5.005, 51.005)]] },
      'overlapping_parts',
      '/b/coordinates/1',
    ],
    [
      'part inside another part',
      { type: 'MultiPolygon', coordinates: [[sq(5, 51)], [sq(5.002, 51.002, 0.001)]] },
      'overlapping_parts',
      '/b/coordinates/1',
    ],
    [
      'antimeridian',
      poly([
        [179.9, 0],
        [-179.9, 0],
        [-179.9, 0.1],
        [179.9, 0.1],
        [179.9, 0],
      ]),
      'crosses_antimeridian',
      '/b/coordinates/0',
    ],
    ['too large', poly(sq(5, 51, 2)), 'area_too_large', '/b/coordinates'],
    ['empty multipolygon', { type: 'MultiPolygon', coordinates: [] }, 'invalid_multipolygon', '/b/coordinates'],
  ])('%s → %s', (_why, input, code, path) => {
    const i = issue(input);
    expect(i.code).toBe(code);
    expect(i.path).toBe(path);
    expect(i.message.length).toBeGreaterThan(10);
  });

  it('refuses more vertices than the limit', () => {
    const ring = Array.from({ length: 30 }, (_, k) => [
      5 + 0.01 * Math.cos((2 * Math.PI * k) / 30),
      51 + 0.01 * Math.sin((2 * Math.PI * k) / 30),
    ]);
    ring.push(ring[0]!);
    expect(issue(poly(ring), { maxVertices: 20 }).code).toBe('too_many_vertices');
  });

  it('accepts polygons with holes, multipolygons, Features and 3D positions; normalises orientation', () => {
    const cw = [...sq(5, 51)].reverse();
    const v = validateBoundary({
      type: 'Feature',
      properties: {},
      geometry: poly(cw, [
        [5.002, 51.002],
        [5.004, 51.002],
        [5.004, 51.004],
        [5.002, 51.004],
        [5.002, 51.002],
      ]),
    });
    expect(v.geometry.type).toBe('Polygon');
    const [shell, hole] = (v.geometry as { coordinates: number[][][] }).coordinates;
    const signed = (r: number[][]) =>
      r.slice(0, -1).reduce((a, p, i) => a + p[0]! * r[i + 1]![1]! - r[i + 1]![0]! * p[1]!, 0);
    expect(signed(shell!)).toBeGreaterThan(0); // exterior counter-clockwise (RFC 7946)
    expect(signed(hole!)).toBeLessThan(0);
    const full = validateBoundary(poly(sq(5, 51))).areaHa;
    expect(v.areaHa).toBeLessThan(full);
    const m = validateBoundary({ type: 'MultiPolygon', coordinates: [[sq(5, 51)], [sq(5.02, 51)]] });
    expect(m.areaHa).toBeCloseTo(
      validateBoundary(poly(sq(5, 51))).areaHa + validateBoundary(poly(sq(5.02, 51))).areaHa,
      6,
    );
    const z = validateBoundary(poly(sq(5, 51).map(([x, y]) => [x!, y!, 12.5])));
    expect(z.geometry.coordinates[0]![0]).toHaveLength(2);
    const dup = validateBoundary(
      poly([
        [5, 51],
        [5, 51],
        [5.01, 51],
        [5.01, 51.01],
        [5, 51.01],
        [5, 51],
      ]),
    );
    expect(dup.geometry.coordinates[0]).toHaveLength(5);
  });

  it('geodesic area matches the closed-form ellipsoidal area of a 1° × 1° cell to 1e-5', () => {
    for (const lat0 of [0, 45, 70]) {
      const cell = {
        type: 'Polygon' as const,
        coordinates: [
          [
            [10, lat0],
            [11, lat0],
            [11, lat0 + 1],
            [10, lat0 + 1],
            [10, lat0],
          ] as [number, number][],
        ],
      };
      // Geodesic edges between the corners are not parallels: compare against a cell whose
      // east/west edges are meridians (exact) and whose north/south edges are densified parallels.
      const dense: [number, number][] = [];
      for (let k = 0; k <= 1000; k++) dense.push([10 + k / 1000, lat0]);
      for (let k = 0; k <= 1000; k++) dense.push([11 - k / 1000, lat0 + 1]);
      dense.push([10, lat0]);
      const ha = geodesicAreaHa({ type: 'Polygon', coordinates: [dense] });
      const exact = (zoneArea(lat0 + 1, 1) - zoneArea(lat0, 1)) / 10_000;
      expect(Math.abs(ha - exact) / exact).toBeLessThan(1e-5);
      expect(geodesicAreaHa(cell)).toBeGreaterThan(0);
    }
  });

  it('a 20,000-vertex boundary validates', () => {
    const n = 19_999;
    const ring = Array.from({ length: n }, (_, k) => [
      5 + 0.02 * Math.cos((2 * Math.PI * k) / n),
      51 + 0.02 * Math.sin((2 * Math.PI * k) / n),
    ]);
    ring.push(ring[0]!);
    expect(validateBoundary(poly(ring)).vertexCount).toBe(20_000);
  });

  it('any JSON either validates or throws BoundaryError', () => {
    const coord = fc.oneof(fc.double(), fc.integer({ min: -200, max: 200 }), fc.string(), fc.constant(null));
    const pos = fc.array(coord, { maxLength: 4 });
    const ring = fc.array(pos, { maxLength: 8 });
    const geom = fc.record({
      type: fc.constantFrom('Polygon', 'MultiPolygon', 'Point', 'Feature', 7),
      coordinates: fc.oneof(
        fc.array(ring, { maxLength: 3 }),
        fc.array(fc.array(ring, { maxLength: 2 }), { maxLength: 2 }),
        fc.anything(),
      ),
    });
    fc.assert(
      fc.property(fc.oneof(geom, fc.anything()), (input) => {
        try {
          validateBoundary(input);
        } catch (e) {
          if (!(e instanceof BoundaryError)) throw e;
        }
      }),
      { numRuns: 3000 },
    );
  });
});
