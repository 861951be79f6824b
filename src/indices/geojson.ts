/**
 * The per-pixel GeoJSON of an index result, written by hand: one Polygon feature per field pixel
 * (the pixel's square, reprojected to WGS84), property `value` (a number, or null where masked).
 * JSON.stringify of nested coordinate arrays is several times slower and allocates per pixel;
 * this writes fixed-precision numbers straight into one string.
 */
import { toWgs84 } from '../imagery/crs.js';
import type { FieldWindow } from '../imagery/window-reader.js';

export type PixelGrid = Pick<FieldWindow, 'width' | 'height' | 'epsg' | 'originX' | 'originY' | 'resX' | 'resY'>;

const coord = (x: number) => (Math.round(x * 1e7) / 1e7).toString();
const value = (v: number) => (Number.isNaN(v) ? 'null' : (Math.round(v * 1e6) / 1e6).toString());

export function pixelGeoJson(grid: PixelGrid, values: Float32Array, inside: Uint8Array): string {
  const inv = toWgs84(grid.epsg);
  // Corners are shared by neighbouring pixels: project each grid node once.
  const cols = grid.width + 1;
  const nodes = new Map<number, string>();
  const node = (i: number, j: number): string => {
    const k = j * cols + i;
    let s = nodes.get(k);
    if (s === undefined) {
      const [lon, lat] = inv([grid.originX + i * grid.resX, grid.originY + j * grid.resY]);
      s = `[${coord(lon)},${coord(lat)}]`;
      nodes.set(k, s);
    }
    return s;
  };
  const parts: string[] = ['{"type":"FeatureCollection","features":['];
  let first = true;
  for (let j = 0; j < grid.height; j++) {
    for (let i = 0; i < grid.width; i++) {
      const k = j * grid.width + i;
      if (!inside[k]) continue;
      // Counter-clockwise in lon/lat (RFC 7946): resY < 0, so row j+1 is south of row j.
      const ring = `[${node(i, j + 1)},${node(i + 1, j + 1)},${node(i + 1, j)},${node(i, j)},${node(i, j + 1)}]`;
      parts.push(`${first ? '' : ','}{"type":"Feature","geometry":{"type":"Polygon","coordinates":[${ring}]},"properties":{"value":${value(values[k]!)}}}`);
      first = false;
    }
  }
  parts.push(']}');
  return parts.join('');
}
