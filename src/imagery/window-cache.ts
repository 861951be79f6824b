/**
 * A bounded LRU of decoded field windows (per thread), keyed by capture, boundary and bands, so
 * that repeated requests for a field do no decoding at all. Sized in bytes of pixel data
 * (WINDOW_CACHE_MB per worker thread, default 128).
 */
import { createHash } from 'node:crypto';
import type { FieldWindow } from './window-reader.js';

const LIMIT = Math.max(0, Number(process.env.WINDOW_CACHE_MB ?? 128)) * 1_048_576;
const entries = new Map<string, { win: FieldWindow; bytes: number }>();
let total = 0;
export const windowCacheStats = { hits: 0, misses: 0 };

/** The mask and weighting options of the read belong in the key when given (the defaults keep the old key). */
export function windowKey(capture: unknown, boundary: unknown, bands: string[], read?: object): string {
  const parts: unknown[] = [capture, boundary, [...bands].sort()];
  if (read && Object.keys(read).length) parts.push(read);
  return createHash('sha256').update(JSON.stringify(parts)).digest('base64url');
}

function sizeOf(w: FieldWindow): number {
  let b = w.inside.byteLength + w.valid.byteLength + (w.weights?.byteLength ?? 0) + (w.partial?.byteLength ?? 0);
  for (const band of Object.values(w.bands)) b += band!.data.byteLength;
  return b;
}

export function getWindow(key: string): FieldWindow | undefined {
  const e = entries.get(key);
  if (!e) {
    windowCacheStats.misses++;
    return undefined;
  }
  windowCacheStats.hits++;
  entries.delete(key);
  entries.set(key, e); // most recently used last
  return e.win;
}

export function putWindow(key: string, win: FieldWindow): void {
  const bytes = sizeOf(win);
  if (bytes > LIMIT) return;
  const old = entries.get(key);
  if (old) {
    total -= old.bytes;
    entries.delete(key);
  }
  entries.set(key, { win, bytes });
  total += bytes;
  for (const [k, e] of entries) {
    if (total <= LIMIT) break;
    entries.delete(k);
    total -= e.bytes;
  }
}
