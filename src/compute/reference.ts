/**
 * A plain float64 implementation of the kernel's semantics, for tests and benchmarks to compare
 * against (never used to serve requests).
 */
import { applyBinary, applyCall, parseFormula, type BandId, type Node } from './formula.js';
import type { BandArray, BandSpec, Stats } from './kernel-host.js';

/**
 * Evaluates a syntax tree on one pixel. `round` is applied after every operation: identity for
 * float64, Math.fround to emulate the kernel's float32 arithmetic exactly (IEEE +, −, ×, ÷ and
 * sqrt are correctly rounded, so rounding the float64 result reproduces the float32 result).
 */
export function evaluateNode(n: Node, px: Record<string, number>, round: (x: number) => number = (x) => x): number {
  switch (n.k) {
    case 'num':
      return round(n.v);
    case 'band':
      return px[n.b]!;
    case 'neg':
      return round(-evaluateNode(n.a, px, round));
    case 'bin':
      return round(applyBinary(n.op, evaluateNode(n.a, px, round), evaluateNode(n.b, px, round)));
    case 'call': {
      const args = n.args.map((a) => evaluateNode(a, px, round));
      // min/max with more than two arguments run pairwise in the kernel
      return round(applyCall(n.f, args));
    }
  }
}

/** Reflectance of one digital number, NaN when it is no-data (integer DN 0 or the declared nodata). */
export function reflectance(dn: number, spec: BandSpec, round: (x: number) => number = (x) => x): number {
  if (Number.isNaN(dn)) return NaN;
  if (spec.dtype !== 'f32' && dn === 0) return NaN;
  if (spec.nodata !== undefined && spec.nodata !== null && dn === spec.nodata) return NaN;
  return round(round(dn * round(spec.scale ?? 1)) + round(spec.offset ?? 0));
}

/** Evaluates a formula per pixel in float64; masked, invalid and non-finite results are NaN. */
export function referenceValues(
  formula: string | Node,
  bands: Partial<Record<BandId, { data: BandArray | number[]; spec: BandSpec }>>,
  n: number,
  mask?: Uint8Array,
  round: (x: number) => number = (x) => x,
): Float64Array {
  const tree = typeof formula === 'string' ? parseFormula(formula) : formula;
  const out = new Float64Array(n);
  const px: Record<string, number> = {};
  const entries = Object.entries(bands) as Array<[BandId, { data: BandArray | number[]; spec: BandSpec }]>;
  for (let i = 0; i < n; i++) {
    if (mask && mask[i] === 0) {
      out[i] = NaN;
      continue;
    }
    for (const [b, { data, spec }] of entries) px[b] = reflectance(data[i]!, spec, round);
    const v = evaluateNode(tree, px, round);
    out[i] = Number.isFinite(v) ? v : NaN;
  }
  return out;
}

/** Two-pass float64 statistics over the non-NaN values. */
export function referenceStats(values: ArrayLike<number>): Stats {
  let count = 0;
  let sum = 0;
  let min = Infinity;
  let max = -Infinity;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (Number.isNaN(v)) continue;
    count++;
    sum += v;
    if (v < min) min = v;
    if (v > max) max = v;
  }
  if (!count) return { count: 0, min: NaN, max: NaN, mean: NaN, std: NaN };
  const mean = sum / count;
  let m2 = 0;
  for (let i = 0; i < values.length; i++) {
    const v = values[i]!;
    if (!Number.isNaN(v)) m2 += (v - mean) * (v - mean);
  }
  return { count, min, max, mean, std: Math.sqrt(m2 / count) };
}

/** numpy-style percentile (linear interpolation between closest ranks) over non-NaN values. */
export function referencePercentile(values: ArrayLike<number>, p: number): number {
  const v = Array.from(values)
    .filter((x) => !Number.isNaN(x))
    .sort((a, b) => a - b);
  if (!v.length) return NaN;
  const rank = (p / 100) * (v.length - 1);
  const lo = Math.floor(rank);
  const hi = Math.min(lo + 1, v.length - 1);
  return v[lo]! + (v[hi]! - v[lo]!) * (rank - lo);
}
