/**
 * Reading prescription files back with readers independent of the service's writers: Python's
 * zipfile for the archives, GDAL (ogrinfo / ogr2ogr, SpatiaLite SQL) for the Shapefile,
 * fast-xml-parser for TASKDATA.XML, and the ISO 11783-11 rate DDIs written out here from the
 * standard (not imported from src/).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { XMLParser } from 'fast-xml-parser';

/** unit → DDI, and integer counts per one unit: the DDI's unit per report unit ÷ the DDI's resolution. */
export const STANDARD_DDI: Record<string, { ddi: string; perUnit: number }> = {
  // DDI 6 Setpoint Mass Per Area Application Rate: mg/m², resolution 1. 1 kg/ha = 10^6 mg / 10^4 m².
  'kg/ha': { ddi: '0006', perUnit: 100 },
  't/ha': { ddi: '0006', perUnit: 100_000 },
  // DDI 1 Setpoint Volume Per Area Application Rate: mm³/m², resolution 0.01. 1 l/ha = 10^6 mm³ / 10^4 m² = 100 mm³/m².
  'l/ha': { ddi: '0001', perUnit: 10_000 },
  // DDI 11 Setpoint Count Per Area Application Rate: /m², resolution 0.001. 1 /ha = 10^-4 /m².
  'seeds/ha': { ddi: '000B', perUnit: 0.1 },
};

/** The file names in a zip and their bytes, read by Python's zipfile (Debian's python3). */
export function unzip(buf: Buffer): Record<string, Buffer> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rx-unzip-'));
  try {
    const file = path.join(dir, 'in.zip');
    writeFileSync(file, buf);
    const out = execFileSync(
      '/usr/bin/python3',
      [
        '-c',
        'import base64, json, sys, zipfile\nz = zipfile.ZipFile(sys.argv[1])\nassert z.testzip() is None\nprint(json.dumps({n: base64.b64encode(z.read(n)).decode() for n in z.namelist() if not n.endswith("/")}))',
        file,
      ],
      { maxBuffer: 256 * 1024 * 1024 },
    );
    const files = JSON.parse(out.toString()) as Record<string, string>;
    return Object.fromEntries(Object.entries(files).map(([n, b]) => [n, Buffer.from(b, 'base64')]));
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

export interface OgrFeature {
  properties: Record<string, string | number>;
  geometry: { type: string; coordinates: number[][][] | number[][][][] };
  valid: number;
  geodesic_m2: number;
}

/**
 * A zipped Shapefile as GDAL reads it: the layer's CRS (WKT), the field types GDAL gives the
 * columns, and each feature with its attributes, geometry (GeoJSON by ogr2ogr), validity (GEOS
 * through SpatiaLite's ST_IsValid) and area on the WGS84 ellipsoid (ST_Area(geometry, 1)).
 */
export function readShapefileZip(buf: Buffer): {
  layer: string;
  srsWkt: string;
  fieldTypes: Record<string, string>;
  features: OgrFeature[];
} {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'rx-ogr-'));
  try {
    const zip = path.join(dir, 'rx.zip');
    writeFileSync(zip, buf);
    const src = `/vsizip/${zip}`;
    const summary = execFileSync('ogrinfo', ['-ro', '-al', '-so', src]).toString();
    const layer = /Layer name: (\S+)/.exec(summary)![1]!;
    const fieldTypes = Object.fromEntries(
      [...summary.matchAll(/^(\w+): (\w+ \(\d+\.\d+\))$/gm)].map((m) => [m[1]!, m[2]!] as [string, string]),
    );
    const srsWkt = summary.slice(summary.indexOf('Layer SRS WKT:'));
    const gj = JSON.parse(
      execFileSync('ogr2ogr', ['-f', 'GeoJSON', '/vsistdout/', src], { maxBuffer: 1 << 28 }).toString(),
    );
    const sql = execFileSync(
      'ogr2ogr',
      [
        '-f',
        'GeoJSON',
        '/vsistdout/',
        src,
        '-dialect',
        'SQLite',
        '-sql',
        `SELECT ST_IsValid(geometry) AS valid, ST_Area(geometry, 1) AS geodesic_m2 FROM "${layer}"`,
      ],
      { maxBuffer: 1 << 28 },
    );
    const extra = JSON.parse(sql.toString()).features as Array<{ properties: { valid: number; geodesic_m2: number } }>;
    const features = (gj.features as Array<Omit<OgrFeature, 'valid' | 'geodesic_m2'>>).map((f, k) => ({
      ...f,
      valid: extra[k]!.properties.valid,
      geodesic_m2: extra[k]!.properties.geodesic_m2,
    }));
    return { layer, srsWkt, fieldTypes, features };
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/** TASKDATA.XML as plain elements: every element's attributes as strings, children in arrays. */
export function parseTaskData(xml: string): Record<string, any> {
  const parser = new XMLParser({
    ignoreAttributes: false,
    attributeNamePrefix: '',
    parseAttributeValue: false,
    isArray: (name, _path, _leaf, isAttribute) => !isAttribute && name !== 'ISO11783_TaskData',
  });
  return parser.parse(xml).ISO11783_TaskData;
}

/** Ray casting on one polygon with holes (even-odd over all its rings). */
function inRings(x: number, y: number, rings: number[][][]): boolean {
  let inside = false;
  for (const ring of rings) {
    for (let i = 0, j = ring.length - 1; i < ring.length; j = i++) {
      const [xi, yi] = ring[i] as [number, number];
      const [xj, yj] = ring[j] as [number, number];
      if (yi > y !== yj > y && x < ((xj - xi) * (y - yi)) / (yj - yi) + xi) inside = !inside;
    }
  }
  return inside;
}

export function inMultiPolygon(x: number, y: number, polys: number[][][][]): boolean {
  return polys.some((rings) => inRings(x, y, rings));
}

/** Distance in degrees from a point to the nearest edge of a multipolygon. */
export function distanceToEdges(x: number, y: number, polys: number[][][][]): number {
  let best = Infinity;
  for (const rings of polys)
    for (const ring of rings)
      for (let k = 0; k + 1 < ring.length; k++) {
        const [x1, y1] = ring[k] as [number, number];
        const [x2, y2] = ring[k + 1] as [number, number];
        const dx = x2 - x1;
        const dy = y2 - y1;
        const t = dx || dy ? Math.max(0, Math.min(1, ((x - x1) * dx + (y - y1) * dy) / (dx * dx + dy * dy))) : 0;
        best = Math.min(best, Math.hypot(x - (x1 + t * dx), y - (y1 + t * dy)));
      }
  return best;
}
