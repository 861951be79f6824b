/**
 * Coordinate reference systems from GeoTIFF geokeys, and reprojection of WGS84 boundaries with
 * proj4. Supported: WGS84 (EPSG:4326), Web Mercator (3857), UTM north/south on WGS84
 * (326xx/327xx): what satellite and drone imagery of fields comes in.
 */
import proj4 from 'proj4';

export class CrsError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'CrsError';
  }
}

export function proj4Definition(epsg: number): string {
  if (epsg === 4326) return '+proj=longlat +datum=WGS84 +no_defs';
  if (epsg === 3857) return '+proj=merc +a=6378137 +b=6378137 +lat_ts=0 +lon_0=0 +x_0=0 +y_0=0 +k=1 +units=m +nadgrids=@null +no_defs';
  if (epsg >= 32601 && epsg <= 32660) return `+proj=utm +zone=${epsg - 32600} +datum=WGS84 +units=m +no_defs`;
  if (epsg >= 32701 && epsg <= 32760) return `+proj=utm +zone=${epsg - 32700} +south +datum=WGS84 +units=m +no_defs`;
  throw new CrsError(`EPSG:${epsg} is not supported (WGS84, Web Mercator and WGS84 UTM zones are)`);
}

/** EPSG code from geotiff.js geokeys (projected first, then geographic). */
export function epsgFromGeoKeys(keys: Record<string, unknown> | null): number {
  if (!keys) throw new CrsError('the file has no GeoKeys: it is not georeferenced');
  const projected = keys.ProjectedCSTypeGeoKey;
  if (typeof projected === 'number' && projected > 0 && projected !== 32767) return projected;
  const geographic = keys.GeographicTypeGeoKey;
  if (typeof geographic === 'number' && geographic > 0 && geographic !== 32767) return geographic;
  throw new CrsError('the CRS is user-defined in the GeoKeys; only EPSG-coded CRSs are supported');
}

const converters = new Map<number, proj4.Converter>();

function converter(epsg: number): proj4.Converter {
  let c = converters.get(epsg);
  if (!c) {
    c = proj4('EPSG:4326', proj4Definition(epsg));
    converters.set(epsg, c);
  }
  return c;
}

/** lon/lat → raster CRS coordinates. */
export function fromWgs84(epsg: number): (lonLat: [number, number]) => [number, number] {
  const c = converter(epsg);
  return (p) => c.forward(p) as [number, number];
}

/** raster CRS coordinates → lon/lat. */
export function toWgs84(epsg: number): (xy: [number, number]) => [number, number] {
  const c = converter(epsg);
  return (p) => c.inverse(p) as [number, number];
}
