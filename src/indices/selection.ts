/**
 * Choosing the capture for a field and a date (domain code), the "best available image":
 * - candidates: the captures over the field that have every band the formula reads and at least
 *   one usable field pixel (a capture entirely under cloud, shadow or no-data over the field is
 *   never chosen unless pinned by imagery_id);
 * - the one nearest the date (on the date if there is one); ties: the lower field cloud cover
 *   (share of the field's pixels that are unusable), then the earlier date.
 * The time series picks within each interval with the same order minus the date distance
 * (`betterCapture`).
 */
export interface Candidate {
  id: string;
  capture_date: string;
  field_pixels: number;
  valid_pixels: number;
  bands: string[];
}

const day = (d: string) => Date.parse(`${d}T00:00:00Z`) / 86_400_000;

/** Share of the field's pixels that are unusable in the capture, 0..1 (1 when it has none). */
export const fieldCloudShare = (c: Pick<Candidate, 'field_pixels' | 'valid_pixels'>): number =>
  c.field_pixels ? 1 - c.valid_pixels / c.field_pixels : 1;

/** Whether the capture has at least one usable pixel over the field. */
export const hasUsablePixels = (c: Pick<Candidate, 'valid_pixels'>): boolean => c.valid_pixels > 0;

export const hasBands = (c: Pick<Candidate, 'bands'>, needed: readonly string[]): boolean =>
  needed.every((b) => c.bands.includes(b));

/** Lower field cloud cover, then the earlier date: whether `a` is better than `b` (same distance to the date). */
export function betterCapture(a: Candidate, b: Candidate): boolean {
  const ca = fieldCloudShare(a);
  const cb = fieldCloudShare(b);
  return ca < cb || (ca === cb && a.capture_date < b.capture_date);
}

export function selectBestCapture(cands: Candidate[], date: string, needed: readonly string[]): Candidate | null {
  const target = day(date);
  let best: Candidate | null = null;
  let bestDist = Infinity;
  for (const c of cands) {
    if (!hasUsablePixels(c) || !hasBands(c, needed)) continue;
    const dist = Math.abs(day(c.capture_date) - target);
    if (dist < bestDist || (dist === bestDist && betterCapture(c, best!))) {
      best = c;
      bestDist = dist;
    }
  }
  return best;
}
