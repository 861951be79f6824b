/**
 * Coverage weights (imagery/coverage-fraction.ts) against an independent reference: the exact area
 * of polygon ∩ pixel square from polygon-clipping, for random star-shaped polygons with holes,
 * multipolygons, slivers and a polygon inside one pixel, on a UTM grid of 10 m pixels (y down);
 * then the weighted statistics (kernel + compute/zonal.ts) against float64 formulas over the
 * reference weights: numpy-style weighted mean and population std, and exactextract's weighted
 * quantiles written out here with a full sort.
 */
import polygonClipping, { type MultiPolygon as PcMulti, type Polygon as PcPolygon } from 'polygon-clipping';
import { describe, expect, it } from 'vitest';
import { compileFormula } from '../../../src/compute/formula.js';
import { Kernel } from '../../../src/compute/kernel-host.js';
import { histogramOf, weightedPercentiles, weightedStats } from '../../../src/compute/zonal.js';
import { coverageFractions, type Ring } from '../../../src/imagery/coverage-fraction.js';
import { fromWgs84, toWgs84 } from '../../../src/imagery/crs.js';
import { refQuantile } from '../../helpers/exactextract.js';
import { npHistogram } from '../../helpers/numpy.js';
import { rng } from '../../helpers/random.js';

const OX = 500_000;
const OY = 5_600_000;
const RES = 10;

/** A star-shaped simple ring around (cx, cy) in UTM metres, radii in [r0, r1], closed. */
function star(r: () => number, cx: number, cy: number, r0: number, r1: number, n: number): Ring {
  const ring: Ring = [];
  for (let k = 0; k < n; k++) {
    const a = (2 * Math.PI * (k + 0.2 + 0.6 * r())) / n;
    const rad = r0 + (r1 - r0) * r();
    ring.push([cx + rad * Math.cos(a), cy + rad * Math.sin(a)]);
  }
  ring.push([...ring[0]!] as [number, number]);
  return ring;
}

/** Shoelace area about (ox, oy), a corner of the cell: UTM coordinates themselves would cancel ~1e-4 m². */
const areaOf = (ring: Array<[number, number]>, ox: number, oy: number) => {
  let a = 0;
  for (let k = 0; k + 1 < ring.length; k++)
    a += (ring[k]![0] - ox) * (ring[k + 1]![1] - oy) - (ring[k + 1]![0] - ox) * (ring[k]![1] - oy);
  return Math.abs(a / 2);
};

/** The window (pixels, 1 px margin), the rings in its pixel units and the reference weights. */
function reference(polygons: Ring[][]) {
  const all = polygons.flat(2);
  const minX = Math.min(...all.map((p) => p[0]));
  const maxX = Math.max(...all.map((p) => p[0]));
  const minY = Math.min(...all.map((p) => p[1]));
  const maxY = Math.max(...all.map((p) => p[1]));
  const x0 = Math.floor((minX - OX) / RES) - 1;
  const y0 = Math.floor((OY - maxY) / RES) - 1;
  const w = Math.ceil((maxX - OX) / RES) + 1 - x0;
  const h = Math.ceil((OY - minY) / RES) + 1 - y0;
  const pixelRings = polygons.map((rings) =>
    rings.map((ring) => ring.map(([x, y]) => [(x - OX) / RES - x0, (OY - y) / RES - y0] as [number, number])),
  );
  const weights = new Float64Array(w * h);
  const geom = polygons as unknown as PcMulti;
  for (let j = 0; j < h; j++)
    for (let i = 0; i < w; i++) {
      const ax = OX + (x0 + i) * RES;
      const ay = OY - (y0 + j) * RES;
      const cell: PcPolygon = [
        [
          [ax, ay - RES],
          [ax + RES, ay - RES],
          [ax + RES, ay],
          [ax, ay],
          [ax, ay - RES],
        ],
      ];
      const inter = polygonClipping.intersection(cell, geom);
      let a = 0;
      for (const poly of inter) for (const [k, ring] of poly.entries()) a += (k === 0 ? 1 : -1) * areaOf(ring, ax, ay);
      weights[j * w + i] = a / (RES * RES);
    }
  return { w, h, pixelRings, weights };
}

function cases(): Array<{ name: string; polygons: Ring[][] }> {
  const r = rng(2023);
  const out: Array<{ name: string; polygons: Ring[][] }> = [];
  for (let k = 0; k < 12; k++) {
    const cx = OX + 200 + r() * 300;
    const cy = OY - 200 - r() * 300;
    const outer = star(r, cx, cy, 40 + r() * 20, 80 + r() * 60, 5 + Math.floor(r() * 40));
    const polys: Ring[][] = [[outer]];
    if (k % 2 === 0) polys[0]!.push(star(r, cx + r() * 5, cy - r() * 5, 5, 30, 3 + Math.floor(r() * 12)));
    if (k % 3 === 0) polys.push([star(r, cx + 300, cy - 20, 10, 45, 4 + Math.floor(r() * 10))]);
    out.push({
      name: `random ${k}${k % 2 === 0 ? ' with a hole' : ''}${k % 3 === 0 ? ', multipolygon' : ''}`,
      polygons: polys,
    });
  }
  // a sliver 1 mm wide and 137 m long, across many pixels, at a slant
  const sx = OX + 101.3;
  const sy = OY - 203.7;
  out.push({
    name: 'sliver',
    polygons: [
      [
        [
          [sx, sy],
          [sx + 120.1, sy - 66.2],
          [sx + 120.1006, sy - 66.2008],
          [sx, sy],
        ],
      ],
    ],
  });
  // a triangle inside one pixel, and a square on the pixel lines exactly
  out.push({
    name: 'inside one pixel',
    polygons: [
      [
        [
          [OX + 31.2, OY - 42.5],
          [OX + 38.9, OY - 47.7],
          [OX + 33.3, OY - 41.1],
          [OX + 31.2, OY - 42.5],
        ],
      ],
    ],
  });
  out.push({
    name: 'pixel-aligned square with a pixel-aligned hole',
    polygons: [
      [
        [
          [OX + 100, OY - 100],
          [OX + 160, OY - 100],
          [OX + 160, OY - 40],
          [OX + 100, OY - 40],
          [OX + 100, OY - 100],
        ],
        [
          [OX + 120, OY - 80],
          [OX + 130, OY - 80],
          [OX + 130, OY - 70],
          [OX + 120, OY - 70],
          [OX + 120, OY - 80],
        ],
      ],
    ],
  });
  return out;
}

describe('coverage weights against polygon-clipping', () => {
  const kernel = new Kernel();
  const identity = compileFormula('B04');

  for (const c of cases()) {
    it(`${c.name}: weights within 1e-9; weighted mean/std within 1e-6; quantiles as exactextract's`, () => {
      const ref = reference(c.polygons);
      const got = coverageFractions(ref.pixelRings, ref.w, ref.h);
      let worst = 0;
      for (let k = 0; k < got.length; k++) worst = Math.max(worst, Math.abs(got[k]! - ref.weights[k]!));
      expect(worst).toBeLessThan(1e-9);
      const total = ref.weights.reduce((a, b) => a + b, 0);
      expect(total).toBeGreaterThan(0);

      // values on the touched pixels (a few NaN), the kernel's unweighted pass, then the weighting
      const r = rng(ref.w * 31 + ref.h);
      const n = ref.w * ref.h;
      const prep = kernel.prepare(n, [{ dtype: 'f32' }], { mask: true });
      const vals = prep.bands[0]!;
      for (let k = 0; k < n; k++) {
        vals[k] = r() < 0.03 ? NaN : Math.fround(0.2 + 0.6 * r());
        prep.mask![k] = got[k]! > 0 ? 1 : 0;
      }
      const values0 = Float32Array.from(vals);
      const s = kernel.run(identity);
      const values = kernel.values();
      const partial: number[] = [];
      for (let k = 0; k < n; k++) if (got[k]! > 0 && got[k]! < 1) partial.push(k);
      const ws = weightedStats(s, values, got, partial);
      // numpy: np.average(x, weights=w), sqrt(np.average((x - m)**2, weights=w)), min/max over w > 0
      let sw = 0;
      let swx = 0;
      let mn = Infinity;
      let mx = -Infinity;
      const pairs: Array<[number, number]> = [];
      for (let k = 0; k < n; k++) {
        const w = ref.weights[k]!;
        const v = values0[k]!;
        // a share under 1e-9 counts as none (coverage-fraction.ts, docs/compute-engine.md)
        if (!(w >= 1e-9) || Number.isNaN(v)) continue;
        sw += w;
        swx += w * v;
        mn = Math.min(mn, v);
        mx = Math.max(mx, v);
        pairs.push([v, w]);
      }
      const mean = swx / sw;
      let m2 = 0;
      for (const [v, w] of pairs) m2 += w * (v - mean) ** 2;
      expect(Math.abs(ws.count - sw)).toBeLessThan(1e-9 * Math.max(1, sw));
      expect(Math.abs(ws.mean - mean)).toBeLessThan(1e-6);
      expect(Math.abs(ws.std - Math.sqrt(m2 / sw))).toBeLessThan(1e-6);
      expect(ws.min).toBe(mn);
      expect(ws.max).toBe(mx);
      const ps = [0, 5, 25, 50, 75, 95, 100];
      const wp = weightedPercentiles(values, got, ps)!;
      for (const [i, p] of ps.entries())
        expect(Math.abs(wp[i]! - refQuantile(pairs, p / 100)), `p${p}`).toBeLessThan(1e-6);
      // the weighted histogram: numpy's with weights= over the same values and weights (1e-9), and
      // its counts sum to the weight of the valid pixels (the kernel's values read before it runs)
      const counted = Array.from({ length: n }, (_, k) => k).filter((k) => got[k]! > 0 && !Number.isNaN(values[k]!));
      const want = npHistogram(
        counted.map((k) => values[k]!),
        { bins: 5 },
        counted.map((k) => got[k]!),
      );
      const hist = histogramOf(
        kernel,
        { bins: 5 },
        { min: mn, max: mx },
        { weights: got, partial: Int32Array.from(partial) },
      );
      expect(hist.edges).toEqual(want.edges);
      for (const [b, c] of want.counts.entries()) expect(Math.abs(hist.counts[b]! - c), `bin ${b}`).toBeLessThan(1e-9);
      expect(Math.abs(hist.counts.reduce((a, b) => a + b, 0) - sw)).toBeLessThan(1e-9 * Math.max(1, sw));
    });
  }

  it('a square drawn on the grid and stored in lon/lat: every weight exactly 0 or 1, as drawn', () => {
    // the demo field's case (imagery/synthetic.ts sceneField): UTM 31N corners on the 10 m grid,
    // stored in WGS84, reprojected back as the window reader does
    const [ox, oy] = [630_000, 5_602_000];
    const toLonLat = toWgs84(32631);
    const toUtm = fromWgs84(32631);
    const corners: Array<[number, number]> = [
      [ox + 400, oy - 1200],
      [ox + 1200, oy - 1200],
      [ox + 1200, oy - 400],
      [ox + 400, oy - 400],
    ];
    const back = [...corners, corners[0]!].map((c) => toUtm(toLonLat(c)));
    // the window of the reader: 1 px margin; pixel (i, j) is [i, i + 1] × [j, j + 1] from (x0, y0)
    const [x0, y0, w, h] = [39, 39, 82, 82];
    const ring = back.map(([x, y]) => [(x - ox) / RES - x0, (oy - y) / RES - y0] as [number, number]);
    // the round trip moved the corners off the grid lines, if only by a few 1e-10 px
    expect(ring.some(([x, y]) => x !== Math.round(x) || y !== Math.round(y))).toBe(true);
    const got = coverageFractions([[ring]], w, h);
    let wrong = 0;
    for (let j = 0; j < h; j++)
      for (let i = 0; i < w; i++) {
        const inside = i >= 1 && i <= 80 && j >= 1 && j <= 80;
        if (got[j * w + i] !== (inside ? 1 : 0)) wrong++;
      }
    expect(wrong).toBe(0);
  });

  it('all weights 1 give numpy percentiles and the unweighted statistics', () => {
    const v = Float32Array.from([0.5, 0.1, NaN, 0.9, 0.3, 0.3]);
    const w = Float64Array.from([1, 1, 1, 1, 1, 1]);
    // numpy.percentile([0.1, 0.3, 0.3, 0.5, 0.9], [10, 50, 90]) in float32 values
    const sorted = [0.1, 0.3, 0.3, 0.5, 0.9].map(Math.fround);
    const np = (p: number) => {
      const rank = (p / 100) * 4;
      const k = Math.floor(rank);
      return sorted[k]! + (sorted[Math.min(k + 1, 4)]! - sorted[k]!) * (rank - k);
    };
    const got = weightedPercentiles(v, w, [10, 50, 90])!;
    for (const [i, p] of [10, 50, 90].entries()) expect(Math.abs(got[i]! - np(p))).toBeLessThan(1e-12);
  });
});
