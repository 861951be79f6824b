/**
 * In-process caches of the index endpoints, one set per database handle (a replica, or a test
 * "replica" on its own handle, has its own). Nothing here can go stale:
 * - field states are used only while the field's stamp, read from the database on every request,
 *   is unchanged (see field-state.ts);
 * - statistics and response bodies are keyed by what determines them: the capture (imagery rows
 *   and their files never change), the hash of the field boundary and the hash of the compiled
 *   formula; statistics answers by the field's state stamp and the query.
 */
import type { Database } from '../platform/database.js';
import { createHash } from 'node:crypto';
import type { CachedStats, FieldState } from './types.js';
import { LRUCache } from 'lru-cache';

/** A short content hash: the cache keys of boundaries, formulas and bodies. */
export const hash = (x: unknown) =>
  createHash('sha256')
    .update(typeof x === 'string' ? x : JSON.stringify(x))
    .digest('base64url')
    .slice(0, 22);

/** A GeoJSON response body: plain, gzip-encoded, or both (each made when first asked for). */
export interface CachedBody {
  raw?: Buffer;
  gzip?: Buffer;
}

const MB = 1_048_576;
/** In whole bytes, at least 1 (lru-cache wants a positive integer; a 1-byte limit keeps no body). */
const bodyLimit = () => {
  const mb = Number(process.env.GEOJSON_CACHE_MB ?? 64);
  return mb > 0 ? Math.max(1, Math.min(Number.MAX_SAFE_INTEGER, Math.floor(mb * MB))) : 1;
};

/** Bound of the statistics answers kept per process (UTF-16 string bytes). */
export const ANSWER_CACHE_BYTES = 16 * MB;

export class IndexCache {
  /** Per `account/field`: boundary, its hash, the captures over it (see field-state.ts). */
  readonly fields = new LRUCache<string, FieldState>({ max: 2_000 });
  /**
   * Per `boundary hash|formula hash`: the statistics by capture id; bounded in captures. A group
   * that grew is re-measured by deleting and setting it again (lru-cache measures a value that is
   * set again as the same object only once).
   */
  readonly stats = new LRUCache<string, Map<string, CachedStats>>({
    maxSize: 200_000,
    sizeCalculation: (g) => g.size + 1,
  });
  /** Whole GET indices bodies with GeoJSON, bounded in bytes (GEOJSON_CACHE_MB, default 64). */
  readonly bodies = new LRUCache<string, CachedBody>({
    maxSize: bodyLimit(),
    sizeCalculation: (b) => (b.raw?.byteLength ?? 0) + (b.gzip?.byteLength ?? 0),
  });
  /**
   * Whole GET indices bodies without GeoJSON (statistics answers), per `account/field|field-state
   * stamp|query`: what the body is made of is the field's state (the stamp changes with the
   * boundary and every coverage row) and the query. A warm request is then answered without
   * choosing the capture, reading the statistics cache or serialising again. Bounded at 16 MiB
   * of string (ANSWER_CACHE_BYTES; a statistics answer is about 500 bytes).
   */
  readonly answers = new LRUCache<string, string>({
    maxSize: ANSWER_CACHE_BYTES,
    sizeCalculation: (s) => Math.max(1, 2 * s.length),
  });
  /** Work under way, so that a burst of identical misses computes once. */
  private readonly running = new Map<string, Promise<unknown>>();

  once<T>(key: string, fn: () => Promise<T>): Promise<T> {
    const cur = this.running.get(key);
    if (cur) return cur as Promise<T>;
    const p = fn().finally(() => this.running.delete(key));
    this.running.set(key, p);
    return p;
  }
}

const caches = new WeakMap<Database, IndexCache>();

export function cacheFor(db: Database): IndexCache {
  let c = caches.get(db);
  if (!c) {
    c = new IndexCache();
    caches.set(db, c);
  }
  return c;
}
