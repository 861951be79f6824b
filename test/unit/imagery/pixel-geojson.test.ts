/**
 * The byte-level GeoJSON writer of index results, against a JSON.stringify reference of the same
 * rings.
 */
import { describe, expect, it } from 'vitest';
import { toWgs84 } from '../../../src/imagery/crs.js';
import { pixelGeoJson, type PixelGrid } from '../../../src/imagery/pixel-geojson.js';

function reference(grid: PixelGrid, values: Float32Array, inside: Uint8Array) {
  const inv = toWgs84(grid.epsg);
  const node = (i: number, j: number) =>
    inv([grid.originX + i * grid.resX, grid.originY + j * grid.resY]).map((x) => Math.round(x * 1e7) / 1e7);
  const features = [];
  for (let j = 0; j < grid.height; j++) {
    for (let i = 0; i < grid.width; i++) {
      const k = j * grid.width + i;
      if (!inside[k]) continue;
      const v = values[k]!;
      features.push({
        type: 'Feature',
        geometry: {
          type: 'Polygon',
          coordinates: [[node(i, j + 1), node(i + 1, j + 1), node(i + 1, j), node(i, j), node(i, j + 1)]],
        },
        properties: { value: Number.isFinite(v) ? Math.round(v * 1e6) / 1e6 : null },
      });
    }
  }
  return { type: 'FeatureCollection', features };
}

describe('pixelGeoJson', () => {
  const special = [
    NaN,
    Infinity,
    -Infinity,
    0,
    -0,
    1e-7,
    -1e-7,
    0.5,
    -0.25,
    0.1234565,
    1,
    -1,
    12.000001,
    123.4567891,
    999_999_999.5,
    1e12,
    -3.4e38,
    0.999_999_7,
  ];
  for (const [epsg, ox, oy] of [
    [32631, 630_000, 5_602_000],
    [32733, 500_000, 7_000_000],
    [4326, 5.1, 51.2],
    [3857, 560_000, 6_650_000],
  ] as const) {
    it(`writes what JSON.stringify of the same rings would, EPSG:${epsg}`, () => {
      const res = epsg === 4326 ? 0.0001 : 10;
      const grid: PixelGrid = { width: 9, height: 7, epsg, originX: ox, originY: oy, resX: res, resY: -res };
      const n = grid.width * grid.height;
      const values = new Float32Array(n).map((_, k) => (k < special.length ? special[k]! : Math.sin(k) * 0.9));
      const inside = new Uint8Array(n).map((_, k) => (k % 5 === 3 ? 0 : 1));
      const out = pixelGeoJson(grid, values, inside);
      const parsed = JSON.parse(out.toString('latin1'));
      const ref = JSON.parse(JSON.stringify(reference(grid, values, inside))) as ReturnType<typeof reference>;
      expect(parsed.features).toHaveLength(ref.features.length);
      expect(parsed).toEqual(ref);
    });
  }

  it('answers bytes in an ArrayBuffer of their own (transferable); no pixel inside is an empty collection', () => {
    const grid: PixelGrid = {
      width: 2,
      height: 2,
      epsg: 32631,
      originX: 630_000,
      originY: 5_602_000,
      resX: 10,
      resY: -10,
    };
    const body = pixelGeoJson(grid, new Float32Array(4).fill(0.3), new Uint8Array([0, 1, 0, 0]));
    expect(body.byteOffset).toBe(0);
    expect(body.buffer.byteLength).toBe(body.byteLength);
    const parsed = JSON.parse(body.toString());
    expect(parsed.features).toHaveLength(1);
    expect(parsed.features[0].properties.value).toBe(0.3);
    expect(JSON.parse(pixelGeoJson(grid, new Float32Array(4), new Uint8Array(4)).toString())).toEqual({
      type: 'FeatureCollection',
      features: [],
    });
  });
});
