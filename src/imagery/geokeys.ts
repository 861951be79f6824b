/**
 * The CRS of a GeoTIFF from its GeoKeys (GeoTIFF 1.0/1.1): an EPSG-coded projected or geographic
 * CRS as its code, or a user-defined one (code 32767) as a proj4 definition built from the keys,
 * parameter by parameter as libgeotiff (and so GDAL) reads them: each projection parameter may sit
 * under any of the keys GeoTIFF writers use for it (natural origin, false origin, centre), angles
 * are in GeogAngularUnits, false easting/northing in ProjLinearUnits (proj4 wants metres), and the
 * datum comes from the geographic CRS code, the datum code, the ellipsoid code or the ellipsoid's
 * axes (with GeogTOWGS84GeoKey when given). Whatever is not understood is a CrsError naming it.
 */
import { readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { CrsError, checkCrs, epsgEntry, proj4Definition, type CrsRef } from './crs.js';

export type GeoKeys = Record<string, unknown>;

const USER_DEFINED = 32767;
const DEGREE = [9102, 9122];
const RADIAN = 9101;
const METRE = 9001;

/** GeoTIFF coordinate transformation codes (ProjCoordTransGeoKey), by name for messages. */
const CT_NAMES: Record<number, string> = {
  1: 'TransverseMercator',
  2: 'TransvMercator_Modified_Alaska',
  3: 'ObliqueMercator',
  4: 'ObliqueMercator_Laborde',
  5: 'ObliqueMercator_Rosenmund',
  6: 'ObliqueMercator_Spherical',
  7: 'Mercator',
  8: 'LambertConfConic_2SP',
  9: 'LambertConfConic_1SP',
  10: 'LambertAzimEqualArea',
  11: 'AlbersEqualArea',
  12: 'AzimuthalEquidistant',
  13: 'EquidistantConic',
  14: 'Stereographic',
  15: 'PolarStereographic',
  16: 'ObliqueStereographic',
  17: 'Equirectangular',
  18: 'CassiniSoldner',
  19: 'Gnomonic',
  20: 'MillerCylindrical',
  21: 'Orthographic',
  22: 'Polyconic',
  23: 'Robinson',
  24: 'Sinusoidal',
  25: 'VanDerGrinten',
  26: 'NewZealandMapGrid',
  27: 'TransvMercator_SouthOriented',
  28: 'CylindricalEqualArea',
  29: 'HotineObliqueMercatorAzimuthCenter',
};

const code = (v: unknown): number | null => (typeof v === 'number' && Number.isInteger(v) && v > 0 ? v : null);

/** The CRS of a GeoTIFF, checked usable. Throws CrsError naming what is not supported. */
export function crsFromGeoKeys(keys: GeoKeys | null): CrsRef {
  if (!keys) throw new Error('the file has no GeoKeys: it is not georeferenced');
  const crs = readCrs(keys);
  checkCrs(crs);
  return crs;
}

function readCrs(keys: GeoKeys): CrsRef {
  const pcs = code(keys.ProjectedCSTypeGeoKey);
  if (pcs && pcs !== USER_DEFINED) return pcs;
  const model = code(keys.GTModelTypeGeoKey);
  if (pcs === USER_DEFINED || (model === 1 && (code(keys.ProjCoordTransGeoKey) || code(keys.ProjectionGeoKey))))
    return userProjected(keys);
  const gcs = code(keys.GeographicTypeGeoKey);
  if (gcs && gcs !== USER_DEFINED) return gcs;
  if (gcs === USER_DEFINED) {
    if (angularToDegrees(keys) !== 1)
      throw new CrsError(
        'the user-defined geographic CRS is not in degrees (GeogAngularUnitsGeoKey): reproject the file',
      );
    return `+proj=longlat ${datumOf(keys)} +no_defs`;
  }
  if (model === 3)
    throw new CrsError(
      'the file is in a geocentric CRS (GTModelTypeGeoKey 3): georeference it in a projected or geographic CRS',
    );
  throw new CrsError('the GeoKeys name no CRS (no ProjectedCSTypeGeoKey or GeographicTypeGeoKey)');
}

// Units of the EPSG registry as its WKTs state them (`UNIT["US survey foot",0.3048…,AUTHORITY["EPSG","9003"]]`,
// and SPHEROID likewise): read from the index's all.json once, only when a file names a unit or an
// ellipsoid by code other than metre and degree (a scan of 8 MB, ~0.15 s).
let registryTable: Map<number, { kind: string; name: string; a: number; b?: number }> | undefined;

function registry(codeNumber: number) {
  if (!registryTable) {
    registryTable = new Map();
    const text = readFileSync(createRequire(import.meta.url).resolve('epsg-index/all.json'), 'utf8');
    const re = /(SPHEROID|UNIT)\[\\"([^\\]*)\\",([-\d.eE]+)(?:,([-\d.eE]+))?,AUTHORITY\[\\"EPSG\\",\\"(\d+)\\"\]/g;
    for (let m = re.exec(text); m; m = re.exec(text)) {
      registryTable.set(Number(m[5]), {
        kind: m[1]!,
        name: m[2]!,
        a: Number(m[3]),
        ...(m[4] !== undefined ? { b: Number(m[4]) } : {}),
      });
    }
  }
  return registryTable.get(codeNumber);
}

/** Degrees per GeogAngularUnits unit. */
function angularToDegrees(keys: GeoKeys): number {
  const unit = code(keys.GeogAngularUnitsGeoKey) ?? 9102;
  if (DEGREE.includes(unit)) return 1;
  if (unit === RADIAN) return 180 / Math.PI;
  if (unit === USER_DEFINED) {
    const size = keys.GeogAngularUnitSizeGeoKey;
    if (typeof size === 'number' && size > 0) return (size * 180) / Math.PI;
    throw new CrsError('GeogAngularUnitsGeoKey is user-defined without GeogAngularUnitSizeGeoKey');
  }
  const u = registry(unit);
  // 9110 and the other sexagesimal "units" are notations, not factors.
  if (u?.kind !== 'UNIT' || unit === 9108 || unit === 9110)
    throw new CrsError(`the angular unit EPSG:${unit} (GeogAngularUnitsGeoKey) is not supported: use degrees`);
  return (u.a * 180) / Math.PI;
}

/** Metres per ProjLinearUnits unit. */
export function linearUnitMetres(keys: GeoKeys): number {
  const unit = code(keys.ProjLinearUnitsGeoKey) ?? METRE;
  if (unit === METRE) return 1;
  if (unit === USER_DEFINED) {
    const size = keys.ProjLinearUnitSizeGeoKey;
    if (typeof size === 'number' && size > 0) return size;
    throw new CrsError('ProjLinearUnitsGeoKey is user-defined without ProjLinearUnitSizeGeoKey');
  }
  const u = registry(unit);
  if (u?.kind !== 'UNIT' || u.b !== undefined)
    throw new CrsError(
      `the linear unit EPSG:${unit} (ProjLinearUnitsGeoKey) is not a unit of the EPSG registry this service knows`,
    );
  return u.a;
}

/** The proj4 datum terms (+ellps/+a/+b/+towgs84/+pm …) of a geographic CRS definition. */
function datumTerms(def: string): string {
  return def
    .split(/\s+/)
    .filter((t) => /^\+(datum|ellps|a|b|rf|f|towgs84|nadgrids|pm|R)=/.test(t))
    .join(' ');
}

function datumOf(keys: GeoKeys): string {
  let terms: string;
  const gcs = code(keys.GeographicTypeGeoKey);
  const datum = code(keys.GeogGeodeticDatumGeoKey);
  if (gcs && gcs !== USER_DEFINED) {
    terms = datumTerms(proj4Definition(gcs));
  } else if (datum && datum !== USER_DEFINED) {
    // EPSG numbers the classic geodetic datums 6001–6999 as their geographic CRSs 4001–4999.
    const e = datum >= 6001 && datum <= 6999 ? epsgEntry(datum - 2000) : null;
    const stated = e
      ? /DATUM\["[^"]*",SPHEROID\[[^\]]*\](?:,TOWGS84\[[^\]]*\])?(?:,EXTENSION\[[^\]]*\])?,AUTHORITY\["EPSG","(\d+)"\]/.exec(
          e.wkt ?? '',
        )
      : null;
    if (e?.kind !== 'CRS-GEOGCRS' || (stated && Number(stated[1]) !== datum)) {
      throw new CrsError(
        `the datum EPSG:${datum} (GeogGeodeticDatumGeoKey) is not supported: use GeographicTypeGeoKey, or give the ellipsoid`,
      );
    }
    terms = datumTerms(proj4Definition(datum - 2000));
  } else {
    terms = ellipsoidOf(keys);
  }
  const towgs84 = keys.GeogTOWGS84GeoKey;
  if (towgs84 !== undefined) {
    const v = typeof towgs84 === 'number' ? [towgs84] : Array.from(towgs84 as ArrayLike<number>);
    if ((v.length !== 3 && v.length !== 7) || !v.every(Number.isFinite))
      throw new CrsError('GeogTOWGS84GeoKey must hold 3 or 7 numbers');
    terms = `${terms.replace(/\+(towgs84|nadgrids|datum)=\S+/g, '')} +towgs84=${v.join(',')}`;
  }
  return `${terms} ${primeMeridian(keys)}`.replace(/\s+/g, ' ').trim();
}

function ellipsoidOf(keys: GeoKeys): string {
  const ell = code(keys.GeogEllipsoidGeoKey);
  if (ell && ell !== USER_DEFINED) {
    const e = registry(ell);
    if (e?.kind !== 'SPHEROID')
      throw new CrsError(
        `the ellipsoid EPSG:${ell} (GeogEllipsoidGeoKey) is not one of the EPSG registry's this service knows`,
      );
    return e.b ? `+a=${e.a} +rf=${e.b}` : `+a=${e.a} +b=${e.a}`;
  }
  const a = keys.GeogSemiMajorAxisGeoKey;
  const rf = keys.GeogInvFlatteningGeoKey;
  const b = keys.GeogSemiMinorAxisGeoKey;
  if (typeof a !== 'number' || !(a > 0))
    throw new CrsError(
      'the user-defined datum gives no ellipsoid (GeogEllipsoidGeoKey, or GeogSemiMajorAxisGeoKey with GeogInvFlatteningGeoKey or GeogSemiMinorAxisGeoKey)',
    );
  if (typeof rf === 'number' && rf > 0) return `+a=${a} +rf=${rf}`;
  if (typeof b === 'number' && b > 0) return `+a=${a} +b=${b}`;
  return `+a=${a} +b=${a}`;
}

function primeMeridian(keys: GeoKeys): string {
  const pm = code(keys.GeogPrimeMeridianGeoKey);
  const long = keys.GeogPrimeMeridianLongGeoKey;
  if (typeof long === 'number' && long !== 0) return `+pm=${long * angularToDegrees(keys)}`;
  if (!pm || pm === 8901) return '';
  throw new CrsError(
    `the prime meridian EPSG:${pm} (GeogPrimeMeridianGeoKey) is not supported without GeogPrimeMeridianLongGeoKey`,
  );
}

function userProjected(keys: GeoKeys): string {
  const metres = linearUnitMetres(keys);
  const projection = code(keys.ProjectionGeoKey);
  let method: string;
  if (projection && projection !== USER_DEFINED) {
    // EPSG conversions 16001–16060 and 16101–16160 are the UTM zones, north and south.
    if (projection >= 16001 && projection <= 16060) method = `+proj=utm +zone=${projection - 16000}`;
    else if (projection >= 16101 && projection <= 16160) method = `+proj=utm +zone=${projection - 16100} +south`;
    else
      throw new CrsError(
        `the EPSG projection ${projection} (ProjectionGeoKey) is not supported: only the UTM zones (16001–16060, 16101–16160) are; give the projection by ProjCoordTransGeoKey and its parameters`,
      );
  } else {
    method = projectionTerms(keys, metres);
  }
  return `${method} ${datumOf(keys)} ${metres === 1 ? '+units=m' : `+to_meter=${metres}`} +no_defs`.replace(
    /\s+/g,
    ' ',
  );
}

/** The projection terms of a user-defined ProjCoordTransGeoKey, parameters read as libgeotiff does. */
function projectionTerms(keys: GeoKeys, metres: number): string {
  const ct = code(keys.ProjCoordTransGeoKey);
  if (!ct) throw new CrsError('the user-defined projected CRS names no projection (ProjCoordTransGeoKey)');
  const deg = angularToDegrees(keys);
  const first = (names: string[], fallback: number): number => {
    for (const n of names) {
      const v = keys[`Proj${n}GeoKey`];
      if (typeof v === 'number' && Number.isFinite(v)) return v;
    }
    return fallback;
  };
  const angle = (...names: string[]) => first(names, 0) * deg;
  const lat0 = (order: 'nat' | 'false' | 'center') =>
    angle(
      ...{
        nat: ['NatOriginLat', 'FalseOriginLat', 'CenterLat'],
        false: ['FalseOriginLat', 'NatOriginLat', 'CenterLat'],
        center: ['CenterLat', 'NatOriginLat', 'FalseOriginLat'],
      }[order],
    );
  const lon0 = (order: 'nat' | 'false' | 'center') =>
    angle(
      ...{
        nat: ['NatOriginLong', 'FalseOriginLong', 'CenterLong', 'StraightVertPoleLong'],
        false: ['FalseOriginLong', 'NatOriginLong', 'CenterLong'],
        center: ['CenterLong', 'NatOriginLong', 'FalseOriginLong'],
      }[order],
    );
  const k = () => first(['ScaleAtNatOrigin', 'ScaleAtCenter'], 1);
  const xy = (order: 'nat' | 'false' | 'center') => {
    const e = {
      nat: ['FalseEasting', 'FalseOriginEasting', 'CenterEasting'],
      false: ['FalseOriginEasting', 'FalseEasting', 'CenterEasting'],
      center: ['CenterEasting', 'FalseEasting', 'FalseOriginEasting'],
    }[order];
    const n = e.map((s) => s.replace('Easting', 'Northing'));
    return `+x_0=${first(e, 0) * metres} +y_0=${first(n, 0) * metres}`;
  };
  const sp = () => `+lat_1=${angle('StdParallel1')} +lat_2=${angle('StdParallel2')}`;
  switch (ct) {
    case 1:
      return `+proj=tmerc +lat_0=${lat0('nat')} +lon_0=${lon0('nat')} +k=${k()} ${xy('nat')}`;
    case 7: {
      const ts = keys.ProjStdParallel1GeoKey;
      return typeof ts === 'number' && ts !== 0
        ? `+proj=merc +lat_ts=${ts * deg} +lon_0=${lon0('nat')} ${xy('nat')}`
        : `+proj=merc +lon_0=${lon0('nat')} +k=${k()} ${xy('nat')}`;
    }
    case 8:
      return `+proj=lcc ${sp()} +lat_0=${lat0('false')} +lon_0=${lon0('false')} ${xy('false')}`;
    case 9: {
      const lat = lat0('nat');
      return `+proj=lcc +lat_1=${lat} +lat_0=${lat} +lon_0=${lon0('nat')} +k_0=${k()} ${xy('nat')}`;
    }
    case 10:
      return `+proj=laea +lat_0=${lat0('center')} +lon_0=${lon0('center')} ${xy('nat')}`;
    case 11:
      return `+proj=aea ${sp()} +lat_0=${lat0('nat')} +lon_0=${lon0('nat')} ${xy('nat')}`;
    case 12:
      return `+proj=aeqd +lat_0=${lat0('center')} +lon_0=${lon0('center')} ${xy('nat')}`;
    case 13:
      return `+proj=eqdc ${sp()} +lat_0=${lat0('false')} +lon_0=${lon0('false')} ${xy('nat')}`;
    case 14:
      return `+proj=stere +lat_0=${lat0('center')} +lon_0=${lon0('center')} +k=${k()} ${xy('nat')}`;
    case 15: {
      // GDAL writes the latitude of true scale here, or ±90 with a scale factor (variant A).
      const lat = lat0('nat');
      const lon = angle('StraightVertPoleLong', 'NatOriginLong', 'CenterLong');
      return Math.abs(Math.abs(lat) - 90) < 1e-9
        ? `+proj=stere +lat_0=${lat} +lon_0=${lon} +k=${k()} ${xy('nat')}`
        : `+proj=stere +lat_0=${lat < 0 ? -90 : 90} +lat_ts=${lat} +lon_0=${lon} ${xy('nat')}`;
    }
    case 16:
      return `+proj=sterea +lat_0=${lat0('nat')} +lon_0=${lon0('nat')} +k=${k()} ${xy('nat')}`;
    case 17:
      return `+proj=eqc +lat_ts=${angle('StdParallel1')} +lat_0=${lat0('center')} +lon_0=${lon0('center')} ${xy('nat')}`;
    case 18:
      return `+proj=cass +lat_0=${lat0('nat')} +lon_0=${lon0('nat')} ${xy('nat')}`;
    case 19:
      return `+proj=gnom +lat_0=${lat0('center')} +lon_0=${lon0('center')} ${xy('nat')}`;
    case 20:
      return `+proj=mill +lat_0=${lat0('center')} +lon_0=${lon0('center')} ${xy('nat')}`;
    case 21:
      return `+proj=ortho +lat_0=${lat0('center')} +lon_0=${lon0('center')} ${xy('nat')}`;
    case 22:
      return `+proj=poly +lat_0=${lat0('nat')} +lon_0=${lon0('nat')} ${xy('nat')}`;
    case 23:
      return `+proj=robin +lon_0=${lon0('center')} ${xy('nat')}`;
    case 24:
      return `+proj=sinu +lon_0=${lon0('center')} ${xy('nat')}`;
    case 25:
      return `+proj=vandg +lon_0=${lon0('center')} ${xy('nat')}`;
    case 26:
      return `+proj=nzmg +lat_0=${lat0('nat')} +lon_0=${lon0('nat')} ${xy('nat')}`;
    case 28:
      return `+proj=cea +lat_ts=${angle('StdParallel1')} +lon_0=${lon0('nat')} ${xy('nat')}`;
    default:
      throw new CrsError(
        `the projection CT_${CT_NAMES[ct] ?? 'unknown'} (ProjCoordTransGeoKey ${ct}) of the user-defined CRS is not supported: reproject the file (e.g. to its UTM zone)`,
      );
  }
}
