/**
 * Decodes one TIFF block (tile or strip) to its raw little-endian sample bytes: DEFLATE through
 * node:zlib, LZW in WebAssembly (assembly/decode.ts), the horizontal predictor undone in
 * WebAssembly. One instance per thread; the returned bytes are a view into its memory, valid until
 * the next call (callers copy the rows they need straight out of it).
 *
 * Nothing decodes past the block's declared size: DEFLATE inflates with that as its maximum
 * output, LZW stops there, and data that goes on is refused as a decompression bomb, before the
 * memory is spent. The declared size itself is checked against IMAGERY_MAX_BLOCK_BYTES and charged
 * to the request's IMAGERY_MAX_DECODED_BYTES (decode-limits.ts).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { inflateSync } from 'node:zlib';
import { wasmDir } from '../platform/paths.js';
import { checkBlockBytes, decompressionBomb, spendDecoded } from './decode-limits.js';

/** TIFF Compression tag values this decoder handles. */
export const COMPRESSION = { none: 1, lzw: 5, deflate: 8, adobeDeflate: 32946 } as const;
const SUPPORTED = new Set<number>(Object.values(COMPRESSION));

export interface BlockLayout {
  compression: number;
  /** TIFF Predictor tag: 1 none, 2 horizontal differencing. */
  predictor: number;
  /** Pixels per row of the block, rows in the block. */
  width: number;
  rows: number;
  /** Samples per pixel stored in the block (1 for planar configuration 2). */
  samples: number;
  bytesPerSample: 1 | 2 | 4;
}

export class BlockDecodeError extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'BlockDecodeError';
  }
}

interface DecodeExports {
  memory: WebAssembly.Memory;
  workspace(): number;
  lzwDecode(src: number, srcLen: number, dst: number, dstLen: number): number;
  unpredict(ptr: number, width: number, rows: number, samples: number, bytesPerSample: number): number;
}

let wasm: DecodeExports | undefined;

function exportsOf(): DecodeExports {
  if (!wasm) {
    const file = path.join(wasmDir, 'decode.wasm');
    let bytes: Buffer;
    try {
      bytes = readFileSync(file);
    } catch {
      throw new Error(`${file} is missing: run npm run build`);
    }
    wasm = new WebAssembly.Instance(new WebAssembly.Module(bytes), {}).exports as unknown as DecodeExports;
  }
  return wasm;
}

/** Makes [workspace, workspace + bytes) addressable and returns its start. */
function reserve(bytes: number): number {
  const w = exportsOf();
  const base = w.workspace();
  const need = base + bytes;
  const have = w.memory.buffer.byteLength;
  if (need > have) w.memory.grow(Math.ceil((need - have) / 65536));
  return base;
}

export function canDecode(layout: Pick<BlockLayout, 'compression' | 'predictor' | 'bytesPerSample'>): boolean {
  return (
    SUPPORTED.has(layout.compression) &&
    (layout.predictor === 1 || layout.predictor === 2) &&
    [1, 2, 4].includes(layout.bytesPerSample)
  );
}

/**
 * The decoded bytes of one block (exactly width × rows × samples × bytesPerSample of them).
 * `declaredRows` (default `rows`) is what the file declares the block to hold: the last strip of an
 * image may carry more rows than are left, and only decoding past the declared size is a bomb.
 * Throws BlockDecodeError when the data is corrupt or shorter than the block, ImageryLimitError
 * when it decodes to more than it declares or the block is over the limits.
 */
export function decodeBlock(
  compressed: Uint8Array,
  layout: BlockLayout,
  opts: { partial?: boolean; declaredRows?: number } = {},
): Uint8Array {
  const rowBytes = layout.width * layout.samples * layout.bytesPerSample;
  let size = rowBytes * layout.rows;
  const bound = Math.max(size, rowBytes * (opts.declaredRows ?? layout.rows));
  checkBlockBytes(bound, 'a strip or tile');
  spendDecoded(bound);
  const w = exportsOf();
  let dst: number;
  if (layout.compression === COMPRESSION.lzw) {
    // [decoded block + 16 slack][compressed + 8 slack]: the decoder writes and reads a little past the ends.
    const srcAt = (bound + 16 + 7) & ~7;
    const base = reserve(srcAt + compressed.length + 8);
    dst = base;
    const mem = new Uint8Array(w.memory.buffer);
    mem.set(compressed, base + srcAt);
    mem.fill(0, base + srcAt + compressed.length, base + srcAt + compressed.length + 8);
    const n = w.lzwDecode(base + srcAt, compressed.length, dst, bound);
    if (n === -2) throw decompressionBomb('LZW', bound);
    if (n < 0) throw new BlockDecodeError('invalid LZW code: the data is corrupt');
    if (n < size) {
      // A strip at the bottom of an image may hold fewer rows than RowsPerStrip says.
      if (!opts.partial || n < rowBytes)
        throw new BlockDecodeError(`LZW data ends after ${n} of ${size} bytes: the data is corrupt or truncated`);
      size = n - (n % rowBytes);
    }
  } else {
    let raw: Uint8Array = compressed;
    if (layout.compression === COMPRESSION.deflate || layout.compression === COMPRESSION.adobeDeflate) {
      try {
        // One output chunk of the block's size: the default 16 KiB chunks are concatenated afterwards (~30 % slower).
        raw = inflateSync(compressed, { chunkSize: Math.max(64, bound + 64), maxOutputLength: Math.max(1, bound) });
      } catch (err) {
        if ((err as { code?: string }).code === 'ERR_BUFFER_TOO_LARGE') throw decompressionBomb('DEFLATE', bound);
        throw new BlockDecodeError(
          `DEFLATE data cannot be inflated (${(err as Error).message}): the data is corrupt or truncated`,
        );
      }
    } else if (layout.compression !== COMPRESSION.none) {
      throw new BlockDecodeError(`compression ${layout.compression} is not handled here`);
    }
    if (raw.length < size) {
      if (!opts.partial || raw.length < rowBytes)
        throw new BlockDecodeError(`the block has ${raw.length} of ${size} bytes: the data is corrupt or truncated`);
      size = raw.length - (raw.length % rowBytes);
    }
    if (layout.predictor === 1) return raw.subarray(0, size);
    dst = reserve(size);
    new Uint8Array(w.memory.buffer).set(raw.subarray(0, size), dst);
  }
  if (
    layout.predictor === 2 &&
    w.unpredict(dst, layout.width, size / rowBytes, layout.samples, layout.bytesPerSample) < 0
  ) {
    throw new BlockDecodeError(`predictor 2 with ${layout.bytesPerSample}-byte samples is not supported`);
  }
  return new Uint8Array(w.memory.buffer, dst, size);
}
