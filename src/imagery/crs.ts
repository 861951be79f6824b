/**
 * Coordinate reference systems of rasters, and reprojection of WGS84 boundaries with proj4.
 *
 * A raster's CRS (`CrsRef`) is either an EPSG code or, for a CRS the GeoTIFF's GeoKeys define
 * themselves, the proj4 definition built from those keys (`geokeys.ts`), which crosses threads and
 * processes as a string. Anything that cannot be used is a `CrsError` naming the CRS (a 400
 * upstream, never a 500).
 *
 * EPSG definitions, read on first use (nothing at start-up):
 * - `proj4js-definitions` (4,758 codes: PROJ's own proj4 export, datum shifts as the position-vector
 *   `towgs84` proj4 expects) first;
 * - `epsg-index` (every CRS of the current EPSG registry, one small file per code) for the others,
 *   but not its rotations: the index copies coordinate-frame Helmert parameters into `towgs84`
 *   unconverted (EPSG:31370 lands 65 m off, EPSG:28992 170 m), so a definition of its whose shift
 *   rotates is refused rather than trusted.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import proj4 from 'proj4';

export type CrsRef = number | string;

export class CrsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CrsError';
  }
}

/** `EPSG:3035`, or `user-defined CRS (+proj=aea …)`: how records and messages name a CRS. */
export function crsLabel(crs: CrsRef): string {
  return typeof crs === 'number' ? `EPSG:${crs}` : `user-defined CRS (${crs})`;
}

interface EpsgEntry {
  code: string;
  kind: string;
  name: string;
  wkt?: string;
  proj4?: string;
}

const require = createRequire(import.meta.url);
let epsgDir: string | undefined;

/** epsg-index's entry for a code, or null when the code is not in it. */
export function epsgEntry(code: number): EpsgEntry | null {
  if (!Number.isInteger(code) || code <= 0 || code > 999_999) return null;
  epsgDir ??= path.join(path.dirname(require.resolve('epsg-index/package.json')), 's');
  try {
    return JSON.parse(readFileSync(path.join(epsgDir, `${code}.json`), 'utf8')) as EpsgEntry;
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code === 'ENOENT') return null;
    throw err;
  }
}

let projDefinitions: Map<string, string> | undefined;

/** proj4js-definitions' definition of a code (633 kB of JSON, parsed once per thread on first use). */
function projExport(code: number): string | undefined {
  projDefinitions ??= new Map(
    JSON.parse(readFileSync(require.resolve('proj4js-definitions/proj4js-definitions.json'), 'utf8')) as Array<
      [string, string]
    >,
  );
  return projDefinitions.get(`EPSG:${code}`);
}

const HORIZONTAL = new Set(['CRS-PROJCRS', 'CRS-GEOGCRS', 'CRS-GEOG3DCRS', 'CRS-COMPOUNDCRS']);

function epsgDefinition(code: number): string {
  if (code === 4326) return '+proj=longlat +datum=WGS84 +no_defs';
  if (code >= 32601 && code <= 32660) return `+proj=utm +zone=${code - 32600} +datum=WGS84 +units=m +no_defs`;
  if (code >= 32701 && code <= 32760) return `+proj=utm +zone=${code - 32700} +south +datum=WGS84 +units=m +no_defs`;
  const e = epsgEntry(code);
  if (!e) throw new CrsError(`EPSG:${code} is not a CRS of the EPSG registry`);
  const label = `EPSG:${code} (${e.name})`;
  if (!HORIZONTAL.has(e.kind))
    throw new CrsError(
      `${label} is not a horizontal coordinate system (${e.kind.replace('CRS-', '')}): georeference the file in a projected or geographic CRS`,
    );
  const exported = projExport(code);
  if (!exported && !e.proj4)
    throw new CrsError(`${label} has no proj4 definition in the EPSG index: reproject the file (e.g. to its UTM zone)`);
  // Vertical parts of a compound CRS do not matter to a 2-D boundary.
  const def = (exported ?? e.proj4!).replace(/ \+(geoidgrids|vunits)=\S+/g, '');
  const rotations = /\+towgs84=[^,\s]+,[^,\s]+,[^,\s]+,([^,\s]+),([^,\s]+),([^,\s]+)/.exec(def);
  if (!exported && rotations && rotations.slice(1).some((r) => Number(r) !== 0)) {
    throw new CrsError(
      `${label}: the EPSG index's transformation of its datum to WGS84 is not reliable (rotations of unknown convention): reproject the file to a CRS on WGS84, ETRS89 or NAD83 (e.g. its UTM zone)`,
    );
  }
  if (/\+axis=(?!enu)/.test(def))
    throw new CrsError(`${label} has south- or west-pointing axes, which are not supported: reproject the file`);
  const grid = /\+nadgrids=("[^"]*"|\S+)/.exec(def);
  if (grid && grid[1] !== '@null') {
    throw new CrsError(
      `${label}: its datum is shifted to WGS84 with the grid ${grid[1]}, which this service does not have: reproject the file (e.g. to WGS84 UTM)`,
    );
  }
  // Without a stated shift proj4 takes a datum for WGS84 (PROJ's "ballpark"): right to a metre or
  // two for WGS84 and the GRS80 datums (ETRS89, NAD83, GDA94, SIRGAS…), tens to hundreds of metres
  // off for the others (a datum with several regional transformations has none in the index).
  if (
    !/\+towgs84=|\+nadgrids=@null|\+datum=(WGS84|NAD83)\b/.test(def) &&
    !(/\+ellps=(WGS84|GRS80)\b/.test(def) && !/\+pm=/.test(def))
  ) {
    throw new CrsError(
      `${label}: its definition gives no transformation from its datum to WGS84 (the field would be misplaced by up to hundreds of metres): reproject the file to a CRS on WGS84, ETRS89 or NAD83 (e.g. its UTM zone)`,
    );
  }
  return def;
}

const definitions = new Map<CrsRef, string>();

/** The proj4 definition of a CRS. Throws CrsError when the CRS is unknown or unusable. */
export function proj4Definition(crs: CrsRef): string {
  let def = definitions.get(crs);
  if (def === undefined) {
    def = typeof crs === 'number' ? epsgDefinition(crs) : crs;
    definitions.set(crs, def);
  }
  return def;
}

const converters = new Map<CrsRef, proj4.Converter>();

function converter(crs: CrsRef): proj4.Converter {
  let c = converters.get(crs);
  if (!c) {
    const def = proj4Definition(crs);
    try {
      c = proj4('EPSG:4326', def);
    } catch (err) {
      const why = err instanceof Error ? err.message : String(err ?? 'unknown projection');
      throw new CrsError(`${crsLabel(crs)}: proj4 cannot use its definition ${def} (${why || 'unknown projection'})`);
    }
    converters.set(crs, c);
  }
  return c;
}

/** Throws CrsError unless the CRS can be used (known, and its definition understood by proj4). */
export function checkCrs(crs: CrsRef): void {
  converter(crs);
}

/** lon/lat → raster CRS coordinates. */
export function fromWgs84(crs: CrsRef): (lonLat: [number, number]) => [number, number] {
  const c = converter(crs);
  return (p) => c.forward(p) as [number, number];
}

/** raster CRS coordinates → lon/lat. */
export function toWgs84(crs: CrsRef): (xy: [number, number]) => [number, number] {
  const c = converter(crs);
  return (p) => c.inverse(p) as [number, number];
}
