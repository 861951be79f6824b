/**
 * Reads a window of one sample of a GeoTIFF image by reading the raw bytes of the blocks it
 * touches through the image's RasterSource (one read for all of them: the source merges
 * neighbouring ranges), decoding each block (block-decoder.ts) and copying its rows straight into
 * the output typed array. geotiff.js's readRasters instead reads every sample through a DataView
 * call, which capped it at 82 Mpx/s on an uncompressed 4096² uint16 file where this path does
 * several times that (docs/compute-engine.md, "Reading rasters").
 *
 * The image's size, tile size and sample types come from geotiff.js's public getters; the byte
 * order, compression, predictor and the block offsets and byte counts from the structure check
 * (tiff-structure.ts), which has read them already. Files this
 * path does not handle (big-endian, other compressions such as JPEG or ZSTD, the floating-point
 * predictor, sub-byte samples) return null and the caller uses readRasters.
 */
import { canDecode, decodeBlock, type BlockLayout } from './block-decoder.js';
import { recordDecode, recordDecodeError } from './metrics.js';
import type { RasterImage } from './raster.js';

/** Compressed bytes read at once (a batch of blocks: the next batch is read while one decodes). */
const BATCH_BYTES = 2 * 1_048_576;

export type SampleArray = Uint8Array | Int8Array | Uint16Array | Int16Array | Uint32Array | Int32Array | Float32Array;

function arrayFor(
  format: number,
  bytes: number,
  buffer: ArrayBuffer | number,
  byteOffset = 0,
  length?: number,
): SampleArray | null {
  const b = buffer as ArrayBuffer;
  const make = <T>(C: new (a: ArrayBuffer, o: number, l?: number) => T, N: new (n: number) => T): T =>
    typeof buffer === 'number' ? new N(buffer) : new C(b, byteOffset, length);
  if (format === 1 && bytes === 1) return make(Uint8Array, Uint8Array);
  if (format === 2 && bytes === 1) return make(Int8Array, Int8Array);
  if (format === 1 && bytes === 2) return make(Uint16Array, Uint16Array);
  if (format === 2 && bytes === 2) return make(Int16Array, Int16Array);
  if (format === 1 && bytes === 4) return make(Uint32Array, Uint32Array);
  if (format === 2 && bytes === 4) return make(Int32Array, Int32Array);
  if (format === 3 && bytes === 4) return make(Float32Array, Float32Array);
  return null;
}

/** The block layout of an image when the fast path can read it, else null. */
export function rawLayout(
  raster: RasterImage,
): (Omit<BlockLayout, 'rows'> & { format: number; tileHeight: number; tiled: boolean; planar: 1 | 2 }) | null {
  const { image, structure } = raster;
  if (!structure.littleEndian || !structure.blocks) return null;
  const blocks = structure.blocks;
  const samples = image.getSamplesPerPixel();
  const bits = image.getBitsPerSample(0);
  const format = image.getSampleFormat(0);
  for (let s = 1; s < samples; s++) {
    if (image.getBitsPerSample(s) !== bits || image.getSampleFormat(s) !== format) return null;
  }
  if (bits !== 8 && bits !== 16 && bits !== 32) return null;
  const bytesPerSample = (bits / 8) as 1 | 2 | 4;
  if (!arrayFor(format, bytesPerSample, 0)) return null;
  const { compression, predictor, planar } = blocks;
  if (planar !== 1 && planar !== 2) return null;
  if (!canDecode({ compression, predictor, bytesPerSample })) return null;
  return {
    compression,
    predictor,
    width: image.getTileWidth(),
    tileHeight: image.getTileHeight(),
    samples: planar === 2 ? 1 : samples,
    bytesPerSample,
    format,
    tiled: blocks.tiled,
    planar,
  };
}

export interface RawReadOptions {
  /** Value of pixels in blocks the file leaves out (byte count 0). Default 0. */
  fill?: number;
  signal?: AbortSignal;
  /** Where to write the window (row-major, the file's sample type, at least its size): e.g. kernel memory. */
  into?: SampleArray;
}

/**
 * The part of one decoded block inside a window: sample `s` of the pixel (x, y), for
 * cx0 ≤ x < cx1 and cy0 ≤ y < cy1 (image pixels), is `data[((y - by0) * width + (x - bx0)) * spp + inner]`.
 */
export interface BlockPart {
  /** The block's samples in the file's type; valid only during the visit (decoder memory). */
  data: SampleArray;
  /** Pixels per row of `data`, samples per pixel, and the sample's place in a pixel. */
  width: number;
  spp: number;
  inner: number;
  /** The block's top-left pixel in the image. */
  bx0: number;
  by0: number;
  cx0: number;
  cx1: number;
  cy0: number;
  cy1: number;
}

export interface VisitOptions {
  /** Value of pixels in blocks the file leaves out (byte count 0). Default 0. */
  fill?: number;
  signal?: AbortSignal;
  /**
   * Whether the part [cx0, cx1) × [cy0, cy1) of a block is needed: a block none of whose parts is
   * wanted is neither read nor decoded (and never visited). Default: every block.
   */
  want?: (cx0: number, cy0: number, cx1: number, cy1: number) => boolean;
}

/**
 * Visits every block of sample `sample` (0-based) meeting [x0, x1) × [y0, y1), each read and
 * decoded once, with the part of it inside the window; blocks are visited in file order of
 * their batches, each exactly once. Returns false (and visits nothing) when the file needs
 * geotiff.js's general reader.
 */
export async function visitWindowRaw(
  raster: RasterImage,
  window: [number, number, number, number],
  sample: number,
  visit: (part: BlockPart) => void,
  opts: VisitOptions = {},
): Promise<boolean> {
  const layout = rawLayout(raster);
  if (!layout) return false;
  const { image, source } = raster;
  const { offsets, counts } = raster.structure.blocks!;
  const tiled = layout.tiled;
  const planar = layout.planar;
  const [x0, y0, x1, y1] = window;
  const { fill = 0, signal, want } = opts;
  const tw = layout.width;
  const th = layout.tileHeight;
  const height = image.getHeight();
  const width = image.getWidth();
  const across = Math.ceil(width / tw);
  const down = Math.ceil(height / th);
  const spp = layout.samples;
  const inner = planar === 2 ? 0 : sample;
  /** The part of block (bx, by) inside the window. */
  const partOf = (data: SampleArray, bx: number, by: number, rows: number): BlockPart => {
    const bx0 = bx * tw;
    const by0 = by * th;
    return {
      data,
      width: tw,
      spp,
      inner,
      bx0,
      by0,
      cx0: Math.max(x0, bx0),
      cx1: Math.min(x1, bx0 + tw, width),
      cy0: Math.max(y0, by0),
      cy1: Math.min(y1, by0 + rows, height),
    };
  };
  // Strips: the last one holds only the rows left; tiles are always full size.
  const rowsOf = (by: number) => (tiled ? th : Math.min(th, height - by * th));
  const blocks: Array<{ bx: number; by: number; index: number; offset: number; length: number }> = [];
  for (let by = Math.floor(y0 / th); by <= Math.floor((y1 - 1) / th); by++) {
    for (let bx = Math.floor(x0 / tw); bx <= Math.floor((x1 - 1) / tw); bx++) {
      const index = (planar === 2 ? sample * across * down : 0) + by * across + bx;
      if (index >= offsets.length || index >= counts.length)
        throw new Error(`block ${index} is missing from the offsets table`);
      if (want) {
        const bx0 = bx * tw;
        const by0 = by * th;
        const cy1 = Math.min(y1, by0 + rowsOf(by), height);
        if (!want(Math.max(x0, bx0), Math.max(y0, by0), Math.min(x1, bx0 + tw, width), cy1)) continue;
      }
      blocks.push({ bx, by, index, offset: Number(offsets[index]), length: Number(counts[index]) });
    }
  }
  let filled: SampleArray | undefined;
  for (const b of blocks) {
    if (b.length > 0) continue;
    filled ??= arrayFor(layout.format, layout.bytesPerSample, tw * th * spp)!.fill(fill);
    visit(partOf(filled, b.bx, b.by, rowsOf(b.by)));
  }
  const present = blocks.filter((b) => b.length > 0);
  // Read in batches of about BATCH_BYTES, the next batch read while this one decodes: memory stays
  // bounded and the compressed bytes are still in the CPU cache when they are decoded.
  const batches: Array<typeof present> = [];
  for (let i = 0, bytes = Infinity; i < present.length; i++) {
    if (bytes >= BATCH_BYTES) {
      batches.push([]);
      bytes = 0;
    }
    batches.at(-1)!.push(present[i]!);
    bytes += present[i]!.length;
  }
  let decodeMs = 0;
  const decodeBatch = (batch: typeof present, data: Uint8Array[]): void => {
    batch.forEach((b, k) => {
      const rows = rowsOf(b.by);
      const compressed = data[k]!;
      if (compressed.length < b.length) throw new Error(`block ${b.index} is cut short: the file is truncated`);
      const t0 = performance.now();
      const bytes = decodeBlock(compressed.subarray(0, b.length), { ...layout, rows }, { declaredRows: th });
      decodeMs += performance.now() - t0;
      // The decoded bytes may sit at any offset of their buffer; copy them out only when unaligned
      // (a copy: a Buffer's slice() is a view).
      const aligned = bytes.byteOffset % layout.bytesPerSample === 0 ? bytes : new Uint8Array(bytes);
      const block = arrayFor(
        layout.format,
        layout.bytesPerSample,
        aligned.buffer as ArrayBuffer,
        aligned.byteOffset,
        aligned.byteLength / layout.bytesPerSample,
      )!;
      visit(partOf(block, b.bx, b.by, rows));
    });
  };
  let next = batches.length ? source.read(batches[0]!, signal) : undefined;
  for (let n = 0; n < batches.length; n++) {
    const batch = batches[n]!;
    const data = await next!;
    next = n + 1 < batches.length ? source.read(batches[n + 1]!, signal) : undefined;
    // An unread batch must not reject unobserved when this one fails.
    next?.catch(() => {});
    try {
      decodeBatch(batch, data);
    } catch (err) {
      recordDecodeError(layout.compression);
      throw err;
    }
  }
  recordDecode(layout.compression, decodeMs / 1000);
  return true;
}

/**
 * The pixels of sample `sample` (0-based) in [x0, x1) × [y0, y1), row-major, or null when the
 * file needs geotiff.js's general reader.
 */
export async function readWindowRaw(
  raster: RasterImage,
  window: [number, number, number, number],
  sample: number,
  opts: RawReadOptions = {},
): Promise<SampleArray | null> {
  const layout = rawLayout(raster);
  if (!layout) return null;
  const [x0, y0, x1, y1] = window;
  const ww = x1 - x0;
  const wh = y1 - y0;
  const fresh = arrayFor(layout.format, layout.bytesPerSample, 0)!;
  if (opts.into && (opts.into.constructor !== fresh.constructor || opts.into.length < ww * wh)) {
    throw new Error(`the target array must be a ${fresh.constructor.name} of at least ${ww * wh} elements`);
  }
  const out = opts.into ?? arrayFor(layout.format, layout.bytesPerSample, ww * wh)!;
  await visitWindowRaw(
    raster,
    window,
    sample,
    ({ data, width, spp, inner, bx0, by0, cx0, cx1, cy0, cy1 }) => {
      for (let y = cy0; y < cy1; y++) {
        const src = ((y - by0) * width + (cx0 - bx0)) * spp + inner;
        const dst = (y - y0) * ww + (cx0 - x0);
        if (spp === 1) {
          out.set(data.subarray(src, src + (cx1 - cx0)), dst);
        } else {
          for (let x = 0, s = src; x < cx1 - cx0; x++, s += spp) out[dst + x] = data[s]!;
        }
      }
    },
    opts,
  );
  return out;
}

/** readWindowRaw when it can read the file, else geotiff.js's readRasters (with the registered decoders). */
export async function readWindow(
  raster: RasterImage,
  window: [number, number, number, number],
  sample: number,
  signal?: AbortSignal,
): Promise<ArrayLike<number>> {
  const { image } = raster;
  const fast = await readWindowRaw(raster, window, sample, { fill: image.getGDALNoData() ?? 0, signal });
  if (fast) return fast;
  // geotiff.js reads and decodes together: the whole call is the decode time here.
  const t0 = performance.now();
  const compression = Number(image.getFileDirectory().getValue('Compression') ?? 1);
  const r = (await image.readRasters({ window, samples: [sample], interleave: false, signal }).catch((err: unknown) => {
    // A read cut short (abort, I/O) is not a decode error; geotiff.js mixes both, so only what
    // was not aborted is counted.
    if (!signal?.aborted) recordDecodeError(compression);
    throw err;
  })) as unknown as ArrayLike<number>[];
  recordDecode(compression, (performance.now() - t0) / 1000);
  return r[0]!;
}
