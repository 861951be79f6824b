/** Calendar dates of the time series. */
import { describe, expect, it } from 'vitest';
import { iso } from '../../../src/indices/timeseries.js';

describe('iso', () => {
  it('equals Date#toISOString for every day from 0001 to 9999 sampled, and around leap days', () => {
    const DAY = 86_400_000;
    const from = Date.parse('0001-01-01T00:00:00Z');
    const to = Date.UTC(9999, 11, 31);
    for (let t = from; t <= to; t += DAY * 97) expect(iso(t)).toBe(new Date(t).toISOString().slice(0, 10));
    for (const d of [
      '1900-02-28',
      '1900-03-01',
      '2000-02-29',
      '2000-03-01',
      '2024-02-29',
      '2025-12-31',
      '2026-01-01',
      '0400-02-29',
    ])
      expect(iso(Date.parse(`${d}T00:00:00Z`))).toBe(d);
  });
});
