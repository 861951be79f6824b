/**
 * CRSs of rasters: EPSG codes from the epsg-index package and user-defined CRSs from GeoKeys,
 * each checked against GDAL/PROJ's reading (gdaltransform on the same point, or on the same file
 * written here with those GeoKeys), with GDAL's own report of the file's CRS; and the CRSs that
 * cannot be used, each refused with a CrsError naming it. The GDAL checks are skipped, and said
 * so, without gdal-bin.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fromFile } from 'geotiff';
import { afterAll, describe, expect, it } from 'vitest';
import { CrsError, fromWgs84, toWgs84 } from '../../../src/imagery/crs.js';
import { crsFromGeoKeys, type GeoKeys } from '../../../src/imagery/geokeys.js';
import { hasGdal } from '../../helpers/tools.js';
import { writeGeoTiff } from '../../../src/imagery/tiff-writer.js';
import { pixelAreaHa } from '../../../src/reports/content/raster.js';
import { ALBERS_CONUS_KEYS } from '../../helpers/geokeys.js';

const gdal = hasGdal();

const dir = mkdtempSync(path.join(os.tmpdir(), 'crs-'));
afterAll(() => rmSync(dir, { recursive: true, force: true }));

/** GDAL's transformation of lon/lat points (traditional GIS order) to a CRS, or to a file's pixel/line with `-i file`. */
function gdalTransform(args: string[], points: Array<[number, number]>): Array<[number, number]> {
  const out = execFileSync('gdaltransform', args, {
    input: `${points.map((p) => `${p[0]} ${p[1]}`).join('\n')}\n`,
    encoding: 'utf8',
  });
  return out
    .trim()
    .split('\n')
    .map((l) => l.trim().split(/\s+/).slice(0, 2).map(Number) as [number, number]);
}

/** Points around a centre, a few kilometres apart. */
const around = ([lon, lat]: [number, number]): Array<[number, number]> => [
  [lon, lat],
  [lon + 0.05, lat + 0.03],
  [lon - 0.04, lat - 0.05],
  [lon + 0.02, lat - 0.04],
];

describe.runIf(gdal)('EPSG-coded CRSs against PROJ (gdaltransform)', () => {
  // [code, a point inside its area of use, tolerance in CRS units (1 cm)]
  const cases: Array<[number, [number, number], number]> = [
    [3035, [10.5, 51.2], 0.01], // ETRS89 / LAEA Europe
    [2154, [2.35, 48.85], 0.01], // RGF93 / Lambert-93
    [27700, [-1.2, 52.6], 0.01], // OSGB36 / British National Grid: Helmert EPSG:1314, as PROJ without the OSTN15 grid
    [28992, [5.3, 52.1], 0.01], // Amersfoort / RD New: epsg-index's rotations would put it 170 m off
    [31370, [4.45, 50.5], 0.01], // BD72 / Belgian Lambert 72: 65 m off with epsg-index's
    [2263, [-73.4, 40.8], 0.033], // NAD83 / New York Long Island (ftUS)
    [2056, [7.45, 46.95], 0.01], // CH1903+ / LV95
    [3857, [12.5, 41.9], 0.01], // Web Mercator
    [32631, [3.2, 50.5], 0.01], // WGS 84 / UTM 31N
    [4258, [10.5, 51.2], 1e-9], // ETRS89, geographic
  ];
  it.each(cases)('EPSG:%i projects lon/lat as PROJ does', (code, centre, tol) => {
    const pts = around(centre);
    const ref = gdalTransform(['-s_srs', 'EPSG:4326', '-t_srs', `EPSG:${code}`], pts);
    const fwd = fromWgs84(code);
    const inv = toWgs84(code);
    pts.forEach((p, i) => {
      const [x, y] = fwd(p);
      expect(Math.abs(x - ref[i]![0]), `EPSG:${code} x of ${p}`).toBeLessThan(tol);
      expect(Math.abs(y - ref[i]![1]), `EPSG:${code} y of ${p}`).toBeLessThan(tol);
      const [lon, lat] = inv([x, y]);
      expect(Math.abs(lon - p[0]) + Math.abs(lat - p[1])).toBeLessThan(1e-7);
    });
  });
});

interface UserCase {
  name: string;
  keys: GeoKeys & Record<number, number | number[]>;
  centre: [number, number];
  /** What GDAL's WKT of the file must contain (proves the GeoKeys say what we meant). */
  wkt: RegExp;
  /** Pixel size in CRS units. */
  res?: number;
}

// GeoKey ids: 1024 model, 2048 GeographicType, 2050 datum, 2056 ellipsoid, 2057 semi-major, 2059
// inverse flattening, 2062 TOWGS84, 3074 Projection, 3075 CoordTrans, 3076 LinearUnits, 3078/3079
// StdParallel1/2, 3080/3081 NatOrigin long/lat, 3082/3083 FalseEasting/Northing, 3084/3085
// FalseOrigin long/lat, 3086/3087 FalseOrigin easting/northing, 3088/3089 Center long/lat,
// 3092 ScaleAtNatOrigin, 3095 StraightVertPoleLong.
const USER_CASES: UserCase[] = [
  {
    name: 'Albers Equal Area (CONUS), NAD83 by datum code, metres',
    keys: ALBERS_CONUS_KEYS,
    centre: [-93.6, 41.6],
    wkt: /Albers/i,
  },
  {
    name: 'Albers Equal Area, false origin keys, GRS80 by ellipsoid code, US survey feet',
    keys: {
      3074: 32767,
      3075: 11,
      2048: 32767,
      2050: 32767,
      2056: 7019,
      3076: 9003,
      3078: 34,
      3079: 40.5,
      3085: 0,
      3084: -120,
      3086: 0,
      3087: -4000000,
    },
    centre: [-119.8, 36.7],
    wkt: /Albers[\s\S]*US survey foot/i,
    res: 30,
  },
  {
    name: 'Lambert Conformal Conic 2SP on ETRS89 (GeographicTypeGeoKey 4258)',
    keys: { 3074: 32767, 3075: 8, 2048: 4258, 3078: 49, 3079: 44, 3085: 46.5, 3084: 3, 3086: 700000, 3087: 6600000 },
    centre: [2.35, 48.85],
    wkt: /Lambert/i,
  },
  {
    name: 'Transverse Mercator on a user ellipsoid (a, 1/f) with TOWGS84',
    keys: {
      3074: 32767,
      3075: 1,
      2048: 32767,
      2050: 32767,
      2057: 6377397.155,
      2059: 299.1528128,
      2062: [598.1, 73.7, 418.2, 0.202, 0.045, -2.455, 6.7],
      3081: 0,
      3080: 9,
      3092: 1,
      3082: 3500000,
      3083: 0,
    },
    centre: [9.2, 48.8],
    wkt: /Transverse Mercator|Transverse_Mercator/i,
  },
  {
    name: 'Lambert Azimuthal Equal Area on ETRS89',
    keys: { 3074: 32767, 3075: 10, 2048: 4258, 3089: 52, 3088: 10, 3082: 4321000, 3083: 3210000 },
    centre: [5.1, 52.1],
    wkt: /Lambert Azimuthal Equal Area|Lambert_Azimuthal_Equal_Area/i,
  },
  {
    name: 'Oblique Stereographic on Bessel with TOWGS84',
    keys: {
      3074: 32767,
      3075: 16,
      2048: 32767,
      2050: 32767,
      2056: 7004,
      2062: [565.4171, 50.3319, 465.5524, 1.9342, -1.6677, 9.1019, 4.0725],
      3081: 52.1561605555556,
      3080: 5.38763888888889,
      3092: 0.9999079,
      3082: 155000,
      3083: 463000,
    },
    centre: [5.3, 52.0],
    wkt: /Oblique Stereographic|Oblique_Stereographic/i,
  },
  {
    name: 'Mercator 1SP on WGS84',
    keys: { 3074: 32767, 3075: 7, 2048: 4326, 3080: 0, 3081: 0, 3092: 1, 3082: 0, 3083: 0 },
    centre: [30.1, -1.9],
    wkt: /Mercator/i,
  },
  {
    name: 'Polar Stereographic (true scale at 71°S) on WGS84',
    keys: { 3074: 32767, 3075: 15, 2048: 4326, 3081: -71, 3095: 0, 3082: 0, 3083: 0 },
    centre: [-60.5, -64.2],
    wkt: /Polar Stereographic|Polar_Stereographic/i,
  },
  {
    name: 'UTM zone 33N by ProjectionGeoKey on ETRS89',
    keys: { 3074: 16033, 2048: 4258 },
    centre: [15.2, 52.3],
    wkt: /"Longitude of natural origin",15,[\s\S]*"Scale factor at natural origin",0.9996,/,
  },
];

async function keysOf(file: string): Promise<GeoKeys> {
  const tiff = await fromFile(file);
  try {
    return (await tiff.getImage(0)).getGeoKeys() as GeoKeys;
  } finally {
    await tiff.close();
  }
}

describe('user-defined CRSs from GeoKeys', () => {
  it.runIf(gdal).each(USER_CASES)(
    '$name: the pixel of each lon/lat is the one GDAL finds',
    async ({ name, keys, centre, wkt, res = 10 }) => {
      // A 200 × 200 raster whose top-left corner sits 1 km north-west of the centre, in CRS units.
      const file = path.join(dir, `${name.replace(/\W+/g, '-')}.tif`);
      const probe = crsFromGeoKeys({ GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 32767, ...named(keys) });
      const [cx, cy] = fromWgs84(probe)(centre);
      const ox = Math.round(cx) - 100 * res;
      const oy = Math.round(cy) + 100 * res;
      writeFileSync(
        file,
        writeGeoTiff({
          width: 200,
          height: 200,
          data: new Uint16Array(200 * 200).fill(1),
          epsg: 32767,
          geoKeys: keys,
          originX: ox,
          originY: oy,
          resolution: res,
          tileSize: 256,
        }),
      );
      const info = JSON.parse(execFileSync('gdalinfo', ['-json', file], { encoding: 'utf8' })) as {
        coordinateSystem: { wkt: string };
      };
      expect(info.coordinateSystem.wkt, `GDAL's reading of the ${name} GeoKeys`).toMatch(wkt);
      const crs = crsFromGeoKeys(await keysOf(file));
      expect(crs).toBe(probe);
      const pts = around(centre).map(([lon, lat]) => [lon + 0.002, lat + 0.001] as [number, number]);
      const ref = gdalTransform(['-i', '-t_srs', 'EPSG:4326', file], pts);
      const fwd = fromWgs84(crs);
      pts.forEach((p, i) => {
        const [x, y] = fwd(p);
        const col = (x - ox) / res;
        const row = (oy - y) / res;
        // 1e-3 of a pixel: a centimetre on 10 m pixels
        expect(Math.abs(col - ref[i]![0]), `${name}: column of ${p} (${crs})`).toBeLessThan(1e-3);
        expect(Math.abs(row - ref[i]![1]), `${name}: row of ${p} (${crs})`).toBeLessThan(1e-3);
      });
    },
  );

  it('refuses what it cannot use, naming it', () => {
    const refused: Array<[string, GeoKeys, RegExp]> = [
      [
        'an EPSG code not in the registry',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 29999 },
        /EPSG:29999 is not a CRS of the EPSG registry/,
      ],
      [
        'a vertical CRS',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 5703 },
        /EPSG:5703 \(NAVD88 height\) is not a horizontal coordinate system/,
      ],
      [
        'an engineering CRS',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 5800 },
        /EPSG:5800 .*not a horizontal coordinate system/,
      ],
      [
        'NAD27, shifted only by grids the service lacks',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 26718 },
        /EPSG:26718 \(NAD27 \/ UTM zone 18N\): its definition gives no transformation from its datum to WGS84/,
      ],
      [
        'NAD27 in the EPSG index only (a grid)',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 6201 },
        /EPSG:6201 \(NAD27 \/ Michigan Central\): its datum is shifted to WGS84 with the grid/,
      ],
      [
        'a datum shift with rotations only the EPSG index gives',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 5896 },
        /EPSG:5896 \(VN-2000 \/ TM-3 zone 481\): the EPSG index's transformation of its datum to WGS84 is not reliable/,
      ],
      [
        'south-oriented axes',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 22289 },
        /EPSG:22289 \(Cape \/ Lo29\) has south- or west-pointing axes/,
      ],
      [
        'an unsupported user-defined projection',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 32767, ProjCoordTransGeoKey: 4, GeographicTypeGeoKey: 4326 },
        /CT_ObliqueMercator_Laborde \(ProjCoordTransGeoKey 4\)/,
      ],
      [
        'an EPSG conversion other than UTM',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 32767, ProjectionGeoKey: 19914, GeographicTypeGeoKey: 4326 },
        /EPSG projection 19914/,
      ],
      [
        'an unknown linear unit',
        {
          GTModelTypeGeoKey: 1,
          ProjectedCSTypeGeoKey: 32767,
          ProjCoordTransGeoKey: 1,
          GeographicTypeGeoKey: 4326,
          ProjLinearUnitsGeoKey: 9999,
        },
        /linear unit EPSG:9999/,
      ],
      [
        'an unknown datum code',
        {
          GTModelTypeGeoKey: 1,
          ProjectedCSTypeGeoKey: 32767,
          ProjCoordTransGeoKey: 1,
          GeographicTypeGeoKey: 32767,
          GeogGeodeticDatumGeoKey: 6999,
        },
        /datum EPSG:6999/,
      ],
      [
        'a user-defined datum without an ellipsoid',
        {
          GTModelTypeGeoKey: 1,
          ProjectedCSTypeGeoKey: 32767,
          ProjCoordTransGeoKey: 1,
          GeographicTypeGeoKey: 32767,
          GeogGeodeticDatumGeoKey: 32767,
        },
        /gives no ellipsoid/,
      ],
      [
        'a projected CRS without a projection',
        { GTModelTypeGeoKey: 1, ProjectedCSTypeGeoKey: 32767, GeographicTypeGeoKey: 4326 },
        /names no projection/,
      ],
      ['a geocentric CRS', { GTModelTypeGeoKey: 3 }, /geocentric/],
      ['no CRS at all', { GTModelTypeGeoKey: 1, GTRasterTypeGeoKey: 1 }, /name no CRS/],
    ];
    for (const [what, keys, message] of refused) {
      let err: unknown;
      try {
        crsFromGeoKeys(keys);
      } catch (e) {
        err = e;
      }
      expect(err, what).toBeInstanceOf(CrsError);
      expect((err as Error).message, what).toMatch(message);
    }
  });
});

describe('pixel area in a CRS in feet', () => {
  it('a 10 ftUS pixel of NAD83 / New York Long Island is 9.29 m² on the ground (metres, not feet)', () => {
    const [x, y] = fromWgs84(2263)([-73.4, 40.8]);
    const area = pixelAreaHa({ epsg: 2263, originX: x, originY: y, resX: 10, resY: -10, width: 100, height: 100 });
    const ftUS = 1200 / 3937;
    // LCC's scale factor within the zone is 1 ± 1e-4: the area is (3.048 m)² within 0.05 %.
    expect(Math.abs(area * 10_000 - (10 * ftUS) ** 2) / (10 * ftUS) ** 2).toBeLessThan(5e-4);
  });
});

/** Numeric GeoKey ids to the names geotiff.js reports. */
function named(keys: Record<number, number | number[]>): GeoKeys {
  const names: Record<number, string> = {
    1024: 'GTModelTypeGeoKey',
    2048: 'GeographicTypeGeoKey',
    2050: 'GeogGeodeticDatumGeoKey',
    2056: 'GeogEllipsoidGeoKey',
    2057: 'GeogSemiMajorAxisGeoKey',
    2059: 'GeogInvFlatteningGeoKey',
    2062: 'GeogTOWGS84GeoKey',
    3072: 'ProjectedCSTypeGeoKey',
    3074: 'ProjectionGeoKey',
    3075: 'ProjCoordTransGeoKey',
    3076: 'ProjLinearUnitsGeoKey',
    3078: 'ProjStdParallel1GeoKey',
    3079: 'ProjStdParallel2GeoKey',
    3080: 'ProjNatOriginLongGeoKey',
    3081: 'ProjNatOriginLatGeoKey',
    3082: 'ProjFalseEastingGeoKey',
    3083: 'ProjFalseNorthingGeoKey',
    3084: 'ProjFalseOriginLongGeoKey',
    3085: 'ProjFalseOriginLatGeoKey',
    3086: 'ProjFalseOriginEastingGeoKey',
    3087: 'ProjFalseOriginNorthingGeoKey',
    3088: 'ProjCenterLongGeoKey',
    3089: 'ProjCenterLatGeoKey',
    3092: 'ProjScaleAtNatOriginGeoKey',
    3095: 'ProjStraightVertPoleLongGeoKey',
  };
  return Object.fromEntries(Object.entries(keys).map(([k, v]) => [names[Number(k)]!, v]));
}
