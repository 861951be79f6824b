/**
 * Captures in national grids and in a CRS defined by the GeoTIFF's own GeoKeys, through the API:
 * EPSG:3035 (LAEA Europe), EPSG:2154 (Lambert-93), EPSG:27700 (British National Grid, OSGB36),
 * EPSG:2263 (New York Long Island, US survey feet) and a user-defined Albers Equal Area on NAD83.
 * For each, red and NIR files written here are registered over a field drawn in WGS84, and checked
 * against GDAL's reading of the same pixels: the boundary reprojected by ogr2ogr to the file's CRS
 * (as gdalsrsinfo reads it) and burnt by gdal_rasterize onto the file's grid gives the field's
 * pixels (count and which ones), and the NDVI of those pixels computed from the values
 * gdal_translate reads is the reference for the API's per-pixel values and zonal statistics.
 * Skipped, and said so, without gdal-bin.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { hasGdal } from '../helpers/tools.js';
import { writeGeoTiff } from '../../src/imagery/tiff-writer.js';
import { dbBackends } from '../helpers/backends.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { ALBERS_CONUS_KEYS } from '../helpers/geokeys.js';

const gdal = hasGdal();

interface Case {
  name: string;
  epsg: number;
  geoKeys?: Record<number, number | number[]>;
  /** The CRS for GDAL, to lay the raster out around the field. */
  srs: string;
  centre: [number, number];
  /** Pixel size in CRS units. */
  res: number;
  /** The record's `crs`. */
  label: RegExp;
}

const CASES: Case[] = [
  {
    name: 'EPSG:3035 LAEA Europe (Lower Saxony)',
    epsg: 3035,
    srs: 'EPSG:3035',
    centre: [9.73, 52.37],
    res: 10,
    label: /^EPSG:3035$/,
  },
  {
    name: 'EPSG:2154 Lambert-93 (Beauce)',
    epsg: 2154,
    srs: 'EPSG:2154',
    centre: [1.62, 48.21],
    res: 10,
    label: /^EPSG:2154$/,
  },
  {
    name: 'EPSG:27700 British National Grid (Lincolnshire)',
    epsg: 27700,
    srs: 'EPSG:27700',
    centre: [-0.35, 53.05],
    res: 10,
    label: /^EPSG:27700$/,
  },
  {
    name: 'EPSG:2263 NY Long Island, 30 ftUS pixels (Suffolk County)',
    epsg: 2263,
    srs: 'EPSG:2263',
    centre: [-72.68, 40.93],
    res: 30,
    label: /^EPSG:2263$/,
  },
  {
    name: 'user-defined Albers Equal Area on NAD83 (Iowa)',
    epsg: 32767,
    geoKeys: ALBERS_CONUS_KEYS,
    srs: '+proj=aea +lat_0=23 +lon_0=-96 +lat_1=29.5 +lat_2=45.5 +x_0=0 +y_0=0 +datum=NAD83 +units=m',
    centre: [-93.62, 41.98],
    res: 10,
    label: /^\+proj=aea .*\+lat_1=29\.5 \+lat_2=45\.5/,
  },
];

const SIZE = 120;

/** An irregular field of about 20 ha with a hole (a pond), in WGS84 around `centre`. */
function fieldAround([lon, lat]: [number, number]) {
  const m = (dx: number, dy: number): [number, number] => [
    lon + dx / (111_320 * Math.cos((lat * Math.PI) / 180)),
    lat + dy / 110_574,
  ];
  const outer = [m(-230, -190), m(210, -240), m(260, 60), m(90, 250), m(-170, 210), m(-270, 20)];
  const hole = [m(-40, -30), m(-50, 40), m(30, 45), m(45, -20)];
  return {
    type: 'Polygon' as const,
    coordinates: [
      [...outer, outer[0]!],
      [...hole, hole[0]!],
    ],
  };
}

/** A raster read by GDAL (gdal_translate to an ASCII grid): values row-major. */
function gdalRead(file: string): number[] {
  const text = execFileSync('gdal_translate', ['-q', '-of', 'AAIGrid', file, '/vsistdout/'], {
    encoding: 'utf8',
    maxBuffer: 64 * 1024 * 1024,
  });
  return text
    .split('\n')
    .filter((l) => /^\s*-?\d/.test(l) && !/^[a-z]/i.test(l.trim()))
    .flatMap((l) => l.trim().split(/\s+/).map(Number));
}

describe.runIf(gdal)('captures in national grids and user-defined CRSs, against GDAL', () => {
  let t: TestApp;
  let dir: string;

  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'imagery-crs-'));
    t = await buildTestApp(dbBackends.at(-1)!, { env: { IMAGERY_ROOTS: dir } });
  });
  afterAll(async () => {
    await t?.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it.each(CASES)("$name: the field's pixels and NDVI values are GDAL's", async (c) => {
    const sub = path.join(dir, String(c.epsg) + (c.geoKeys ? '-user' : ''));
    execFileSync('mkdir', ['-p', sub]);
    // The raster: SIZE × SIZE pixels centred on the field, on a grid of whole CRS units.
    const [cx, cy] = execFileSync('gdaltransform', ['-s_srs', 'EPSG:4326', '-t_srs', c.srs], {
      input: `${c.centre[0]} ${c.centre[1]}\n`,
      encoding: 'utf8',
    })
      .trim()
      .split(/\s+/)
      .map(Number) as [number, number];
    const originX = Math.round(cx - (SIZE / 2) * c.res);
    const originY = Math.round(cy + (SIZE / 2) * c.res);
    const red = new Uint16Array(SIZE * SIZE);
    const nir = new Uint16Array(SIZE * SIZE);
    for (let j = 0; j < SIZE; j++) {
      for (let i = 0; i < SIZE; i++) {
        red[j * SIZE + i] = 400 + ((i * 37 + j * 11) % 700);
        nir[j * SIZE + i] = 2200 + ((i * 13 + j * 29) % 2100);
      }
    }
    const files = { B04: path.join(sub, 'red.tif'), B08: path.join(sub, 'nir.tif') };
    for (const [file, data] of [
      [files.B04, red],
      [files.B08, nir],
    ] as const) {
      writeFileSync(
        file,
        writeGeoTiff({
          width: SIZE,
          height: SIZE,
          data,
          epsg: c.epsg,
          ...(c.geoKeys ? { geoKeys: c.geoKeys } : {}),
          originX,
          originY,
          resolution: c.res,
          tileSize: 64,
        }),
      );
    }

    // GDAL's side: its CRS of the file, the boundary reprojected to it, burnt by pixel centres.
    const boundary = fieldAround(c.centre);
    const srs = path.join(sub, 'srs.wkt');
    writeFileSync(srs, execFileSync('gdalsrsinfo', ['-o', 'wkt', files.B04], { encoding: 'utf8' }));
    if (c.epsg === 32767) expect(readFileSync(srs, 'utf8')).toMatch(/Albers/);
    else expect(readFileSync(srs, 'utf8')).toMatch(new RegExp(`ID\\["EPSG",${c.epsg}\\]\\]\\s*$`));
    writeFileSync(
      path.join(sub, 'field.geojson'),
      JSON.stringify({
        type: 'FeatureCollection',
        features: [{ type: 'Feature', properties: {}, geometry: boundary }],
      }),
    );
    // GeoPackage keeps the CRS with the geometry (GeoJSON would not name a user-defined one).
    execFileSync('ogr2ogr', [
      '-f',
      'GPKG',
      '-t_srs',
      srs,
      path.join(sub, 'field-crs.gpkg'),
      path.join(sub, 'field.geojson'),
    ]);
    execFileSync('gdal_create', [
      '-q',
      '-if',
      files.B04,
      '-bands',
      '1',
      '-ot',
      'Byte',
      '-burn',
      '0',
      path.join(sub, 'mask.tif'),
    ]);
    execFileSync('gdal_rasterize', ['-q', '-burn', '1', path.join(sub, 'field-crs.gpkg'), path.join(sub, 'mask.tif')]);
    const mask = gdalRead(path.join(sub, 'mask.tif'));
    const gRed = gdalRead(files.B04);
    const gNir = gdalRead(files.B08);
    expect(mask).toHaveLength(SIZE * SIZE);
    const refNdvi = new Map<number, number>();
    for (let k = 0; k < mask.length; k++) if (mask[k]) refNdvi.set(k, (gNir[k]! - gRed[k]!) / (gNir[k]! + gRed[k]!));
    expect(refNdvi.size).toBeGreaterThan(1000);

    // The service's side.
    const field = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: t.auth(),
      payload: { name: c.name, boundary },
    });
    expect(field.statusCode, field.body).toBe(201);
    const fieldId = field.json().id as string;
    const reg = await t.app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: t.auth(),
      payload: { source: 'drone', capture_date: '2025-06-14', bands: files },
    });
    expect(reg.statusCode, reg.body).toBe(201);
    const img = reg.json();
    expect(img.crs).toMatch(c.label);
    expect(img.resolution).toBe(c.res);
    const cover = img.fields.find((f: { field_id: string }) => f.field_id === fieldId);
    expect(cover, 'the capture covers the field').toBeDefined();
    expect(cover.field_pixels, `${c.name}: field pixels`).toBe(refNdvi.size);

    const res = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${fieldId}/indices?index=NDVI&date=2025-06-14&zonal_stats=true&imagery_id=${img.id}`,
      headers: t.auth(),
    });
    expect(res.statusCode, res.body).toBe(200);
    const body = res.json();
    const features = body.geojson.features as Array<{
      geometry: { coordinates: number[][][] };
      properties: { value: number | null };
    }>;
    expect(features).toHaveLength(refNdvi.size);
    // Which pixel each feature is: GDAL's pixel/line of the square's centre in the file.
    const centres = features.map((f) => {
      const ring = f.geometry.coordinates[0]!.slice(0, 4);
      return `${ring.reduce((s, p) => s + p[0]!, 0) / 4} ${ring.reduce((s, p) => s + p[1]!, 0) / 4}`;
    });
    const pixels = execFileSync('gdaltransform', ['-i', '-t_srs', 'EPSG:4326', files.B04], {
      input: `${centres.join('\n')}\n`,
      encoding: 'utf8',
    })
      .trim()
      .split('\n')
      .map((l) => l.trim().split(/\s+/).map(Number));
    let worst = 0;
    features.forEach((f, n) => {
      const [col, row] = pixels[n]!;
      // the square's centre is the pixel's centre: GDAL puts it at .5 of a pixel
      expect(Math.abs(col! - Math.floor(col!) - 0.5) + Math.abs(row! - Math.floor(row!) - 0.5)).toBeLessThan(1e-3);
      const k = Math.floor(row!) * SIZE + Math.floor(col!);
      expect(refNdvi.has(k), `${c.name}: pixel ${Math.floor(col!)},${Math.floor(row!)} is inside for GDAL too`).toBe(
        true,
      );
      worst = Math.max(worst, Math.abs(f.properties.value! - refNdvi.get(k)!));
    });
    expect(new Set(pixels.map(([col, row]) => Math.floor(row!) * SIZE + Math.floor(col!))).size).toBe(refNdvi.size);
    // the GeoJSON writes values to 6 decimals; the kernel computes in float32
    expect(worst, `${c.name}: largest per-pixel NDVI difference`).toBeLessThan(1e-6);
    const ref = [...refNdvi.values()];
    const mean = ref.reduce((a, b) => a + b, 0) / ref.length;
    expect(body.zonal_stats.count).toBe(ref.length);
    expect(Math.abs(body.zonal_stats.mean - mean)).toBeLessThan(1e-6);
    expect(Math.abs(body.zonal_stats.min - Math.min(...ref))).toBeLessThan(1e-6);
    expect(Math.abs(body.zonal_stats.max - Math.max(...ref))).toBeLessThan(1e-6);
  });
});
