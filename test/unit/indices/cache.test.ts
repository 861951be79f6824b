/** The bounded caches of the index endpoints (src/indices/cache.ts, src/imagery/pixel-geojson.ts). */
import { LRUCache } from 'lru-cache';
import { describe, expect, it } from 'vitest';

// The caches of index bodies, statistics and GeoJSON grids are lru-cache instances bounded by a
// size: what they rely on is checked here.
describe('LRUCache bounded by size', () => {
  it('keeps the most recently used entries within the size limit', () => {
    const lru = new LRUCache<string, string>({ maxSize: 10, sizeCalculation: (s) => s.length });
    lru.set('a', 'aaaa');
    lru.set('b', 'bbbb');
    expect(lru.get('a')).toBe('aaaa'); // a is now the most recent
    lru.set('c', 'cccc'); // 12 > 10: b goes
    expect(lru.get('b')).toBeUndefined();
    expect(lru.get('a')).toBe('aaaa');
    expect(lru.calculatedSize).toBe(8);
    lru.set('big', 'x'.repeat(11)); // larger than the limit: not kept, nothing evicted
    expect(lru.size).toBe(2);
    lru.set('a', 'aaaaaaa'); // re-measured: 7 + 4 > 10, c goes
    expect(lru.get('c')).toBeUndefined();
    expect(lru.calculatedSize).toBe(7);
  });

  it('re-measures an object that grew only when deleted and set again', () => {
    const lru = new LRUCache<string, Map<string, number>>({ maxSize: 5, sizeCalculation: (g) => g.size + 1 });
    const g = new Map<string, number>();
    lru.set('g', g);
    lru.set('h', new Map());
    g.set('x', 1).set('y', 2);
    lru.set('g', g);
    expect(lru.calculatedSize).toBe(2); // the same object set again is not measured again
    lru.delete('g');
    lru.set('g', g); // 3 + 1: still within 5, h stays
    expect(lru.calculatedSize).toBe(4);
    g.set('z', 3);
    lru.delete('g');
    lru.set('g', g); // 4 + 1 = 5
    expect([...lru.keys()]).toEqual(['g', 'h']);
    g.set('w', 4);
    lru.delete('g');
    lru.set('g', g); // 5 + 1 > 5: h goes
    expect(lru.has('h')).toBe(false);
    expect(lru.calculatedSize).toBe(5);
  });
});
