/**
 * The index catalogue: every built-in index is a formula in the same language as custom band
 * math, evaluated on reflectance (0..1). Sentinel-2 band roles: B02 blue, B03 green, B04 red,
 * B05/B06/B07 red edge 1–3, B08 NIR, B8A narrow NIR, B11 SWIR 1, B12 SWIR 2.
 * Sources are given per entry; where names are ambiguous in the wild the choice is stated.
 */
import { compileFormula, type BandId, type Program } from './formula.js';

export interface IndexEntry {
  name: string;
  long_name: string;
  formula: string;
  bands: BandId[];
  /** Values expected for real surfaces (outliers are possible on odd pixels). */
  range: [number, number];
  primary_use: string;
  source: string;
}

const entries: Array<Omit<IndexEntry, 'bands'>> = [
  // The spec's six.
  {
    name: 'NDVI',
    long_name: 'Normalized Difference Vegetation Index',
    formula: '(B08 - B04) / (B08 + B04)',
    range: [-1, 1],
    primary_use: 'General crop health and canopy greenness',
    source: 'Rouse et al. 1974, NASA SP-351',
  },
  {
    name: 'NDRE',
    long_name: 'Normalized Difference Red Edge',
    formula: '(B08 - B05) / (B08 + B05)',
    range: [-1, 1],
    primary_use: 'Chlorophyll content, early stress detection',
    source: 'Barnes et al. 2000 (NIR with red edge 1, B05)',
  },
  {
    name: 'NDWI',
    long_name: 'Normalized Difference Water Index (Gao, vegetation water)',
    formula: '(B08 - B11) / (B08 + B11)',
    range: [-1, 1],
    primary_use: 'Crop water stress, irrigation management (leaf water; not McFeeters open-water NDWI)',
    source: 'Gao 1996, Remote Sens. Environ. 58:257',
  },
  {
    name: 'EVI',
    long_name: 'Enhanced Vegetation Index',
    formula: '2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)',
    range: [-1, 1],
    primary_use: 'Dense canopy, reduced atmospheric noise',
    source: 'Huete et al. 2002 (G 2.5, C1 6, C2 7.5, L 1)',
  },
  {
    name: 'SAVI',
    long_name: 'Soil-Adjusted Vegetation Index',
    formula: '1.5 * (B08 - B04) / (B08 + B04 + 0.5)',
    range: [-1, 1],
    primary_use: 'Early-season analysis with exposed soil',
    source: 'Huete 1988 (L 0.5)',
  },
  {
    name: 'MSAVI2',
    long_name: 'Modified Soil-Adjusted Vegetation Index 2',
    formula: '(2 * B08 + 1 - sqrt(pow(2 * B08 + 1, 2) - 8 * (B08 - B04))) / 2',
    range: [-1, 1],
    primary_use: 'Dynamic soil correction for variable canopy cover',
    source: 'Qi et al. 1994 (closed form)',
  },
  // More indices used in agronomy.
  {
    name: 'GNDVI',
    long_name: 'Green NDVI',
    formula: '(B08 - B03) / (B08 + B03)',
    range: [-1, 1],
    primary_use: 'Chlorophyll and nitrogen status in dense canopies',
    source: 'Gitelson et al. 1996',
  },
  {
    name: 'OSAVI',
    long_name: 'Optimized Soil-Adjusted Vegetation Index',
    formula: '(B08 - B04) / (B08 + B04 + 0.16)',
    range: [-1, 1],
    primary_use: 'Sparse canopies, soil background correction',
    source: 'Rondeaux et al. 1996 (L 0.16)',
  },
  {
    name: 'NDMI',
    long_name: 'Normalized Difference Moisture Index',
    formula: '(B08 - B11) / (B08 + B11)',
    range: [-1, 1],
    primary_use: 'Canopy moisture (same formula as the catalogue NDWI, Gao 1996)',
    source: 'Wilson & Sader 2002',
  },
  {
    name: 'CIgreen',
    long_name: 'Chlorophyll Index Green',
    formula: 'B08 / B03 - 1',
    range: [0, 15],
    primary_use: 'Canopy chlorophyll content',
    source: 'Gitelson et al. 2003',
  },
  {
    name: 'CIre',
    long_name: 'Chlorophyll Index Red Edge',
    formula: 'B08 / B05 - 1',
    range: [0, 10],
    primary_use: 'Canopy chlorophyll content, nitrogen',
    source: 'Gitelson et al. 2003',
  },
  {
    name: 'MCARI',
    long_name: 'Modified Chlorophyll Absorption in Reflectance Index',
    formula: '((B05 - B04) - 0.2 * (B05 - B03)) * (B05 / B04)',
    range: [-0.5, 1.5],
    primary_use: 'Leaf chlorophyll concentration',
    source: 'Daughtry et al. 2000',
  },
  {
    name: 'NBR',
    long_name: 'Normalized Burn Ratio',
    formula: '(B08 - B12) / (B08 + B12)',
    range: [-1, 1],
    primary_use: 'Burnt areas, residue and tillage, severe canopy damage',
    source: 'Key & Benson 2006',
  },
  {
    name: 'EVI2',
    long_name: 'Two-band Enhanced Vegetation Index',
    formula: '2.5 * (B08 - B04) / (B08 + 2.4 * B04 + 1)',
    range: [-1, 1],
    primary_use: 'EVI without the blue band',
    source: 'Jiang et al. 2008',
  },
  {
    name: 'ReCI',
    long_name: 'Red-edge Chlorophyll Index',
    formula: 'B08 / B04 - 1',
    range: [0, 20],
    primary_use: 'Chlorophyll and nitrogen during active growth',
    source: 'Gitelson et al. 2005 (as used in EOS/Sentinel Hub agronomy)',
  },
  {
    name: 'NDRE2',
    long_name: 'Normalized Difference Red Edge (B06 variant)',
    formula: '(B08 - B06) / (B08 + B06)',
    range: [-1, 1],
    primary_use: 'Chlorophyll in dense canopies (red edge 2)',
    source: 'Variant of Barnes et al. 2000 used by several vendors',
  },
  {
    name: 'NDRE_B8A',
    long_name: 'Normalized Difference Red Edge (narrow NIR)',
    formula: '(B8A - B05) / (B8A + B05)',
    range: [-1, 1],
    primary_use: 'Chlorophyll with the 20 m narrow NIR band',
    source: 'Variant of Barnes et al. 2000 on B8A',
  },
  {
    name: 'NDVI_B8A',
    long_name: 'NDVI on narrow NIR',
    formula: '(B8A - B04) / (B8A + B04)',
    range: [-1, 1],
    primary_use: 'NDVI where B08 is missing (e.g. 20/60 m products)',
    source: 'Rouse et al. 1974 with Sentinel-2 B8A',
  },
  {
    name: 'MSI',
    long_name: 'Moisture Stress Index',
    formula: 'B11 / B08',
    range: [0, 3],
    primary_use: 'Leaf water stress (higher = drier)',
    source: 'Hunt & Rock 1989',
  },
  {
    name: 'NDMI2',
    long_name: 'Normalized Difference Moisture Index (SWIR 2)',
    formula: '(B08 - B12) / (B08 + B12)',
    range: [-1, 1],
    primary_use: 'Canopy water content with SWIR 2',
    source: 'Hardisky et al. 1983 (NDII family)',
  },
  {
    name: 'SIPI',
    long_name: 'Structure Insensitive Pigment Index',
    formula: '(B08 - B02) / (B08 - B04)',
    range: [0, 2],
    primary_use: 'Carotenoid/chlorophyll ratio, stress and senescence',
    source: 'Penuelas et al. 1995',
  },
  {
    name: 'ARVI',
    long_name: 'Atmospherically Resistant Vegetation Index',
    formula: '(B08 - (2 * B04 - B02)) / (B08 + (2 * B04 - B02))',
    range: [-1, 1],
    primary_use: 'Vegetation under haze',
    source: 'Kaufman & Tanre 1992 (gamma 1)',
  },
  {
    name: 'GCI',
    long_name: 'Green Chlorophyll Vegetation Index (B8A)',
    formula: 'B8A / B03 - 1',
    range: [0, 15],
    primary_use: 'Chlorophyll with the narrow NIR band',
    source: 'Gitelson et al. 2003',
  },
  {
    name: 'BSI',
    long_name: 'Bare Soil Index',
    formula: '((B11 + B04) - (B08 + B02)) / ((B11 + B04) + (B08 + B02))',
    range: [-1, 1],
    primary_use: 'Bare soil and tillage detection',
    source: 'Rikimaru et al. 2002',
  },
  {
    name: 'TCARI_OSAVI',
    long_name: 'TCARI / OSAVI',
    formula: '3 * ((B05 - B04) - 0.2 * (B05 - B03) * (B05 / B04)) / (1.16 * (B08 - B04) / (B08 + B04 + 0.16))',
    range: [0, 2],
    primary_use: 'Chlorophyll insensitive to LAI and soil',
    source: 'Haboudane et al. 2002',
  },
];

export const indexCatalog: IndexEntry[] = entries.map((e) => ({ ...e, bands: compileFormula(e.formula).bands }));

const byName = new Map(indexCatalog.map((e) => [e.name.toUpperCase(), e]));
const programs = new Map<string, Program>();

export function findIndex(name: string): IndexEntry | undefined {
  return byName.get(name.toUpperCase());
}

/** The compiled program of a catalogue index (compiled once per process). */
export function indexProgram(name: string): Program {
  const e = findIndex(name);
  if (!e) throw new Error(`unknown index ${name}`);
  let p = programs.get(e.name);
  if (!p) {
    p = compileFormula(e.formula);
    programs.set(e.name, p);
  }
  return p;
}

/** The six indices of the spec (the `index` query parameter accepts these and `custom`). */
export const SPEC_INDICES = ['NDVI', 'NDRE', 'NDWI', 'EVI', 'SAVI', 'MSAVI2'] as const;
