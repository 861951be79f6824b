/**
 * Per-formula WebAssembly: for a compiled program and the band layout of a task, emits a small
 * module that imports the kernel's memory and runs the whole formula in one loop over the pixels
 * (8 a step, two f32x4 halves, every intermediate in a local), finishing and, in the stats
 * variant, accumulating the statistics in the same pass. The general kernel is a bytecode
 * interpreter that makes one pass over a 2 KB register per instruction; this makes one pass.
 *
 * Semantics are the interpreter's, operation for operation (the same f32x4 operations in the same
 * order, the same scalar code for the last len % 8 pixels), so values are bit-identical (NaN
 * payloads aside):
 * - LOAD: DN → f32, × scale, + offset; DN 0 and the declared nodata have no value (on 16-bit lanes
 *   in the vector loop, on the i32 DN in the scalar tail, as the interpreter does); f32 inputs:
 *   nodata → NaN. A multiplication by 1 or an addition that cannot change the value is left out.
 *   As every operation propagates NaN, the integer bands' no-value masks (and the validity mask)
 *   are OR-ed on 16-bit lanes and applied once to the result instead of NaN-ing each band.
 * - x/0 → NaN (OR with an all-ones mask), ND = (a − b)/(a + b) with a zero sum → NaN, min/max
 *   propagate NaN; the normalised difference of two u16 bands of equal scale and no offset runs
 *   on the digital numbers (integer math, as the interpreter's fused NDB loop).
 * - finishing: non-finite (exponent bits all set) or masked → NaN.
 * - statistics: invalid lanes replaced by K (add exactly 0, cannot move min or max), count in
 *   i32x4 (i16x8 for the integer NDB), min/max in f32x4, Σ(x − K) and Σ(x − K)² in f64x2 (promote_low and a shuffle for the
 *   high half). K is picked by the host as the interpreter picks it (the value closest to the
 *   mean of the first block with a value, on a 64-pixel block); the host adds each call's
 *   partial sums (two-level sum), so results agree with the interpreter to rounding of the sums
 *   (~1e-15 relative). NDB keeps the interpreter's fused accumulation (NaN lanes zeroed, their
 *   −K and K² taken back out at the end).
 * exp, log and pow have no cheap f32x4 form here: programs with them return null (the caller runs
 * the interpreter).
 *
 * Exports of the module: values(start, end, dst, mask, acc, K, ptr0 … ptrN) writes the finished
 * values of pixels [start, end) to dst (f32 per pixel, indexed from pixel 0); stats(…) the same
 * with the statistics (and the store only when the module was built with `out`), writing count,
 * min, max, S, Q (f64) at acc. At most 262,136 pixels a call (the integer NDB counts on 16-bit
 * lanes); the host calls with 16,384.
 */
import type { Program } from '../formula.js';
import { OP } from '../opcodes.js';
import { encodeModule } from '../wasm-module.js';
import { type JitBand, normalise } from './bands.js';
import { buildFunction } from './function.js';

export type { JitBand, JitDtype } from './bands.js';

export type JitFn = (
  start: number,
  end: number,
  dst: number,
  mask: number,
  acc: number,
  k: number,
  ...ptrs: number[]
) => void;

export interface JitKernel {
  values: JitFn;
  stats: JitFn;
}

const UNSUPPORTED = new Set<number>([OP.EXP, OP.LOG, OP.POW]);

/** Whether the program can be compiled (no exp, log or pow). */
export function jitSupports(program: Program): boolean {
  for (let k = 0; k < program.code.length; k += 4) if (UNSUPPORTED.has(program.code[k]!)) return false;
  return true;
}

const MAX_MODULES = 64;
const modules = new Map<string, WebAssembly.Module>();

/** The program's part of a module cache key. */
export function jitProgramKey(program: Program): string {
  return `${program.code.join(',')}|${program.consts.map(([r, v]) => `${r}=${v}`).join(',')}|${program.resultReg}`;
}

/** The band layout's part of a module cache key (what the module is specialised on). */
export function jitLayoutKey(bands: JitBand[]): string {
  return bands
    .map(
      (x) =>
        `${x.dtype},${Math.fround(x.scale ?? 1)},${Math.fround(x.offset ?? 0)},${Object.is(Math.fround(x.offset ?? 0), -0) ? 'n' : ''},${x.nodata ?? ''}`,
    )
    .join(';');
}

/** A key for the module cache: the program, the band layout, the mask and whether values are stored. */
export function jitKey(programKey: string, layoutKey: string, hasMask: boolean, store: boolean): string {
  return `${programKey}|${layoutKey}|${hasMask ? 1 : 0}${store ? 1 : 0}`;
}

/** The module's bytes (for tests and debugging). */
export function jitModuleBytes(
  program: Program,
  bands: JitBand[],
  hasMask: boolean,
  store: boolean,
): Uint8Array | null {
  if (!jitSupports(program) || bands.length !== program.bands.length || bands.length > 16) return null;
  const nb = bands.map(normalise);
  return encodeModule([
    { name: 'values', fn: buildFunction(program, nb, { hasMask, store: true, stats: false }) },
    { name: 'stats', fn: buildFunction(program, nb, { hasMask, store, stats: true }) },
  ]);
}

/**
 * The compiled module of a program for a band layout (cached, at most 64 per thread, least
 * recently used dropped), or null when the program has operations the JIT does not emit.
 */
export function jitModule(
  program: Program,
  bands: JitBand[],
  hasMask: boolean,
  store: boolean,
  key = jitKey(jitProgramKey(program), jitLayoutKey(bands), hasMask, store),
): WebAssembly.Module | null {
  const hit = modules.get(key);
  if (hit) {
    modules.delete(key);
    modules.set(key, hit);
    return hit;
  }
  const bytes = jitModuleBytes(program, bands, hasMask, store);
  if (!bytes) return null;
  const m = new WebAssembly.Module(bytes);
  modules.set(key, m);
  if (modules.size > MAX_MODULES) modules.delete(modules.keys().next().value!);
  return m;
}

/** Instantiates a module on a kernel's memory. */
export function jitInstantiate(m: WebAssembly.Module, memory: WebAssembly.Memory): JitKernel {
  const inst = new WebAssembly.Instance(m, { env: { memory } });
  return inst.exports as unknown as JitKernel;
}
