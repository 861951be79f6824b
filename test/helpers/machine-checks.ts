/**
 * The checks every prescription file for a farm terminal must pass, against the JSON report of the
 * same request: the Shapefile through GDAL, the TaskData through the isoxml library and through a
 * generic XML parser with every DDI value recomputed from the JSON's rates (test/helpers/machine-files.ts).
 */
import { ISOXMLManager, type ExtendedTask } from 'isoxml';
import { expect } from 'vitest';
import {
  distanceToEdges,
  inMultiPolygon,
  parseTaskData,
  readShapefileZip,
  STANDARD_DDI,
  unzip,
} from './machine-files.js';

type Json = Record<string, any>;

export function checkShapefile(zip: Buffer, rx: Json, fieldAreaHa: number): void {
  const files = unzip(zip);
  const names = Object.keys(files);
  const base = names.find((n) => n.endsWith('.shp'))!.slice(0, -4);
  expect(names.sort()).toEqual(['.cpg', '.dbf', '.prj', '.shp', '.shx'].map((e) => base + e).sort());
  expect(base).toMatch(/^[A-Za-z0-9_]+$/);
  expect(files[`${base}.cpg`]!.toString()).toBe('UTF-8');
  const shp = readShapefileZip(zip);
  expect(shp.srsWkt).toContain('ID["EPSG",4326]');
  expect(shp.fieldTypes).toMatchObject({
    ZONE: 'Integer (4.0)',
    RATE: 'Integer (9.0)',
    TGT_RATE: 'Real (14.2)',
    UNIT: 'String (10.0)',
    PRODUCT: 'String (60.0)',
    IDX_MEAN: 'Real (10.4)',
  });
  expect(shp.features).toHaveLength(rx.zones.length);
  let area = 0;
  for (const [k, f] of shp.features.entries()) {
    const z = rx.zones[k];
    expect(f.valid, `zone ${z.zone} geometry valid (GEOS)`).toBe(1);
    expect(['Polygon', 'MultiPolygon']).toContain(f.geometry.type);
    expect(f.properties).toMatchObject({
      ZONE: z.zone,
      RATE: Math.round(z.rate),
      TGT_RATE: z.rate,
      UNIT: rx.unit,
      PRODUCT: rx.product,
      INDEX: rx.meta.index,
      IDX_MEAN: z.mean_index,
    });
    for (const c of JSON.stringify(f.geometry.coordinates)
      .match(/-?\d+(\.\d+)?(e-?\d+)?/g)!
      .map(Number))
      expect(Math.abs(c)).toBeLessThanOrEqual(180);
    area += f.geodesic_m2 / 10_000;
  }
  expect(Math.abs(area - fieldAreaHa) / fieldAreaHa, `Σ zone areas ${area} ha vs field ${fieldAreaHa} ha`).toBeLessThan(
    0.005,
  );
}

export interface IsoChecks {
  customer: string;
  fieldName: string;
  boundary: { type: string; coordinates: any };
  form: 'grid' | 'zones';
  defaultRate: number;
}

/** Returns the number of grid cells checked (0 for the zones form). */
export async function checkTaskData(zip: Buffer, rx: Json, want: IsoChecks): Promise<number> {
  const files = unzip(zip);
  expect(Object.keys(files)).toContain('TASKDATA/TASKDATA.XML');
  const ddi = STANDARD_DDI[rx.unit]!;
  const raw = (rate: number) => Math.round(rate * ddi.perUnit);

  // 1. The isoxml library parses it back to the same task, zones and rates, without a warning.
  const m = new ISOXMLManager();
  await m.parseISOXMLFile(new Uint8Array(zip), 'application/zip');
  expect(m.getWarnings()).toEqual([]);
  const root = m.rootElement.attributes;
  expect(root.Customer![0]!.attributes.CustomerLastName).toBe(want.customer.slice(0, 32));
  expect(root.Partfield![0]!.attributes.PartfieldDesignator).toBe(want.fieldName.slice(0, 32));
  expect(root.Product![0]!.attributes.ProductDesignator).toBe(rx.product);
  expect(root.Task).toHaveLength(1);
  const task = root.Task![0] as ExtendedTask;
  const tzns = task.attributes.TreatmentZone ?? [];
  const tznValue = (code: number | undefined) =>
    tzns.find((z) => z.attributes.TreatmentZoneCode === code)!.attributes.ProcessDataVariable![0]!.attributes
      .ProcessDataValue;
  expect(tznValue(task.attributes.DefaultTreatmentZoneCode)).toBe(raw(want.defaultRate));
  expect(tznValue(task.attributes.PositionLostTreatmentZoneCode)).toBe(raw(want.defaultRate));
  expect(tznValue(task.attributes.OutOfFieldTreatmentZoneCode)).toBe(0);
  if (want.form === 'grid') {
    expect(task.getGridValuesDescription()).toMatchObject([
      { DDINumber: Number.parseInt(ddi.ddi, 16), unit: rx.unit, scale: 1 / ddi.perUnit, offset: 0 },
    ]);
    const cells = task.getGridAsGeoJSON(['rate']);
    const got = new Set(cells.features.map((f) => f.properties!.rate));
    expect([...got].sort()).toEqual([...new Set(rx.zones.map((z: Json) => raw(z.rate)))].sort());
  } else {
    for (const z of rx.zones) {
      const t = tzns.find((x) => x.attributes.TreatmentZoneCode === z.zone)!;
      expect(t.attributes.ProcessDataVariable![0]!.attributes.ProcessDataValue).toBe(raw(z.rate));
      expect(t.attributes.PolygonTreatmentZoneonly).toHaveLength(z.geometry.coordinates.length);
    }
  }

  // 2. A generic XML parser, every value recomputed from the JSON report (ISO 11783-10 attribute letters).
  const x = parseTaskData(files['TASKDATA/TASKDATA.XML']!.toString('utf8'));
  expect(x.VersionMajor).toBe('4');
  const ctr = x.CTR[0];
  const frm = x.FRM[0];
  const pfd = x.PFD[0];
  const pdt = x.PDT[0];
  const vpn = x.VPN[0];
  const tsk = x.TSK[0];
  expect(ctr.B).toBe(want.customer.slice(0, 32));
  expect(frm.I).toBe(ctr.A);
  expect(pfd).toMatchObject({ C: want.fieldName.slice(0, 32), D: String(Math.round(rx.meta.field.area_ha * 10_000)) });
  expect(pfd.E).toBe(ctr.A);
  expect(pfd.F).toBe(frm.A);
  // The partfield boundary: PLN type 1, exterior LSG type 1, PNT C = latitude, D = longitude, the field's vertices.
  const polys = want.boundary.type === 'Polygon' ? [want.boundary.coordinates] : want.boundary.coordinates;
  expect(pfd.PLN).toHaveLength(polys.length);
  for (const [k, pln] of pfd.PLN.entries()) {
    expect(pln.A).toBe('1');
    const ext = pln.LSG[0];
    expect(ext.A).toBe('1');
    const pts = ext.PNT.map((p: Json) => [Number(p.D), Number(p.C)]);
    expect(pts).toHaveLength(polys[k][0].length);
    for (const [i, p] of pts.entries()) {
      expect(Math.abs(p[0] - polys[k][0][i][0])).toBeLessThan(1e-9);
      expect(Math.abs(p[1] - polys[k][0][i][1])).toBeLessThan(1e-9);
    }
  }
  expect(pdt.B).toBe(rx.product);
  expect(Number(vpn.C)).toBeCloseTo(1 / ddi.perUnit, 12);
  expect(vpn.E).toBe(rx.unit);
  expect(tsk).toMatchObject({ C: ctr.A, D: frm.A, E: pfd.A, G: '1' });
  const tznBy = new Map<string, Json>(tsk.TZN.map((t: Json) => [t.A, t]));
  const pdvOf = (code: string) => {
    const p = tznBy.get(code)!.PDV;
    expect(p).toHaveLength(1);
    expect(p[0]).toMatchObject({ A: ddi.ddi, C: pdt.A, E: vpn.A });
    return Number(p[0].B);
  };
  expect(pdvOf(tsk.H)).toBe(raw(want.defaultRate));
  expect(pdvOf(tsk.I)).toBe(raw(want.defaultRate));
  expect(pdvOf(tsk.J)).toBe(0);
  if (want.form === 'zones') {
    expect(tsk.GRD).toBeUndefined();
    for (const z of rx.zones) {
      const t = tznBy.get(String(z.zone))!;
      expect(pdvOf(String(z.zone))).toBe(raw(z.rate));
      expect(t.B).toBe(`Zone ${z.zone}`);
      // One treatment-zone polygon (PLN type 2) per part of the zone, its exterior ring the zone's.
      expect(t.PLN).toHaveLength(z.geometry.coordinates.length);
      for (const [k, pln] of t.PLN.entries()) {
        expect(pln.A).toBe('2');
        const rings = pln.LSG;
        expect(rings).toHaveLength(z.geometry.coordinates[k].length);
        expect(rings.map((r: Json) => r.A)).toEqual(
          z.geometry.coordinates[k].map((_: unknown, i: number) => (i ? '2' : '1')),
        );
        const ext = rings[0].PNT.map((p: Json) => [Number(p.D), Number(p.C)]);
        expect(ext).toEqual(z.geometry.coordinates[k][0]);
      }
    }
    return 0;
  }
  // Grid of type 2: GRD A = minimum north, B = minimum east, C = cell north size, D = cell east size,
  // E = columns, F = rows, G = file name, H = file length, I = type, J = the TZN that gives its DDI.
  expect(tsk.GRD).toHaveLength(1);
  const grd = tsk.GRD[0];
  expect(grd.I).toBe('2');
  expect(pdvOf(grd.J)).toBe(0);
  const [minN, minE, dN, dE] = [grd.A, grd.B, grd.C, grd.D].map(Number) as [number, number, number, number];
  const cols = Number(grd.E);
  const rows = Number(grd.F);
  const bin = files[`TASKDATA/${grd.G}.bin`]!;
  expect(bin.length).toBe(cols * rows * 4);
  expect(Number(grd.H)).toBe(bin.length);
  // Cells of about 10 m (the zones' Sentinel-2 pixels): 10 m ≈ 1/111,320 degree of latitude.
  expect(dN * 111_320).toBeGreaterThan(8);
  expect(dN * 111_320).toBeLessThan(12);
  let mismatched = 0;
  for (let r = 0; r < rows; r++) {
    for (let c = 0; c < cols; c++) {
      const lon = minE + (c + 0.5) * dE;
      const lat = minN + (r + 0.5) * dN;
      const zone = rx.zones.find((z: Json) => inMultiPolygon(lon, lat, z.geometry.coordinates));
      const expected = zone ? raw(zone.rate) : 0;
      const got = bin.readInt32LE((r * cols + c) * 4);
      if (got !== expected) {
        // Only a centre on a zone edge (within 1e-7 degree, 1 cm) may go either way.
        const near = Math.min(...rx.zones.map((z: Json) => distanceToEdges(lon, lat, z.geometry.coordinates)));
        expect(near, `cell ${r},${c}: ${got} vs ${expected}`).toBeLessThan(1e-7);
        mismatched++;
      }
    }
  }
  expect(mismatched).toBeLessThanOrEqual(2);
  return rows * cols;
}
