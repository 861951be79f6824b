/**
 * The pieces of the index endpoints that are plain functions: the byte-level GeoJSON writer
 * (against a JSON.stringify reference of the same rings), calendar dates of the time series,
 * Accept-Encoding negotiation and the bounded LRU.
 */
import { LRUCache } from 'lru-cache';
import { describe, expect, it } from 'vitest';
import { toWgs84 } from '../../../src/imagery/crs.js';
import { pixelGeoJson, type PixelGrid } from '../../../src/compute/pixel-geojson.js';
import { iso } from '../../../src/indices/timeseries.js';
import { acceptsEncoding } from '../../../src/platform/http/accept-encoding.js';

function reference(grid: PixelGrid, values: Float32Array, inside: Uint8Array) {
  const inv = toWgs84(grid.epsg);
  const node = (i: number, j: number) => inv([grid.originX + i * grid.resX, grid.originY + j * grid.resY]).map((x) => Math.round(x * 1e7) / 1e7);
  const features = [];
  for (let j = 0; j < grid.height; j++) {
    for (let i = 0; i < grid.width; i++) {
      const k = j * grid.width + i;
      if (!inside[k]) continue;
      const v = values[k]!;
      features.push({
        type: 'Feature',
        geometry: { type: 'Polygon', coordinates: [[node(i, j + 1), node(i + 1, j + 1), node(i + 1, j), node(i, j), node(i, j + 1)]] },
        properties: { value: Number.isFinite(v) ? Math.round(v * 1e6) / 1e6 : null },
      });
    }
  }
  return { type: 'FeatureCollection', features };
}

describe('pixelGeoJson', () => {
  const special = [NaN, Infinity, -Infinity, 0, -0, 1e-7, -1e-7, 0.5, -0.25, 0.1234565, 1, -1, 12.000001, 123.4567891, 999_999_999.5, 1e12, -3.4e38, 0.999_999_7];
  for (const [epsg, ox, oy] of [[32631, 630_000, 5_602_000], [32733, 500_000, 7_000_000], [4326, 5.1, 51.2], [3857, 560_000, 6_650_000]] as const) {
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
    const grid: PixelGrid = { width: 2, height: 2, epsg: 32631, originX: 630_000, originY: 5_602_000, resX: 10, resY: -10 };
    const body = pixelGeoJson(grid, new Float32Array(4).fill(0.3), new Uint8Array([0, 1, 0, 0]));
    expect(body.byteOffset).toBe(0);
    expect(body.buffer.byteLength).toBe(body.byteLength);
    const parsed = JSON.parse(body.toString());
    expect(parsed.features).toHaveLength(1);
    expect(parsed.features[0].properties.value).toBe(0.3);
    expect(JSON.parse(pixelGeoJson(grid, new Float32Array(4), new Uint8Array(4)).toString())).toEqual({ type: 'FeatureCollection', features: [] });
  });
});

describe('iso', () => {
  it('equals Date#toISOString for every day from 0001 to 9999 sampled, and around leap days', () => {
    const DAY = 86_400_000;
    const from = Date.parse('0001-01-01T00:00:00Z');
    const to = Date.UTC(9999, 11, 31);
    for (let t = from; t <= to; t += DAY * 97) expect(iso(t)).toBe(new Date(t).toISOString().slice(0, 10));
    for (const d of ['1900-02-28', '1900-03-01', '2000-02-29', '2000-03-01', '2024-02-29', '2025-12-31', '2026-01-01', '0400-02-29']) expect(iso(Date.parse(`${d}T00:00:00Z`))).toBe(d);
  });
});

describe('acceptsEncoding', () => {
  it.each([
    ['gzip', true],
    ['gzip, deflate, br', true],
    ['br;q=1.0, gzip;q=0.8, *;q=0.1', true],
    ['GZIP', true],
    ['*', true],
    ['gzip;q=0', false],
    ['gzip; q=0.000', false],
    ['br, *;q=0', false],
    ['identity', false],
    ['', false],
    [undefined, false],
    ['x-gzipped', false],
  ] as const)('%s → %s', (header, ok) => {
    expect(acceptsEncoding(header, 'gzip')).toBe(ok);
  });
});

// The caches of index bodies, statistics and GeoJSON grids are lru-cache instances bounded by a
// size: what they rely on is checked here.
describe('LRUCache bounded by size', () => {
  it('keeps the most recently used entries within the size limit', () => {
    const lru = new LRUCache<string, string>({ maxSize: 10, sizeCalculation: (s) => s.length });
    lru.set('a', 'aaaa');
    lru.set('b', 'bbbb');
    expect(lru.get('a')).toBe('aaaa'); // a is now the most recent
    lru.set('c', 'cccc'); // 12 > 10: b goes
    expect(lru.get('b')).toBeUndefined();
    expect(lru.get('a')).toBe('aaaa');
    expect(lru.calculatedSize).toBe(8);
    lru.set('big', 'x'.repeat(11)); // larger than the limit: not kept, nothing evicted
    expect(lru.size).toBe(2);
    lru.set('a', 'aaaaaaa'); // re-measured: 7 + 4 > 10, c goes
    expect(lru.get('c')).toBeUndefined();
    expect(lru.calculatedSize).toBe(7);
  });

  it('re-measures an object that grew only when deleted and set again', () => {
    const lru = new LRUCache<string, Map<string, number>>({ maxSize: 5, sizeCalculation: (g) => g.size + 1 });
    const g = new Map<string, number>();
    lru.set('g', g);
    lru.set('h', new Map());
    g.set('x', 1).set('y', 2);
    lru.set('g', g);
    expect(lru.calculatedSize).toBe(2); // the same object set again is not measured again
    lru.delete('g');
    lru.set('g', g); // 3 + 1: still within 5, h stays
    expect(lru.calculatedSize).toBe(4);
    g.set('z', 3);
    lru.delete('g');
    lru.set('g', g); // 4 + 1 = 5
    expect([...lru.keys()]).toEqual(['g', 'h']);
    g.set('w', 4);
    lru.delete('g');
    lru.set('g', g); // 5 + 1 > 5: h goes
    expect(lru.has('h')).toBe(false);
    expect(lru.calculatedSize).toBe(5);
  });
});
