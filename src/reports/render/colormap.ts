/**
 * Colour maps of a field as PNG images (pngjs): an index map on a red-yellow-green ramp with masked
 * pixels grey, or management zones in categorical colours; outside the field is transparent.
 * Pixels are enlarged by a whole factor (nearest neighbour) so they stay crisp in the PDF.
 */
import { PNG } from 'pngjs';
import type { IndexRaster } from '../content/raster.js';

type Rgb = [number, number, number];

/** ColorBrewer RdYlGn (5 classes), interpolated linearly. */
const RAMP: Rgb[] = [
  [215, 25, 28],
  [253, 174, 97],
  [255, 255, 191],
  [166, 217, 106],
  [26, 150, 65],
];
export const MASKED_RGB: Rgb = [190, 190, 190];

export function rampColour(f: number): Rgb {
  const x = Math.min(1, Math.max(0, f)) * (RAMP.length - 1);
  const k = Math.min(RAMP.length - 2, Math.floor(x));
  const u = x - k;
  const a = RAMP[k]!;
  const b = RAMP[k + 1]!;
  return [
    Math.round(a[0] + (b[0] - a[0]) * u),
    Math.round(a[1] + (b[1] - a[1]) * u),
    Math.round(a[2] + (b[2] - a[2]) * u),
  ];
}

/** n zone colours from low (red) to high (green) index. */
export function zoneColours(n: number): Rgb[] {
  return Array.from({ length: n }, (_, z) => rampColour(n === 1 ? 1 : z / (n - 1)));
}

export const hex = (c: Rgb) => `#${c.map((v) => v.toString(16).padStart(2, '0')).join('')}`;

/** Colour range for a map: the 2nd and 98th percentiles rounded outwards to 0.05, at least 0.1 wide. */
export function colourRange(sorted: ArrayLike<number>): { lo: number; hi: number } {
  if (!sorted.length) return { lo: 0, hi: 1 };
  const at = (q: number) => sorted[Math.min(sorted.length - 1, Math.max(0, Math.round(q * (sorted.length - 1))))]!;
  let lo = Math.floor(at(0.02) * 20) / 20;
  let hi = Math.ceil(at(0.98) * 20) / 20;
  if (hi - lo < 0.1) {
    const mid = (hi + lo) / 2;
    lo = Math.round((mid - 0.05) * 100) / 100;
    hi = Math.round((mid + 0.05) * 100) / 100;
  }
  return { lo, hi };
}

export function scaleFor(width: number, height: number, target = 720): number {
  return Math.max(1, Math.min(16, Math.floor(target / Math.max(width, height))));
}

function encode(width: number, height: number, scale: number, colourOf: (k: number) => Rgb | null): Buffer {
  const png = new PNG({ width: width * scale, height: height * scale, colorType: 6 });
  const W = width * scale;
  for (let j = 0; j < height; j++) {
    for (let i = 0; i < width; i++) {
      const c = colourOf(j * width + i);
      if (!c) continue;
      for (let dy = 0; dy < scale; dy++) {
        let o = ((j * scale + dy) * W + i * scale) * 4;
        for (let dx = 0; dx < scale; dx++, o += 4) {
          png.data[o] = c[0];
          png.data[o + 1] = c[1];
          png.data[o + 2] = c[2];
          png.data[o + 3] = 255;
        }
      }
    }
  }
  return PNG.sync.write(png, { colorType: 6 });
}

export function indexMapPng(
  r: IndexRaster,
  range: { lo: number; hi: number },
  scale = scaleFor(r.width, r.height),
): Buffer {
  const span = range.hi - range.lo;
  return encode(r.width, r.height, scale, (k) => {
    if (!r.inside[k]) return null;
    const v = r.values[k]!;
    return Number.isNaN(v) ? MASKED_RGB : rampColour((v - range.lo) / span);
  });
}

export function zoneMapPng(
  labels: Int32Array,
  width: number,
  height: number,
  zones: number,
  scale = scaleFor(width, height),
): Buffer {
  const colours = zoneColours(zones);
  return encode(width, height, scale, (k) => (labels[k]! >= 0 ? colours[labels[k]!]! : null));
}
