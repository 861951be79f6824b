/**
 * Asset presets: our band names (B01..B12, B8A, and SCL for the mask) → the asset keys of a
 * catalogue's Sentinel-2 L2A Items. An explicit map (`{"B04": "red", …}`) is taken as it is.
 * (Interim copy for the poller; the subscriptions API owns the presets.)
 */
const BANDS = ['B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09', 'B11', 'B12'] as const;

export const PRESETS: Record<string, Record<string, string>> = {
  'earth-search': {
    B01: 'coastal',
    B02: 'blue',
    B03: 'green',
    B04: 'red',
    B05: 'rededge1',
    B06: 'rededge2',
    B07: 'rededge3',
    B08: 'nir',
    B8A: 'nir08',
    B09: 'nir09',
    B11: 'swir16',
    B12: 'swir22',
    SCL: 'scl',
  },
  'planetary-computer': { ...Object.fromEntries(BANDS.map((b) => [b, b])), SCL: 'SCL' },
  cdse: { ...Object.fromEntries(BANDS.map((b) => [b, b])), SCL: 'SCL' },
};

/** Band → asset key of a preset name or an explicit map; an unknown preset is an error. */
export function assetKeysFor(assets: string | Record<string, string>): Record<string, string> {
  if (typeof assets !== 'string') return { ...assets };
  const preset = PRESETS[assets];
  if (!preset) throw new Error(`unknown asset preset "${assets}"`);
  return { ...preset };
}
