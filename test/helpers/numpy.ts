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

/**
 * numpy.histogram(values, bins | edges) in float64 (with `weights`, one per value: the weight
 * sums): linspace edges over [min, max] ([v − 0.5, v + 0.5] for one value), searchsorted, the last
 * bin closed, values outside explicit edges left out.
 */
export function npHistogram(
  values: ArrayLike<number>,
  spec: { bins: number } | { edges: number[] },
  weights?: ArrayLike<number>,
): { edges: number[]; counts: number[] } {
  let edges: number[];
  if ('edges' in spec) edges = spec.edges;
  else {
    let lo = Infinity;
    let hi = -Infinity;
    for (let i = 0; i < values.length; i++) {
      lo = Math.min(lo, values[i]!);
      hi = Math.max(hi, values[i]!);
    }
    if (lo === hi) {
      lo -= 0.5;
      hi += 0.5;
    }
    const step = (hi - lo) / spec.bins;
    edges = Array.from({ length: spec.bins + 1 }, (_, i) => i * step + lo);
    edges[spec.bins] = hi;
  }
  const counts = new Array(edges.length - 1).fill(0);
  const last = edges.length - 1;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (v < edges[0]! || v > edges[last]!) continue;
    // searchsorted(edges, v, 'right') − 1, the last edge into the last bin
    let lo = 0;
    let hi = edges.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (edges[mid]! <= v) lo = mid + 1;
      else hi = mid;
    }
    counts[Math.min(lo - 1, last - 1)] += weights ? weights[i]! : 1;
  }
  return { edges, counts };
}
