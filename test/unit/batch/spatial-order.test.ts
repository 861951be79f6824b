/**
 * The Z-order of a batch job's features (src/batch/service.ts): every feature kept once, nearby
 * features in the same chunk, those without a place (invalid polygons) last; and at any count
 * BATCH_MAX_FEATURES allows (up to 1,000,000), where spreading the centres into Math.min threw
 * "Maximum call stack size exceeded" from about 120,000 on.
 */
import { describe, expect, it } from 'vitest';
import { spatialOrder, type NewFeature } from '../../../src/batch/service.js';

/** n features on a square grid of side `side` cells over [4, 5] × [50, 51], row by row; every 97th invalid. */
function grid(n: number, side: number): NewFeature[] {
  return Array.from({ length: n }, (_, k) => ({
    feature_id: `f${k}`,
    field_id: null,
    boundary: null,
    error: k % 97 === 3 ? 'invalid geometry' : null,
    centre: k % 97 === 3 ? null : ([4 + (k % side) / side, 50 + Math.floor(k / side) / side] as [number, number]),
  }));
}

describe('spatialOrder', () => {
  it.each([1_000, 300_000, 1_000_000])('%i features: each once, chunks of 1,000 compact, unplaced last', (n) => {
    const side = Math.ceil(Math.sqrt(n));
    const list = grid(n, side);
    const out = spatialOrder(list);
    expect(out).toHaveLength(n);
    expect(new Set(out.map((f) => f.feature_id)).size).toBe(n);
    const unplaced = list.filter((f) => !f.centre).length;
    expect(out.slice(n - unplaced).every((f) => f.centre === null)).toBe(true);
    // a chunk of 1,000 placed features spans a small part of the grid (row order would span it all)
    const chunk = out.slice(0, Math.min(1_000, n - unplaced));
    const xs = chunk.map((f) => f.centre![0]);
    const ys = chunk.map((f) => f.centre![1]);
    const area = (Math.max(...xs) - Math.min(...xs)) * (Math.max(...ys) - Math.min(...ys));
    expect(area).toBeLessThanOrEqual(n === 1_000 ? 1 : 0.02);
  });
});
