/**
 * Rasterises polygons (rings in pixel coordinates of a window) by pixel centres with the even-odd
 * rule over all rings: holes and multipolygons included, exactly like GDAL's default rasterize
 * (ALL_TOUCHED=FALSE) and a plain ray cast. A scanline per row: crossings of the row's centre
 * line with every edge, sorted; centres between pairs are inside.
 */
export type Ring = Array<[number, number]>;

/**
 * `rings` are in pixel units of the window: x = column, y = row, pixel (i, j) has its centre at
 * (i + 0.5, j + 0.5). Returns width × height bytes, 1 inside.
 */
export function rasterizeRings(rings: Ring[], width: number, height: number): Uint8Array {
  const mask = new Uint8Array(width * height);
  const xs: number[] = [];
  for (let j = 0; j < height; j++) {
    const y = j + 0.5;
    xs.length = 0;
    for (const ring of rings) {
      for (let k = 0, n = ring.length; k < n - 1; k++) {
        const a = ring[k]!;
        const b = ring[k + 1]!;
        const x1 = a[0];
        const y1 = a[1];
        const x2 = b[0];
        const y2 = b[1];
        if (y1 > y !== y2 > y) xs.push(x1 + ((y - y1) * (x2 - x1)) / (y2 - y1));
      }
    }
    if (xs.length < 2) continue;
    // Two crossings (a convex row, the usual case) need no sort call
    if (xs.length === 2) {
      if (xs[0]! > xs[1]!) xs.reverse();
    } else xs.sort((a, b) => a - b);
    for (let p = 0; p + 1 < xs.length; p += 2) {
      // centre x is inside when xs[p] <= x < xs[p+1]  (an odd number of crossings lies right of it)
      const from = Math.max(0, Math.ceil(xs[p]! - 0.5));
      const to = Math.min(width - 1, Math.ceil(xs[p + 1]! - 0.5) - 1);
      if (to >= from) mask.fill(1, j * width + from, j * width + to + 1);
    }
  }
  return mask;
}
