/**
 * exactextract's weighted quantile (WeightedQuantiles, isciences/exactextract#75) written out
 * plainly over (value, weight) pairs: sorted by value then weight, s_0 = 0 and
 * s_i = i·w_i + (n − 1)·C_(i−1), the q-quantile interpolated in s at q·W·(n − 1). The tests'
 * independent reference for weighted percentiles.
 */
export function refQuantile(pairs: Array<[number, number]>, q: number): number {
  return refQuantiles(pairs, [q])[0]!;
}

/** The same for several quantiles, the pairs sorted once. */
export function refQuantiles(pairs: Array<[number, number]>, qs: readonly number[]): number[] {
  const e = [...pairs].sort((a, b) => a[0] - b[0] || a[1] - b[1]);
  const n = e.length;
  let cum = 0;
  const s = e.map(([, w], i) => {
    const v = i === 0 ? 0 : i * w + (n - 1) * cum;
    cum += w;
    return v;
  });
  return qs.map((q) => {
    const target = q * cum * (n - 1);
    const right = s.findIndex((x) => x > target);
    if (right === 0) return e[0]![0];
    if (right === -1) return e[n - 1]![0];
    const l = right - 1;
    return e[l]![0] + ((target - s[l]!) * (e[right]![0] - e[l]![0])) / (s[right]! - s[l]!);
  });
}
