/**
 * Prescription as an ISO 11783-10 TaskData zip (`TASKDATA/TASKDATA.XML`, ISOXML v4), built with the
 * `isoxml` library (dev4Agriculture): customer and farm from the account, the field as a partfield
 * with its boundary polygon, the product, one planned task, and the rates in one of two forms:
 * - `grid`: a grid of type 2 (`GRD` + `GRD00001.bin`, one int32 rate per 10 m cell, rows from the
 *   south, columns from the west; 0 outside the field), what most ISOBUS terminals read;
 * - `zones`: one treatment zone per management zone, its polygons and one process data variable.
 * Both carry a default and a position-lost treatment zone at `default_rate` and an out-of-field one
 * at 0. Rates are converted to the DDI of the unit (rate-ddi.ts); a value presentation shows them
 * in the report's unit on the terminal. The library is loaded on first use.
 */
import type * as Iso from 'isoxml';
import type { Boundary } from '../../fields/index.js';
import type { PrescriptionContent } from '../content/schema.js';
import { ddiHex, processValue, RATE_DDI, rawPerUnit } from '../rate-ddi.js';
import type { RateUnit } from '../schemas.js';

export interface IsoxmlContext {
  /** Account name: the customer and the farm. */
  customer: string;
  boundary: Boundary;
  form: 'grid' | 'zones';
  defaultRate: number;
  version: string;
}

/** Grid cell size in metres (the resolution of the Sentinel-2 bands the zones come from). */
export const GRID_CELL_M = 10;

type Rings = number[][][];
interface GridParams {
  minX: number;
  minY: number;
  numCols: number;
  numRows: number;
  cellWidth: number;
  cellHeight: number;
}
interface ZoneFeature {
  properties: Record<string, number>;
  geometry: { type: 'MultiPolygon'; coordinates: Rings[] };
}

/**
 * The library's grid generator tests each cell centre against every polygon edge, which is
 * cells × vertices (minutes on 1,000 ha of zones traced along pixel edges). This one fills the
 * same cells, by cell centre, with a scanline per row: each edge is visited once per row it
 * crosses, and a zone's crossings of a row, sorted, bound the runs of cells inside it (even-odd
 * rule, so holes stay empty). Cells no zone covers are 0.
 */
export function scanlineGrid(zones: { features: ZoneFeature[] }, propertyNames: string[], g: GridParams): ArrayBuffer {
  const { features } = zones;
  const n = propertyNames.length;
  const buffer = new ArrayBuffer(g.numCols * g.numRows * 4 * n);
  const cells = new Int32Array(buffer);
  const rowY = (r: number) => g.minY + (r + 0.5) * g.cellHeight;
  for (const f of features) {
    const values = propertyNames.map((p) => Math.round(f.properties[p] ?? 0));
    const crossings: number[][] = Array.from({ length: g.numRows }, () => []);
    for (const poly of f.geometry.coordinates) {
      for (const ring of poly) {
        for (let k = 0; k + 1 < ring.length; k++) {
          const [x1, y1] = ring[k] as [number, number];
          const [x2, y2] = ring[k + 1] as [number, number];
          if (y1 === y2) continue;
          const lo = Math.min(y1, y2);
          const hi = Math.max(y1, y2);
          // Rows whose centre y satisfies lo <= y < hi (half-open, so a vertex is counted once).
          const r0 = Math.max(0, Math.ceil((lo - g.minY) / g.cellHeight - 0.5));
          const r1 = Math.min(g.numRows - 1, Math.ceil((hi - g.minY) / g.cellHeight - 0.5) - 1);
          for (let r = r0; r <= r1; r++) {
            const y = rowY(r);
            if (y < lo || y >= hi) continue;
            crossings[r]!.push(x1 + ((y - y1) * (x2 - x1)) / (y2 - y1));
          }
        }
      }
    }
    for (let r = 0; r < g.numRows; r++) {
      const xs = crossings[r]!.sort((a, b) => a - b);
      for (let k = 0; k + 1 < xs.length; k += 2) {
        // Cells whose centre x lies in [xs[k], xs[k + 1]).
        const c0 = Math.max(0, Math.ceil((xs[k]! - g.minX) / g.cellWidth - 0.5));
        const c1 = Math.min(g.numCols - 1, Math.ceil((xs[k + 1]! - g.minX) / g.cellWidth - 0.5) - 1);
        for (let c = c0; c <= c1; c++) for (let v = 0; v < n; v++) cells[(r * g.numCols + c) * n + v] = values[v]!;
      }
    }
  }
  return buffer;
}

/**
 * Cells of about GRID_CELL_M × GRID_CELL_M metres in lon/lat over the zones' extent (the
 * library's default generator does the same from a bounding box; this one reads the extent from
 * the coordinates directly).
 */
export function gridParams({ features }: { features: ZoneFeature[] }): GridParams {
  let minX = Infinity;
  let minY = Infinity;
  let maxX = -Infinity;
  let maxY = -Infinity;
  for (const f of features)
    for (const poly of f.geometry.coordinates)
      for (const p of poly[0]!) {
        if (p[0]! < minX) minX = p[0]!;
        if (p[0]! > maxX) maxX = p[0]!;
        if (p[1]! < minY) minY = p[1]!;
        if (p[1]! > maxY) maxY = p[1]!;
      }
  // Metres per degree on the WGS84 ellipsoid at the mean latitude (meridian and parallel).
  const phi = (((minY + maxY) / 2) * Math.PI) / 180;
  const mLat = 111_132.954 - 559.822 * Math.cos(2 * phi) + 1.175 * Math.cos(4 * phi);
  const mLon = ((Math.PI / 180) * 6_378_137 * Math.cos(phi)) / Math.sqrt(1 - 0.00669437999014 * Math.sin(phi) ** 2);
  const numCols = Math.max(1, Math.round(((maxX - minX) * mLon) / GRID_CELL_M));
  const numRows = Math.max(1, Math.round(((maxY - minY) * mLat) / GRID_CELL_M));
  return { minX, minY, numCols, numRows, cellWidth: (maxX - minX) / numCols, cellHeight: (maxY - minY) / numRows };
}

/**
 * A designator as ISO 11783-10 limits it, to 32 characters: code points, so that a name cut after
 * its 31st does not end in half an emoji (a lone surrogate, written to the XML as U+FFFD).
 */
const designator = (s: string): string => Array.from(s).slice(0, 32).join('');

export async function renderIsoxml(c: PrescriptionContent, ctx: IsoxmlContext): Promise<Buffer> {
  const iso = await import('isoxml');
  const { ISOXMLManager, TAGS, ExtendedPolygon, PolygonPolygonTypeEnum, TaskTaskStatusEnum } = iso;
  const m = new ISOXMLManager({
    fmisTitle: 'Field analysis service',
    fmisVersion: ctx.version,
    version: 4,
    gridParamsGenerator: gridParams as never,
    gridGenerator: scanlineGrid as never,
  });
  const entity = <T extends Iso.Entity>(tag: Iso.TAGS, attrs: Iso.EntityAttributes): [T, Iso.ISOXMLReference] => {
    const e = m.createEntityFromAttributes<T>(tag, attrs);
    return [e, m.registerEntity(e)];
  };
  const unit = c.unit as RateUnit;
  const d = RATE_DDI[unit];
  const [customer, ctrRef] = entity(TAGS.Customer, { CustomerLastName: designator(ctx.customer) });
  const [farm, frmRef] = entity(TAGS.Farm, { FarmDesignator: designator(ctx.customer), CustomerIdRef: ctrRef });
  const [partfield, pfdRef] = entity<Iso.ExtendedPartfield>(TAGS.Partfield, {
    PartfieldDesignator: designator(c.meta.field.name),
    PartfieldArea: 0,
    CustomerIdRef: ctrRef,
    FarmIdRef: frmRef,
  });
  partfield.boundaryFromGeoJSON(ctx.boundary as never, m);
  // The field's own geodesic area (the library's is spherical).
  partfield.attributes.PartfieldArea = Math.round(c.meta.field.area_ha * 10_000);
  const [product, pdtRef] = entity(TAGS.Product, { ProductDesignator: designator(c.product) });
  const [presentation, vpnRef] = entity(TAGS.ValuePresentation, {
    Offset: 0,
    Scale: 1 / rawPerUnit(unit),
    NumberOfDecimals: d.decimals,
    UnitDesignator: unit,
  });
  const pdv = (rate: number) =>
    m.createEntityFromAttributes<Iso.ProcessDataVariable>(TAGS.ProcessDataVariable, {
      ProcessDataDDI: ddiHex(d.ddi),
      ProcessDataValue: processValue(rate, unit),
      ProductIdRef: pdtRef,
      ValuePresentationIdRef: vpnRef,
    });
  const [task] = entity<Iso.ExtendedTask>(TAGS.Task, {
    TaskDesignator: designator(`Rx ${c.meta.field.name}`),
    CustomerIdRef: ctrRef,
    FarmIdRef: frmRef,
    PartfieldIdRef: pfdRef,
    TaskStatus: TaskTaskStatusEnum.Planned,
  });
  const zones = c.zones.filter((z) => z.geometry.coordinates.length);
  if (ctx.form === 'grid') {
    const features = zones.map((z) => ({
      type: 'Feature' as const,
      properties: { rate: processValue(z.rate, unit) },
      geometry: z.geometry,
    }));
    const dv = processValue(ctx.defaultRate, unit);
    task.addGridFromGeoJSON({ type: 'FeatureCollection', features } as never, [pdv(0)], ['rate'], [dv], [dv], [0]);
  } else {
    const tzn = (code: number, designator: string, rate: number, polygons: Iso.Polygon[] = []) =>
      m.createEntityFromAttributes<Iso.TreatmentZone>(TAGS.TreatmentZone, {
        TreatmentZoneCode: code,
        TreatmentZoneDesignator: designator,
        ProcessDataVariable: [pdv(rate)],
        ...(polygons.length ? { PolygonTreatmentZoneonly: polygons } : {}),
      });
    const n = Math.max(0, ...zones.map((z) => z.zone));
    task.attributes.TreatmentZone = [
      tzn(0, 'Outside field', 0),
      ...zones.map((z) =>
        tzn(
          z.zone,
          `Zone ${z.zone}`,
          z.rate,
          ExtendedPolygon.fromGeoJSON(z.geometry as never, PolygonPolygonTypeEnum.TreatmentZone, m),
        ),
      ),
      tzn(n + 1, 'Default', ctx.defaultRate),
      tzn(n + 2, 'Position lost', ctx.defaultRate),
    ];
    task.attributes.OutOfFieldTreatmentZoneCode = 0;
    task.attributes.DefaultTreatmentZoneCode = n + 1;
    task.attributes.PositionLostTreatmentZoneCode = n + 2;
  }
  Object.assign(m.rootElement.attributes, {
    Customer: [customer],
    Farm: [farm],
    Partfield: [partfield],
    Product: [product],
    ValuePresentation: [presentation],
    Task: [task],
  });
  return Buffer.from(await m.saveISOXML());
}
