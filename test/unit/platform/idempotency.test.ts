/**
 * The Idempotency-Key body hash: independent of members' order, and the same as the member-by-member
 * canonical text it was first defined by (written out here), so that keys kept before the
 * array fast path (a GeoJSON position in one JSON.stringify) still match their bodies.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { requestHash } from '../../../src/platform/idempotency.js';
import { rng } from '../../helpers/random.js';

function referenceCanonical(x: unknown): string {
  if (Array.isArray(x)) return `[${x.map(referenceCanonical).join(',')}]`;
  if (x && typeof x === 'object') {
    return `{${Object.keys(x)
      .sort()
      .filter((k) => (x as Record<string, unknown>)[k] !== undefined)
      .map((k) => `${JSON.stringify(k)}:${referenceCanonical((x as Record<string, unknown>)[k])}`)
      .join(',')}}`;
  }
  return JSON.stringify(x);
}
const referenceHash = (x: unknown) => createHash('sha256').update(referenceCanonical(x)).digest('base64url');

/** A random JSON value: objects, arrays of leaves (positions), mixed arrays, every kind of leaf. */
function randomJson(r: () => number, depth: number): unknown {
  const leaf = () => {
    const k = Math.floor(r() * 6);
    if (k === 0) return null;
    if (k === 1) return r() < 0.5;
    if (k === 2) return Math.floor(r() * 2_000) - 1_000;
    if (k === 3) return (r() - 0.5) * 1e6 * r();
    if (k === 4) return ['', 'a', 'é', '"q"', '\\', 'line\nbreak', '😀', 'x'.repeat(20)][Math.floor(r() * 8)];
    return r() * 1e-12;
  };
  if (depth === 0 || r() < 0.25) return leaf();
  const k = Math.floor(r() * 3);
  const n = Math.floor(r() * 5);
  if (k === 0) return Array.from({ length: n }, leaf);
  if (k === 1) return Array.from({ length: n }, () => randomJson(r, depth - 1));
  const o: Record<string, unknown> = {};
  for (let i = 0; i < n; i++)
    o[['b', 'a', 'type', 'id', 'ü', '10', '2', 'coordinates'][Math.floor(r() * 8)]!] = randomJson(r, depth - 1);
  return o;
}

/** The same value with every object's members in reverse order. */
function reordered(x: unknown): unknown {
  if (Array.isArray(x)) return x.map(reordered);
  if (x && typeof x === 'object')
    return Object.fromEntries(
      Object.entries(x)
        .reverse()
        .map(([k, v]) => [k, reordered(v)]),
    );
  return x;
}

describe('requestHash', () => {
  it('equals the member-by-member canonical hash on 2,000 random bodies, whatever the members order', () => {
    const r = rng(20261127);
    for (let i = 0; i < 2_000; i++) {
      const x = randomJson(r, 5);
      expect(requestHash(x)).toBe(referenceHash(x));
      expect(requestHash(reordered(x))).toBe(requestHash(x));
    }
  });

  it('a FeatureCollection: the same with its members reordered, another with one coordinate moved', () => {
    const square = (x: number) => [
      [
        [x, 50],
        [x + 0.001, 50],
        [x + 0.001, 50.001],
        [x, 50],
      ],
    ];
    const body = {
      indices: ['NDVI'],
      features: {
        type: 'FeatureCollection',
        features: [1, 2, 3].map((k) => ({
          type: 'Feature',
          id: k,
          properties: {},
          geometry: { type: 'Polygon', coordinates: square(4 + k / 100) },
        })),
      },
    };
    expect(requestHash(body)).toBe(referenceHash(body));
    expect(requestHash(reordered(body))).toBe(requestHash(body));
    const moved = structuredClone(body);
    moved.features.features[2]!.geometry.coordinates[0]![1]![0] = 4.0301;
    expect(requestHash(moved)).not.toBe(requestHash(body));
    // arrays keep their order: a position's two numbers swapped is another body
    const swapped = structuredClone(body);
    swapped.features.features[0]!.geometry.coordinates[0]![1]!.reverse();
    expect(requestHash(swapped)).not.toBe(requestHash(body));
  });
});
