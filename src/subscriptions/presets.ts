/**
 * Which asset of a STAC Item holds which band. Catalogues name Sentinel-2 L2A assets differently:
 * Earth Search by common name (`red`, `nir`, `scl`), Planetary Computer by band (`B04`, `SCL`).
 * A subscription names a preset or gives its own map, band → asset key; our band names are
 * B01..B12 (no B10), B8A and SCL (the scene classification used as the cloud mask).
 *
 * `cdse`: Copernicus Data Space's STAC publishes resolution-suffixed keys (`B04_10m`, `SCL_20m`)
 * in some collections; the preset uses the plain band names, as its `sentinel-2-l2a` COG
 * collection does. An explicit map (`{"B04": "B04_10m", ...}`) serves any other naming.
 */
import { CAPTURE_BANDS, EARTH_SEARCH_ASSET_KEYS } from '../imagery/index.js';

/** Band names an asset map may use: the bands a capture takes (no B10: L1C only) and SCL. */
export const BAND_NAMES = [...CAPTURE_BANDS, 'SCL'] as const;
export type BandName = (typeof BAND_NAMES)[number];

/** Each band named as itself. */
const BY_BAND_NAME: Record<string, string> = Object.fromEntries(BAND_NAMES.map((b) => [b, b]));

export const PRESETS = {
  'earth-search': { ...EARTH_SEARCH_ASSET_KEYS, SCL: 'scl' },
  'planetary-computer': BY_BAND_NAME,
  cdse: BY_BAND_NAME,
} as const satisfies Record<string, Record<string, string>>;

export type PresetName = keyof typeof PRESETS;
export const PRESET_NAMES = Object.keys(PRESETS) as PresetName[];

export function isPreset(name: string): name is PresetName {
  return Object.hasOwn(PRESETS, name);
}

export function isBandName(name: string): name is BandName {
  return (BAND_NAMES as readonly string[]).includes(name);
}

/** An asset map's problems, each with the member it concerns ('' for the map as a whole). */
export interface AssetIssue {
  member: string;
  code: 'unknown_preset' | 'unknown_band' | 'empty_asset_key' | 'no_band';
  message: string;
}

/** What is wrong with a preset name or an explicit map (empty when nothing is). */
export function assetIssues(assets: string | Record<string, unknown>): AssetIssue[] {
  if (typeof assets === 'string') {
    return isPreset(assets)
      ? []
      : [
          {
            member: '',
            code: 'unknown_preset',
            message: `"${assets}" is not a preset; use one of ${PRESET_NAMES.join(', ')}, or a map of band → asset key`,
          },
        ];
  }
  const issues: AssetIssue[] = [];
  for (const [band, key] of Object.entries(assets)) {
    if (!isBandName(band)) {
      issues.push({
        member: band,
        code: 'unknown_band',
        message: `"${band}" is not a band name; use ${BAND_NAMES.join(', ')}`,
      });
    } else if (typeof key !== 'string' || key.trim() === '') {
      issues.push({ member: band, code: 'empty_asset_key', message: `${band} must name an asset key` });
    }
  }
  if (!Object.keys(assets).some((b) => b !== 'SCL' && isBandName(b))) {
    issues.push({
      member: '',
      code: 'no_band',
      message: `the map must name at least one band (${BAND_NAMES.filter((b) => b !== 'SCL').join(', ')}) besides SCL`,
    });
  }
  return issues;
}

/**
 * Band → the Item's asset key, for a preset name or an explicit map (returned as a copy). Throws
 * on a name or map that assetIssues refuses.
 */
export function assetKeysFor(assets: string | Record<string, string>): Record<string, string> {
  const issues = assetIssues(assets);
  if (issues.length) throw new Error(issues.map((i) => i.message).join('; '));
  return typeof assets === 'string' ? { ...PRESETS[assets as PresetName] } : { ...assets };
}
