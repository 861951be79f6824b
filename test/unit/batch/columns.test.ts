/**
 * The percentile columns of a batch file (src/batch/execute.ts): `p` and the percentile in decimal
 * notation, which reads back as the number asked. JavaScript writes numbers under 1e-6 with an
 * exponent, and `percentiles: [1e-7]` made a column `p1e-7`.
 */
import { describe, expect, it } from 'vitest';
import { header, percentileColumn } from '../../../src/batch/execute.js';

describe('percentile columns', () => {
  it('are decimal, read back as the percentile asked, and differ when the percentiles do', () => {
    const ps = [0, 5, 50, 99.99999, 100, 1e-6, 1e-7, 1.5e-7, 2.5e-10, 1.2345e-9, 5e-324, 33.333333333333336];
    const cols = ps.map(percentileColumn);
    for (const [i, c] of cols.entries()) {
      expect(c, String(ps[i])).toMatch(/^p\d+(\.\d+)?$/);
      expect(Number(c.slice(1)), c).toBe(ps[i]);
    }
    expect(new Set(cols).size).toBe(ps.length);
    expect(cols.slice(0, 9)).toEqual([
      'p0',
      'p5',
      'p50',
      'p99.99999',
      'p100',
      'p0.000001',
      'p0.0000001',
      'p0.00000015',
      'p0.00000000025',
    ]);
  });

  it('name the CSV header (NDJSON has none: its members take the same names)', () => {
    const extra = { percentiles: [1e-7, 50], histogram: true };
    expect(header('csv', extra).trimEnd().split(',').slice(-3)).toEqual(['p0.0000001', 'p50', 'histogram']);
    expect(header('ndjson', extra)).toBe('');
  });
});
