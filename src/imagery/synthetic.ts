/**
 * Synthetic Sentinel-2-like captures for the demo, the tests and the benchmarks: every L2A band
 * that formulas accept, each at its native resolution over one UTM grid (10 m B02 B03 B04 B08;
 * 20 m B05 B06 B07 B8A B11 B12 and SCL; 60 m B01 B09; B10 is L1C only); a crop that greens up after
 * planting and senesces before harvest; in-field variability (a smooth gradient and a weak patch);
 * cloud and cloud-shadow patches in the SCL band on some dates. Digital numbers follow L2A from
 * processing baseline 04.00: DN = (reflectance + 0.1) × 10,000, so offset −0.1. Deterministic for
 * a seed.
 */
import { EARTH_SEARCH_ASSET_KEYS } from './stac.js';
import { mkdirSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { toWgs84 } from './crs.js';
import { writeGeoTiff } from './tiff-writer.js';

export interface SceneSpec {
  /** UTM EPSG code and the top-left corner (m). */
  epsg: number;
  originX: number;
  originY: number;
  /** Size of the 10 m grid (the 20 m grid is half of it, the 60 m grid a sixth, rounded up). */
  size: number;
  seed: number;
}

/** The bands written and their native resolution (m), as in Sentinel-2 L2A products. */
export const SYNTHETIC_BANDS = {
  B01: 60,
  B02: 10,
  B03: 10,
  B04: 10,
  B05: 20,
  B06: 20,
  B07: 20,
  B08: 10,
  B8A: 20,
  B09: 60,
  B11: 20,
  B12: 20,
} as const;
export type SyntheticBand = keyof typeof SYNTHETIC_BANDS;

const red = (v: number) => 0.09 - 0.06 * v;
const nir = (v: number) => 0.2 + 0.32 * v;
const redEdge1 = (v: number) => 0.1 + 0.12 * v;
/**
 * Surface reflectance of each band for a vigour v (0 bare soil … about 1 full canopy): red falls
 * and NIR rises as the crop grows; the red-edge bands B05 < B06 < B07 lie between red and NIR and
 * climb towards NIR with the canopy (the red-edge shift); B8A, the narrow NIR, follows B08; B09 is
 * NIR dimmed by water vapour absorption; B01 (coastal aerosol) follows blue; SWIR falls with leaf
 * water.
 */
const REFLECTANCE: Record<SyntheticBand, (v: number) => number> = {
  B01: (v) => red(v) * 0.75 + 0.01,
  B02: (v) => red(v) * 0.75,
  B03: (v) => red(v) * 0.9 + 0.03 * v + 0.02,
  B04: red,
  B05: redEdge1,
  B06: (v) => redEdge1(v) + 0.55 * (nir(v) - redEdge1(v)),
  B07: (v) => redEdge1(v) + 0.85 * (nir(v) - redEdge1(v)),
  B08: nir,
  B8A: (v) => nir(v) * 1.02 + 0.005,
  B09: (v) => nir(v) * 0.8,
  B11: (v) => 0.26 - 0.1 * v,
  B12: (v) => 0.19 - 0.09 * v,
};

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
export function sceneField(
  spec: SceneSpec,
  fraction = 0.5,
): { type: 'Polygon'; coordinates: Array<Array<[number, number]>> } {
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

export interface SyntheticOptions {
  /** DEFLATE level of the files (default 6; 1 writes about a fifth faster, 5 % larger). */
  deflateLevel?: number;
}

export function writeSyntheticSeason(
  dir: string,
  spec: SceneSpec,
  dates: string[],
  planting: string,
  harvest: string,
  opts: SyntheticOptions = {},
): SyntheticCapture[] {
  return [...syntheticSteps(dir, spec, dates, planting, harvest, opts)].filter((c) => c !== null);
}

/**
 * writeSyntheticSeason in small steps, for a caller that must keep its event loop turning: writes
 * one file per step, yields null after each band file and the capture after its last file.
 */
export function* syntheticSteps(
  dir: string,
  spec: SceneSpec,
  dates: string[],
  planting: string,
  harvest: string,
  opts: SyntheticOptions = {},
): Generator<SyntheticCapture | null> {
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
  // Each coarser pixel takes the vigour of the 10 m pixel at its top-left corner.
  const grids = new Map<number, { n: number; from: Int32Array }>();
  for (const res of new Set(Object.values(SYNTHETIC_BANDS))) {
    const f = res / 10;
    const n = Math.ceil(n10 / f);
    const from = new Int32Array(n * n);
    for (let j = 0; j < n; j++)
      for (let i = 0; i < n; i++) from[j * n + i] = Math.min(n10 - 1, j * f) * n10 + Math.min(n10 - 1, i * f);
    grids.set(res, { n, from });
  }
  const dn = (refl: number) => Math.max(1, Math.min(65534, Math.round((refl + 0.1) * 10_000)));
  const base = { epsg: spec.epsg, originX: spec.originX, originY: spec.originY };
  for (const [k, date] of dates.entries()) {
    const day = (Date.parse(`${date}T00:00:00Z`) - t0) / 86_400_000;
    const g = day < 0 || day > season ? 0 : growth(day, season);
    const vigourAt = new Map<number, Float64Array>();
    const files: Record<string, string> = {};
    for (const [b, res] of Object.entries(SYNTHETIC_BANDS) as Array<[SyntheticBand, number]>) {
      const { n, from } = grids.get(res)!;
      let v = vigourAt.get(res);
      if (!v) {
        v = new Float64Array(n * n);
        for (let p = 0; p < v.length; p++) v[p] = g * vigour[from[p]!]!;
        vigourAt.set(res, v);
      }
      const reflectance = REFLECTANCE[b];
      const data = new Uint16Array(n * n);
      for (let p = 0; p < data.length; p++) data[p] = dn(reflectance(v[p]!));
      const f = path.join(dir, `${date}_${b}.tif`);
      writeFileSync(
        f,
        writeGeoTiff({
          ...base,
          width: n,
          height: n,
          resolution: res,
          data,
          nodata: 0,
          predictor: true,
          deflateLevel: opts.deflateLevel,
        }),
      );
      files[b] = f;
      yield null;
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
    const sclFile = path.join(dir, `${date}_SCL.tif`);
    writeFileSync(
      sclFile,
      writeGeoTiff({
        ...base,
        width: n20,
        height: n20,
        resolution: 20,
        data: scl,
        nodata: 0,
        deflateLevel: opts.deflateLevel,
      }),
    );
    yield { date, cloudiness, files, scl: sclFile };
  }
}

/** Every `step` days from `start` to `end` inclusive. */
export function datesEvery(start: string, end: string, step: number): string[] {
  const out: string[] = [];
  for (let t = Date.parse(`${start}T00:00:00Z`); t <= Date.parse(`${end}T00:00:00Z`); t += step * 86_400_000)
    out.push(new Date(t).toISOString().slice(0, 10));
  return out;
}

export interface SyntheticItemOptions {
  /** Asset href of a written file (default: the file path itself). */
  href?: (file: string) => string;
  collection?: string;
  /** MGRS tile of the scene for the Item id and `grid:code` (default 31UFS, the demo's). */
  tile?: string;
}

/**
 * A synthetic capture as a STAC Item in Earth Search's shape (collection sentinel-2-l2a): assets
 * keyed red/nir/scl…, `eo:cloud_cover`, `s2:processing_baseline` 05.10 with `raster:bands`
 * scale 0.0001 and offset −0.1, `proj:epsg`, `proj:shape` and `proj:transform` of each file, the
 * scene footprint as geometry. `index` alternates the platform (S2A, S2B) as the real orbit does.
 */
export function syntheticItem(
  c: SyntheticCapture,
  spec: SceneSpec,
  index: number,
  opts: SyntheticItemOptions = {},
): Record<string, unknown> & { id: string; collection: string } {
  const href = opts.href ?? ((f: string) => f);
  const tile = opts.tile ?? '31UFS';
  const sat = index % 2 === 0 ? 'A' : 'B';
  const inv = toWgs84(spec.epsg);
  const ext = spec.size * 10;
  const ring = [
    inv([spec.originX, spec.originY - ext]),
    inv([spec.originX + ext, spec.originY - ext]),
    inv([spec.originX + ext, spec.originY]),
    inv([spec.originX, spec.originY]),
  ];
  const xs = ring.map((p) => p[0]);
  const ys = ring.map((p) => p[1]);
  const file = (res: number, n: number) => ({
    type: 'image/tiff; application=geotiff; profile=cloud-optimized',
    'proj:shape': [n, n],
    'proj:transform': [res, 0, spec.originX, 0, -res, spec.originY],
  });
  const assets: Record<string, unknown> = {};
  for (const [b, res] of Object.entries(SYNTHETIC_BANDS) as Array<[SyntheticBand, number]>) {
    const key = EARTH_SEARCH_ASSET_KEYS[b];
    assets[key] = {
      href: href(c.files[b]!),
      ...file(res, Math.ceil(spec.size / (res / 10))),
      title: `${b} - ${res}m`,
      'eo:bands': [{ name: key, ...(b === 'B09' ? {} : { common_name: key }) }],
      gsd: res,
      'raster:bands': [{ nodata: 0, data_type: 'uint16', spatial_resolution: res, scale: 0.0001, offset: -0.1 }],
      roles: ['data', 'reflectance'],
    };
  }
  assets.scl = {
    href: href(c.scl),
    ...file(20, Math.ceil(spec.size / 2)),
    title: 'Scene classification map (SCL)',
    'raster:bands': [{ nodata: 0, data_type: 'uint8', spatial_resolution: 20 }],
    roles: ['data', 'reflectance'],
  };
  return {
    type: 'Feature',
    stac_version: '1.0.0',
    stac_extensions: [
      'https://stac-extensions.github.io/eo/v1.0.0/schema.json',
      'https://stac-extensions.github.io/projection/v1.0.0/schema.json',
      'https://stac-extensions.github.io/raster/v1.1.0/schema.json',
    ],
    id: `S2${sat}_${tile}_${c.date.replace(/-/g, '')}_0_L2A`,
    collection: opts.collection ?? 'sentinel-2-l2a',
    bbox: [Math.min(...xs), Math.min(...ys), Math.max(...xs), Math.max(...ys)],
    geometry: { type: 'Polygon', coordinates: [[...ring, ring[0]!]] },
    properties: {
      datetime: `${c.date}T10:46:19.024000Z`,
      platform: `sentinel-2${sat.toLowerCase()}`,
      constellation: 'sentinel-2',
      instruments: ['msi'],
      'eo:cloud_cover': Math.round(c.cloudiness * 1000) / 10,
      'proj:epsg': spec.epsg,
      'grid:code': `MGRS-${tile}`,
      's2:processing_baseline': '05.10',
      's2:product_type': 'S2MSI2A',
      'earthsearch:boa_offset_applied': false,
    },
    links: [],
    assets,
  };
}
