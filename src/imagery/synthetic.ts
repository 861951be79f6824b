/**
 * Synthetic Sentinel-2-like captures for the demo, the tests and the benchmarks: B02, B03, B04,
 * B08 at 10 m and B05, B11, B12 and SCL at 20 m over one UTM grid; a crop that greens up after
 * planting and senesces before harvest; in-field variability (a smooth gradient and a weak patch);
 * cloud and cloud-shadow patches in the SCL band on some dates. Digital numbers follow L2A from
 * processing baseline 04.00: DN = (reflectance + 0.1) × 10,000, so offset −0.1. Deterministic for
 * a seed.
 */
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { toWgs84 } from './crs.js';
import { writeGeoTiff } from './tiff-writer.js';

export interface SceneSpec {
  /** UTM EPSG code and the top-left corner (m). */
  epsg: number;
  originX: number;
  originY: number;
  /** Size of the 10 m grid (the 20 m grid is half). */
  size: number;
  seed: number;
}

export interface SyntheticCapture {
  date: string;
  /** Share of the scene under cloud or shadow, 0..1 (what the generator aimed at). */
  cloudiness: number;
  files: Record<string, string>;
  scl: string;
}

function rng(seed: number) {
  let s = seed >>> 0 || 1;
  return () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
}

/** Crop development 0..1 on a day of the season: logistic green-up, then senescence. */
export function growth(dayOfSeason: number, seasonDays: number): number {
  const up = 1 / (1 + Math.exp(-(dayOfSeason - seasonDays * 0.3) / (seasonDays * 0.06)));
  const down = 1 / (1 + Math.exp((dayOfSeason - seasonDays * 0.85) / (seasonDays * 0.05)));
  return Math.max(0, Math.min(1, up * down));
}

/** The demo field: a 60 ha block in the middle of the scene, in WGS84. */
export function sceneField(spec: SceneSpec, fraction = 0.5): { type: 'Polygon'; coordinates: Array<Array<[number, number]>> } {
  const inv = toWgs84(spec.epsg);
  const ext = spec.size * 10;
  const m = (ext * (1 - fraction)) / 2;
  const x0 = spec.originX + m;
  const x1 = spec.originX + ext - m;
  const y0 = spec.originY - m;
  const y1 = spec.originY - ext + m;
  const ring = [inv([x0, y1]), inv([x1, y1]), inv([x1, y0]), inv([x0, y0])];
  return { type: 'Polygon', coordinates: [[...ring, ring[0]!]] };
}

export function writeSyntheticSeason(dir: string, spec: SceneSpec, dates: string[], planting: string, harvest: string): SyntheticCapture[] {
  mkdirSync(dir, { recursive: true });
  const n10 = spec.size;
  const n20 = Math.ceil(spec.size / 2);
  const t0 = Date.parse(`${planting}T00:00:00Z`);
  const season = (Date.parse(`${harvest}T00:00:00Z`) - t0) / 86_400_000;
  const random = rng(spec.seed);
  // Per-pixel vigour: a gentle gradient, a low-vigour patch, a little noise.
  const vigour = new Float32Array(n10 * n10);
  for (let j = 0; j < n10; j++) {
    for (let i = 0; i < n10; i++) {
      const dx = (i - n10 * 0.62) / (n10 * 0.09);
      const dy = (j - n10 * 0.4) / (n10 * 0.12);
      const patch = 0.45 * Math.exp(-(dx * dx + dy * dy));
      vigour[j * n10 + i] = 0.8 + 0.25 * (i / n10) - patch + 0.05 * (random() - 0.5);
    }
  }
  const out: SyntheticCapture[] = [];
  for (const [k, date] of dates.entries()) {
    const day = (Date.parse(`${date}T00:00:00Z`) - t0) / 86_400_000;
    const g = day < 0 || day > season ? 0 : growth(day, season);
    const bands10: Record<string, Uint16Array> = { B02: new Uint16Array(n10 * n10), B03: new Uint16Array(n10 * n10), B04: new Uint16Array(n10 * n10), B08: new Uint16Array(n10 * n10) };
    const bands20: Record<string, Uint16Array> = { B05: new Uint16Array(n20 * n20), B11: new Uint16Array(n20 * n20), B12: new Uint16Array(n20 * n20) };
    const dn = (refl: number) => Math.max(1, Math.min(65534, Math.round((refl + 0.1) * 10_000)));
    for (let p = 0; p < n10 * n10; p++) {
      const v = g * vigour[p]!;
      const red = 0.09 - 0.06 * v;
      const nir = 0.2 + 0.32 * v;
      bands10.B02![p] = dn(red * 0.75);
      bands10.B03![p] = dn(red * 0.9 + 0.03 * v + 0.02);
      bands10.B04![p] = dn(red);
      bands10.B08![p] = dn(nir);
    }
    for (let j = 0; j < n20; j++) {
      for (let i = 0; i < n20; i++) {
        const v = g * vigour[Math.min(n10 - 1, j * 2) * n10 + Math.min(n10 - 1, i * 2)]!;
        bands20.B05![j * n20 + i] = dn(0.1 + 0.12 * v);
        bands20.B11![j * n20 + i] = dn(0.26 - 0.1 * v);
        bands20.B12![j * n20 + i] = dn(0.19 - 0.09 * v);
      }
    }
    // Clouds: every third date clear, others with one or two patches of varying size.
    const cloudiness = k % 3 === 0 ? 0 : k % 7 === 5 ? 0.8 : 0.05 + 0.25 * random();
    const scl = new Uint8Array(n20 * n20).fill(g > 0.15 ? 4 : 5);
    if (cloudiness > 0) {
      const r = Math.sqrt((cloudiness * n20 * n20) / Math.PI);
      const cx = n20 * (0.2 + 0.6 * random());
      const cy = n20 * (0.2 + 0.6 * random());
      for (let j = 0; j < n20; j++) {
        for (let i = 0; i < n20; i++) {
          const d = Math.hypot(i - cx, j - cy);
          const ds = Math.hypot(i - cx - r * 0.4, j - cy - r * 0.3);
          if (d < r) scl[j * n20 + i] = d < r * 0.8 ? 9 : 8;
          else if (ds < r) scl[j * n20 + i] = 3;
        }
      }
    }
    const base = { epsg: spec.epsg, originX: spec.originX, originY: spec.originY };
    const files: Record<string, string> = {};
    for (const [b, data] of Object.entries(bands10)) {
      const f = path.join(dir, `${date}_${b}.tif`);
      writeFileSync(f, writeGeoTiff({ ...base, width: n10, height: n10, resolution: 10, data, nodata: 0, predictor: true }));
      files[b] = f;
    }
    for (const [b, data] of Object.entries(bands20)) {
      const f = path.join(dir, `${date}_${b}.tif`);
      writeFileSync(f, writeGeoTiff({ ...base, width: n20, height: n20, resolution: 20, data, nodata: 0, predictor: true }));
      files[b] = f;
    }
    const sclFile = path.join(dir, `${date}_SCL.tif`);
    writeFileSync(sclFile, writeGeoTiff({ ...base, width: n20, height: n20, resolution: 20, data: scl, nodata: 0 }));
    out.push({ date, cloudiness, files, scl: sclFile });
  }
  return out;
}

/** Every `step` days from `start` to `end` inclusive. */
export function datesEvery(start: string, end: string, step: number): string[] {
  const out: string[] = [];
  for (let t = Date.parse(`${start}T00:00:00Z`); t <= Date.parse(`${end}T00:00:00Z`); t += step * 86_400_000) out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}
