/**
 * Prescription as a zipped polygon Shapefile in WGS84 (EPSG:4326), the form FieldView, John Deere
 * Operations Center and Trimble take: one multipolygon record per zone, geometry written by
 * @mapbox/shp-write, attributes by dbffile (typed dBase columns: an integer RATE as John Deere
 * expects, TGT_RATE with decimals as Trimble expects), zipped by JSZip with the .prj and a .cpg.
 * Libraries are loaded on first use: the service does not pay for them at start-up.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import type { PrescriptionContent } from '../content/schema.js';

/** WGS84 as Esri writes it in a .prj (what ArcGIS, John Deere and Trimble tools read). */
export const WGS84_PRJ =
  'GEOGCS["GCS_WGS_1984",DATUM["D_WGS_1984",SPHEROID["WGS_1984",6378137.0,298.257223563]],PRIMEM["Greenwich",0.0],UNIT["Degree",0.0174532925199433]]';

/** The dBase columns, names of at most 10 characters (the format's limit). */
export const SHP_COLUMNS = [
  { name: 'ZONE', type: 'N', size: 4, decimalPlaces: 0 },
  { name: 'RATE', type: 'N', size: 9, decimalPlaces: 0 },
  { name: 'TGT_RATE', type: 'N', size: 14, decimalPlaces: 2 },
  { name: 'UNIT', type: 'C', size: 10 },
  { name: 'PRODUCT', type: 'C', size: 60 },
  { name: 'INDEX', type: 'C', size: 16 },
  { name: 'IDX_MEAN', type: 'N', size: 10, decimalPlaces: 4 },
  { name: 'AREA_HA', type: 'N', size: 14, decimalPlaces: 4 },
] as const;

type Ring = number[][];

/** Twice the signed area (shoelace): positive when counter-clockwise in lon/lat. */
function signedArea2(ring: Ring): number {
  let s = 0;
  for (let k = 0; k + 1 < ring.length; k++) s += ring[k]![0]! * ring[k + 1]![1]! - ring[k + 1]![0]! * ring[k]![1]!;
  return s;
}

/** Shapefile rings: outer rings clockwise, holes counter-clockwise (the reverse of GeoJSON's rule). */
export function shapefileRings(polygons: Ring[][]): Ring[][] {
  return polygons.map((rings) =>
    rings.map((ring, k) => {
      const ccw = signedArea2(ring) > 0;
      const wantCcw = k > 0;
      return ccw === wantCcw ? ring : [...ring].reverse();
    }),
  );
}

/** Latin letters without their accents (Žitné → Zitne): the marks NFKD splits off are dropped. */
export const withoutAccents = (s: string): string => s.normalize('NFKD').replace(/\p{M}/gu, '');

/** ASCII, no spaces: some terminals refuse other file names. */
export function shapefileBaseName(fieldName: string, date: string): string {
  const slug =
    withoutAccents(fieldName)
      .replace(/[^A-Za-z0-9]+/g, '_')
      .replace(/^_+|_+$/g, '')
      .slice(0, 24) || 'field';
  return `rx_${slug}_${date.replaceAll('-', '')}`;
}

export async function renderShapefile(c: PrescriptionContent): Promise<Buffer> {
  const [{ default: shpwrite }, { DBFFile }, { default: JSZip }] = await Promise.all([
    import('@mapbox/shp-write'),
    import('dbffile'),
    import('jszip'),
  ]);
  const zones = c.zones.filter((z) => z.geometry.coordinates.length);
  const geometries = zones.map((z) => shapefileRings(z.geometry.coordinates));
  const { shp, shx } = await new Promise<{ shp: DataView; shx: DataView }>((resolve, reject) =>
    shpwrite.write([], 'POLYGON', geometries, (err, files) => (err ? reject(err) : resolve(files))),
  );
  const dir = await mkdtemp(path.join(os.tmpdir(), 'rx-shp-'));
  let dbf: Buffer;
  try {
    const file = path.join(dir, 'zones.dbf');
    const out = await DBFFile.create(
      file,
      SHP_COLUMNS.map((f) => ({ ...f })),
      { encoding: 'utf-8' },
    );
    await out.appendRecords(
      zones.map((z) => ({
        ZONE: z.zone,
        RATE: Math.round(z.rate),
        TGT_RATE: z.rate,
        UNIT: c.unit,
        PRODUCT: c.product,
        INDEX: c.meta.index,
        IDX_MEAN: z.mean_index,
        AREA_HA: z.area_ha,
      })),
    );
    dbf = await readFile(file);
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
  const base = shapefileBaseName(c.meta.field.name, c.capture.date);
  const zip = new JSZip();
  zip.file(`${base}.shp`, new Uint8Array(shp.buffer));
  zip.file(`${base}.shx`, new Uint8Array(shx.buffer));
  zip.file(`${base}.dbf`, dbf);
  zip.file(`${base}.prj`, WGS84_PRJ);
  zip.file(`${base}.cpg`, 'UTF-8');
  return zip.generateAsync({ type: 'nodebuffer', compression: 'DEFLATE', compressionOptions: { level: 6 } });
}
