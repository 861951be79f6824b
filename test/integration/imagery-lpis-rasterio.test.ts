/**
 * Real parcels over a real scene: the three Flemish LPIS parcels over Sentinel-2 tile 31UFS
 * (../shared/data/real/s2_l1c_be_31UFS_20190411: stripped DEFLATE files, nodata 65535). For each
 * parcel the field window's pixel count, valid count and mean NDVI (float64, computed here from
 * the window's digital numbers) equal what rasterio computes independently from the same files
 * (geometry_mask by pixel centres, nodata and DN 0 excluded). Skipped, and said so, without the
 * data or without Debian's python3-rasterio.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { Boundary } from '../../src/fields/boundary.js';
import { readFieldWindow } from '../../src/imagery/window-reader.js';
import { realDataDir } from '../helpers/real-data.js';
import { hasRasterio } from '../helpers/tools.js';

const DIR = path.join(realDataDir, 's2_l1c_be_31UFS_20190411');
const PY = `
import json, sys
import numpy as np, rasterio
from rasterio.features import geometry_mask
from rasterio.warp import transform_geom
job = json.loads(sys.argv[1])
out = []
with rasterio.open(job["red"]) as r, rasterio.open(job["nir"]) as n:
    red_all = r.read(1).astype(np.float64)
    nir_all = n.read(1).astype(np.float64)
    for g in job["fields"]:
        geom = transform_geom("EPSG:4326", r.crs, g)
        inside = ~geometry_mask([geom], out_shape=red_all.shape, transform=r.transform, all_touched=False)
        valid = inside & (red_all != 65535) & (nir_all != 65535) & (red_all != 0) & (nir_all != 0)
        red = red_all[valid] / 10000.0
        nir = nir_all[valid] / 10000.0
        ndvi = (nir - red) / (nir + red)
        out.append({"pixels": int(inside.sum()), "valid": int(valid.sum()), "mean": float(ndvi.mean())})
print(json.dumps(out))
`;

const hasLpis = existsSync(path.join(DIR, 'fields_flanders_lpis.geojson'));
if (!hasLpis) console.warn('[test] Flemish LPIS data missing: the LPIS/rasterio check is SKIPPED');
const ready = hasLpis && hasRasterio();

describe.runIf(ready)('real LPIS parcels over Sentinel-2 31UFS against rasterio', () => {
  it("pixel counts, valid counts and mean NDVI equal rasterio's for each parcel", async () => {
    const fields = (
      JSON.parse(readFileSync(path.join(DIR, 'fields_flanders_lpis.geojson'), 'utf8')).features as Array<{
        geometry: Boundary;
      }>
    ).map((f) => f.geometry);
    const red = path.join(DIR, 'ref_input_S2_B04.tif');
    const nir = path.join(DIR, 'ref_input_S2_B08.tif');
    const ref = JSON.parse(
      execFileSync('/usr/bin/python3', ['-c', PY, JSON.stringify({ red, nir, fields })], { encoding: 'utf8' }),
    ) as Array<{ pixels: number; valid: number; mean: number }>;
    expect(ref).toHaveLength(3);
    const capture = { bands: { B04: { href: red }, B08: { href: nir } }, scale: 0.0001, offset: 0 };
    for (const [k, field] of fields.entries()) {
      const win = await readFieldWindow(capture, field, ['B04', 'B08'], { roots: [DIR] });
      expect(win.bands.B04!.nodata).toBe(65535);
      let sum = 0;
      let count = 0;
      for (let p = 0; p < win.valid.length; p++) {
        if (!win.valid[p]) continue;
        const r = win.bands.B04!.data[p]! / 10000;
        const n = win.bands.B08!.data[p]! / 10000;
        sum += (n - r) / (n + r);
        count++;
      }
      expect(win.fieldPixels, `parcel ${k} pixels`).toBe(ref[k]!.pixels);
      expect(win.validPixels, `parcel ${k} valid`).toBe(ref[k]!.valid);
      expect(count).toBe(win.validPixels);
      expect(
        Math.abs(sum / count - ref[k]!.mean),
        `parcel ${k} mean NDVI ${sum / count} vs ${ref[k]!.mean}`,
      ).toBeLessThan(1e-9);
    }
  });
});
