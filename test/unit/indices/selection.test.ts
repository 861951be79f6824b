/**
 * The "best available image" rule (src/indices/selection.ts): captures with every band the formula
 * reads and at least one usable field pixel; the nearest date; ties by the lower field cloud cover,
 * then the earlier date. The time series orders the captures of an interval the same way.
 */
import { describe, expect, it } from 'vitest';
import { betterCapture, fieldCloudShare, selectBestCapture, type Candidate } from '../../../src/indices/selection.js';

const c = (id: string, capture_date: string, valid: number, field = 100, bands = ['B04', 'B08']): Candidate => ({
  id,
  capture_date,
  field_pixels: field,
  valid_pixels: valid,
  bands,
});

describe('selectBestCapture', () => {
  it('never picks a capture without a usable field pixel, even on the date', () => {
    const cs = [c('cloudy', '2025-04-25', 0), c('before', '2025-04-19', 46), c('after', '2025-05-01', 100)];
    // 04-19 and 05-01 are both 6 days away: the clearer one wins
    expect(selectBestCapture(cs, '2025-04-25', ['B04'])!.id).toBe('after');
    expect(selectBestCapture(cs, '2025-04-22', ['B04'])!.id).toBe('before');
    expect(selectBestCapture([cs[0]!], '2025-04-25', ['B04'])).toBeNull();
    // a field with no pixel in the capture has nothing usable either
    expect(selectBestCapture([c('empty', '2025-04-25', 0, 0)], '2025-04-25', [])).toBeNull();
  });

  it('nearest date first, whatever the cloud cover; then lower field cloud cover; then the earlier date', () => {
    const cs = [
      c('near-cloudy', '2025-06-11', 5),
      c('far-clear', '2025-06-14', 100),
      c('same-day', '2025-06-10', 40),
      c('same-day-clearer', '2025-06-10', 60),
    ];
    expect(selectBestCapture(cs, '2025-06-10', [])!.id).toBe('same-day-clearer');
    expect(selectBestCapture(cs, '2025-06-12', [])!.id).toBe('near-cloudy');
    // equal distance and cover: the earlier
    expect(
      selectBestCapture([c('later', '2025-06-14', 80), c('earlier', '2025-06-06', 80)], '2025-06-10', [])!.id,
    ).toBe('earlier');
  });

  it('ties compare the cloud cover as a share of the field (captures on grids of different resolution)', () => {
    // 10 m: 400 field pixels, 100 unusable (25 %); 20 m: 100 field pixels, 50 unusable (50 %)
    const fine = c('fine', '2025-06-08', 300, 400);
    const coarse = c('coarse', '2025-06-12', 50, 100);
    expect(fieldCloudShare(fine)).toBe(0.25);
    expect(selectBestCapture([coarse, fine], '2025-06-10', [])!.id).toBe('fine');
    expect(betterCapture(fine, coarse)).toBe(true);
    expect(betterCapture(coarse, fine)).toBe(false);
  });

  it('needs every band the formula reads', () => {
    const cs = [c('rn', '2025-06-10', 100), c('rne', '2025-06-20', 10, 100, ['B04', 'B05', 'B08'])];
    expect(selectBestCapture(cs, '2025-06-10', ['B05', 'B08'])!.id).toBe('rne');
    expect(selectBestCapture(cs, '2025-06-10', ['B11'])).toBeNull();
  });
});
