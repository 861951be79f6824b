/**
 * Index images, drawn in the compute threads (never on the API thread): the COG of a field's
 * window (imagery/cog-writer.ts), a PNG of it, or a WebMercatorQuad map tile
 * (imagery/web-mercator.ts), coloured with the ramps of indices/ramps.ts and encoded by pngjs.
 *
 * A layer — the index values over a field's window, NaN where there is no value (outside the
 * field, masked, cloud, ÷0), as the per-pixel GeoJSON has null — is kept per thread by the key the
 * API thread gives (capture, boundary, formula), so tiles of a field after the first cost a lookup,
 * the tile's cached mapping, a gather and a PNG encode.
 */
import { LRUCache } from 'lru-cache';
import { PNG } from 'pngjs';
import type { FieldRasterResult, RasterOutput, WindowGrid } from '../compute/tasks.js';
import { writeCog } from '../imagery/cog-writer.js';
import { TILE_SIZE, tileMap } from '../imagery/web-mercator.js';
import { colourise, rampTable, type RampName } from '../indices/ramps.js';

export interface Layer {
  grid: WindowGrid;
  values: Float32Array;
  /** Smallest and largest value (null: none). */
  min: number | null;
  max: number | null;
}

const layers = new LRUCache<string, Layer>({
  maxSize: 64 * 1_048_576,
  sizeCalculation: (l) => l.values.byteLength + 256,
});

/** The layer under `key`, or the one `make` computes (then kept). */
export async function layerFor(key: string, make: () => Promise<Layer>): Promise<Layer> {
  const hit = layers.get(key);
  if (hit) return hit;
  const l = await make();
  layers.set(key, l);
  return l;
}

/** A layer from the kernel's values: NaN outside the field and wherever the value is not finite. */
export function toLayer(grid: WindowGrid, values: Float32Array, inside: Uint8Array): Layer {
  let min = Infinity;
  let max = -Infinity;
  for (let k = 0; k < values.length; k++) {
    const v = values[k]!;
    if (!inside[k] || !Number.isFinite(v)) values[k] = Number.NaN;
    else {
      if (v < min) min = v;
      if (v > max) max = v;
    }
  }
  return { grid, values, min: min <= max ? min : null, max: min <= max ? max : null };
}

/** PNG encoding: RGBA, 8 bits, the Sub filter on every row, DEFLATE level 6 with the RLE strategy. */
function encodePng(width: number, height: number, rgba: Uint8Array): Uint8Array {
  const png = PNG.sync.write(
    { width, height, data: Buffer.from(rgba.buffer, rgba.byteOffset, rgba.byteLength) } as PNG,
    {
      filterType: 1,
      deflateLevel: 6,
      deflateStrategy: 3,
    },
  );
  return ownBytes(png);
}

/** Bytes in an ArrayBuffer of their own (a small Buffer sits in Node's shared pool), to transfer. */
const ownBytes = (b: Uint8Array): Uint8Array =>
  b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : new Uint8Array(b);

/** The transparent tile (encoded once per thread; a copy goes out, as the bytes are transferred). */
let empty: Uint8Array | undefined;

function rangeOf(l: Layer, range?: [number, number]): [number, number] {
  if (range) return range;
  return l.min === null ? [0, 1] : [l.min, l.max!];
}

export function renderRaster(l: Layer, out: RasterOutput): FieldRasterResult {
  const g = l.grid;
  if (out.kind === 'grid') return { window: g };
  if (out.kind === 'tif') {
    if (typeof g.epsg !== 'number')
      return {
        window: g,
        refused: `the capture's CRS is user-defined (${g.epsg}), not an EPSG code: the GeoTIFF cannot declare it; use format=png with its world file`,
      };
    const bytes = writeCog({
      width: g.width,
      height: g.height,
      data: l.values,
      epsg: g.epsg,
      originX: g.originX,
      originY: g.originY,
      resX: g.resX,
      resY: g.resY,
      metadata: out.metadata,
      description: out.description,
    });
    return { bytes: ownBytes(bytes), window: g };
  }
  const range = rangeOf(l, out.range);
  const table = rampTable(out.ramp as RampName);
  if (out.kind === 'png') {
    const rgba = new Uint32Array(g.width * g.height);
    colourise(rgba, l.values, table, range[0], range[1]);
    return { bytes: encodePng(g.width, g.height, new Uint8Array(rgba.buffer)), window: g, range };
  }
  const m = tileMap(g, out.z, out.x, out.y);
  if (!m) {
    empty ??= encodePng(TILE_SIZE, TILE_SIZE, new Uint8Array(TILE_SIZE * TILE_SIZE * 4));
    return { bytes: empty.slice(), window: g, range };
  }
  const rgba = new Uint32Array(TILE_SIZE * TILE_SIZE);
  const w = m.width;
  colourise(rgba, l.values, table, range[0], range[1], m.idx, (k) => {
    const j = (k / w) | 0;
    return (m.y0 + j) * TILE_SIZE + m.x0 + (k - j * w);
  });
  return { bytes: encodePng(TILE_SIZE, TILE_SIZE, new Uint8Array(rgba.buffer)), window: g, range };
}
