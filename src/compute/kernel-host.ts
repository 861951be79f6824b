/**
 * Host side of the WebAssembly kernel: loads the module once, lays out buffers in its memory
 * (growing it, never per pixel), and runs compiled programs. One Kernel per thread.
 *
 * Zero-copy use (what the worker and the imagery reader do): `prepare()` reserves the buffers
 * of one task and returns typed-array views into kernel memory; decode band data straight into
 * those views, then `run()`. Views are only valid until the next prepare().
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { wasmDir } from '../platform/paths.js';
import type { BandId, Program } from './formula.js';
import {
  jitInstantiate,
  jitKey,
  jitLayoutKey,
  jitModule,
  jitProgramKey,
  jitSupports,
  type JitKernel,
} from './jit/index.js';

export type Dtype = 'f32' | 'u16' | 'i16' | 'u8';
const DTYPE_CODE: Record<Dtype, number> = { f32: 0, u16: 1, i16: 2, u8: 3 };
const DTYPE_BYTES: Record<Dtype, number> = { f32: 4, u16: 2, i16: 2, u8: 1 };
export type BandArray = Float32Array | Uint16Array | Int16Array | Uint8Array;

export interface BandSpec {
  dtype: Dtype;
  /** reflectance = DN × scale + offset (GDAL / STAC raster convention). Default 1 and 0. */
  scale?: number;
  offset?: number;
  /** A declared no-data value; DN 0 is always treated as no-data for integer inputs. */
  nodata?: number | null;
}

export interface Stats {
  count: number;
  min: number;
  max: number;
  mean: number;
  /** Population standard deviation. */
  std: number;
}

export interface OrderStats {
  median: number;
  p10: number;
  p25: number;
  p75: number;
  p90: number;
}

/** The percentiles of OrderStats, in the order orderFrom reads them. */
export const ORDER_PS = [10, 25, 50, 75, 90] as const;

/** OrderStats from the percentiles ORDER_PS (null when there was no value). */
export function orderFrom(r: readonly number[] | null): OrderStats | null {
  return r ? { p10: r[0]!, p25: r[1]!, median: r[2]!, p75: r[3]!, p90: r[4]! } : null;
}

interface Exports {
  memory: WebAssembly.Memory;
  progBase(): number;
  bandBase(): number;
  statsBase(): number;
  dataBase(): number;
  blockSize(): number;
  maxRegisters(): number;
  simdEnabled(): number;
  fillConst(r: number, v: number): void;
  resetStats(): void;
  run(nInstr: number, n: number, resultReg: number, maskPtr: number, outPtr: number, withStats: number): void;
  statsOf(ptr: number, n: number): void;
  compactValid(src: number, n: number, dst: number): number;
  select(p: number, lo: number, hi: number, k: number): number;
  selectFR(p: number, lo: number, hi: number, k: number): number;
  minOf(p: number, lo: number, hi: number): number;
  histogram(src: number, n: number, lo: number, hi: number, bins: number, dst: number): void;
  chooseK(p: number, len: number): number;
  bucketCount(src: number, n: number, lo: number, scale: number, nb: number, hist: number): void;
  bucketGather(
    src: number,
    n: number,
    lo: number,
    scale: number,
    nb: number,
    slot: number,
    off: number,
    dst: number,
  ): void;
  sampleValid(src: number, n: number, s: number, seed: number, dst: number): number;
  samplePlaces(n: number, s: number, seed: number, dst: number): void;
  gatherPlaces(src: number, places: number, s: number, size: number, dst: number): void;
  bracketPack(src: number, n: number, br: number, dst: number, k: number, countValid: number): number;
  bracketSplit(src: number, u: number, br: number, dst: number, k: number): void;
  bracketSizes(src: number, u: number, br: number, k: number): void;
  oneValue(p: number, lo: number, hi: number): number;
  sampleLevels(p: number, s: number, most: number, out: number): number;
  levelCounts(src: number, n: number, lv: number, k: number, dst: number): void;
  histogramNp(src: number, n: number, edges: number, nb: number, uniform: number, dst: number): void;
  sortF32(p: number, n: number, tmp: number): void;
}

/** Whether the per-formula JIT runs by default (KERNEL_JIT=0 turns it off). */
export function jitFromEnv(env: NodeJS.ProcessEnv = process.env): boolean {
  return env.KERNEL_JIT !== '0' && env.KERNEL_JIT !== 'false';
}
const jitDefault = jitFromEnv();
/** Pixels per call of a JIT function: a two-level sum, and calls short enough for V8 to tier up. */
const JIT_CHUNK = 16384;
/**
 * Pixels of the blocks in which K is sought: the interpreter picks it in its first 512-pixel block
 * that has a value; 64 is as good a shift and costs a tenth on a 10,000-pixel field.
 */
const K_BLOCK = 64;
/** Values of a bracket under which its ranks are selected without narrowing it first. */
const NARROW_MIN = 256;
const NO_STATS: Stats = Object.freeze({ count: 0, min: NaN, max: NaN, mean: NaN, std: NaN });

const modules = new Map<string, WebAssembly.Module>();

function loadModule(simd: boolean): WebAssembly.Module {
  const file = path.join(wasmDir, simd ? 'kernel.simd.wasm' : 'kernel.scalar.wasm');
  let m = modules.get(file);
  if (!m) {
    m = new WebAssembly.Module(readFileSync(file));
    modules.set(file, m);
  }
  return m;
}

export interface Prepared {
  n: number;
  bands: BandArray[];
  mask: Uint8Array | null;
  out: Float32Array | null;
}

const align = (x: number) => (x + 63) & ~63;

export class Kernel {
  private readonly x: Exports;
  readonly simd: boolean;
  private bandPtrs: number[] = [];
  private maskPtr = 0;
  private outPtr = 0;
  private scratchPtr = 0;
  private accPtr = 0;
  private specKey = '';
  private accView = new Float64Array(0);
  private n = 0;
  /** The count of non-NaN values in the output (the last run's or statsOf's statistics), or −1. */
  private validCount = -1;
  private specs: BandSpec[] = [];
  /** Whether programs run through the per-formula JIT (SIMD build only; exp/log/pow never do). */
  readonly jit: boolean;
  private readonly jitKernels = new Map<string, JitKernel | null>();
  private readonly jitKeys = new WeakMap<Program, string>();
  private jitFailed = false;
  private lastJit: {
    program: Program;
    specKey: string;
    mask: boolean;
    writeValues: boolean;
    j: JitKernel | null;
  } | null = null;

  constructor(opts: { simd?: boolean; jit?: boolean } = {}) {
    this.simd = opts.simd ?? true;
    this.jit = this.simd && (opts.jit ?? jitDefault);
    const inst = new WebAssembly.Instance(loadModule(this.simd), {
      env: {
        abort: () => {
          throw new Error('kernel abort');
        },
      },
    });
    this.x = inst.exports as unknown as Exports;
  }

  private mem = { f32: new Float32Array(0), i32: new Int32Array(0) };
  /** percentilesBySample's sample and blocks for the last window size (sampleLayout). */
  private layout: { n: number; acc: number; s0: number; smpPtr: number; brPtr: number; most: number } | null = null;

  /**
   * Views of the whole kernel memory, taken again after it grows: growing detaches the old
   * buffer, and a detached view has length 0 (memory.buffer is a call into the engine, a few
   * tens of ns; a 10,000-pixel percentile call asked for it about ten times).
   */
  private views(): { f32: Float32Array; i32: Int32Array } {
    if (this.mem.f32.length === 0) {
      const buf = this.x.memory.buffer;
      this.mem = { f32: new Float32Array(buf), i32: new Int32Array(buf) };
    }
    return this.mem;
  }

  private ensure(bytes: number): void {
    const have = this.views().f32.byteLength;
    if (bytes > have) this.x.memory.grow(Math.ceil((bytes - have) / 65536));
  }

  /** Bytes of kernel memory in use (grows, never shrinks). */
  get memoryBytes(): number {
    return this.x.memory.buffer.byteLength;
  }

  /**
   * Reserves buffers for `n` pixels: one per band (slot = index in `bands`), an optional mask
   * (u8, 0 = not counted) and an optional f32 output. Returns views to fill.
   */
  prepare(n: number, bands: BandSpec[], opts: { mask?: boolean; out?: boolean } = {}): Prepared {
    if (bands.length > 16) throw new Error('at most 16 bands');
    const laid = layBands(this.x.dataBase(), n, bands);
    this.bandPtrs = laid.ptrs;
    let p = laid.end;
    this.maskPtr = opts.mask ? p : 0;
    if (opts.mask) p = align(p + n + 16);
    this.outPtr = p; // the output is always reserved: order statistics read it
    p = align(p + n * 4 + 16);
    this.scratchPtr = p;
    p = align(p + n * 4 + 16);
    this.accPtr = p;
    p += 64;
    this.ensure(p);
    this.n = n;
    this.validCount = -1;
    this.specs = bands;
    this.specKey = jitLayoutKey(bands);
    const buf = this.x.memory.buffer;
    const view = (b: BandSpec, ptr: number): BandArray => {
      switch (b.dtype) {
        case 'f32':
          return new Float32Array(buf, ptr, n);
        case 'u16':
          return new Uint16Array(buf, ptr, n);
        case 'i16':
          return new Int16Array(buf, ptr, n);
        case 'u8':
          return new Uint8Array(buf, ptr, n);
      }
    };
    const dv = new DataView(buf);
    bands.forEach((b, slot) => {
      const t = this.x.bandBase() + slot * 32;
      dv.setInt32(t, this.bandPtrs[slot]!, true);
      dv.setInt32(t + 4, DTYPE_CODE[b.dtype], true);
      dv.setFloat32(t + 8, b.scale ?? 1, true);
      dv.setFloat32(t + 12, b.offset ?? 0, true);
      dv.setFloat32(t + 16, b.nodata ?? 0, true);
      dv.setInt32(t + 20, b.nodata === undefined || b.nodata === null ? 0 : 1, true);
    });
    return {
      n,
      bands: bands.map((b, i) => view(b, this.bandPtrs[i]!)),
      mask: opts.mask ? new Uint8Array(buf, this.maskPtr, n) : null,
      out: opts.out ? new Float32Array(buf, this.outPtr, n) : null,
    };
  }

  /**
   * Runs a program whose band i reads slot i of the last prepare(). Values are written to the
   * output buffer (read them with `values()`); statistics are computed in the same pass.
   */
  run(program: Program, opts: { stats?: boolean; writeValues?: boolean } = {}): Stats {
    if (program.bands.length !== this.specs.length)
      throw new Error(`program reads ${program.bands.length} bands, ${this.specs.length} prepared`);
    const stats = opts.stats !== false;
    const writeValues = opts.writeValues !== false;
    const st = this.runProgram(program, stats, writeValues);
    // values are NaN exactly where not counted (masked or non-finite): percentilesBySample trusts this count
    this.validCount = stats && writeValues ? st.count : -1;
    return st;
  }

  private runProgram(program: Program, stats: boolean, writeValues: boolean): Stats {
    if (this.jit && !this.jitFailed) {
      const j = this.jitFor(program, writeValues);
      if (j) return this.runJit(j, stats, writeValues);
    }
    const x = this.x;
    new Int32Array(x.memory.buffer, x.progBase(), program.code.length).set(program.code);
    for (const [r, v] of program.consts) x.fillConst(r, v);
    x.resetStats();
    x.run(
      program.code.length / 4,
      this.n,
      program.resultReg,
      this.maskPtr,
      writeValues ? this.outPtr : 0,
      stats ? 1 : 0,
    );
    return this.readStats();
  }

  /** The JIT functions of a program for the prepared band layout (cached), or null for the interpreter. */
  private jitFor(program: Program, writeValues: boolean): JitKernel | null {
    // the same program on the same layout as the last run (a worker's common case): no key to build
    const last = this.lastJit;
    if (
      last &&
      last.program === program &&
      last.specKey === this.specKey &&
      last.mask === (this.maskPtr !== 0) &&
      last.writeValues === writeValues
    )
      return last.j;
    const j = this.jitLookup(program, writeValues);
    this.lastJit = { program, specKey: this.specKey, mask: this.maskPtr !== 0, writeValues, j };
    return j;
  }

  private jitLookup(program: Program, writeValues: boolean): JitKernel | null {
    let pk = this.jitKeys.get(program);
    if (pk === undefined) {
      pk = jitSupports(program) ? jitProgramKey(program) : '';
      this.jitKeys.set(program, pk);
    }
    if (pk === '') return null;
    const key = jitKey(pk, this.specKey, this.maskPtr !== 0, writeValues);
    let j = this.jitKernels.get(key);
    if (j === undefined) {
      try {
        const m = jitModule(program, this.specs, this.maskPtr !== 0, writeValues, key);
        j = m ? jitInstantiate(m, this.x.memory) : null;
      } catch (err) {
        // never expected (the tests compile every operation); the interpreter still works
        this.jitFailed = true;
        process.emitWarning(`kernel JIT disabled: ${(err as Error).message}`);
        return null;
      }
      this.jitKernels.set(key, j);
      if (this.jitKernels.size > 64) this.jitKernels.delete(this.jitKernels.keys().next().value!);
    }
    return j;
  }

  /**
   * Runs JIT functions over the prepared pixels: K from the first block of K_BLOCK pixels with a
   * value (the interpreter's rule on a smaller block), then the statistics in calls of JIT_CHUNK pixels, summed here in f64.
   * With statistics, `after` is called on each chunk's pixels once their values are written.
   */
  private runJit(
    j: JitKernel,
    stats: boolean,
    writeValues: boolean,
    after?: (start: number, end: number) => void,
  ): Stats {
    const n = this.n;
    const ptrs = this.bandPtrs;
    const mask = this.maskPtr;
    const acc = this.accPtr;
    if (!stats) {
      if (writeValues)
        for (let s = 0; s < n; s += JIT_CHUNK)
          j.values(s, Math.min(n, s + JIT_CHUNK), this.outPtr, mask, acc, 0, ...ptrs);
      return { ...NO_STATS };
    }
    const dst = writeValues ? this.outPtr : this.scratchPtr;
    let a = this.accView;
    if (a.buffer !== this.x.memory.buffer || a.byteOffset !== acc)
      a = this.accView = new Float64Array(this.x.memory.buffer, acc, 5);
    let count = 0;
    let min = Infinity;
    let max = -Infinity;
    let sS = 0;
    let sQ = 0;
    let k = NaN;
    let start = 0;
    // the blocks before the first value have no statistics: values only, until K is found
    for (; start < n; start += K_BLOCK) {
      const end = Math.min(n, start + K_BLOCK);
      j.values(start, end, dst, mask, acc, 0, ...ptrs);
      k = this.x.chooseK(dst + start * 4, end - start);
      if (!Number.isNaN(k)) break;
    }
    // then everything from that block on (start and end multiples of 8, except the last end)
    for (; start < n; start += JIT_CHUNK) {
      const end = Math.min(n, start + JIT_CHUNK);
      j.stats(start, end, dst, mask, acc, k, ...ptrs);
      after?.(start, end);
      count += a[0]!;
      if (a[1]! < min) min = a[1]!;
      if (a[2]! > max) max = a[2]!;
      sS += a[3]!;
      sQ += a[4]!;
    }
    if (count === 0) return { ...NO_STATS };
    const m2 = Math.max(0, sQ - sS * (sS / count));
    return { count, min, max, mean: k + sS / count, std: Math.sqrt(m2 / count) };
  }

  private readStats(): Stats {
    const s = new Float64Array(this.x.memory.buffer, this.x.statsBase(), 5);
    const count = s[0]!;
    if (count === 0) return { count: 0, min: NaN, max: NaN, mean: NaN, std: NaN };
    return { count, min: s[1]!, max: s[2]!, mean: s[3]!, std: Math.sqrt(s[4]! / count) };
  }

  /** The values of the last run (a view: copy it, or use copyValues, before the next prepare). */
  values(): Float32Array {
    return new Float32Array(this.x.memory.buffer, this.outPtr, this.n);
  }

  /** Copies the values of the last run into `target` (reused or transferable). */
  copyValues(target = new Float32Array(this.n)): Float32Array {
    target.set(this.values());
    return target;
  }

  /** Statistics of an f32 array (copied into kernel memory). */
  statsOf(values: Float32Array): Stats {
    this.prepare(values.length, []);
    new Float32Array(this.x.memory.buffer, this.outPtr, values.length).set(values);
    this.x.statsOf(this.outPtr, values.length);
    const st = this.readStats();
    this.validCount = st.count; // statsOf turns non-finite values into NaN, uncounted
    return st;
  }

  /**
   * Median and 10/25/75/90th percentiles of the last run's non-NaN values, as numpy's default
   * (linear interpolation between closest ranks: rank = p/100 × (count − 1)). With the run's
   * statistics (`range`), by the same paths as `percentiles` with them: a window of 10,000 values
   * in about half the time of a quickselect over all of them, one of 1 M in a fifth.
   */
  orderStats(range?: { min: number; max: number; count?: number }): OrderStats | null {
    return orderFrom(this.percentiles(ORDER_PS, range));
  }

  /**
   * Any percentiles (each in [0, 100]) of the last run's non-NaN values, as numpy's default
   * (`linear`: rank = p/100 × (count − 1), interpolated as numpy's `_lerp`), by selection: the
   * ranks needed (⌊rank⌋ and ⌊rank⌋ + 1) are placed by quickselect, the middle rank first and
   * each half on its own side, O(count × log ranks) instead of a sort. Null when no value.
   * With `range` (the run's statistics; a window of BUCKETS_FROM values or more): with its count
   * and from SAMPLE_FROM values, one pass over brackets placed by a sample (percentilesBySample),
   * else, or when a rank falls outside its bracket, the buckets of [min, max]
   * (percentilesByBuckets). Every path gives the same values.
   */
  percentiles(ps: readonly number[], range?: { min: number; max: number; count?: number }): number[] | null {
    if (range && Number.isFinite(range.min) && Number.isFinite(range.max) && this.n >= BUCKETS_FROM) {
      if (range.count && this.n >= SAMPLE_FROM) {
        const bySample = this.percentilesBySample(ps, range.count);
        if (bySample) return bySample;
      }
      return this.percentilesByBuckets(ps, range.min, range.max);
    }
    const x = this.x;
    const m = x.compactValid(this.outPtr, this.n, this.scratchPtr);
    if (m === 0) return null;
    const ranks = neededRanks(ps, m);
    const at = new Map<number, number>();
    const ptr = this.scratchPtr;
    const place = (lo: number, hi: number, a: number, b: number): void => {
      if (a > b) return;
      const mid = (a + b) >> 1;
      const r = ranks[mid]!;
      at.set(r, x.select(ptr, lo, hi, r));
      place(lo, r - 1, a, mid - 1);
      place(r + 1, hi, mid + 1, b);
    };
    place(0, m - 1, 0, ranks.length - 1);
    return interpolated(ps, m, at);
  }

  /**
   * The same percentiles when the count of values is known (the run's statistics), in one pass
   * (Floyd–Rivest's idea): a random sample of the values (one in each of n^⅔ / 4 strata, at
   * least 512) places around each rank needed a bracket of values [lo, hi] wide enough to hold it
   * but for a chance of about 1 in 1,000; one vector pass counts the values below each bracket and
   * copies those inside; each bracket is narrowed around its ranks (narrowBracket) and each rank
   * selected among what is left. Undefined when a rank is not in its bracket (or more than six
   * brackets are needed, or five or six under 2^19 values): the caller falls back to the buckets,
   * so the result never depends on the sample.
   */
  /** @internal (tests call it to know which path answered) */
  percentilesBySample(ps: readonly number[], count: number): number[] | undefined {
    const n = this.n;
    const lay = this.sampleLayout();
    // five or six brackets pay on large windows only: the five ranks of orderStats took, beyond the
    // fused pass, 12.5 ms against 21.5 by the buckets at 10 M values, 1.7 against 1.9 ms at 1 M,
    // but 26.8 against 23.2 µs at 10,000; so more are declined before the sample is drawn when the
    // sample expected (count / n of it valid) would need them, and before their ends are selected
    // when the sample drawn does (the sample and its ends were 4 µs at 10,000 values); seven or
    // eight (zonal_stats' five ranks with the percentiles asked) from 2^22 values: p5–p95's seven
    // ranks took, beyond the fused pass, 13.4 ms against 17.5 by the buckets at 10 M values, 5.5
    // against 6.5 at 4 M, but 3.1 against 3.0 at 2.1 M and 1.7 against 1.55 at 1.1 M (the brackets
    // of a smaller sample are wider)
    const ranks = neededRanks(ps, count);
    const trusted = count === this.validCount;
    // a window of a few values is answered by its counts whatever the ranks (levelPercentiles):
    // from LEVELS_FROM values the sample is drawn for it even when the brackets would be declined
    const levels = trusted && n >= LEVELS_FROM;
    const declined = sampleSpans(ranks, count, Math.round((lay.s0 * count) / n)).length > 2 * lay.most;
    if (declined && !(levels && this.fewValues(lay))) return undefined;
    const s = this.x.sampleValid(this.outPtr, n, lay.s0, sampleSeed(n), lay.smpPtr);
    if (levels) {
      const byLevels = this.levelPercentiles(ps, count, s, lay);
      if (byLevels) return byLevels;
    }
    if (declined) return undefined;
    const placed = this.sampleBrackets(ranks, count, s, lay);
    if (!placed) return undefined;
    const { lims, guess } = placed;
    // the pass: the values below each bracket counted, those inside copied (branchless: a swizzle
    // per four lanes) to the scratch; the count of values is the run's when it is (this.validCount),
    // else the pass's own
    const u = this.x.bracketPack(this.outPtr, n, lay.brPtr, this.scratchPtr, lims.length >> 1, trusted ? 0 : 1);
    const m = trusted ? count : this.views().i32[(lay.brPtr >> 2) + BLOCK.valid]!;
    return this.bracketFinish(ps, m, lims, guess, lay.brPtr, u);
  }

  /**
   * percentilesBySample's answer for a window of a few values (a custom formula of classes,
   * quantized values), where the brackets would hold whole levels, millions of copies to copy and
   * select among: when the sample (s values at smpPtr) holds at most MAX_BRACKETS distinct values,
   * one pass counts the window's values below and equal to each (countLevels, nothing copied), and
   * when every rank falls on one of them the counts answer. Undefined otherwise: more values in the
   * sample, or a rank among values it did not hold. `count` must be the run's.
   */
  private levelPercentiles(
    ps: readonly number[],
    count: number,
    s: number,
    lay: { smpPtr: number; brPtr: number },
  ): number[] | undefined {
    const lv = this.countLevels(s, lay);
    if (!lv) return undefined;
    const rs = neededRanks(ps, count);
    const inLevel = bracketsOf(
      rs,
      lv.values.length,
      (j) => lv.below[j]!,
      (j) => lv.equal[j]!,
    );
    if (!inLevel) return undefined;
    this.levels++;
    return interpolatedAt(
      ps,
      count,
      rs,
      inLevel.map((j) => lv.values[j]!),
    );
  }

  /**
   * The distinct values of the sample (s values at smpPtr) when there are at most MAX_BRACKETS,
   * ascending, with the count of the window's values below and equal to each (levelCounts: one
   * pass, nothing copied). Undefined when the sample holds more.
   */
  private countLevels(
    s: number,
    lay: { smpPtr: number; brPtr: number },
  ): { values: number[]; below: number[]; equal: number[] } | undefined {
    const x = this.x;
    const lv = lay.brPtr + BLOCK_BYTES; // narrowBracket's block: the levels, then their counts
    const k = x.sampleLevels(lay.smpPtr, s, MAX_BRACKETS, lv);
    if (k === 0 || k > MAX_BRACKETS) return undefined;
    const F = this.views().f32;
    const values = Array.from(F.subarray(lv >> 2, (lv >> 2) + k)).sort((a, b) => a - b);
    F.set(values, lv >> 2);
    x.levelCounts(this.outPtr, this.n, lv, k, lv + 32);
    const I = this.views().i32;
    const at = (lv + 32) >> 2;
    return { values, below: Array.from(I.subarray(at, at + k)), equal: Array.from(I.subarray(at + 8, at + 8 + k)) };
  }

  /**
   * Whether 64 of the last run's values, one in each of 64 strata, are at most MAX_BRACKETS
   * distinct values: the check before the whole sample is drawn for countLevels (at 10 M values
   * the sample's 11,600 reads took 0.2–0.7 ms, these 64 a few µs), for callers that would not draw
   * it otherwise.
   */
  private fewValues(lay: { smpPtr: number; brPtr: number }): boolean {
    return this.fewInSample(this.x.sampleValid(this.outPtr, this.n, 64, sampleSeed(this.n), lay.smpPtr), lay);
  }

  /** Whether the sample (s values at smpPtr, at least one) holds at most MAX_BRACKETS distinct values. */
  private fewInSample(s: number, lay: { smpPtr: number; brPtr: number }): boolean {
    return s > 0 && this.x.sampleLevels(lay.smpPtr, s, MAX_BRACKETS, lay.brPtr + BLOCK_BYTES) <= MAX_BRACKETS;
  }

  /**
   * The last run's values when they are a few values (from LEVELS_FROM values, with the run's
   * statistics): each value, ascending, and how often it occurs, when the sample holds at most
   * MAX_BRACKETS distinct values and their counts add up to the run's. Undefined otherwise. What
   * weighted percentiles walk instead of gathering windows (compute/zonal.ts).
   */
  levelsOf(range: { count: number }): { values: number[]; counts: number[] } | undefined {
    const n = this.n;
    if (n < LEVELS_FROM || range.count === 0 || range.count !== this.validCount) return undefined;
    const lay = this.sampleLayout();
    if (!this.fewValues(lay)) return undefined;
    const s = this.x.sampleValid(this.outPtr, n, lay.s0, sampleSeed(n), lay.smpPtr);
    const lv = this.countLevels(s, lay);
    if (!lv || lv.equal.reduce((a, c) => a + c, 0) !== range.count) return undefined;
    return { values: lv.values, counts: lv.equal };
  }

  /** @internal Placements answered by levelPercentiles (tests read it). */
  levels = 0;

  /**
   * Runs the program as `run` does (values and statistics) and places percentiles ps of its values
   * as `percentiles` with the run's statistics does, with the same results. From RUN_PACK_FROM
   * pixels (a window whose values no longer stay in the core's cache), through the JIT, the sample
   * of percentilesBySample is computed first (the formula at its places only), and the brackets'
   * pass over the values is made chunk by chunk right after the run writes each one, while it is
   * in cache, instead of reading the whole window again (10 M pixels: 5.6–7.4 ms beyond the run
   * instead of 9.1–19.7). The count of values is not known before the run: the brackets
   * are placed from the sample's share of values, and checked against the run's count after it.
   * `inRun` makes the pass in the run (true) or after it (false) whatever the size (the bench
   * compares the two).
   */
  runWithPercentiles(
    program: Program,
    ps: readonly number[],
    opts: { inRun?: boolean } = {},
  ): { stats: Stats; percentiles: number[] | null } {
    const n = this.n;
    const inRun = opts.inRun ?? n >= RUN_PACK_FROM;
    // (a program that reads another number of bands than prepared goes to run, which says so)
    const fits = program.bands.length === this.specs.length;
    const j = inRun && fits && n >= SAMPLE_FROM && this.jit && !this.jitFailed ? this.jitFor(program, true) : null;
    if (!j) return this.runThenPlace(program, ps);
    const x = this.x;
    const lay = this.sampleLayout();
    // the sample as percentilesBySample draws it, computed first: the bands' and the mask's pixels
    // at its places gathered into a window of s0 pixels (the reads overlap their cache misses), the
    // formula run on that window once, its non-NaN values kept in order (10 M pixels: 0.3 ms
    // against 1.7 for the formula called on each place, one pixel a call)
    // (padded to a multiple of 8 pixels with the last place again: every one in the JIT's vector
    // loop, as the run computes them, not its scalar tail, whose float32 NDB can differ by an ulp)
    const seed = sampleSeed(n);
    const s0 = lay.s0;
    const s8 = (s0 + 7) & ~7;
    const places = align(lay.brPtr + 2 * BLOCK_BYTES);
    const { ptrs: gathered, end } = layBands(align(places + s8 * 4 + 16), s8, this.specs);
    let at = end;
    const gMask = this.maskPtr ? at : 0;
    if (gMask) at = align(at + s8 + 16);
    const gOut = at;
    this.ensure(gOut + s8 * 4 + 64);
    x.samplePlaces(n, s0, seed, places);
    const P = this.views().i32;
    P.fill(P[(places >> 2) + s0 - 1]!, (places >> 2) + s0, (places >> 2) + s8);
    for (const [i, b] of this.specs.entries())
      x.gatherPlaces(this.bandPtrs[i]!, places, s8, DTYPE_BYTES[b.dtype], gathered[i]!);
    if (gMask) x.gatherPlaces(this.maskPtr, places, s8, 1, gMask);
    j.values(0, s8, gOut, gMask, this.accPtr, 0, ...gathered);
    const s = x.compactValid(gOut, s0, lay.smpPtr);
    // a sample of a few values: the window is answered after the run by its counts (levelPercentiles)
    if (this.fewInSample(s, lay)) return this.runThenPlace(program, ps);
    // the count expected from the sample's share of values (the ranks' places in it are what count)
    const expected = Math.max(1, Math.round((s * n) / lay.s0));
    const placed = this.sampleBrackets(neededRanks(ps, expected), expected, s, lay);
    if (!placed) return this.runThenPlace(program, ps);
    const { lims, guess } = placed;
    const k = lims.length >> 1;
    const br = lay.brPtr;
    const b4 = br >> 2;
    const I = this.views().i32;
    const below = new Float64Array(k);
    let u = 0;
    const { outPtr: out, scratchPtr: scratch } = this;
    const stats = this.runJit(j, true, true, (start, end) => {
      u += x.bracketPack(out + start * 4, end - start, br, scratch + u * 4, k, 0);
      for (let q = 0; q < k; q++) below[q] += I[b4 + BLOCK.below + q]!;
    });
    this.validCount = stats.count;
    if (stats.count === 0) return { stats, percentiles: null };
    for (let q = 0; q < k; q++) I[b4 + BLOCK.below + q] = below[q]!;
    const r = this.bracketFinish(ps, stats.count, lims, guess, br, u);
    return { stats, percentiles: r ?? this.percentilesByBuckets(ps, stats.min, stats.max) };
  }

  /** runWithPercentiles without the pass in the run: run, then percentiles with its statistics. */
  private runThenPlace(program: Program, ps: readonly number[]): { stats: Stats; percentiles: number[] | null } {
    const stats = this.run(program);
    return { stats, percentiles: stats.count ? this.percentiles(ps, stats) : null };
  }

  /**
   * The size of percentilesBySample's sample for this window (n^⅔ / 4 strata, at least 512: since
   * the brackets are narrowed after the pass, a smaller sample, with wider brackets, costs less
   * than it draws and sorts out: 10 M pixels −0.4 ms of 5.9), where it and the blocks go (memory
   * ensured), and how many brackets a pass takes.
   */
  private sampleLayout(): { s0: number; smpPtr: number; brPtr: number; most: number } {
    const n = this.n;
    // (kept for the window: n ** (2 / 3) alone was 5 % of the JS of a 10,000-pixel call)
    let lay = this.layout;
    if (lay?.n !== n || lay.acc !== this.accPtr) {
      const s0 = Math.min(n >> 2, Math.max(512, Math.round(n ** (2 / 3) / 4)));
      const smpPtr = align(this.accPtr + 64);
      const brPtr = align(smpPtr + s0 * 4);
      const most = n < 1 << 19 ? 4 : n < 1 << 22 ? 6 : MAX_BRACKETS;
      lay = this.layout = { n, acc: this.accPtr, s0, smpPtr, brPtr, most };
      // (memory only grows: ensured once for the layout)
      this.ensure(brPtr + 2 * BLOCK_BYTES); // the sample, bracketPack's block, then narrowBracket's
    }
    return lay;
  }

  /**
   * The brackets [lo, hi] (flat) around the ranks of `count` values, by selection in the sample of
   * s values (the middle end first), merged where they meet, written to the block at brPtr. Undefined when
   * the sample has too few values or more brackets than a pass takes are needed. A first bracket
   * that starts within TAIL_SHARE of the sample's start is opened to −∞, a last one that ends
   * within it of its end to +∞ (`lims`: what the pass takes; `guess`: the sample's ends, where
   * narrowBracket starts): the pass then compares and counts that end for no value.
   */
  private sampleBrackets(
    ranks: readonly number[],
    count: number,
    s: number,
    lay: { smpPtr: number; brPtr: number; most: number },
  ): { lims: number[]; guess: number[] } | undefined {
    if (s < 64) return undefined;
    const spans = sampleSpans(ranks, count, s);
    if (spans.length > 2 * lay.most) return undefined;
    // the ends in the sample, the middle one first and each half on its own side (each selection
    // leaves the values below its place left of it): about s × log2(ends) values visited instead
    // of s for each end
    const x = this.x;
    // (a span past the sample's start or end: only the first and the last can be, an open end)
    const ends = spans.map((q) => (q < 0 ? -Infinity : q >= s ? Infinity : 0));
    const place = (lo: number, hi: number, i0: number, i1: number): void => {
      if (i0 > i1) return;
      const mid = (i0 + i1) >> 1;
      const q = spans[mid]!;
      ends[mid] = x.selectFR(lay.smpPtr, lo, hi, q);
      place(lo, q - 1, i0, mid - 1);
      place(q + 1, hi, mid + 1, i1);
    };
    place(0, s - 1, spans[0]! < 0 ? 1 : 0, ends.length - (spans[ends.length - 1]! >= s ? 2 : 1));
    const lims: number[] = []; // lo, hi of each bracket
    for (let j = 0; j < spans.length; j += 2) {
      const lo = ends[j]!;
      const hi = ends[j + 1]!;
      const last = lims.length - 1;
      if (last > 0 && lo <= lims[last]!) lims[last] = hi;
      else lims.push(lo, hi);
    }
    const guess = lims.slice();
    // (not a bracket of one value: a level of ties, which tiedRanks answers by its count)
    const tail = TAIL_SHARE * s;
    const z = lims.length - 1;
    if (spans[0]! < tail && lims[0]! < lims[1]!) lims[0] = -Infinity;
    if (spans[spans.length - 1]! > s - 1 - tail && lims[z - 1]! < lims[z]!) lims[z] = Infinity;
    const k = lims.length >> 1;
    const F = this.views().f32;
    const b4 = lay.brPtr >> 2; // brPtr is 16-byte aligned
    for (let j = 0; j < BLOCK.slots; j++) {
      F[b4 + BLOCK.lo + j] = j < k ? lims[2 * j]! : NaN;
      F[b4 + BLOCK.hi + j] = j < k ? lims[2 * j + 1]! : NaN;
    }
    return { lims, guess };
  }

  /**
   * After the brackets' pass (u values inside them in the scratch, the counts below each in the
   * block at br) over m values: the values split by bracket, each rank's bracket found (undefined
   * when a rank is in none), each bracket narrowed (narrowBracket) and its ranks selected in what
   * is left.
   */
  private bracketFinish(
    ps: readonly number[],
    m: number,
    lims: readonly number[],
    guess: readonly number[],
    br: number,
    u: number,
  ): number[] | undefined {
    const x = this.x;
    const n = this.n;
    const k = lims.length >> 1;
    const b4 = br >> 2;
    // brackets of one value (ties: a field of a few levels, where the union can be most of the
    // window) hold nothing to select: when every rank falls in one, the counts answer
    const oneValue = m > 0 && lims.some((v, i) => i % 2 === 0 && v === lims[i + 1]);
    if (oneValue) {
      const tied = this.tiedRanks(ps, m, lims, br, u);
      if (tied) {
        this.tied++;
        return tied;
      }
    }
    // room for the split and the narrowing: each bracket's area sized for all u values, or (on a
    // large window where that would take more than 8 bytes a pixel: seven or eight brackets) for its
    // own, counted first (bracketSizes); brackets that still hold more than their share (ties, a
    // count that misplaces them) leave the ranks to the buckets instead
    const split = align(br + 2 * BLOCK_BYTES);
    const starts: number[] = [];
    const lens: number[] = [];
    let packRoom = 0;
    let widest = u; // the most values one bracket can hold (the narrowing's two areas each take as many)
    if (k > 1) {
      const stride = align(u * 4 + 16);
      const exact = n > 1 << 20 && (k + 2) * stride > 8 * n;
      if (exact && !oneValue) x.bracketSizes(this.scratchPtr, u, br, k); // (tiedRanks counted them)
      const I = this.views().i32;
      widest = 0;
      for (let j = 0; j < k; j++) {
        const len = exact ? I[b4 + BLOCK.split + j]! : u;
        I[b4 + BLOCK.starts + j] = packRoom;
        packRoom += align(len * 4 + 16);
        widest = Math.max(widest, len);
      }
    }
    const areas = packRoom + 2 * align(widest * 4 + 16);
    if (n > 1 << 20 && areas > 8 * n) return undefined;
    this.ensure(split + areas + 64);
    const I = this.views().i32;
    if (k === 1) {
      starts.push(this.scratchPtr);
      lens.push(u);
    } else {
      x.bracketSplit(this.scratchPtr, u, br, split, k);
      for (let j = 0; j < k; j++) {
        starts.push(split + I[b4 + BLOCK.starts + j]!);
        lens.push(I[b4 + BLOCK.split + j]!);
      }
    }
    if (m === 0) return undefined;
    // each rank's bracket (each rank must lie in one, at or above the values below it)
    const rs = neededRanks(ps, m);
    const inBracket = bracketsOf(
      rs,
      k,
      (j) => I[b4 + BLOCK.below + j]!,
      (j) => lens[j]!,
    );
    if (!inBracket) return undefined;
    let room = 0;
    for (const j of inBracket) room = Math.max(room, lens[j]!);
    // each bracket narrowed (narrowBracket), then its ranks selected in what is left
    const br2 = br + BLOCK_BYTES;
    const bufA = align(split + packRoom);
    const bufB = align(bufA + room * 4 + 16);
    const at: number[] = [];
    for (let i = 0; i < rs.length; ) {
      const j = inBracket[i]!;
      let e = i + 1;
      while (e < rs.length && inBracket[e] === j) e++;
      const below = I[b4 + BLOCK.below + j]!;
      const { ptr, len, first } = this.narrowBracket(
        rs[i]!,
        rs[e - 1]!,
        lims[2 * j]!,
        lims[2 * j + 1]!,
        guess[2 * j]!,
        guess[2 * j + 1]!,
        starts[j]!,
        lens[j]!,
        below,
        br2,
        bufA,
        bufB,
      );
      let from = 0;
      let prev = -1; // the last place selected
      for (; i < e; i++) {
        const q = rs[i]! - first;
        // the next place after one selected: the smallest value right of it
        at.push(q === prev + 1 ? x.minOf(ptr, q, len - 1) : x.selectFR(ptr, from, len - 1, q));
        from = q;
        prev = q;
      }
    }
    return interpolatedAt(ps, m, rs, at);
  }

  /**
   * bracketFinish's answer when every rank falls in a bracket of one value (lo = hi): that value,
   * each bracket's count from bracketSizes (u with one bracket). Undefined when a rank falls in
   * another bracket, or in none.
   */
  private tiedRanks(
    ps: readonly number[],
    m: number,
    lims: readonly number[],
    br: number,
    u: number,
  ): number[] | undefined {
    const k = lims.length >> 1;
    const b4 = br >> 2;
    if (k > 1) this.x.bracketSizes(this.scratchPtr, u, br, k);
    const I = this.views().i32;
    const rs = neededRanks(ps, m);
    const inBracket = bracketsOf(
      rs,
      k,
      (j) => I[b4 + BLOCK.below + j]!,
      (j) => (k > 1 ? I[b4 + BLOCK.split + j]! : u),
    );
    if (!inBracket || inBracket.some((j) => lims[2 * j] !== lims[2 * j + 1])) return undefined;
    return interpolatedAt(
      ps,
      m,
      rs,
      inBracket.map((j) => lims[2 * j]!),
    );
  }

  /** @internal Placements answered by tiedRanks (tests read it). */
  tied = 0;

  /** @internal Narrowing passes run and those whose interpolated bracket missed a rank (tests read them). */
  readonly narrowings = { passes: 0, misses: 0 };

  /**
   * Narrows the values of one bracket (all in [lo, hi], `len` of them from `ptr`, `first` values
   * under them) around its ranks t0…t1 before they are selected: a narrower bracket is placed by
   * linear interpolation of the ranks between lo and hi (with a margin of an eighth of the values
   * and 16 more each side), and one vector pass (bracketPack with one bracket) counts the values
   * below it and copies those inside, into bufA and bufB in turn, while more than NARROW_MIN values
   * are left. When a rank falls outside the interpolated bracket (a bracket whose values are far
   * from evenly spread) the narrowing stops and the ranks are selected among the values it had:
   * the result never depends on the guess. A bracket opened to ±∞ (a tail: sampleBrackets) is
   * first narrowed to the sample's bracket [gLo, gHi]. Returns where the values are, how many, and
   * the rank of the first.
   */
  private narrowBracket(
    t0: number,
    t1: number,
    lo: number,
    hi: number,
    gLo: number,
    gHi: number,
    ptr: number,
    len: number,
    first: number,
    br: number,
    bufA: number,
    bufB: number,
  ): { ptr: number; len: number; first: number } {
    const x = this.x;
    let into = bufA;
    const { f32: F, i32: I } = this.views();
    const b4 = br >> 2; // br is 16-byte aligned
    let tail = gLo > lo || gHi < hi;
    // its passes take one bracket: the other slots NaN (nothing below, nothing inside), once
    if (len > NARROW_MIN) F.fill(NaN, b4 + BLOCK.lo, b4 + BLOCK.hi + BLOCK.slots);
    while (len > NARROW_MIN && (tail || (Number.isFinite(lo) && Number.isFinite(hi) && hi > lo))) {
      if (tail) {
        F[b4 + BLOCK.lo] = gLo;
        F[b4 + BLOCK.hi] = gHi;
        tail = false;
      } else {
        const d = len / 8 + 16;
        const a = t0 - first - d;
        const b = t1 - first + d;
        if (a <= 0 && b >= len - 1) break;
        F[b4 + BLOCK.lo] = a <= 0 ? lo : lo + (hi - lo) * ((a + 0.5) / len);
        F[b4 + BLOCK.hi] = b >= len - 1 ? hi : lo + (hi - lo) * ((b + 0.5) / len);
      }
      const got = x.bracketPack(ptr, len, br, into, 1, 0);
      this.narrowings.passes++;
      const below = I[b4 + BLOCK.below]!;
      if (t0 - first < below || t1 - first >= below + got) {
        this.narrowings.misses++;
        break;
      }
      ptr = into;
      first += below;
      lo = F[b4 + BLOCK.lo]!;
      hi = F[b4 + BLOCK.hi]!;
      into = into === bufA ? bufB : bufA;
      if (got === len) break;
      len = got;
    }
    return { ptr, len, first };
  }

  /**
   * The same percentiles when the values' min and max are known (the run's statistics): a count
   * per bucket of [min, max] (about 32 values a bucket, at most 65,536 buckets), the buckets that
   * hold the ranks needed found from the counts, their values gathered, and each rank selected
   * among the few of its bucket: two linear passes instead of several quickselect partitions. A
   * bucket of over 4,096 values that holds one value (ties: a field of a few levels) answers
   * without a selection (oneValue).
   */
  private percentilesByBuckets(ps: readonly number[], lo: number, hi: number): number[] | null {
    const x = this.x;
    const t = this.bucketCounts(lo, hi);
    const { hist, slot, off, m } = t;
    if (m === 0) return null;
    // the ranks needed, in order, and the bucket (and place in it) of each
    const ranks = neededRanks(ps, m);
    const where: Array<{ r: number; s: number; at: number }> = [];
    const starts: number[] = [];
    const sizes: number[] = [];
    let b = 0;
    let before = 0; // values in buckets before b
    let gathered = 0;
    for (const r of ranks) {
      while (before + hist[b]! <= r) before += hist[b++]!;
      if (slot[b]! < 0) {
        slot[b] = starts.length;
        off[starts.length] = gathered;
        starts.push(gathered);
        sizes.push(hist[b]!);
        gathered += hist[b]!;
      }
      where.push({ r, s: slot[b]!, at: r - before });
    }
    this.bucketGather(t);
    const at = new Map<number, number>();
    const sp = this.scratchPtr;
    let tied: Map<number, boolean> | undefined; // per slot of over 4,096 values: one value only
    for (const w of where) {
      const start = starts[w.s]!;
      const size = sizes[w.s]!;
      let one = false;
      if (size > 4096) {
        tied ??= new Map();
        if (!tied.has(w.s)) tied.set(w.s, x.oneValue(sp, start, start + size - 1) !== 0);
        one = tied.get(w.s)!;
      }
      at.set(w.r, one ? this.views().f32[(sp >> 2) + start]! : x.select(sp, start, start + size - 1, start + w.at));
    }
    return interpolated(ps, m, at);
  }

  /**
   * The last run's values whose ranks (0-based among its m non-NaN values; m must be the run's
   * count) lie in each range [r0, r1], with the others of their buckets of [min, max]: per range,
   * those values sorted, and the count of values below the first. Two passes whatever the ranges
   * (bucketCount, bucketGather); the values of a range's buckets are every value between its
   * first and its last. A range far wider in values than in ranks (ties fill its buckets: a field
   * of a few levels) is sorted bucket by bucket, a bucket of one value not at all. Weighted
   * percentiles gather the values around their places with it.
   */
  rankWindows(
    ranges: ReadonlyArray<readonly [number, number]>,
    range: { min: number; max: number; count: number },
  ): Array<{ first: number; values: Float32Array }> {
    // (room after the tables for sortF32's second buffer: a range's values are at most the window's)
    const t = this.bucketCounts(range.min, range.max, this.n * 4 + 16);
    const { nb, hist, slot, off, m } = t;
    if (m !== range.count) throw new Error(`rankWindows: ${range.count} values expected, ${m} counted`);
    // before[b]: the values in the buckets under b; each range's first and last bucket
    const before = new Float64Array(nb + 1);
    for (let b = 0; b < nb; b++) before[b + 1] = before[b]! + hist[b]!;
    const bucketOf = (r: number): number => {
      let a = 0;
      let z = nb - 1;
      while (a < z) {
        const mid = (a + z) >> 1;
        if (before[mid + 1]! <= r) a = mid + 1;
        else z = mid;
      }
      return a;
    };
    const ends = ranges.map(([r0, r1]) => [bucketOf(r0), bucketOf(r1)] as const);
    for (const [b0, b1] of ends) for (let b = b0; b <= b1; b++) slot[b] = 0;
    // slots in bucket order (a range's buckets next to each other), each at its place in the scratch
    const startOf = new Float64Array(nb);
    let slots = 0;
    let gathered = 0;
    for (let b = 0; b < nb; b++) {
      if (slot[b]! < 0) continue;
      slot[b] = slots;
      off[slots++] = gathered;
      startOf[b] = gathered;
      gathered += hist[b]!;
    }
    this.bucketGather(t); // (no memory grows from here on: hist stays valid)
    const F = this.views().f32;
    const from = this.scratchPtr >> 2;
    const x = this.x;
    // sorted in the kernel's memory (sortF32), then copied out: a typed array's own sort took
    // 30–80 ns a value
    return ends.map(([b0, b1], i) => {
      const start = from + startOf[b0]!;
      const len = before[b1 + 1]! - before[b0]!;
      const [r0, r1] = ranges[i]!;
      if (len <= 2 * (r1 - r0 + 1) + 4096) x.sortF32(start * 4, len, t.freePtr);
      else
        for (let b = b0, at = start * 4; b <= b1; at += hist[b++]! * 4)
          if (!x.oneValue(at, 0, hist[b]! - 1)) x.sortF32(at, hist[b]!, t.freePtr);
      return { first: before[b0]!, values: F.slice(start, start + len) };
    });
  }

  /**
   * Counts the last run's values per bucket of [lo, hi] (bucketCount: ⌊(x − lo) × scale⌋ in f32,
   * monotone, so the buckets are in value order; about 32 values a bucket, at most 65,536), with
   * the slot and offset tables bucketGather reads (no slot yet) and m, the values counted;
   * `room` bytes are free for the caller from freePtr.
   */
  private bucketCounts(lo: number, hi: number, room = 0) {
    const n = this.n;
    let nb = 16;
    while (nb < 65536 && nb * 32 < n) nb *= 2;
    const histPtr = align(this.accPtr + 64);
    const slotPtr = align(histPtr + 4 * (nb + 1) * 4); // four count tables (bucketCount)
    const offPtr = align(slotPtr + (nb + 1) * 4); // slot[nb]: NaN's, never gathered
    const freePtr = align(offPtr + nb * 4 + 64); // `room` bytes from here for the caller
    this.ensure(freePtr + room);
    const fLo = Math.fround(lo);
    const scale = hi > lo ? Math.fround(nb / (hi - lo)) : 0;
    this.x.bucketCount(this.outPtr, n, fLo, scale, nb, histPtr);
    const buf = this.x.memory.buffer;
    const hist = new Uint32Array(buf, histPtr, nb + 1);
    const slot = new Int32Array(buf, slotPtr, nb + 1).fill(-1);
    const off = new Int32Array(buf, offPtr, nb);
    return { nb, fLo, scale, slotPtr, offPtr, freePtr, hist, slot, off, m: n - hist[nb]! };
  }

  /** Gathers the values of the buckets given a slot (bucketCounts' tables) to the scratch. */
  private bucketGather(t: { nb: number; fLo: number; scale: number; slotPtr: number; offPtr: number }): void {
    this.x.bucketGather(this.outPtr, this.n, t.fLo, t.scale, t.nb, t.slotPtr, t.offPtr, this.scratchPtr);
  }

  /**
   * numpy.histogram's counts of the last run's non-NaN values over `edges` (increasing; values
   * outside left out, the last bin closed), in one pass: with `uniform` (equal bins) each value's
   * bin from the step, checked against the edges either side, else by bisection; in float64.
   * compute/zonal.ts histogramOf gives the edges and the weights.
   */
  countBins(edges: Float64Array, uniform: boolean): Uint32Array {
    const nb = edges.length - 1;
    const ePtr = align(this.accPtr + 64);
    const cPtr = align(ePtr + edges.length * 8);
    this.ensure(cPtr + 4 * nb * 4 + 64); // four count tables (histogramNp)
    new Float64Array(this.x.memory.buffer, ePtr, edges.length).set(edges);
    this.x.histogramNp(this.outPtr, this.n, ePtr, nb, uniform ? 1 : 0, cPtr);
    return new Uint32Array(this.x.memory.buffer, cPtr, nb).slice();
  }

  /** Histogram of the last run's values over [lo, hi] in `bins` equal bins (outliers clamp to the edge bins). */
  histogram(lo: number, hi: number, bins: number): Uint32Array {
    const ptr = this.scratchPtr;
    this.x.histogram(this.outPtr, this.n, lo, hi, bins, ptr);
    return new Uint32Array(this.x.memory.buffer, ptr, bins).slice();
  }
}

export type { BandId };

/**
 * Window sizes from which percentiles with the run's statistics leave the quickselect over all
 * values for the buckets of [min, max], and the buckets for the sample's brackets (when the count
 * is known). NDVI over a round field, CPU µs beyond the fused pass, p10–p90 / p5, p50, p95 (a
 * scratch run, 2026-11-27): 256 px quickselect 2.1 / 1.6, buckets 2.3 / 1.8; 576 px 3.3 / 2.5
 * against 2.6 / 2.2; 1,600 px 7.0 / 5.6 against 4.2 / 3.7; 5,041 px, three ranks, buckets 9.1,
 * sample 9.8; 7,225 px 12.4 against 11.7.
 */
const BUCKETS_FROM = 512;
const SAMPLE_FROM = 6144;

/**
 * Brackets of one pass of percentilesBySample (bracketPack's k): enough for OrderStats' five ranks
 * with p5 and p95 (the worker asks for zonal_stats' ranks and the percentiles asked at once).
 */
const MAX_BRACKETS = 8;
/**
 * The share of the sample within which a first bracket is opened to −∞ and a last one to +∞
 * (sampleBrackets).
 */
const TAIL_SHARE = 0.1;
/**
 * Values from which percentilesBySample asks whether the window is a few values (levelPercentiles)
 * before placing brackets. Below it ties cost little: a 10,000-pixel field of two levels took 0.07
 * ms beyond the fused pass, NDVI 0.04. On 10 M pixels, before levelPercentiles, two levels took
 * 87–142 ms and NDVI 10–23 (percentiles 5, 50, 95 and p5–p95; 2026-11-27, Intel Xeon guest).
 */
const LEVELS_FROM = 1 << 18;

/**
 * bracketPack's and bracketSplit's block (assembly/index.ts), in 4-byte places: f32 lo and hi of
 * each bracket (`slots` places each, NaN past k), i32 counts below each lo, the count of non-NaN
 * values (with countValid), then bracketSplit's count of each bracket (or bracketSizes'), then where
 * bracketSplit puts each bracket's values (bytes from its dst). 16-byte aligned.
 */
const BLOCK = { lo: 0, hi: 8, slots: 8, below: 16, valid: 24, split: 25, starts: 33 } as const;
/** Room for one block (164 bytes used); narrowBracket's follows percentilesBySample's. */
const BLOCK_BYTES = 176;

/** The seed of percentilesBySample's sample of n values. */
const sampleSeed = (n: number) => 0x9e3779b9 ^ n;

/**
 * Pixels from which runWithPercentiles makes the brackets' pass chunk by chunk in the run: the
 * window's values (4 bytes a pixel) no longer stay in a core's cache. Measured (the kernel bench's
 * large-window table, percentiles 5, 50, 95, µs beyond the fused pass, after the run against in
 * it): 2026-11-27, Intel Xeon guest with 2 MiB L2 a core, four runs: 2^18 px 203–216 against
 * 221–231, 2^19 397–405 against 421–434, 2^20 796–833 against 796–838, 2^21 1,504–1,622 against
 * 1,503–1,545, 10 M 9.1–19.7 ms against 5.6–7.4; AMD EPYC (family 25), two runs, the sample's
 * pixels gathered: 2^18 208–219 against 208–213, 2^19 379–383 against 363–376, 2^20 756 against
 * 754, 2^21 1,449–1,464 against 1,434–1,471, 10 M 5.9–6.4 ms against 6.2–6.3.
 */
const RUN_PACK_FROM = 1 << 20;

/**
 * One buffer per band for n pixels from `at` (each 16-byte aligned, 16 bytes spare), and where the
 * last ends: the layout of prepare()'s bands and of runWithPercentiles' gathered sample.
 */
function layBands(at: number, n: number, bands: readonly BandSpec[]): { ptrs: number[]; end: number } {
  const ptrs = bands.map((b) => {
    const ptr = at;
    at = align(at + n * DTYPE_BYTES[b.dtype] + 16);
    return ptr;
  });
  return { ptrs, end: at };
}

/** numpy's `_lerp`: a + (b − a)·t, or b − (b − a)·(1 − t) from t = 0.5 on (monotone, exact at t = 1). */
export function lerp(a: number, b: number, t: number): number {
  const d = b - a;
  return t >= 0.5 ? b - d * (1 - t) : a + d * t;
}

/**
 * The brackets of percentilesBySample in positions of a sorted sample of s values: around each
 * rank's place in it, 3.3 standard deviations of the sample rank and 2 more each side, merged
 * where they meet or overlap. Flat: a and b of each, a < 0 or b ≥ s where open.
 */
function sampleSpans(ranks: readonly number[], count: number, s: number): number[] {
  const spans: number[] = [];
  for (let i = 0; i < ranks.length; ) {
    let a = 0;
    let b = -1;
    for (; i < ranks.length; i++) {
      const q = count > 1 ? ranks[i]! / (count - 1) : 0;
      const t = q * (s - 1);
      const d = 3.3 * Math.sqrt(s * q * (1 - q)) + 2;
      const a1 = Math.floor(t - d);
      if (b >= a && a1 > b + 1) break;
      if (b < a) a = a1;
      b = Math.max(b, Math.ceil(t + d));
    }
    spans.push(a, b);
  }
  return spans;
}

/**
 * The bracket of each rank (ascending) among k brackets of `len(j)` values with `below(j)` values
 * under each: the first that reaches past it; undefined when a rank lies in none (past the last,
 * or under the values of its bracket).
 */
function bracketsOf(
  rs: readonly number[],
  k: number,
  below: (j: number) => number,
  len: (j: number) => number,
): number[] | undefined {
  const out: number[] = [];
  for (const r of rs) {
    let j = 0;
    while (j < k && r >= below(j) + len(j)) j++;
    if (j >= k || r < below(j)) return undefined;
    out.push(j);
  }
  return out;
}

/** The ranks (0-based, ascending, once each) that numpy's linear percentiles of m values read. */
function neededRanks(ps: readonly number[], m: number): number[] {
  const out: number[] = [];
  for (const p of ps) {
    const rank = (m - 1) * (p / 100);
    const k = Math.floor(rank);
    out.push(k);
    if (rank > k) out.push(k + 1);
  }
  // ascending: an insertion sort, as the list is short and mostly in order already (a sort with a
  // comparator took 0.5 µs of a 10,000-pixel call, twice)
  if (out.length > 64) out.sort((a, b) => a - b);
  else
    for (let i = 1; i < out.length; i++) {
      const v = out[i]!;
      let j = i - 1;
      for (; j >= 0 && out[j]! > v; j--) out[j + 1] = out[j]!;
      out[j + 1] = v;
    }
  let w = 0;
  for (let i = 0; i < out.length; i++) if (i === 0 || out[i] !== out[w - 1]) out[w++] = out[i]!;
  if (w < out.length) out.length = w;
  return out;
}

/** The percentiles from the values at the ranks they read (`at`), interpolated as numpy's `_lerp`. */
function interpolate(ps: readonly number[], m: number, at: (rank: number) => number): number[] {
  return ps.map((p) => {
    const rank = (m - 1) * (p / 100);
    const k = Math.floor(rank);
    const t = rank - k;
    const a = at(k);
    return t > 0 ? lerp(a, at(k + 1), t) : a;
  });
}

/** The same, from values `at[i]` of ranks `rs[i]` (ascending). */
function interpolatedAt(ps: readonly number[], m: number, rs: readonly number[], at: readonly number[]): number[] {
  return interpolate(ps, m, (r) => {
    let lo = 0;
    let hi = rs.length - 1;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (rs[mid]! < r) lo = mid + 1;
      else hi = mid;
    }
    return at[lo]!;
  });
}

/** The same, from a map of rank → value. */
function interpolated(ps: readonly number[], m: number, at: Map<number, number>): number[] {
  return interpolate(ps, m, (r) => at.get(r)!);
}
