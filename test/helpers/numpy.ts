/**
 * numpy.percentile(values, p) (method 'linear') over values sorted ascending in float64: rank =
 * p/100 × (n − 1), interpolated as numpy's `_lerp` (a + (b − a)·t, or b − (b − a)·(1 − t) from
 * t = 0.5 on). The tests' independent reference for the kernel's percentiles.
 */
export function npPercentile(sorted: Float64Array, p: number): number {
  const n = sorted.length;
  const rank = (n - 1) * (p / 100);
  const lo = Math.floor(rank);
  const t = rank - lo;
  const a = sorted[lo]!;
  const b = sorted[Math.min(lo + 1, n - 1)]!;
  const d = b - a;
  return t >= 0.5 ? b - d * (1 - t) : a + d * t;
}
