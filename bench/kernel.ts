/**
 * Kernel throughput in megapixels per second for NDVI, EVI and a 12-operation custom formula on
 * 10,000 (one 100 ha field) and 10,000,000 pixels: the WASM SIMD kernel through the compiled-
 * formula path the service uses, the same kernel built without SIMD, and a straightforward
 * TypeScript loop; ratios against the TypeScript loop and, for NDVI, a C -O3 loop run here.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { Bench } from 'tinybench';
import { compileFormula } from '../src/compute/formula.js';
import { Kernel } from '../src/compute/kernel-host.js';
import { packageRoot } from '../src/platform/paths.js';

const FORMULAS = {
  NDVI: '(B08 - B04) / (B08 + B04)',
  EVI: '2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)',
  custom12: 'sqrt(abs((B08 - B04) * (B08 + B03) / (B11 + 0.5))) - min(B02, B04) * 2 + max(B08 / (B03 + 0.1), B11) * 0.25',
} as const;

// Straightforward TypeScript loops over the same inputs and semantics (DN 0 no-data, x/0 NaN).
const tsLoops: Record<keyof typeof FORMULAS, (b: Record<string, Uint16Array>, out: Float32Array) => void> = {
  NDVI: ({ B04, B08 }, out) => {
    for (let i = 0; i < out.length; i++) {
      const r = B04![i]!, n = B08![i]!;
      const x = n * 0.0001, y = r * 0.0001, s = x + y;
      out[i] = r === 0 || n === 0 || s === 0 ? NaN : (x - y) / s;
    }
  },
  EVI: ({ B02, B04, B08 }, out) => {
    for (let i = 0; i < out.length; i++) {
      const b = B02![i]!, r = B04![i]!, n = B08![i]!;
      const d = n * 0.0001 + 6 * r * 0.0001 - 7.5 * b * 0.0001 + 1;
      out[i] = b === 0 || r === 0 || n === 0 || d === 0 ? NaN : (2.5 * (n * 0.0001 - r * 0.0001)) / d;
    }
  },
  custom12: ({ B02, B03, B04, B08, B11 }, out) => {
    for (let i = 0; i < out.length; i++) {
      const b2 = B02![i]! * 0.0001, b3 = B03![i]! * 0.0001, b4 = B04![i]! * 0.0001, b8 = B08![i]! * 0.0001, b11 = B11![i]! * 0.0001;
      if (b2 === 0 || b3 === 0 || b4 === 0 || b8 === 0 || b11 === 0) {
        out[i] = NaN;
        continue;
      }
      out[i] = Math.sqrt(Math.abs(((b8 - b4) * (b8 + b3)) / (b11 + 0.5))) - Math.min(b2, b4) * 2 + Math.max(b8 / (b3 + 0.1), b11) * 0.25;
    }
  },
};

function synthetic(n: number, band: string): Uint16Array {
  const seed = band.charCodeAt(1) * 31 + band.charCodeAt(2);
  const a = new Uint16Array(n);
  for (let i = 0; i < n; i++) a[i] = 300 + ((i * (7 + seed)) % 4000);
  return a;
}

function cReference(n: number): { checked: number; plain: number } | null {
  const exe = path.join(packageRoot, 'dist', 'bench', 'ndvi');
  try {
    if (!existsSync(exe) || statSync(exe).mtimeMs < statSync(path.join(packageRoot, 'bench', 'c', 'ndvi.c')).mtimeMs) {
      mkdirSync(path.dirname(exe), { recursive: true });
      execFileSync('gcc', ['-O3', '-march=native', '-o', exe, path.join(packageRoot, 'bench', 'c', 'ndvi.c'), '-lm'], { stdio: 'ignore' });
    }
    const [, checked, plain] = execFileSync(exe, [String(n)], { encoding: 'utf8' }).trim().split(' ');
    return { checked: n / Number(checked) / 1000, plain: n / Number(plain) / 1000 };
  } catch {
    return null;
  }
}

async function mpxs(n: number, fn: () => void): Promise<number> {
  const bench = new Bench({ time: n > 1e6 ? 1500 : 400, warmupTime: 200 });
  bench.add('x', fn);
  await bench.run();
  const r = bench.tasks[0]!.result as unknown as { latency: { mean: number } };
  return n / r.latency.mean / 1000;
}

export default async function kernelBench(): Promise<void> {
  const simd = new Kernel({ simd: true });
  const scalar = new Kernel({ simd: false });
  const rows: Array<Record<string, string>> = [];
  for (const n of [10_000, 10_000_000]) {
    const c = cReference(n);
    for (const [name, src] of Object.entries(FORMULAS) as Array<[keyof typeof FORMULAS, string]>) {
      const program = compileFormula(src);
      const inputs = Object.fromEntries(program.bands.map((b) => [b, synthetic(n, b)]));
      const out = new Float32Array(n);
      const ts = await mpxs(n, () => tsLoops[name](inputs, out));
      const results: Record<string, number> = { ts };
      for (const [label, k] of [['simd', simd], ['scalar', scalar]] as const) {
        const prep = k.prepare(n, program.bands.map(() => ({ dtype: 'u16' as const, scale: 0.0001 })));
        program.bands.forEach((b, j) => prep.bands[j]!.set(inputs[b]!));
        results[label] = await mpxs(n, () => k.run(program, { stats: true, writeValues: true }));
        if (label === 'simd') results.simdStatsOnly = await mpxs(n, () => k.run(program, { stats: true, writeValues: false }));
      }
      rows.push({
        formula: `${name} (${program.ops} ops)`,
        pixels: n.toLocaleString('en'),
        'WASM SIMD values+stats': results.simd!.toFixed(0),
        'SIMD fused stats only': results.simdStatsOnly!.toFixed(0),
        'WASM no SIMD': results.scalar!.toFixed(0),
        'TS loop': ts.toFixed(0),
        'SIMD ÷ TS': (results.simd! / ts).toFixed(2),
        'no-SIMD ÷ TS': (results.scalar! / ts).toFixed(2),
        'C -O3 checked': name === 'NDVI' && c ? c.checked.toFixed(0) : '',
        'C -O3 plain': name === 'NDVI' && c ? c.plain.toFixed(0) : '',
        'SIMD ÷ C checked': name === 'NDVI' && c ? (results.simd! / c.checked).toFixed(2) : '',
        'SIMD ÷ C plain': name === 'NDVI' && c ? (results.simd! / c.plain).toFixed(2) : '',
        'fused ÷ C plain': name === 'NDVI' && c ? (results.simdStatsOnly! / c.plain).toFixed(2) : '',
      });
    }
  }
  console.log('Mpx/s (higher is better); "values+stats" writes every value and computes count/min/max/mean/std in the same pass;');
  console.log('"fused stats only" computes the statistics without writing values out. C "checked" has the service semantics, C "plain" none.');
  for (const n of ['10,000', '10,000,000']) console.table(rows.filter((r) => r.pixels === n));
}
