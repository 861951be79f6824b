/**
 * GeoKeys of CRSs a GeoTIFF defines by its own parameters, with no EPSG code, as a writer that
 * does not know the code describes them.
 */

/**
 * Albers Equal Area for the conterminous US on NAD83 (datum by code), metres: EPSG:5070 without
 * its code (ProjectedCSTypeGeoKey 32767 and the parameters).
 */
export const ALBERS_CONUS_KEYS: Readonly<Record<number, number>> = {
  3074: 32767,
  3075: 11,
  2048: 32767,
  2050: 6269,
  3076: 9001,
  3078: 29.5,
  3079: 45.5,
  3081: 23,
  3080: -96,
  3082: 0,
  3083: 0,
};
