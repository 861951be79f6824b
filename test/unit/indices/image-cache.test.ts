/**
 * The encoded-image cache of the raster routes (src/indices/rasters.ts): kept by ETag, bounded in
 * bytes, one drawing for concurrent requests of an image, nothing kept when its bound is 0 or
 * when the drawing fails.
 */
import { describe, expect, it } from 'vitest';
import { ImageCache, type Image } from '../../../src/indices/rasters.js';
import { registry } from '../../../src/platform/metrics.js';

/** image_cache_requests_total{result} and image_cache_bytes from the process registry. */
async function metrics(): Promise<{ hit: number; miss: number; bytes: number }> {
  const requests = await registry.getSingleMetric('image_cache_requests_total')!.get();
  const bytes = await registry.getSingleMetric('image_cache_bytes')!.get();
  const of = (result: string) => requests.values.find((v) => v.labels.result === result)?.value ?? 0;
  return { hit: of('hit'), miss: of('miss'), bytes: bytes.values[0]!.value };
}

const window = { width: 1, height: 1, epsg: 32631, originX: 0, originY: 0, resX: 10, resY: -10 };
const image = (bytes: number, fill = 1): Image => ({ bytes: Buffer.alloc(bytes, fill), window });

describe('ImageCache', () => {
  it('draws an image once and sends the kept bytes after', async () => {
    const c = new ImageCache(1_048_576);
    let draws = 0;
    const draw = async () => {
      draws++;
      return image(1000);
    };
    const m0 = await metrics();
    const a = await c.get('"a"', draw);
    const b = await c.get('"a"', draw);
    expect(b).toBe(a);
    expect(draws).toBe(1);
    expect([c.hits, c.misses]).toEqual([1, 1]);
    await c.get('"b"', draw);
    expect(draws).toBe(2);
    const m1 = await metrics();
    expect([m1.hit - m0.hit, m1.miss - m0.miss]).toEqual([1, 2]);
    expect(m1.bytes - m0.bytes).toBe(2 * (1000 + 512));
  });

  it('concurrent requests for an image wait for one drawing', async () => {
    const c = new ImageCache(1_048_576);
    let draws = 0;
    let release!: () => void;
    const gate = new Promise<void>((r) => (release = r));
    const draw = async () => {
      draws++;
      await gate;
      return image(10);
    };
    const all = Promise.all([c.get('"x"', draw), c.get('"x"', draw), c.get('"x"', draw)]);
    release();
    const [a, b, d] = await all;
    expect(draws).toBe(1);
    expect([c.hits, c.misses], 'the two that waited count as hits').toEqual([2, 1]);
    expect(b).toBe(a);
    expect(d).toBe(a);
  });

  it('stays within its bound in bytes, the least recently used going first', async () => {
    const c = new ImageCache(100_000);
    for (let i = 0; i < 20; i++) await c.get(`"${i}"`, async () => image(10_000, i));
    expect(c.size).toBeLessThanOrEqual(100_000);
    let redrawn = 0;
    await c.get('"19"', async () => {
      redrawn++;
      return image(10_000);
    });
    await c.get('"0"', async () => {
      redrawn++;
      return image(10_000);
    });
    expect(redrawn, 'the last one kept, the first one evicted').toBe(1);
  });

  it('keeps nothing larger than an eighth of its bound, nothing with bound 0, nothing that failed', async () => {
    for (const [bound, bytes] of [
      [80_000, 20_000],
      [0, 10],
    ] as const) {
      const c = new ImageCache(bound);
      let draws = 0;
      const draw = async () => {
        draws++;
        return image(bytes);
      };
      await c.get('"big"', draw);
      await c.get('"big"', draw);
      expect(draws).toBe(2);
      expect(c.size).toBe(0);
    }
    const c = new ImageCache(1_048_576);
    await expect(c.get('"e"', async () => Promise.reject(new Error('refused')))).rejects.toThrow('refused');
    expect((await c.get('"e"', async () => image(5))).bytes.length).toBe(5);
  });
});
