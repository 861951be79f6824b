/**
 * Prescription content (domain code): management zones from the index map, each zone's outline
 * traced along pixel edges, clipped to the field boundary (polygon-clipping, in the raster's
 * projected CRS) and reprojected to WGS84 with proj4; areas are geodesic (so the zones add up to
 * the field's own area_ha), rates are scaled around the base rate, and the total product follows.
 */
import polygonClipping, { type MultiPolygon as PcMulti } from 'polygon-clipping';
import { fromWgs84, toWgs84 } from '../../imagery/index.js';
import { geodesicAreaHa, type Boundary } from '../../fields/index.js';
import type { ResolvedOptions } from '../options.js';
import { pixelAreaHa, tracePixels, type IndexRaster } from './raster.js';
import type { Capture, Meta, PrescriptionContent } from './schema.js';
import { classifyZones, fillFromNeighbours, zoneRates } from './zoning.js';

const r4 = (x: number) => Math.round(x * 1e4) / 1e4;
const r2 = (x: number) => Math.round(x * 100) / 100;
const r7 = (x: number) => Math.round(x * 1e7) / 1e7;

/** Rates as a controller takes them: seeds to the hundred, tonnes to the hundredth, others to 0.1. */
export function roundRate(rate: number, unit: string): number {
  if (unit === 'seeds/ha') return Math.round(rate / 100) * 100;
  if (unit === 't/ha') return Math.round(rate * 100) / 100;
  return Math.round(rate * 10) / 10;
}

export const productUnit = (unit: string) => unit.split('/')[0]!;

export interface PrescriptionResult {
  content: PrescriptionContent;
  /** Zone number (0-based) per pixel of the window, -1 outside the field; for the map. */
  labels: Int32Array;
}

export function buildPrescription(
  meta: Meta,
  capture: Capture,
  r: IndexRaster,
  boundary: Boundary,
  o: NonNullable<ResolvedOptions['prescription']>,
): PrescriptionResult {
  const pxHa = pixelAreaHa(r);
  const minPixels = Math.max(1, Math.round(o.min_zone_ha / pxHa));
  const cls = classifyZones(r, o.zones, o.zoning, minPixels);
  // Pixels whose centre is outside the field can still be partly inside it: the whole window gets
  // the nearest zone before clipping, so the clipped zones tile the field without gaps.
  const full = Int32Array.from(cls.labels, (v) => (v < 0 ? -2 : v));
  fillFromNeighbours(full, r.width, r.height);
  const fwd = fromWgs84(r.epsg);
  const inv = toWgs84(r.epsg);
  const polys = boundary.type === 'Polygon' ? [boundary.coordinates] : boundary.coordinates;
  const fieldXY: PcMulti = polys.map((rings) => rings.map((ring) => ring.map((p) => fwd([p[0]!, p[1]!]))));
  const node = (i: number, j: number): [number, number] => [r.originX + i * r.resX, r.originY + j * r.resY];
  const weights = cls.zones.map((z) => ({ mean: z.mean, weight: z.pixels }));
  const rawRates = zoneRates(weights, o.base_rate, o.rate_direction, o.rate_spread);
  const zones: PrescriptionContent['zones'] = cls.zones.map((z, idx) => {
    const traced = tracePixels(r.width, r.height, (k) => full[k] === z.zone);
    const xy: PcMulti = traced.map((poly) => poly.map((ring) => ring.map(([i, j]) => node(i, j))));
    const clipped = xy.length ? polygonClipping.intersection(xy, fieldXY) : [];
    const coordinates = clipped.map((poly) => poly.map((ring) => ring.map((p) => inv(p).map(r7) as [number, number])));
    const area = coordinates.length ? geodesicAreaHa({ type: 'MultiPolygon', coordinates } as Boundary) : 0;
    const rate = roundRate(rawRates[idx]!, o.unit);
    return {
      zone: z.zone + 1,
      mean_index: r4(z.mean),
      min_index: r4(z.min),
      max_index: r4(z.max),
      area_ha: r4(area),
      share_pct: 0,
      rate,
      product_total: 0,
      geometry: { type: 'MultiPolygon' as const, coordinates },
    };
  });
  const totalArea = zones.reduce((s, z) => s + z.area_ha, 0);
  let total = 0;
  for (const z of zones) {
    z.share_pct = r2((100 * z.area_ha) / totalArea);
    z.product_total = r2(z.rate * z.area_ha);
    total += z.rate * z.area_ha;
  }
  return {
    labels: cls.labels,
    content: {
      meta,
      capture,
      input: o.input,
      product: o.product,
      unit: o.unit,
      base_rate: o.base_rate,
      rate_direction: o.rate_direction,
      rate_spread: o.rate_spread,
      zoning: {
        method: o.zoning,
        zones_requested: o.zones,
        zones: zones.length,
        breaks: cls.breaks.map(r4),
        min_zone_ha: o.min_zone_ha,
        merged_fragments: cls.merged_fragments,
      },
      zones,
      totals: {
        area_ha: r4(totalArea),
        field_area_ha: meta.field.area_ha,
        product_total: r2(total),
        product_unit: productUnit(o.unit),
        average_rate: r2(total / totalArea),
      },
    },
  };
}
