/**
 * Choosing the capture for a field and a date (domain code). On the date: the one with the fewest
 * unusable field pixels. Otherwise the nearest date; ties: fewer unusable pixels, then the earlier
 * date. Captures lacking a band the formula reads are not candidates.
 */
export interface Candidate {
  id: string;
  capture_date: string;
  field_pixels: number;
  valid_pixels: number;
  bands: string[];
}

const day = (d: string) => Date.parse(`${d}T00:00:00Z`) / 86_400_000;

export function selectBestCapture(cands: Candidate[], date: string, needed: string[]): Candidate | null {
  const usable = cands.filter((c) => needed.every((b) => c.bands.includes(b)));
  const target = day(date);
  let best: Candidate | null = null;
  let bestKey: [number, number, number] | null = null;
  for (const c of usable) {
    const key: [number, number, number] = [Math.abs(day(c.capture_date) - target), c.field_pixels - c.valid_pixels, day(c.capture_date)];
    if (!bestKey || key[0] < bestKey[0] || (key[0] === bestKey[0] && (key[1] < bestKey[1] || (key[1] === bestKey[1] && key[2] < bestKey[2])))) {
      best = c;
      bestKey = key;
    }
  }
  return best;
}
