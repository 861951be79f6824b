/**
 * Colour ramps of index images (field PNGs and map tiles), documented in docs/rasters.md: a ramp
 * is a list of evenly spaced colour stops, expanded once into a 256-entry table by linear
 * interpolation; a value v over the range [min, max] takes entry round(clamp((v − min) / (max −
 * min), 0, 1) × 255). A pixel with no value (masked, cloud, outside the field, ÷0) is transparent
 * (0, 0, 0, 0); every other pixel is opaque.
 */
import { findIndex } from '../compute/catalog.js';

import { RAMP_STOPS, type RampName } from './ramp-stops.js';

export { RAMP_STOPS, type RampName };

export const RAMP_NAMES = Object.keys(RAMP_STOPS) as RampName[];

const tables = new Map<RampName, Uint32Array>();

/** The ramp's 256 colours as RGBA packed in native (little-endian) order, alpha 255. */
export function rampTable(name: RampName): Uint32Array {
  let t = tables.get(name);
  if (t) return t;
  const stops = RAMP_STOPS[name].map((h) => [1, 3, 5].map((i) => Number.parseInt(h.slice(i, i + 2), 16)));
  t = new Uint32Array(256);
  const bytes = new Uint8Array(t.buffer);
  for (let i = 0; i < 256; i++) {
    const pos = (i / 255) * (stops.length - 1);
    const k = Math.min(Math.floor(pos), stops.length - 2);
    const f = pos - k;
    for (let c = 0; c < 3; c++) bytes[i * 4 + c] = Math.round(stops[k]![c]! * (1 - f) + stops[k + 1]![c]! * f);
    bytes[i * 4 + 3] = 255;
  }
  tables.set(name, t);
  return t;
}

/** How an index is drawn: its ramp, and its range (undefined: the field's own min..max). */
export interface RampStyle {
  ramp: RampName;
  range?: [number, number];
}

/**
 * The default style of an index: the normalised differences (catalogue range −1..1: NDVI, NDRE,
 * NDWI, GNDVI, …) diverging red–yellow–green over −1..1; the others (ratios such as CIgreen, ReCI,
 * EVI's −0.5..1.5) viridis over their catalogue range; a custom formula red–yellow–green over the
 * field's own minimum to maximum. `rescale` replaces the range.
 */
export function defaultStyle(index: string, rescale?: [number, number]): RampStyle {
  const entry = index.toLowerCase() === 'custom' ? undefined : findIndex(index);
  const diverging = !entry || (entry.range[0] === -1 && entry.range[1] === 1);
  const range = rescale ?? entry?.range;
  return { ramp: diverging ? 'rdylgn' : 'viridis', ...(range ? { range: [range[0], range[1]] } : {}) };
}

/**
 * RGBA pixels (as packed 32-bit words) of `values` into `out` (zeroed: transparent), NaN (no
 * value) left transparent. With `idx` (−1: nothing there), pixel k of a `width`-wide rectangle at
 * (`x0`, `y0`) of an `outWidth`-wide image takes `values[idx[k]]`; without it, pixel k takes
 * `values[k]`.
 */
export function colourise(
  out: Uint32Array,
  values: Float32Array,
  table: Uint32Array,
  min: number,
  max: number,
  idx?: { idx: Int32Array; x0: number; y0: number; width: number; outWidth: number },
): void {
  // A flat range (a constant custom formula): every value takes the first colour.
  const scale = max > min ? 255 / (max - min) : 0;
  const colour = (v: number) => {
    let i = Math.round((v - min) * scale);
    if (i < 0) i = 0;
    else if (i > 255) i = 255;
    return table[i]!;
  };
  if (!idx) {
    for (let k = 0; k < values.length; k++) {
      const v = values[k]!;
      if (!Number.isNaN(v)) out[k] = colour(v);
    }
    return;
  }
  const { width, outWidth } = idx;
  const rows = idx.idx.length / width;
  for (let j = 0; j < rows; j++) {
    const o = (idx.y0 + j) * outWidth + idx.x0;
    const r = j * width;
    for (let i = 0; i < width; i++) {
      const s = idx.idx[r + i]!;
      if (s < 0) continue;
      const v = values[s]!;
      if (!Number.isNaN(v)) out[o + i] = colour(v);
    }
  }
}
