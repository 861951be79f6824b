/**
 * Index images, drawn in the compute threads (never on the API thread): the COG of a field's
 * window (imagery/cog-writer.ts), a PNG of it, or a WebMercatorQuad map tile
 * (imagery/web-mercator.ts), coloured with the ramps of indices/ramps.ts, encoded by
 * imagery/png-writer.ts.
 *
 * A layer — the index values over a field's window, NaN where there is no value (outside the
 * field, masked, cloud, ÷0), as the per-pixel GeoJSON has null — and a tile's mapping come with
 * the task when the API thread holds them (it keeps what a thread computed: src/indices/rasters.ts),
 * else from this thread's caches, else they are computed here and sent back with the result. So a
 * warm tile on any thread is a gather and a PNG encode.
 */
import { LRUCache } from 'lru-cache';
import type { FieldRasterResult, RasterLayer, RasterOutput, TileMapping, WindowGrid } from '../compute/tasks.js';
import { writeCog } from '../imagery/cog-writer.js';
import { encodePng } from '../imagery/png-writer.js';
import { TILE_SIZE, tileMap } from '../imagery/web-mercator.js';
import { colourise, rampTable, type RampName } from '../indices/ramps.js';

export type Layer = RasterLayer;

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

/**
 * A layer from the kernel's values: NaN outside the field and wherever the value is not finite,
 * in shared memory (the API thread keeps it and sends it to any thread without a copy).
 */
export function toLayer(grid: WindowGrid, kernelValues: Float32Array, inside: Uint8Array): Layer {
  const values = new Float32Array(new SharedArrayBuffer(kernelValues.byteLength));
  values.set(kernelValues);
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

/** Bytes in an ArrayBuffer of their own (a small Buffer sits in Node's shared pool), to transfer. */
const ownBytes = (b: Uint8Array): Uint8Array =>
  b.byteOffset === 0 && b.byteLength === b.buffer.byteLength ? b : new Uint8Array(b);

/** The transparent tile (encoded once per thread; a copy goes out, as the bytes are transferred). */
let empty: Uint8Array | undefined;

function rangeOf(l: Layer, range?: [number, number]): [number, number] {
  if (range) return range;
  return l.min === null ? [0, 1] : [l.min, l.max!];
}

/** Draws `out` from the layer; a tile from `given` (its mapping, when the caller holds it) or the thread's cache. */
export function renderRaster(l: Layer, out: RasterOutput, given?: TileMapping | false): FieldRasterResult {
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
    return { bytes: ownBytes(encodePng(g.width, g.height, new Uint8Array(rgba.buffer))), window: g, range };
  }
  const m = given ?? tileMap(g, out.z, out.x, out.y);
  const mapped = given === undefined ? { tileMap: m } : {};
  if (!m) {
    empty ??= ownBytes(encodePng(TILE_SIZE, TILE_SIZE, new Uint8Array(TILE_SIZE * TILE_SIZE * 4)));
    return { bytes: empty.slice(), window: g, range, ...mapped };
  }
  const rgba = new Uint32Array(TILE_SIZE * TILE_SIZE);
  colourise(rgba, l.values, table, range[0], range[1], { ...m, outWidth: TILE_SIZE });
  return { bytes: ownBytes(encodePng(TILE_SIZE, TILE_SIZE, new Uint8Array(rgba.buffer))), window: g, range, ...mapped };
}
