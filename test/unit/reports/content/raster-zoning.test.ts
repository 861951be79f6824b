/**
 * Raster operations and management zones (domain code, no database): pixel outlines traced into
 * polygons whose area is exactly the member pixels' (checked on random masks against the pixel
 * count), connected regions, quantile and k-means classes against plain references, fragment
 * merging, rates around the base rate, and a prescription on a UTM grid whose zone areas add up to
 * the field's geodesic area.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { geodesicAreaHa } from '../../../../src/fields/boundary.js';
import { toWgs84 } from '../../../../src/imagery/crs.js';
import { resolveOptions } from '../../../../src/reports/options.js';
import { buildPrescription, roundRate } from '../../../../src/reports/content/prescription.js';
import {
  connectedRegions,
  pixelAreaHa,
  quantile,
  tracePixels,
  validValues,
  type GridPolygon,
  type IndexRaster,
} from '../../../../src/reports/content/raster.js';
import { classBreaks, classifyZones, kmeans1d, zoneRates } from '../../../../src/reports/content/zoning.js';
import type { Meta } from '../../../../src/reports/content/schema.js';

const ringArea = (ring: Array<[number, number]>) => {
  let s = 0;
  for (let k = 0; k < ring.length - 1; k++) s += ring[k]![0] * -ring[k + 1]![1] - ring[k + 1]![0] * -ring[k]![1];
  return s / 2;
};
const polysArea = (polys: GridPolygon[]) =>
  polys.reduce((s, p) => s + ringArea(p[0]!) + p.slice(1).reduce((h, r) => h + ringArea(r), 0), 0);

function pointIn(polys: GridPolygon[], x: number, y: number): boolean {
  let inside = false;
  for (const p of polys) {
    for (const ring of p) {
      for (let a = 0, b = ring.length - 1; a < ring.length; b = a++) {
        const [xa, ya] = ring[a]!;
        const [xb, yb] = ring[b]!;
        if (ya > y !== yb > y && x < ((xb - xa) * (y - ya)) / (yb - ya) + xa) inside = !inside;
      }
    }
  }
  return inside;
}

describe('tracePixels', () => {
  it('one pixel, an L, a ring with a hole, two diagonal pixels', () => {
    const grid = (rows: string[]) => ({
      w: rows[0]!.length,
      h: rows.length,
      m: (k: number) => rows[Math.floor(k / rows[0]!.length)]![k % rows[0]!.length] === '#',
    });
    const one = grid(['#']);
    const op = tracePixels(one.w, one.h, one.m);
    expect(op).toHaveLength(1);
    expect(op[0]).toHaveLength(1);
    expect(new Set(op[0]![0]!.map((p) => p.join(',')))).toEqual(new Set(['0,0', '0,1', '1,1', '1,0']));
    expect(ringArea(op[0]![0]!)).toBe(1);
    const l = grid(['#.', '##']);
    const lp = tracePixels(l.w, l.h, l.m);
    expect(lp).toHaveLength(1);
    expect(lp[0]![0]).toHaveLength(7); // 6 corners, closed
    expect(polysArea(lp)).toBe(3);
    const ring = grid(['###', '#.#', '###']);
    const rp = tracePixels(ring.w, ring.h, ring.m);
    expect(rp).toHaveLength(1);
    expect(rp[0]).toHaveLength(2); // outer + hole
    expect(ringArea(rp[0]![0]!)).toBe(9);
    expect(ringArea(rp[0]![1]!)).toBe(-1);
    const diag = grid(['#.', '.#']);
    const dp = tracePixels(diag.w, diag.h, diag.m);
    expect(dp).toHaveLength(2);
    expect(polysArea(dp)).toBe(2);
  });

  it('random masks: area equals the member count; every pixel centre is inside exactly when it is a member', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 1, max: 14 }),
        fc.integer({ min: 1, max: 14 }),
        fc.array(fc.boolean(), { minLength: 196, maxLength: 196 }),
        (w, h, bits) => {
          const m = (k: number) => bits[k]!;
          const polys = tracePixels(w, h, m);
          let n = 0;
          for (let k = 0; k < w * h; k++) if (m(k)) n++;
          expect(polysArea(polys)).toBe(n);
          for (const p of polys) {
            expect(ringArea(p[0]!)).toBeGreaterThan(0);
            for (const hole of p.slice(1)) expect(ringArea(hole)).toBeLessThan(0);
            for (const r of p) expect(r[0]).toEqual(r.at(-1));
          }
          for (let k = 0; k < w * h; k++) expect(pointIn(polys, (k % w) + 0.5, Math.floor(k / w) + 0.5)).toBe(m(k));
        },
      ),
      { numRuns: 300 },
    );
  });
});

describe('connectedRegions', () => {
  it('4- and 8-connectivity', () => {
    const labels = Int32Array.from([0, -1, 0, -1, 0, -1, 1, 1, 1]);
    expect(
      connectedRegions(labels, 3, 3, false)
        .regions.map((r) => r.pixels.length)
        .sort(),
    ).toEqual([1, 1, 1, 3]);
    expect(
      connectedRegions(labels, 3, 3, true)
        .regions.map((r) => r.pixels.length)
        .sort(),
    ).toEqual([3, 3]);
  });
});

describe('classes', () => {
  const sorted = Float64Array.from({ length: 1000 }, (_, k) => k / 999).sort();
  it('quantile breaks split into equal shares (numpy linear quantiles)', () => {
    expect(quantile(sorted, 0.25)).toBeCloseTo(0.25, 12);
    const b = classBreaks(sorted, 4, 'quantiles');
    expect(b.map((x) => Math.round(x * 1000) / 1000)).toEqual([0.25, 0.5, 0.75]);
  });
  it('1-D k-means finds well separated clusters', () => {
    const vals = Float64Array.from(
      [...Array(300).fill(0.2), ...Array(100).fill(0.5), ...Array(50).fill(0.9)].map(
        (v, k) => v + ((k % 7) - 3) * 0.001,
      ),
    ).sort();
    const c = kmeans1d(vals, 3);
    expect(c[0]).toBeCloseTo(0.2, 2);
    expect(c[1]).toBeCloseTo(0.5, 2);
    expect(c[2]).toBeCloseTo(0.9, 2);
  });
  it('zoneRates: inverse decreases with the index, proportional increases; the area-weighted mean is the base rate', () => {
    const zones = [
      { mean: 0.3, weight: 10 },
      { mean: 0.5, weight: 30 },
      { mean: 0.8, weight: 20 },
    ];
    const inv = zoneRates(zones, 150, 'inverse', 0.2);
    const pro = zoneRates(zones, 150, 'proportional', 0.2);
    expect(inv[0]).toBeGreaterThan(inv[1]!);
    expect(inv[1]).toBeGreaterThan(inv[2]!);
    expect(pro[0]).toBeLessThan(pro[1]!);
    const avg = (r: number[]) => r.reduce((s, x, k) => s + x * zones[k]!.weight, 0) / 60;
    expect(avg(inv)).toBeCloseTo(150, 9);
    expect(avg(pro)).toBeCloseTo(150, 9);
    expect(Math.max(...inv.map((x) => Math.abs(x / 150 - 1)))).toBeCloseTo(0.2, 12);
    expect(roundRate(80_049, 'seeds/ha')).toBe(80_000);
    expect(roundRate(2.345, 't/ha')).toBe(2.35);
  });
});

/** A UTM 31N raster over a square field, with a gradient, a low patch, salt noise and a cloud. */
function syntheticField(
  size: number,
  opts: { cloud?: boolean } = {},
): { r: IndexRaster; boundary: { type: 'Polygon'; coordinates: number[][][] } } {
  const originX = 630_000;
  const originY = 5_602_000;
  const inv = toWgs84(32631);
  // The field: a square whose edges cut through pixels (not on the grid lines).
  const x0 = originX + 13;
  const x1 = originX + (size - 1) * 10 - 7;
  const y0 = originY - 12;
  const y1 = originY - (size - 1) * 10 + 4;
  const ring = [inv([x0, y1]), inv([x1, y1]), inv([x1, y0]), inv([x0, y0])];
  const values = new Float32Array(size * size);
  const inside = new Uint8Array(size * size);
  let seed = 42;
  const rnd = () => {
    seed = (seed * 1103515245 + 12345) % 2 ** 31;
    return seed / 2 ** 31;
  };
  for (let j = 0; j < size; j++) {
    for (let i = 0; i < size; i++) {
      const k = j * size + i;
      const cx = originX + (i + 0.5) * 10;
      const cy = originY - (j + 0.5) * 10;
      inside[k] = cx > x0 && cx < x1 && cy < y0 && cy > y1 ? 1 : 0;
      const patch = Math.hypot(i - size * 0.3, j - size * 0.6) < size * 0.12 ? -0.3 : 0;
      const salt = rnd() < 0.01 ? -0.4 : 0;
      values[k] = inside[k] ? 0.5 + 0.3 * (i / size) + patch + salt + 0.02 * (rnd() - 0.5) : NaN;
      if (opts.cloud && Math.hypot(i - size * 0.7, j - size * 0.3) < size * 0.1) values[k] = NaN;
    }
  }
  return {
    r: { width: size, height: size, epsg: 32631, originX, originY, resX: 10, resY: -10, values, inside },
    boundary: { type: 'Polygon', coordinates: [[...ring, ring[0]!]] },
  };
}

const meta = (areaHa: number): Meta => ({
  report_id: 'rpt_x',
  type: 'prescription',
  title: 'Prescription map',
  generated_at: new Date().toISOString(),
  index: 'NDVI',
  field: {
    id: 'fld_x',
    name: 'x',
    crop_type: null,
    area_ha: areaHa,
    planting_date: null,
    harvest_date: null,
    centroid: { lon: 4.8, lat: 50.5 },
  },
});

describe('prescription zones', () => {
  it('zones tile the field: geodesic areas add up to the field area within 0.5 %; fragments merged; zones ordered by index', () => {
    for (const [size, cloud] of [
      [60, false],
      [120, true],
    ] as const) {
      const { r, boundary } = syntheticField(size, { cloud });
      const area = geodesicAreaHa(boundary as never);
      for (const zoning of ['quantiles', 'kmeans'] as const) {
        for (const zones of [2, 4, 7]) {
          const o = resolveOptions('prescription', { zones, zoning, min_zone_ha: 0.3 }).prescription!;
          const { content, labels } = buildPrescription(
            meta(area),
            { imagery_id: 'img', date: '2025-07-01', source: 's2', usable_fraction: 1 },
            r,
            boundary as never,
            o,
          );
          const sum = content.zones.reduce((s, z) => s + z.area_ha, 0);
          expect(Math.abs(sum - area) / area, `${size} ${zoning} ${zones}`).toBeLessThan(0.005);
          // k-means may spend a class on scattered outliers, which merging then removes.
          if (zoning === 'quantiles') expect(content.zones.length).toBe(zones);
          else expect(content.zones.length).toBeGreaterThanOrEqual(Math.min(zones, 2));
          expect(content.zoning.zones).toBe(content.zones.length);
          for (let k = 1; k < content.zones.length; k++) {
            expect(content.zones[k]!.mean_index).toBeGreaterThan(content.zones[k - 1]!.mean_index);
            expect(content.zones[k]!.rate).toBeLessThan(content.zones[k - 1]!.rate);
          }
          // No fragment under the minimum survives (4-connected, inside the field).
          const lab = Int32Array.from(labels);
          const { regions } = connectedRegions(lab, r.width, r.height, false);
          const minPx = Math.round(0.3 / pixelAreaHa(r));
          expect(regions.filter((g) => g.pixels.length < minPx)).toEqual([]);
          // Each zone's polygon area agrees with its pixels' area (edges clipped to the boundary).
          const px = new Map<number, number>();
          for (const l of labels) if (l >= 0) px.set(l, (px.get(l) ?? 0) + 1);
          const pxTotal = [...px.values()].reduce((s, n) => s + n, 0);
          expect(Math.abs(pxTotal * pixelAreaHa(r) - area) / area).toBeLessThan(0.05);
        }
      }
    }
  });

  it('quantile zones hold about equal shares of the usable pixels before merging', () => {
    const { r } = syntheticField(80);
    const cls = classifyZones(r, 4, 'quantiles', 1);
    const shares = cls.zones.map((z) => z.pixels / cls.zones.reduce((s, x) => s + x.pixels, 0));
    for (const s of shares) expect(Math.abs(s - 0.25)).toBeLessThan(0.02);
    const v = validValues(r);
    expect(cls.zones[0]!.min).toBeCloseTo(v[0]!, 6);
  });
});
