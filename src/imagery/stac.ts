/**
 * A STAC Item (Sentinel-2 L2A as public catalogues publish it) → a capture description: assets
 * named by band or by common name, SCL as the mask, the date, the scene cloud cover, and the
 * radiometric offset from the raster extension or from `s2:processing_baseline` (04.00 and later:
 * reflectance = DN × 0.0001 − 0.1).
 */
import type { ImageryCreate } from './schemas.js';

/**
 * Earth Search's asset key of each band: the band's `eo:bands` common name (B09 has none; `nir09`
 * is Earth Search's own key). Items name assets so; the subscription preset `earth-search` and the
 * synthetic Items use it too.
 */
export const EARTH_SEARCH_ASSET_KEYS = {
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
} as const;

/** Common name (or Earth Search key) → band. */
const COMMON: Record<string, string> = Object.fromEntries(
  Object.entries(EARTH_SEARCH_ASSET_KEYS).map(([band, key]) => [key, band]),
);
const BAND_RE = /^B(0[1-9]|1[0-2]|8A)$/i;

interface Asset {
  href?: string;
  'eo:bands'?: Array<{ name?: string; common_name?: string }>;
  'raster:bands'?: Array<{ scale?: number; offset?: number }>;
}

function bandOf(key: string, a: Asset): string | undefined {
  const eo = a['eo:bands']?.[0];
  if (BAND_RE.test(key)) return key.toUpperCase();
  return (
    COMMON[key.toLowerCase()] ??
    (eo?.name && BAND_RE.test(eo.name) ? eo.name.toUpperCase() : eo?.common_name ? COMMON[eo.common_name] : undefined)
  );
}

/**
 * `keys` (band name or `SCL` → asset key, a subscription's asset map) names the assets to take;
 * without it every asset is recognised by its key or its eo:bands.
 */
export function captureFromStac(item: Record<string, unknown>, keys?: Record<string, string>): ImageryCreate {
  const props = (item.properties ?? {}) as Record<string, unknown>;
  const assets = (item.assets ?? {}) as Record<string, Asset>;
  const bands: NonNullable<ImageryCreate['bands']> = {};
  let mask: ImageryCreate['mask'];
  const named: Array<[string, Asset | undefined]> = keys
    ? Object.entries(keys).map(([band, key]) => [band, assets[key]])
    : Object.entries(assets);
  for (const [key, a] of named) {
    if (!a?.href || typeof a.href !== 'string') continue;
    if (/^scl$/i.test(key)) {
      mask = { href: a.href, kind: 'scl' };
      continue;
    }
    let band = keys ? key.toUpperCase() : bandOf(key, a);
    if (!band) continue;
    band = band.replace(/^B8a$/i, 'B8A');
    if (bands[band]) continue; // first asset of a band wins (catalogues list JP2 and COG twins)
    const rb = a['raster:bands']?.[0];
    bands[band] =
      rb && (rb.scale !== undefined || rb.offset !== undefined)
        ? {
            href: a.href,
            ...(rb.scale !== undefined ? { scale: rb.scale } : {}),
            ...(rb.offset !== undefined ? { offset: rb.offset } : {}),
          }
        : a.href;
  }
  const baseline = Number(props['s2:processing_baseline'] ?? NaN);
  const dt = String(props.datetime ?? props.start_datetime ?? '');
  const cloud = props['eo:cloud_cover'];
  return {
    source:
      String(props.platform ?? '')
        .toLowerCase()
        .startsWith('sentinel-2') || String(item.collection ?? '').includes('sentinel-2')
        ? 'sentinel-2-l2a'
        : String(item.collection ?? 'stac'),
    ...(/^\d{4}-\d{2}-\d{2}/.test(dt) ? { capture_date: dt.slice(0, 10) } : {}),
    ...(typeof cloud === 'number' ? { cloud_cover: cloud } : {}),
    bands,
    ...(mask ? { mask } : {}),
    scale: 0.0001,
    offset: Number.isFinite(baseline) && baseline >= 4 ? -0.1 : 0,
  };
}
