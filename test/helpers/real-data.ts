/**
 * The real Sentinel-2 scenes in ../shared/data/real (not part of the repository) described as
 * captures, with the reference statistics computed independently with numpy/GDAL.
 */
import { existsSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { packageRoot } from '../../src/platform/paths.js';
import type { CaptureSource } from '../../src/imagery/window-reader.js';

export const realDataDir = path.resolve(packageRoot, '..', 'shared', 'data', 'real');
export const hasRealData = existsSync(path.join(realDataDir, 'reference', 'reference_values.json'));
if (!hasRealData)
  console.warn(`[test] real Sentinel-2 data not found at ${realDataDir}: the real-data checks are SKIPPED`);

export interface RefStats {
  min: number;
  max: number;
  mean: number;
  std: number;
  count: number;
}

export interface RefResult {
  scene: string;
  polygon_file: string;
  pixels_centre_in_polygon: number;
  indices: Record<string, RefStats>;
}

export function referenceResults(): RefResult[] {
  return JSON.parse(readFileSync(path.join(realDataDir, 'reference', 'reference_values.json'), 'utf8')).results;
}

export function polygonOf(r: RefResult): { type: 'Polygon' | 'MultiPolygon'; coordinates: never } {
  const fc = JSON.parse(readFileSync(path.join(realDataDir, 'reference', r.polygon_file), 'utf8'));
  return fc.features[0].geometry;
}

const d = (...p: string[]) => path.join(realDataDir, ...p);

/** Capture descriptions of the reference scenes (band files, indices in multi-band files, radiometry). */
export const scenes: Record<string, { capture: CaptureSource; date: string; source: string }> = {
  EH_29RKH_20200219_L2A: {
    date: '2020-02-19',
    source: 'sentinel-2-l2a',
    capture: {
      scale: 0.0001,
      offset: 0,
      bands: Object.fromEntries(
        ['B02', 'B03', 'B04', 'B05', 'B08', 'B11'].map((b) => [
          b,
          { href: d('s2_l2a_29RKH_20200219_riotilerpds', `${b}.tif`) },
        ]),
      ),
      mask: { href: d('s2_l2a_29RKH_20200219_riotilerpds', 'SCL.tif'), kind: 'scl' },
    },
  },
  AT_T33UUP_20210617_L2A_FTW: {
    date: '2021-06-17',
    source: 'sentinel-2-l2a',
    capture: {
      scale: 0.0001,
      offset: 0,
      bands: {
        B04: { href: d('s2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif'), index: 1 },
        B03: { href: d('s2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif'), index: 2 },
        B02: { href: d('s2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif'), index: 3 },
        B08: { href: d('s2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif'), index: 4 },
      },
    },
  },
  AT_T33UUP_20210925_L2A_FTW: {
    date: '2021-09-25',
    source: 'sentinel-2-l2a',
    capture: {
      scale: 0.0001,
      offset: 0,
      bands: {
        B04: { href: d('s2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif'), index: 5 },
        B03: { href: d('s2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif'), index: 6 },
        B02: { href: d('s2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif'), index: 7 },
        B08: { href: d('s2_l2a_at_T33UUP_2021_ftw', 'inference-img.tif'), index: 8 },
      },
    },
  },
  DE_T32UPC_20200406_L1C_N0209: {
    date: '2020-04-06',
    source: 'sentinel-2-l1c',
    capture: {
      scale: 0.0001,
      offset: 0,
      bands: Object.fromEntries(
        ['B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09', 'B10', 'B11', 'B12']
          .map((b, i) => [
            b,
            {
              href: d(
                's2_l1c_de_T32UPC_2020_2022_ukis',
                'S2B_MSIL1C_20200406T101559_N0209_R065_T32UPC_20200406T130159.tif',
              ),
              index: i + 1,
            },
          ])
          .filter(([b]) => b !== 'B10'),
      ),
    },
  },
};

/** Reference index names → catalogue names. */
export const REF_INDEX: Record<string, string> = {
  NDVI: 'NDVI',
  SAVI: 'SAVI',
  MSAVI2: 'MSAVI2',
  NDRE: 'NDRE',
  NDWI_Gao: 'NDWI',
  EVI: 'EVI',
};
