/**
 * Decompression-bomb defence, shared by the structure check (tiff-structure.ts), the block decoder
 * and the decoders registered with geotiff.js: what a file may declare (IMAGERY_MAX_PIXELS,
 * IMAGERY_MAX_BLOCKS, IMAGERY_MAX_BLOCK_BYTES) and how many bytes one compute task may decode
 * (IMAGERY_MAX_DECODED_BYTES). A refusal is an ImageryLimitError whose message starts with
 * `[code] `: it crosses the worker boundary as text, and the registration turns the code into the
 * problem's `errors[].code` (service.ts).
 */
import { AsyncLocalStorage } from 'node:async_hooks';
import { imageryLimits, type ImageryLimits } from '../platform/config.js';

export type { ImageryLimits };

export type LimitCode =
  | 'decompression_bomb'
  | 'block_too_large'
  | 'too_many_blocks'
  | 'image_too_large'
  | 'ifd_loop'
  | 'too_many_ifds'
  | 'header_too_large'
  | 'decode_limit'
  | 'unsupported_compression';

export class ImageryLimitError extends Error {
  constructor(
    readonly code: LimitCode,
    reason: string,
  ) {
    super(`[${code}] ${reason}`);
    this.name = 'ImageryLimitError';
  }
}

/** A block whose data decodes to more bytes than it declares. */
export function decompressionBomb(codec: string, bytes: number): ImageryLimitError {
  return new ImageryLimitError(
    'decompression_bomb',
    `a strip or tile's ${codec} data decodes to more than its declared ${bytes} bytes (a decompression bomb)`,
  );
}

/** `[code] reason` → code and reason, for messages that crossed a thread boundary. */
export function limitOf(message: string): { code: LimitCode; reason: string } | null {
  const m = /^\[([a-z_]+)\] (.*)$/s.exec(message);
  return m ? { code: m[1] as LimitCode, reason: m[2]! } : null;
}

let cached: { env: string; limits: ImageryLimits } | undefined;

/** This thread's limits, from its environment. */
export function decodeLimits(): ImageryLimits {
  const env = ['IMAGERY_MAX_PIXELS', 'IMAGERY_MAX_BLOCKS', 'IMAGERY_MAX_BLOCK_BYTES', 'IMAGERY_MAX_DECODED_BYTES']
    .map((k) => process.env[k] ?? '')
    .join(',');
  if (cached?.env !== env) cached = { env, limits: imageryLimits() };
  return cached.limits;
}

/**
 * The decoded bytes a block may have, checked before anything is allocated for it.
 * `what` names the block in the refusal ("tile 3").
 */
export function checkBlockBytes(bytes: number, what: string): void {
  const { maxBlockBytes } = decodeLimits();
  if (bytes > maxBlockBytes)
    throw new ImageryLimitError(
      'block_too_large',
      `${what} declares ${bytes} decoded bytes, more than IMAGERY_MAX_BLOCK_BYTES (${maxBlockBytes})`,
    );
}

const budget = new AsyncLocalStorage<{ left: number; max: number }>();

/**
 * Runs `fn` with a budget of IMAGERY_MAX_DECODED_BYTES: every block decoded inside it (on this
 * path of async calls, including geotiff.js's readRasters) is charged its declared size first.
 */
export function withDecodeBudget<T>(fn: () => Promise<T>): Promise<T> {
  const max = decodeLimits().maxDecodedBytes;
  return budget.run({ left: max, max }, fn);
}

/** Charges `bytes` to the current budget (none outside withDecodeBudget), refusing past it. */
export function spendDecoded(bytes: number): void {
  const b = budget.getStore();
  if (!b) return;
  if (bytes > b.left)
    throw new ImageryLimitError(
      'decode_limit',
      `reading it would decode more than IMAGERY_MAX_DECODED_BYTES (${b.max} bytes) for one request`,
    );
  b.left -= bytes;
}
