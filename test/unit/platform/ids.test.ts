/**
 * Ids (src/platform/ids.ts) draw their random bytes from a pool refilled every 256 ids: each id is
 * its prefix and 22 base64url characters (16 bytes), no two alike across several refills, and the
 * bytes look uniform (no slice of the pool reused, no zeroed pool handed out).
 */
import { describe, expect, it } from 'vitest';
import { newId } from '../../../src/platform/ids.js';

describe('newId', () => {
  it('prefix and 128 random bits, unique over many pool refills', () => {
    const ids = Array.from({ length: 5000 }, () => newId('evt'));
    for (const id of ids.slice(0, 300)) expect(id).toMatch(/^evt_[A-Za-z0-9_-]{22}$/);
    expect(new Set(ids).size).toBe(ids.length);
    // the 16-byte bodies: no body twice, and bytes spread evenly (a chi-squared test over 256
    // values of 80,000 bytes; 99.9 % quantile of 255 degrees of freedom ≈ 330)
    const bodies = ids.map((id) => Buffer.from(id.slice(4), 'base64url'));
    expect(bodies.every((b) => b.length === 16)).toBe(true);
    expect(new Set(bodies.map((b) => b.toString('hex'))).size).toBe(ids.length);
    const counts = new Array(256).fill(0);
    for (const b of bodies) for (const x of b) counts[x]++;
    const expected = (16 * ids.length) / 256;
    const chi2 = counts.reduce((s, c) => s + (c - expected) ** 2 / expected, 0);
    expect(chi2).toBeLessThan(330);
  });
});
