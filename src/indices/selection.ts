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
  /**
   * A capture with no pixel centre in the field whose pixels the field touches (a sliver, a
   * polygon within one pixel): the weights of those pixels and of the usable ones (otherwise absent
   * or null). Only weighting=coverage counts them (`underWeighting`).
   */
  field_weight?: number | null;
  valid_weight?: number | null;
}

const day = (d: string) => Date.parse(`${d}T00:00:00Z`) / 86_400_000;

/** Share of the field's pixels that are unusable in the capture, 0..1 (1 when it has none). */
export const fieldCloudShare = (c: Pick<Candidate, 'field_pixels' | 'valid_pixels'>): number =>
  c.field_pixels ? 1 - c.valid_pixels / c.field_pixels : 1;

/** Whether the capture has at least one usable pixel over the field. */
export const hasUsablePixels = (c: Pick<Candidate, 'valid_pixels'>): boolean => c.valid_pixels > 0;

export const hasBands = (c: Pick<Candidate, 'bands'>, needed: readonly string[]): boolean =>
  needed.every((b) => c.bands.includes(b));

/**
 * A candidate as a weighting counts it. A capture with no pixel centre in the field, linked
 * because the field touches its pixels (a sliver, a polygon within one pixel): under the pixel
 * centre rule (the default) it does not cover the field (null); under weighting=coverage it counts
 * by the weights of the pixels the field touches. Every other capture by its pixels.
 */
export function weighed<C extends Candidate>(c: C, weighting: 'centre' | 'coverage' | undefined): C | null {
  if (c.field_pixels > 0) return c;
  return weighting === 'coverage' && c.field_weight
    ? { ...c, field_pixels: c.field_weight, valid_pixels: c.valid_weight ?? 0 }
    : null;
}

/** The candidates as a weighting counts them (`weighed`), those that do not cover the field left out. */
export function underWeighting<C extends Candidate>(cands: C[], weighting: 'centre' | 'coverage' | undefined): C[] {
  return cands.every((c) => c.field_pixels > 0) ? cands : cands.flatMap((c) => weighed(c, weighting) ?? []);
}

/** The answer for a field whose captures only touch it (no pixel centre inside) under the pixel-centre rule. */
export const onlyTouched = (fieldId: string, n: number, weightingAt = 'statistics with weighting=coverage') =>
  `No pixel centre of the ${n === 1 ? 'capture' : `${n} captures`} over field ${fieldId} lies inside it (it is smaller or thinner than a pixel); ${weightingAt} weigh the pixels it touches`;

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
