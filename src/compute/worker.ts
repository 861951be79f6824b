/**
 * Piscina worker: one Kernel per thread, instantiated and warmed up when the thread starts (V8
 * keeps fresh WebAssembly on its baseline compiler for a while; a warm-up pass gets the optimised
 * code in before the first request).
 */
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { compileFormula } from './formula.js';
import { Kernel } from './kernel-host.js';
import type { IndexResult, IndexTask, Task } from './tasks.js';

const kernel = new Kernel();

function warmUp(): void {
  const n = 1 << 16;
  const programs = [compileFormula('(B08 - B04) / (B08 + B04)'), compileFormula('2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)')];
  for (const p of programs) {
    const prep = kernel.prepare(n, p.bands.map(() => ({ dtype: 'u16' as const, scale: 0.0001 })));
    prep.bands.forEach((b, j) => {
      for (let i = 0; i < n; i++) b[i] = 500 + ((i * (7 + j)) % 4000);
    });
    for (let r = 0; r < 20; r++) kernel.run(p);
    kernel.orderStats();
  }
}
warmUp();

function runIndex(t: IndexTask): IndexResult {
  const started = performance.now();
  const n = t.bands[0]?.data.length ?? t.mask?.length ?? 0;
  const prep = kernel.prepare(n, t.bands.map(({ data: _d, ...spec }) => spec), { mask: !!t.mask });
  t.bands.forEach((b, i) => {
    if (b.data.length !== n) throw new Error(`band ${i} has ${b.data.length} pixels, expected ${n}`);
    prep.bands[i]!.set(b.data as never);
  });
  if (t.mask) prep.mask!.set(t.mask);
  const stats = kernel.run(t.program, { stats: true, writeValues: true });
  const result: IndexResult = { stats, kernelMs: 0 };
  if (t.orderStats) result.order = kernel.orderStats();
  if (t.histogram) result.histogram = kernel.histogram(t.histogram.lo, t.histogram.hi, t.histogram.bins);
  if (t.values) result.values = kernel.copyValues(new Float32Array(n));
  result.kernelMs = performance.now() - started;
  return result;
}

/** A result whose typed arrays are transferred back, not copied. */
class Movable {
  constructor(private readonly value: IndexResult) {}
  get [transferableSymbol](): ArrayBuffer[] {
    return [this.value.values?.buffer, this.value.histogram?.buffer].filter((b): b is ArrayBuffer => b instanceof ArrayBuffer);
  }
  get [valueSymbol](): IndexResult {
    return this.value;
  }
}

export default function handle(task: Task): unknown {
  switch (task.kind) {
    case 'ping':
      return { ok: true };
    case 'index':
      if (task.v !== 1) throw new Error(`unsupported index task version ${task.v}`);
      return move(new Movable(runIndex(task)) as never);
    default:
      throw new Error(`unknown task kind ${(task as { kind: string }).kind}`);
  }
}
