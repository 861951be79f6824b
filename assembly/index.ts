// The pixel kernel: a register virtual machine that runs compiled band-math bytecode over blocks
// of pixels in this module's memory, and reductions over the results.
//
// ABI (the host owns the memory layout above dataBase()):
// - Program: `nInstr` instructions of 4 i32 [op, dst, a, b] at progBase(). For the *C ops
//   (operation with a constant) b holds the constant's f32 bits.
// - Band slots (16): at bandBase() + slot*32: ptr i32, dtype i32 (0 f32, 1 u16, 2 i16, 3 u8),
//   scale f32, offset f32, nodata f32, hasNodata i32. LOAD turns a block of a slot into f32
//   reflectance = DN*scale + offset; DN 0 (Sentinel-2's no-data) and DN == nodata become NaN
//   (for f32 inputs only NaN and the declared nodata).
// - Registers: BLOCK f32 each at regBase() + r*BLOCK*4 (BLOCK = 512: 2 KB a register, so a
//   program's working set stays in L1). Constant registers are filled once per run.
// - Results: NaN marks "no value" (masked, nodata, x/0, NaN input). Non-finite results (±Inf from
//   overflow or log(0)) become NaN on output, so statistics and JSON never see infinities.
// - Statistics (f64) at statsBase(): count, min, max, mean, m2 (sum of squared deviations).
//   One pass: the values are shifted by K, one of the values of the first block that has any
//   (the one closest to that block's mean), and Σ(x − K) and Σ(x − K)² are accumulated in f64
//   lanes, summed per block (a two-level sum) into the run's totals; mean = K + S/n,
//   m2 = Q − S²/n. Invalid lanes are replaced by K: they add exactly 0 and, K being one of the
//   values, leave min and max alone, so the loops need no per-lane masking of the sums.
// - A program that is one NDB instruction (NDVI-shaped, two u16 bands) runs as one fused loop over
//   all pixels: load, mask, normalised difference, store and statistics with nothing in between.
// Nothing here allocates: the host grows memory and lays out buffers.

import {
  OP_ABS, OP_ADD, OP_ADDC, OP_DIV, OP_DIVC, OP_EXP, OP_LOAD, OP_LOG, OP_MAX, OP_MAXC, OP_MIN, OP_MINC, OP_MUL, OP_MULC,
  OP_MULCADD, OP_ND, OP_NDB, OP_NEG, OP_POW, OP_RDIVC, OP_RSUBC, OP_SQRT, OP_SUB, OP_SUBC,
} from './opcodes';

// @ts-ignore: decorator
@inline const BLOCK: i32 = 512;
const MAX_INSTR: i32 = 4096;
const MAX_REGS: i32 = 256;
const SLOTS: i32 = 16;
// Pixels per partial sum in the fused NDB loop (a multiple of 8).
// @ts-ignore: decorator
@inline const CHUNK: i32 = 2048;

const PROG: usize = (__heap_base + 63) & ~63;
const BANDS: usize = PROG + <usize>(MAX_INSTR * 16);
const STATS: usize = BANDS + <usize>(SLOTS * 32);
// Vector constants of the running loop (12 slots of 16 bytes after the statistics): V8 would
// otherwise re-broadcast a splat of a runtime scalar on every iteration; a load from here is one
// instruction, often folded into its use.
const VC: usize = STATS + 64;
const REGS: usize = (STATS + 256 + 63) & ~63;
const DATA: usize = REGS + <usize>(MAX_REGS * BLOCK * 4);

export function progBase(): usize { return PROG; }
export function bandBase(): usize { return BANDS; }
export function statsBase(): usize { return STATS; }
export function regBase(): usize { return REGS; }
export function dataBase(): usize { return DATA; }
export function blockSize(): i32 { return BLOCK; }
export function maxRegisters(): i32 { return MAX_REGS; }
export function simdEnabled(): i32 { return ASC_FEATURE_SIMD ? 1 : 0; }

// Op codes: generated from src/compute/opcodes.ts (see there for what each does). NEG … LOG are the
// unary operations; ADDC … MAXC take a constant c (its f32 bits in the instruction's b field, no
// constant register read): a op c, c op a for the reversed RSUBC / RDIVC.

const VC_SCALE: i32 = 0; // f32x4
const VC_OFFSET: i32 = 1; // f32x4
const VC_NODATA: i32 = 2; // f32x4 or i16x8
const VC_SCALE_B: i32 = 3;
const VC_OFFSET_B: i32 = 4;
const VC_NODATA_B: i32 = 5;
const VC_K: i32 = 6; // f32x4 K
const VC_DK: i32 = 7; // f64x2 K
const VC_C: i32 = 8; // f32x4 an instruction's constant

// @ts-ignore: decorator
@inline function vc(slot: i32): v128 { return v128.load(VC + <usize>(slot << 4)); }
// @ts-ignore: decorator
@inline function setVc(slot: i32, v: v128): void { v128.store(VC + <usize>(slot << 4), v); }
/** A finite lane: x − x is 0 (NaN for NaN and ±Inf); no mask constant to materialise. */
// @ts-ignore: decorator
@inline function finite(x: v128): v128 { return f32x4.eq(f32x4.sub(x, x), f32x4.splat(0)); }

// @ts-ignore: decorator
@inline function reg(r: i32): usize { return REGS + <usize>(r * BLOCK * 4); }

export function fillConst(r: i32, value: f32): void {
  const p = reg(r);
  for (let i = 0; i < BLOCK; i++) store<f32>(p + (<usize>i << 2), value);
}

// ---------- LOAD: digital numbers or f32 → reflectance, invalid → NaN ----------

// The dtype is a constant of each inlined copy, so every loop is branch-free.
// @ts-ignore: decorator
@inline function loadLoop(dtype: i32, dst: usize, src: usize, len: i32, scale: f32, offset: f32, nd: i32, nodata: f32, hasNodata: bool): void {
  const nan = NaN as f32;
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    setVc(VC_SCALE, f32x4.splat(scale));
    setVc(VC_OFFSET, f32x4.splat(offset));
    const vn = f32x4.splat(nan);
    if (dtype == 1 || dtype == 2) {
      const z16 = i16x8.splat(0);
      setVc(VC_NODATA, i16x8.splat(<i16>nd));
      for (; i + 8 <= len; i += 8) {
        const raw = v128.load(src + (<usize>i << 1));
        const bad = v128.or(i16x8.eq(raw, z16), i16x8.eq(raw, vc(VC_NODATA)));
        const vs = vc(VC_SCALE);
        const vo = vc(VC_OFFSET);
        const lo = dtype == 2 ? i32x4.extend_low_i16x8_s(raw) : i32x4.extend_low_i16x8_u(raw);
        const hi = dtype == 2 ? i32x4.extend_high_i16x8_s(raw) : i32x4.extend_high_i16x8_u(raw);
        v128.store(dst + (<usize>i << 2), v128.or(f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(lo), vs), vo), i32x4.extend_low_i16x8_s(bad)));
        v128.store(dst + (<usize>i << 2), v128.or(f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(hi), vs), vo), i32x4.extend_high_i16x8_s(bad)), 16);
      }
    } else if (dtype == 0) {
      setVc(VC_NODATA, f32x4.splat(hasNodata ? nodata : nan));
      for (; i + 4 <= len; i += 4) {
        const x = v128.load(src + (<usize>i << 2));
        const r = f32x4.add(f32x4.mul(x, vc(VC_SCALE)), vc(VC_OFFSET));
        v128.store(dst + (<usize>i << 2), v128.or(r, f32x4.eq(x, vc(VC_NODATA))));
      }
    }
  }
  for (; i < len; i++) {
    if (dtype == 0) {
      const x = load<f32>(src + (<usize>i << 2));
      store<f32>(dst + (<usize>i << 2), hasNodata && x == nodata ? nan : x * scale + offset);
    } else {
      const dn: i32 = dtype == 1 ? <i32>load<u16>(src + (<usize>i << 1)) : dtype == 2 ? <i32>load<i16>(src + (<usize>i << 1)) : <i32>load<u8>(src + <usize>i);
      store<f32>(dst + (<usize>i << 2), dn == 0 || dn == nd ? nan : <f32>dn * scale + offset);
    }
  }
}

function loadBand(dst: usize, slot: i32, start: i32, len: i32): void {
  const t = BANDS + <usize>(slot * 32);
  const ptr = <usize>load<i32>(t);
  const dtype = load<i32>(t, 4);
  const scale = load<f32>(t, 8);
  const offset = load<f32>(t, 12);
  const nodata = load<f32>(t, 16);
  const hasNodata = load<i32>(t, 20) != 0;
  const nd = hasNodata ? <i32>nodata : 0; // DN 0 is always invalid; nodata 0 changes nothing
  if (dtype == 1) loadLoop(1, dst, ptr + (<usize>start << 1), len, scale, offset, nd, nodata, hasNodata);
  else if (dtype == 2) loadLoop(2, dst, ptr + (<usize>start << 1), len, scale, offset, nd, nodata, hasNodata);
  else if (dtype == 3) loadLoop(3, dst, ptr + <usize>start, len, scale, offset, nd, nodata, hasNodata);
  else loadLoop(0, dst, ptr + (<usize>start << 2), len, scale, offset, nd, nodata, hasNodata);
}

// ---------- arithmetic over a block ----------

// The operation is a constant of each inlined copy of these, so each loop holds one operation.
// "No value" lanes are set by OR-ing an all-ones mask into the result: all bits set is a NaN, and
// one OR is cheaper than a select.
// @ts-ignore: decorator
@inline function opS(op: i32, x: f32, y: f32): f32 {
  if (op == OP_ADD) return x + y;
  if (op == OP_SUB) return x - y;
  if (op == OP_MUL) return x * y;
  if (op == OP_DIV) return y == 0 ? <f32>NaN : x / y;
  if (op == OP_ND) {
    const s = x + y;
    return s == 0 ? <f32>NaN : (x - y) / s;
  }
  if (op == OP_MIN) return x != x || y != y ? <f32>NaN : Mathf.min(x, y);
  if (op == OP_MAX) return x != x || y != y ? <f32>NaN : Mathf.max(x, y);
  return Mathf.pow(x, y);
}

// @ts-ignore: decorator
@inline function opV(op: i32, x: v128, y: v128): v128 {
  if (op == OP_ADD) return f32x4.add(x, y);
  if (op == OP_SUB) return f32x4.sub(x, y);
  if (op == OP_MUL) return f32x4.mul(x, y);
  if (op == OP_DIV) return v128.or(f32x4.div(x, y), f32x4.eq(y, f32x4.splat(0)));
  if (op == OP_ND) {
    const s = f32x4.add(x, y);
    return v128.or(f32x4.div(f32x4.sub(x, y), s), f32x4.eq(s, f32x4.splat(0)));
  }
  // f32x4.min/max propagate NaN, as the formula language promises
  if (op == OP_MIN) return f32x4.min(x, y);
  return f32x4.max(x, y);
}

// d = a op b, four vectors per step (fewer loop checks), scalar tail.
// @ts-ignore: decorator
@inline function binLoop(op: i32, d: usize, a: usize, b: usize, len: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD && op != OP_POW) {
    for (; i + 16 <= len; i += 16) {
      const o = <usize>i << 2;
      v128.store(d + o, opV(op, v128.load(a + o), v128.load(b + o)));
      v128.store(d + o, opV(op, v128.load(a + o, 16), v128.load(b + o, 16)), 16);
      v128.store(d + o, opV(op, v128.load(a + o, 32), v128.load(b + o, 32)), 32);
      v128.store(d + o, opV(op, v128.load(a + o, 48), v128.load(b + o, 48)), 48);
    }
  }
  for (; i < len; i++) {
    const o = <usize>i << 2;
    store<f32>(d + o, opS(op, load<f32>(a + o), load<f32>(b + o)));
  }
}

// d = a op c, or c op a when `rev`.
// @ts-ignore: decorator
@inline function constLoop(op: i32, rev: bool, d: usize, a: usize, c: f32, len: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    setVc(VC_C, f32x4.splat(c));
    for (; i + 16 <= len; i += 16) {
      const o = <usize>i << 2;
      const vk = vc(VC_C);
      const x0 = v128.load(a + o);
      const x1 = v128.load(a + o, 16);
      const x2 = v128.load(a + o, 32);
      const x3 = v128.load(a + o, 48);
      v128.store(d + o, rev ? opV(op, vk, x0) : opV(op, x0, vk));
      v128.store(d + o, rev ? opV(op, vk, x1) : opV(op, x1, vk), 16);
      v128.store(d + o, rev ? opV(op, vk, x2) : opV(op, x2, vk), 32);
      v128.store(d + o, rev ? opV(op, vk, x3) : opV(op, x3, vk), 48);
    }
  }
  for (; i < len; i++) {
    const o = <usize>i << 2;
    const x = load<f32>(a + o);
    store<f32>(d + o, rev ? opS(op, c, x) : opS(op, x, c));
  }
}

function binary(op: i32, d: usize, a: usize, b: usize, len: i32): void {
  if (op == OP_ADD) binLoop(OP_ADD, d, a, b, len);
  else if (op == OP_SUB) binLoop(OP_SUB, d, a, b, len);
  else if (op == OP_MUL) binLoop(OP_MUL, d, a, b, len);
  else if (op == OP_DIV) binLoop(OP_DIV, d, a, b, len);
  else if (op == OP_ND) binLoop(OP_ND, d, a, b, len);
  else if (op == OP_MIN) binLoop(OP_MIN, d, a, b, len);
  else if (op == OP_MAX) binLoop(OP_MAX, d, a, b, len);
  else binLoop(OP_POW, d, a, b, len);
}

function withConst(op: i32, d: usize, a: usize, c: f32, len: i32): void {
  if (op == OP_ADDC) constLoop(OP_ADD, false, d, a, c, len);
  else if (op == OP_SUBC) constLoop(OP_SUB, false, d, a, c, len);
  else if (op == OP_RSUBC) constLoop(OP_SUB, true, d, a, c, len);
  else if (op == OP_MULC) constLoop(OP_MUL, false, d, a, c, len);
  else if (op == OP_DIVC) constLoop(OP_DIV, false, d, a, c, len);
  else if (op == OP_RDIVC) constLoop(OP_DIV, true, d, a, c, len);
  else if (op == OP_MINC) constLoop(OP_MIN, false, d, a, c, len);
  else constLoop(OP_MAX, false, d, a, c, len);
}

/** d = a*c + b, rounded after the product and after the sum (exactly MULC then ADD). */
function mulAdd(d: usize, a: usize, c: f32, b: usize, len: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    setVc(VC_C, f32x4.splat(c));
    for (; i + 16 <= len; i += 16) {
      const o = <usize>i << 2;
      v128.store(d + o, f32x4.add(f32x4.mul(v128.load(a + o), vc(VC_C)), v128.load(b + o)));
      v128.store(d + o, f32x4.add(f32x4.mul(v128.load(a + o, 16), vc(VC_C)), v128.load(b + o, 16)), 16);
      v128.store(d + o, f32x4.add(f32x4.mul(v128.load(a + o, 32), vc(VC_C)), v128.load(b + o, 32)), 32);
      v128.store(d + o, f32x4.add(f32x4.mul(v128.load(a + o, 48), vc(VC_C)), v128.load(b + o, 48)), 48);
    }
  }
  for (; i < len; i++) {
    const o = <usize>i << 2;
    store<f32>(d + o, load<f32>(a + o) * c + load<f32>(b + o));
  }
}

// @ts-ignore: decorator
@inline function unaryLoop(op: i32, d: usize, a: usize, len: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD && (op == OP_NEG || op == OP_SQRT || op == OP_ABS)) {
    for (; i + 4 <= len; i += 4) {
      const o = <usize>i << 2;
      const x = v128.load(a + o);
      v128.store(d + o, op == OP_NEG ? f32x4.neg(x) : op == OP_SQRT ? f32x4.sqrt(x) : f32x4.abs(x));
    }
  }
  for (; i < len; i++) {
    const o = <usize>i << 2;
    const x = load<f32>(a + o);
    let r: f32;
    if (op == OP_NEG) r = -x;
    else if (op == OP_SQRT) r = Mathf.sqrt(x);
    else if (op == OP_ABS) r = Mathf.abs(x);
    else if (op == OP_EXP) r = Mathf.exp(x);
    else r = Mathf.log(x);
    store<f32>(d + o, r);
  }
}

function unary(op: i32, d: usize, a: usize, len: i32): void {
  if (op == OP_NEG) unaryLoop(OP_NEG, d, a, len);
  else if (op == OP_SQRT) unaryLoop(OP_SQRT, d, a, len);
  else if (op == OP_ABS) unaryLoop(OP_ABS, d, a, len);
  else if (op == OP_EXP) unaryLoop(OP_EXP, d, a, len);
  else unaryLoop(OP_LOG, d, a, len);
}

// ---------- statistics state ----------

// Running statistics (f64) of the current run: count, min, max, and the sums of the values
// shifted by K (see the header).
let sCount: f64 = 0;
let sMin: f64 = Infinity;
let sMax: f64 = -Infinity;
let sS: f64 = 0;
let sQ: f64 = 0;
let sK: f32 = 0;
let haveK = false;

export function resetStats(): void {
  sCount = 0;
  sMin = Infinity;
  sMax = -Infinity;
  sS = 0;
  sQ = 0;
  sK = 0;
  haveK = false;
}

function writeStats(): void {
  store<f64>(STATS, sCount);
  store<f64>(STATS, sMin, 8);
  store<f64>(STATS, sMax, 16);
  const mean = sCount > 0 ? <f64>sK + sS / sCount : 0;
  const m2 = sCount > 0 ? Math.max(0, sQ - sS * (sS / sCount)) : 0;
  store<f64>(STATS, mean, 24);
  store<f64>(STATS, m2, 32);
}

/** Picks K from a finished block (NaN = no value): the value closest to the block's mean. */
function pickK(p: usize, len: i32): void {
  const k = chooseK(p, len);
  if (k != k) return;
  sK = k;
  haveK = true;
}

/**
 * The value of a finished block closest to its mean (NaN when the block has no value): the shift K
 * of the statistics' sums. pickK takes it for the interpreter's run; the host-side JIT
 * (src/compute/jit/) calls it directly.
 */
export function chooseK(p: usize, len: i32): f32 {
  let n = 0;
  let sum: f64 = 0;
  for (let i = 0; i < len; i++) {
    const x = load<f32>(p + (<usize>i << 2));
    if (x == x) {
      n++;
      sum += <f64>x;
    }
  }
  if (n == 0) return NaN;
  const mean = sum / <f64>n;
  let best: f64 = Infinity;
  let k: f32 = 0;
  for (let i = 0; i < len; i++) {
    const x = load<f32>(p + (<usize>i << 2));
    if (x == x && Math.abs(<f64>x - mean) < best) {
      best = Math.abs(<f64>x - mean);
      k = x;
    }
  }
  return k;
}

/** Folds a chunk's vector accumulators into the run's totals (a two-level sum). */
function flushAcc(vCount: v128, vMin: v128, vMax: v128, vS: v128, vQ: v128): void {
  sCount += <f64>(i32x4.extract_lane(vCount, 0) + i32x4.extract_lane(vCount, 1) + i32x4.extract_lane(vCount, 2) + i32x4.extract_lane(vCount, 3));
  sS += f64x2.extract_lane(vS, 0) + f64x2.extract_lane(vS, 1);
  sQ += f64x2.extract_lane(vQ, 0) + f64x2.extract_lane(vQ, 1);
  const mn = Mathf.min(Mathf.min(f32x4.extract_lane(vMin, 0), f32x4.extract_lane(vMin, 1)), Mathf.min(f32x4.extract_lane(vMin, 2), f32x4.extract_lane(vMin, 3)));
  const mx = Mathf.max(Mathf.max(f32x4.extract_lane(vMax, 0), f32x4.extract_lane(vMax, 1)), Mathf.max(f32x4.extract_lane(vMax, 2), f32x4.extract_lane(vMax, 3)));
  if (<f64>mn < sMin) sMin = <f64>mn;
  if (<f64>mx > sMax) sMax = <f64>mx;
}

// The accumulation of 4 values x (ok: all-ones lanes are values) is written out in each loop
// below, on locals (V8 keeps wasm globals in memory): invalid lanes are replaced by K, which adds
// 0 to the sums and cannot move min or max:
//   xk = bitselect(x, K, ok); count -= ok; min = pmin(min, xk); max = pmax(max, xk);
//   d = f64(xk) − K (two f64x2 halves); S += d; Q += d².

// ---------- finishing a block: mask, non-finite → NaN, store, statistics ----------

// @ts-ignore: decorator
@inline function finishLoop(r: usize, maskPtr: usize, start: i32, len: i32, dst: usize, withStats: bool, hasMask: bool): void {
  let i = 0;
  const nan = NaN as f32;
  if (ASC_FEATURE_SIMD) {
    const vn = f32x4.splat(nan);
    const inf = f32x4.splat(Infinity as f32);
    const vz = i32x4.splat(0);
    setVc(VC_K, f32x4.splat(sK));
    setVc(VC_DK, f64x2.splat(<f64>sK));
    let vCount = i32x4.splat(0);
    let vMin = inf;
    let vMax = f32x4.splat(-Infinity as f32);
    let vS = f64x2.splat(0);
    let vQ = f64x2.splat(0);
    for (; i + 4 <= len; i += 4) {
      const o = <usize>i << 2;
      const x = v128.load(r + o);
      let ok = finite(x);
      if (hasMask) {
        const m = i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(v128.load32_zero(maskPtr + <usize>(start + i))));
        ok = v128.andnot(ok, i32x4.eq(m, vz));
      }
      v128.store(dst + o, v128.or(x, v128.not(ok)));
      if (withStats) {
        const dk = vc(VC_DK);
        const xk = v128.bitselect(x, vc(VC_K), ok);
        vCount = i32x4.sub(vCount, ok);
        vMin = f32x4.pmin(vMin, xk);
        vMax = f32x4.pmax(vMax, xk);
        const dlo = f64x2.sub(f64x2.promote_low_f32x4(xk), dk);
        const dhi = f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(xk, xk, 2, 3, 0, 1)), dk);
        vS = f64x2.add(vS, f64x2.add(dlo, dhi));
        vQ = f64x2.add(vQ, f64x2.add(f64x2.mul(dlo, dlo), f64x2.mul(dhi, dhi)));
      }
    }
    if (withStats) flushAcc(vCount, vMin, vMax, vS, vQ);
  }
  for (; i < len; i++) {
    const o = <usize>i << 2;
    let x = load<f32>(r + o);
    const masked = hasMask && load<u8>(maskPtr + <usize>(start + i)) == 0;
    if (masked || !(Mathf.abs(x) < Infinity)) x = nan;
    store<f32>(dst + o, x);
    if (withStats && x == x) {
      sCount += 1;
      const d = <f64>x - <f64>sK;
      sS += d;
      sQ += d * d;
      if (<f64>x < sMin) sMin = <f64>x;
      if (<f64>x > sMax) sMax = <f64>x;
    }
  }
}

/**
 * Finishes a block: masked-out pixels and non-finite values become NaN in `dst` (the output, or
 * the register itself), and with withStats the block's values are accumulated in the same pass.
 * Until K is known (the first block with a value) the block is finished first, K picked from it,
 * and then accumulated.
 */
function finishBlock(r: usize, maskPtr: usize, start: i32, len: i32, out: usize, withStats: bool): void {
  const dst = out ? out : r;
  if (withStats && !haveK) {
    if (maskPtr) finishLoop(r, maskPtr, start, len, dst, false, true);
    else finishLoop(r, 0, start, len, dst, false, false);
    pickK(dst, len);
    if (haveK) finishLoop(dst, 0, 0, len, dst, true, false);
    return;
  }
  if (maskPtr) {
    if (withStats) finishLoop(r, maskPtr, start, len, dst, true, true);
    else finishLoop(r, maskPtr, start, len, dst, false, true);
  } else {
    if (withStats) finishLoop(r, 0, start, len, dst, true, false);
    else finishLoop(r, 0, start, len, dst, false, false);
  }
}

// ---------- NDB: the normalised difference of two u16 bands, fused ----------

/**
 * Whether slots a and b can take the fused u16 path, and how: 0 no, 1 reflectance math
 * (DN × scale + offset in f32, then (x − y)/(x + y): the same roundings as LOAD + ND), 2 integer
 * math on the digital numbers when both bands have the same non-zero scale and no offset:
 * (a − b)/(a + b) exactly in i32, one rounding in the division (scale cancels out; the result is
 * the correctly rounded ratio, within 2⁻²³ of the reflectance path).
 */
function ndMode(slotA: i32, slotB: i32): i32 {
  if (!ASC_FEATURE_SIMD) return 0;
  const ta = BANDS + <usize>(slotA * 32);
  const tb = BANDS + <usize>(slotB * 32);
  if (load<i32>(ta, 4) != 1 || load<i32>(tb, 4) != 1) return 0;
  const sa = load<f32>(ta, 8);
  if (sa == load<f32>(tb, 8) && sa != 0 && Mathf.abs(sa) < Infinity && load<f32>(ta, 12) == 0 && load<f32>(tb, 12) == 0) return 2;
  return 1;
}

/**
 * One pass over pixels [start, end) (end − start a multiple of 8) of slots a and b: validity on the
 * raw 16-bit lanes (DN 0, the declared nodata, the mask), the normalised difference, non-finite
 * results (a zero sum) → NaN, the store (when dst), the statistics (when withStats).
 * dst points at the value of pixel `start`.
 *
 * With integer math an invalid pixel's two DNs are zeroed, so that it comes out as 0/0 = NaN with
 * no masking of the results. The statistics take NaN as "no value": pmin/pmax keep the
 * accumulator when the new lane is NaN, and the sums see 0 instead (x AND (x == x)), i.e. a
 * deviation of −K, which the flush takes back out (S += nInvalid·K, Q −= nInvalid·K²).
 */
// @ts-ignore: decorator
@inline function ndLoop(intMath: bool, hasMask: bool, hasOut: bool, withStats: bool, slotA: i32, slotB: i32, start: i32, end: i32, maskPtr: usize, dst: usize): void {
  const ta = BANDS + <usize>(slotA * 32);
  const tb = BANDS + <usize>(slotB * 32);
  const pa = <usize>load<i32>(ta);
  const pb = <usize>load<i32>(tb);
  setVc(VC_SCALE, f32x4.splat(load<f32>(ta, 8)));
  setVc(VC_OFFSET, f32x4.splat(load<f32>(ta, 12)));
  setVc(VC_SCALE_B, f32x4.splat(load<f32>(tb, 8)));
  setVc(VC_OFFSET_B, f32x4.splat(load<f32>(tb, 12)));
  setVc(VC_NODATA, i16x8.splat(<i16>(load<i32>(ta, 20) ? <i32>load<f32>(ta, 16) : 0)));
  setVc(VC_NODATA_B, i16x8.splat(<i16>(load<i32>(tb, 20) ? <i32>load<f32>(tb, 16) : 0)));
  setVc(VC_DK, f64x2.splat(<f64>sK));
  const z16 = i16x8.splat(0);
  const vn = f32x4.splat(NaN as f32);
  const inf = f32x4.splat(Infinity as f32);
  let i = start;
  while (i < end) {
    const stop = min(end, i + CHUNK);
    const first = i;
    let vCount = i32x4.splat(0);
    let vMin = inf;
    let vMax = f32x4.splat(-Infinity as f32);
    let vS = f64x2.splat(0);
    let vQ = f64x2.splat(0);
    for (; i < stop; i += 8) {
      let ra = v128.load(pa + (<usize>i << 1));
      let rb = v128.load(pb + (<usize>i << 1));
      // DN 0 in either band: min_u of the two is 0
      let bad = v128.or(i16x8.eq(i16x8.min_u(ra, rb), z16), v128.or(i16x8.eq(ra, vc(VC_NODATA)), i16x8.eq(rb, vc(VC_NODATA_B))));
      if (hasMask) bad = v128.or(bad, i16x8.eq(i16x8.extend_low_i8x16_u(v128.load64_zero(maskPtr + <usize>i)), z16));
      let lo = vn;
      let hi = vn;
      if (intMath) {
        ra = v128.andnot(ra, bad);
        rb = v128.andnot(rb, bad);
        const alo = i32x4.extend_low_i16x8_u(ra);
        const ahi = i32x4.extend_high_i16x8_u(ra);
        const blo = i32x4.extend_low_i16x8_u(rb);
        const bhi = i32x4.extend_high_i16x8_u(rb);
        // valid DNs are ≥ 1, so the sum is never 0 and the result always finite
        lo = f32x4.div(f32x4.convert_i32x4_s(i32x4.sub(alo, blo)), f32x4.convert_i32x4_s(i32x4.add(alo, blo)));
        hi = f32x4.div(f32x4.convert_i32x4_s(i32x4.sub(ahi, bhi)), f32x4.convert_i32x4_s(i32x4.add(ahi, bhi)));
      } else {
        const xlo = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(ra)), vc(VC_SCALE)), vc(VC_OFFSET));
        const xhi = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(ra)), vc(VC_SCALE)), vc(VC_OFFSET));
        const ylo = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(rb)), vc(VC_SCALE_B)), vc(VC_OFFSET_B));
        const yhi = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(rb)), vc(VC_SCALE_B)), vc(VC_OFFSET_B));
        lo = f32x4.div(f32x4.sub(xlo, ylo), f32x4.add(xlo, ylo));
        hi = f32x4.div(f32x4.sub(xhi, yhi), f32x4.add(xhi, yhi));
        // a value: valid inputs and a finite result (a zero sum gives ±Inf or NaN)
        lo = v128.or(lo, v128.or(f32x4.ne(f32x4.sub(lo, lo), f32x4.splat(0)), i32x4.extend_low_i16x8_s(bad)));
        hi = v128.or(hi, v128.or(f32x4.ne(f32x4.sub(hi, hi), f32x4.splat(0)), i32x4.extend_high_i16x8_s(bad)));
      }
      if (hasOut) {
        const o = <usize>(i - start) << 2;
        v128.store(dst + o, lo);
        v128.store(dst + o, hi, 16);
      }
      if (withStats) {
        const okLo = f32x4.eq(lo, lo);
        const okHi = f32x4.eq(hi, hi);
        const zlo = v128.and(lo, okLo);
        const zhi = v128.and(hi, okHi);
        vCount = i32x4.add(vCount, i32x4.add(okLo, okHi)); // −1 per value
        vMin = f32x4.pmin(f32x4.pmin(vMin, lo), hi);
        vMax = f32x4.pmax(f32x4.pmax(vMax, lo), hi);
        const dk = vc(VC_DK);
        const d0 = f64x2.sub(f64x2.promote_low_f32x4(zlo), dk);
        const d1 = f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(zlo, zlo, 2, 3, 0, 1)), dk);
        const d2 = f64x2.sub(f64x2.promote_low_f32x4(zhi), dk);
        const d3 = f64x2.sub(f64x2.promote_low_f32x4(i32x4.shuffle(zhi, zhi, 2, 3, 0, 1)), dk);
        vS = f64x2.add(vS, f64x2.add(f64x2.add(d0, d1), f64x2.add(d2, d3)));
        vQ = f64x2.add(vQ, f64x2.add(f64x2.add(f64x2.mul(d0, d0), f64x2.mul(d1, d1)), f64x2.add(f64x2.mul(d2, d2), f64x2.mul(d3, d3))));
      }
    }
    if (withStats) {
      const valid = -(i32x4.extract_lane(vCount, 0) + i32x4.extract_lane(vCount, 1) + i32x4.extract_lane(vCount, 2) + i32x4.extract_lane(vCount, 3));
      const invalid = <f64>(stop - first - valid);
      const k = <f64>sK;
      // the invalid lanes added (0 − K) and (0 − K)²: take them back out
      flushAcc(i32x4.splat(0), vMin, vMax, f64x2.replace_lane(vS, 0, f64x2.extract_lane(vS, 0) + invalid * k), f64x2.replace_lane(vQ, 0, f64x2.extract_lane(vQ, 0) - invalid * (k * k)));
      sCount += <f64>valid;
    }
  }
}

// @ts-ignore: decorator
@inline function ndLoopOut(intMath: bool, hasMask: bool, slotA: i32, slotB: i32, start: i32, end: i32, maskPtr: usize, dst: usize, withStats: bool): void {
  if (dst) {
    if (withStats) ndLoop(intMath, hasMask, true, true, slotA, slotB, start, end, maskPtr, dst);
    else ndLoop(intMath, hasMask, true, false, slotA, slotB, start, end, maskPtr, dst);
  } else if (withStats) ndLoop(intMath, hasMask, false, true, slotA, slotB, start, end, maskPtr, dst);
}

/** The fused loop, specialised on its mode, mask, output and statistics (8 copies). */
function ndFused(mode: i32, slotA: i32, slotB: i32, start: i32, end: i32, maskPtr: usize, dst: usize, withStats: bool): void {
  if (ASC_FEATURE_SIMD) {
    if (mode == 2) {
      if (maskPtr) ndLoopOut(true, true, slotA, slotB, start, end, maskPtr, dst, withStats);
      else ndLoopOut(true, false, slotA, slotB, start, end, maskPtr, dst, withStats);
    } else {
      if (maskPtr) ndLoopOut(false, true, slotA, slotB, start, end, maskPtr, dst, withStats);
      else ndLoopOut(false, false, slotA, slotB, start, end, maskPtr, dst, withStats);
    }
  }
}

/** NDB inside the block interpreter: the fused loop into a register, scalar tail via LOAD + ND. */
function ndBands(dst: usize, slotA: i32, slotB: i32, start: i32, len: i32): void {
  const mode = ndMode(slotA, slotB);
  const len8 = mode ? len & ~7 : 0;
  if (len8) ndFused(mode, slotA, slotB, start, start + len8, 0, dst, false);
  if (len8 < len) {
    const rb = reg(MAX_REGS - 1);
    const d = dst + (<usize>len8 << 2);
    loadBand(d, slotA, start + len8, len - len8);
    loadBand(rb, slotB, start + len8, len - len8);
    binary(OP_ND, d, d, rb, len - len8);
  }
}

// ---------- the interpreter ----------

function execBlock(nInstr: i32, start: i32, len: i32): void {
  for (let k = 0; k < nInstr; k++) {
    const ip = PROG + <usize>(k * 16);
    const op = load<i32>(ip);
    const d = reg(load<i32>(ip, 4));
    const a = load<i32>(ip, 8);
    if (op == OP_LOAD) loadBand(d, a, start, len);
    else if (op >= OP_ADDC && op <= OP_MAXC) withConst(op, d, reg(a), load<f32>(ip, 12), len);
    else if (op == OP_MULCADD) mulAdd(d, reg(a & 0xffff), load<f32>(ip, 12), reg(a >>> 16), len);
    else if (op == OP_NDB) ndBands(d, a, load<i32>(ip, 12), start, len);
    else if (op >= OP_NEG && op <= OP_LOG) unary(op, d, reg(a), len);
    else binary(op, d, reg(a), reg(load<i32>(ip, 12)), len);
  }
}

/**
 * Runs the program over `nPixels` pixels. `resultReg` holds the value after the last instruction.
 * maskPtr (u8 per pixel, 0 = outside/invalid) and outPtr (f32 per pixel) may be 0. With
 * withStats != 0 the statistics are accumulated (call resetStats() first to start afresh).
 */
export function run(nInstr: i32, nPixels: i32, resultReg: i32, maskPtr: usize, outPtr: usize, withStats: i32): void {
  const r = reg(resultReg);
  const stats = withStats != 0;
  let start = 0;
  const mode = nInstr == 1 && load<i32>(PROG) == OP_NDB ? ndMode(load<i32>(PROG, 8), load<i32>(PROG, 12)) : 0;
  if (mode) {
    // Blocks through the interpreter until K is known, then everything else in one fused loop.
    while (start < nPixels && stats && !haveK) {
      const len = min(BLOCK, nPixels - start);
      execBlock(nInstr, start, len);
      finishBlock(r, maskPtr, start, len, outPtr ? outPtr + (<usize>start << 2) : 0, stats);
      start += len;
    }
    const end = start + ((nPixels - start) & ~7);
    if (end > start) ndFused(mode, load<i32>(PROG, 8), load<i32>(PROG, 12), start, end, maskPtr, outPtr ? outPtr + (<usize>start << 2) : 0, stats);
    start = end;
  }
  for (; start < nPixels; start += BLOCK) {
    const len = min(BLOCK, nPixels - start);
    execBlock(nInstr, start, len);
    finishBlock(r, maskPtr, start, len, outPtr ? outPtr + (<usize>start << 2) : 0, stats);
  }
  writeStats();
}

/** Statistics over an f32 array already in memory (NaN skipped; ±Inf become NaN in place). */
export function statsOf(ptr: usize, n: i32): void {
  resetStats();
  for (let start = 0; start < n; start += BLOCK) finishBlock(ptr + (<usize>start << 2), 0, 0, min(BLOCK, n - start), 0, true);
  writeStats();
}

// ---------- order statistics and histogram ----------

/** Copies the non-NaN values of src into dst; returns how many. */
export function compactValid(src: usize, n: i32, dst: usize): i32 {
  let k = 0;
  for (let i = 0; i < n; i++) {
    const x = load<f32>(src + (<usize>i << 2));
    if (x == x) {
      store<f32>(dst + (<usize>k << 2), x);
      k++;
    }
  }
  return k;
}

// @ts-ignore: decorator
@inline function at(p: usize, i: i32): f32 { return load<f32>(p + (<usize>i << 2)); }
// @ts-ignore: decorator
@inline function swap(p: usize, i: i32, j: i32): void {
  const t = at(p, i);
  store<f32>(p + (<usize>i << 2), at(p, j));
  store<f32>(p + (<usize>j << 2), t);
}

/**
 * Rearranges p[lo..hi] so that p[k] is the k-th smallest and everything left of it is ≤ it
 * (Hoare quickselect, median-of-three pivot). Successive calls with increasing k on the
 * right part reuse the earlier partitioning.
 */
export function select(p: usize, lo: i32, hi: i32, k: i32): f32 {
  while (hi > lo) {
    const mid = lo + ((hi - lo) >> 1);
    if (at(p, mid) < at(p, lo)) swap(p, mid, lo);
    if (at(p, hi) < at(p, lo)) swap(p, hi, lo);
    if (at(p, hi) < at(p, mid)) swap(p, hi, mid);
    const pivot = at(p, mid);
    let i = lo;
    let j = hi;
    while (i <= j) {
      while (at(p, i) < pivot) i++;
      while (at(p, j) > pivot) j--;
      if (i <= j) {
        swap(p, i, j);
        i++;
        j--;
      }
    }
    if (k <= j) hi = j;
    else if (k >= i) lo = i;
    else return at(p, k);
  }
  return at(p, k);
}

/**
 * The same as select, by Floyd and Rivest's algorithm (CACM 18(3), 1975, "Algorithm 489"): for a
 * range over 600 values, a sample around k is selected first (recursively) and its two ends
 * partition the range, so most values are compared with a pivot only once or twice.
 */
export function selectFR(p: usize, lo: i32, hi: i32, k: i32): f32 {
  let left = lo;
  let right = hi;
  while (right > left) {
    if (right - left > 600) {
      const n = <f64>(right - left + 1);
      const i = <f64>(k - left + 1);
      const z = Math.log(n);
      const s = 0.5 * Math.exp((2 * z) / 3);
      const sd = 0.5 * Math.sqrt((z * s * (n - s)) / n) * (i - n / 2 < 0 ? -1 : 1);
      const nl = max(left, <i32>Math.floor(<f64>k - (i * s) / n + sd));
      const nr = min(right, <i32>Math.floor(<f64>k + ((n - i) * s) / n + sd));
      selectFR(p, nl, nr, k);
    }
    const t = at(p, k);
    let i = left;
    let j = right;
    swap(p, left, k);
    if (at(p, right) > t) swap(p, right, left);
    while (i < j) {
      swap(p, i, j);
      i++;
      j--;
      while (at(p, i) < t) i++;
      while (at(p, j) > t) j--;
    }
    if (at(p, left) == t) swap(p, left, j);
    else {
      j++;
      swap(p, j, right);
    }
    if (j <= k) left = j + 1;
    if (k <= j) right = j - 1;
  }
  return at(p, k);
}

/**
 * Whether p[lo..hi] holds a single value (compared as floats, so −0 and 0 alike): a bucket of ties,
 * where selection has nothing to do. Stops at the first other value.
 */
export function oneValue(p: usize, lo: i32, hi: i32): bool {
  const v = at(p, lo);
  let i = lo + 1;
  if (ASC_FEATURE_SIMD) {
    const V = f32x4.splat(v);
    for (; i + 3 <= hi; i += 4) if (!i32x4.all_true(f32x4.eq(v128.load(p + (<usize>i << 2)), V))) return false;
  }
  for (; i <= hi; i++) if (at(p, i) != v) return false;
  return true;
}

/**
 * numpy.histogram's counts of the non-NaN values of src over nb bins whose f64 edges are at
 * `edges` (nb + 1, increasing), as u32 at dst: values outside [edges[0], edges[nb]] left out, the
 * last bin closed. With `uniform` (equal bins) each value's bin comes from the step and is then
 * checked against the edges either side; else by bisection (the last edge ≤ the value). In
 * float64, as compute/zonal.ts describes it.
 */
export function histogramNp(src: usize, n: i32, edges: usize, nb: i32, uniform: i32, dst: usize): void {
  // four count tables (value i into table i % 4: no increment waits on the last one's store),
  // summed into the first at the end; dst needs room for 4 × nb counts
  const T = <usize>nb << 2;
  memory.fill(dst, 0, T << 2);
  const first = load<f64>(edges);
  const last = load<f64>(edges + (<usize>nb << 3));
  const norm = <f64>nb / (last - first);
  let i = 0;
  if (uniform) {
    for (; i + 4 <= n; i += 4) {
      const p = src + (<usize>i << 2);
      countUniform(load<f32>(p), edges, nb, first, last, norm, dst);
      countUniform(load<f32>(p, 4), edges, nb, first, last, norm, dst + T);
      countUniform(load<f32>(p, 8), edges, nb, first, last, norm, dst + 2 * T);
      countUniform(load<f32>(p, 12), edges, nb, first, last, norm, dst + 3 * T);
    }
    for (; i < n; i++) countUniform(load<f32>(src + (<usize>i << 2)), edges, nb, first, last, norm, dst);
  } else {
    for (; i + 4 <= n; i += 4) {
      const p = src + (<usize>i << 2);
      countBisect(load<f32>(p), edges, nb, first, last, dst);
      countBisect(load<f32>(p, 4), edges, nb, first, last, dst + T);
      countBisect(load<f32>(p, 8), edges, nb, first, last, dst + 2 * T);
      countBisect(load<f32>(p, 12), edges, nb, first, last, dst + 3 * T);
    }
    for (; i < n; i++) countBisect(load<f32>(src + (<usize>i << 2)), edges, nb, first, last, dst);
  }
  for (let b = 0; b < nb; b++) {
    const q = dst + (<usize>b << 2);
    store<u32>(q, load<u32>(q) + load<u32>(q + T) + load<u32>(q + 2 * T) + load<u32>(q + 3 * T));
  }
}

// @ts-ignore: decorator
@inline function countUniform(x: f32, edges: usize, nb: i32, first: f64, last: f64, norm: f64, table: usize): void {
  const v = <f64>x;
  if (!(v >= first && v <= last)) return; // NaN, or outside the edges
  let b = min(nb - 1, <i32>Math.floor((v - first) * norm));
  if (v < load<f64>(edges + (<usize>b << 3))) b--;
  else if (b < nb - 1 && v >= load<f64>(edges + (<usize>(b + 1) << 3))) b++;
  const q = table + (<usize>b << 2);
  store<u32>(q, load<u32>(q) + 1);
}

// @ts-ignore: decorator
@inline function countBisect(x: f32, edges: usize, nb: i32, first: f64, last: f64, table: usize): void {
  const v = <f64>x;
  if (!(v >= first && v <= last)) return;
  let lo = 0;
  let hi = nb - 1;
  while (lo < hi) {
    const mid = (lo + hi + 1) >> 1;
    if (load<f64>(edges + (<usize>mid << 3)) <= v) lo = mid;
    else hi = mid - 1;
  }
  const q = table + (<usize>lo << 2);
  store<u32>(q, load<u32>(q) + 1);
}

/** Smallest value of p[lo..hi]. */
export function minOf(p: usize, lo: i32, hi: i32): f32 {
  let m: f32 = Infinity;
  for (let i = lo; i <= hi; i++) m = Mathf.min(m, at(p, i));
  return m;
}

/**
 * Histogram of the non-NaN values of src into nBins u32 counts at dst over [lo, hi]; values
 * below lo fall in the first bin, above hi in the last.
 */
export function histogram(src: usize, n: i32, lo: f32, hi: f32, nBins: i32, dst: usize): void {
  memory.fill(dst, 0, <usize>nBins << 2);
  const w = (hi - lo) / <f32>nBins;
  for (let i = 0; i < n; i++) {
    const x = load<f32>(src + (<usize>i << 2));
    if (x != x) continue;
    let b = <i32>Mathf.floor((x - lo) / w);
    if (b < 0) b = 0;
    if (b >= nBins) b = nBins - 1;
    const q = dst + (<usize>b << 2);
    store<u32>(q, load<u32>(q) + 1);
  }
}

// ---------- percentiles by buckets ----------

/**
 * Counts the values of src per bucket b = ⌊(x − lo) × scale⌋ (clamped to [0, nb − 1]; a monotone
 * map, so buckets are in value order) into hist[0..nb − 1]; NaN into hist[nb]. hist has room for
 * four tables of nb + 1 counts: the SIMD loop counts lane l into table l (no increment waits on the
 * previous one's store), then the tables are summed into the first.
 */
export function bucketCount(src: usize, n: i32, lo: f32, scale: f32, nb: i32, hist: usize): void {
  const stride = <usize>(nb + 1) << 2;
  memory.fill(hist, 0, stride << 2);
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const vlo = f32x4.splat(lo);
    const vs = f32x4.splat(scale);
    const vmax = i32x4.splat(nb - 1);
    const vnan = i32x4.splat(nb);
    const zero = i32x4.splat(0);
    const h1 = hist + stride;
    const h2 = h1 + stride;
    const h3 = h2 + stride;
    for (; i + 4 <= n; i += 4) {
      const x = v128.load(src + (<usize>i << 2));
      let b = i32x4.trunc_sat_f32x4_s(f32x4.mul(f32x4.sub(x, vlo), vs));
      b = i32x4.min_s(i32x4.max_s(b, zero), vmax);
      b = v128.bitselect(b, vnan, f32x4.eq(x, x));
      const q0 = hist + (<usize>i32x4.extract_lane(b, 0) << 2);
      store<u32>(q0, load<u32>(q0) + 1);
      const q1 = h1 + (<usize>i32x4.extract_lane(b, 1) << 2);
      store<u32>(q1, load<u32>(q1) + 1);
      const q2 = h2 + (<usize>i32x4.extract_lane(b, 2) << 2);
      store<u32>(q2, load<u32>(q2) + 1);
      const q3 = h3 + (<usize>i32x4.extract_lane(b, 3) << 2);
      store<u32>(q3, load<u32>(q3) + 1);
    }
  }
  for (; i < n; i++) {
    const x = load<f32>(src + (<usize>i << 2));
    let b = nb;
    if (x == x) {
      const f = (x - lo) * scale;
      b = f < 1 ? 0 : f >= <f32>nb ? nb - 1 : <i32>f;
    }
    const q = hist + (<usize>b << 2);
    store<u32>(q, load<u32>(q) + 1);
  }
  if (ASC_FEATURE_SIMD) {
    for (let k = 0; k <= nb; k++) {
      const q = hist + (<usize>k << 2);
      store<u32>(q, load<u32>(q) + load<u32>(q + stride) + load<u32>(q + 2 * stride) + load<u32>(q + 3 * stride));
    }
  }
}

/**
 * Copies the values whose bucket has a slot (slot[b] ≥ 0; slot[nb], NaN's, is −1) to dst at
 * off[slot], off advancing: the values of the buckets that hold the ranks asked for, each bucket
 * contiguous.
 */
export function bucketGather(src: usize, n: i32, lo: f32, scale: f32, nb: i32, slot: usize, off: usize, dst: usize): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const vlo = f32x4.splat(lo);
    const vs = f32x4.splat(scale);
    const vmax = i32x4.splat(nb - 1);
    const vnan = i32x4.splat(nb);
    const zero = i32x4.splat(0);
    for (; i + 4 <= n; i += 4) {
      const x = v128.load(src + (<usize>i << 2));
      let b = i32x4.trunc_sat_f32x4_s(f32x4.mul(f32x4.sub(x, vlo), vs));
      b = i32x4.min_s(i32x4.max_s(b, zero), vmax);
      b = v128.bitselect(b, vnan, f32x4.eq(x, x));
      gatherLane(load<i32>(slot + (<usize>i32x4.extract_lane(b, 0) << 2)), f32x4.extract_lane(x, 0), off, dst);
      gatherLane(load<i32>(slot + (<usize>i32x4.extract_lane(b, 1) << 2)), f32x4.extract_lane(x, 1), off, dst);
      gatherLane(load<i32>(slot + (<usize>i32x4.extract_lane(b, 2) << 2)), f32x4.extract_lane(x, 2), off, dst);
      gatherLane(load<i32>(slot + (<usize>i32x4.extract_lane(b, 3) << 2)), f32x4.extract_lane(x, 3), off, dst);
    }
  }
  for (; i < n; i++) {
    const x = load<f32>(src + (<usize>i << 2));
    if (x != x) continue;
    const f = (x - lo) * scale;
    const b = f < 1 ? 0 : f >= <f32>nb ? nb - 1 : <i32>f;
    gatherLane(load<i32>(slot + (<usize>b << 2)), x, off, dst);
  }
}

// @ts-ignore: decorator
@inline function gatherLane(s: i32, x: f32, off: usize, dst: usize): void {
  if (s < 0) return;
  const q = off + (<usize>s << 2);
  const o = load<i32>(q);
  store<f32>(dst + (<usize>o << 2), x);
  store<i32>(q, o + 1);
}

// ---------- percentiles by sampled brackets ----------

/**
 * `s` values of src, one in each of s nearly equal strata (16.16 fixed point; in index order, so
 * the reads go forward) at a place within it given by the high 16 bits of seed + j × 2^32/φ (a
 * Weyl sequence: well spread, and no step waits on the one before), the non-NaN ones copied to
 * dst; returns how many were copied. Integer arithmetic only, and no branch on a value.
 */
export function sampleValid(src: usize, n: i32, s: i32, seed: u32, dst: usize): i32 {
  let k = 0;
  const step: u64 = (<u64>n << 16) / <u64>s; // below n × 2^16 / s: every place is below n
  let at: u64 = 0;
  let r = seed;
  for (let j = 0; j < s; j++) {
    const x = load<f32>(src + (samplePlace(at, r, step) << 2));
    store<f32>(dst + (<usize>k << 2), x);
    k += <i32>(x == x);
    at += step;
    r += 0x9e3779b9;
  }
  return k;
}

/**
 * The places sampleValid reads for the same n, s and seed, as i32 to dst: the values at them can be
 * computed first (Kernel.runWithPercentiles), and sampleValid then reads only those.
 */
export function samplePlaces(n: i32, s: i32, seed: u32, dst: usize): void {
  const step: u64 = (<u64>n << 16) / <u64>s;
  let at: u64 = 0;
  let r = seed;
  for (let j = 0; j < s; j++) {
    store<i32>(dst + (<usize>j << 2), <i32>samplePlace(at, r, step));
    at += step;
    r += 0x9e3779b9;
  }
}

/**
 * The elements of src (`size` bytes each: 1, 2 or 4) at the s places (i32) at `places`, to dst in
 * that order: a band's (or the mask's) pixels of the sample, gathered so that the formula runs on
 * them as one small window (Kernel.runWithPercentiles). The reads do not wait on each other, so a
 * large window's cache misses overlap.
 */
export function gatherPlaces(src: usize, places: usize, s: i32, size: i32, dst: usize): void {
  if (size == 1)
    for (let j = 0; j < s; j++) store<u8>(dst + <usize>j, load<u8>(src + <usize>load<i32>(places + (<usize>j << 2))));
  else if (size == 2)
    for (let j = 0; j < s; j++)
      store<u16>(dst + (<usize>j << 1), load<u16>(src + (<usize>load<i32>(places + (<usize>j << 2)) << 1)));
  else
    for (let j = 0; j < s; j++)
      store<u32>(dst + (<usize>j << 2), load<u32>(src + (<usize>load<i32>(places + (<usize>j << 2)) << 2)));
}

/** Stratum `at` (16.16) plus the high 16 bits of r of its width `step`. */
// @ts-ignore: decorator
@inline function samplePlace(at: u64, r: u32, step: u64): usize {
  return <usize>((at + ((<u64>(r >>> 16) * step) >> 16)) >> 16);
}

// @ts-ignore: decorator
@inline function laneSum(v: v128): i32 {
  return i32x4.extract_lane(v, 0) + i32x4.extract_lane(v, 1) + i32x4.extract_lane(v, 2) + i32x4.extract_lane(v, 3);
}

// ---------- percentiles: the bracket pass with a branchless left-pack ----------

/** i8x16.swizzle patterns that move the lanes set in a 4-bit mask to the front, in order. */
const PACK_LANES = memory.data<u8>([
  0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 1, 2, 3, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 1, 2, 3, 4, 5, 6, 7, 0, 0, 0, 0, 0, 0, 0, 0,
  8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 1, 2, 3, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0,
  4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 0, 0, 0, 0,
  12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 1, 2, 3, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0,
  4, 5, 6, 7, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 1, 2, 3, 4, 5, 6, 7, 12, 13, 14, 15, 0, 0, 0, 0,
  8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0, 0, 0, 0, 0,
  0, 1, 2, 3, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0,
  4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 0, 0, 0, 0,
  0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15,
]);

/** Stores the lanes of x set in the 4-bit mask m at o, in order (16 bytes written); returns o past them. */
// @ts-ignore: decorator
@inline function packLanes(o: usize, x: v128, m: i32): usize {
  v128.store(o, i8x16.swizzle(x, v128.load(PACK_LANES + (<usize>m << 4))));
  return o + (<usize>popcnt(m) << 2);
}

/**
 * One pass over src for k (1–8) brackets [lo_j, hi_j] of disjoint value ranges in ascending
 * order: counts the values below each lo_j into br (i32 from byte 64) and copies the values inside
 * any bracket to dst in index order (their union), returning how many. br holds f32 lo[8] (byte 0),
 * f32 hi[8] (byte 32). Branchless: each group of four lanes is moved to the front by one swizzle
 * (PACK_LANES) and stored whole, the pointer advanced by the count, so dst needs room for 4 values
 * more than are copied. With countValid, the count of non-NaN values goes to byte 96 (the caller
 * knows it otherwise).
 */
export function bracketPack(src: usize, n: i32, br: usize, dst: usize, k: i32, countValid: bool): i32 {
  if (countValid) {
    if (k == 1) return bracketPackK(src, n, br, dst, 1, true, false, false);
    if (k == 2) return bracketPackK(src, n, br, dst, 2, true, false, false);
    if (k == 3) return bracketPackK(src, n, br, dst, 3, true, false, false);
    if (k == 4) return bracketPackK(src, n, br, dst, 4, true, false, false);
    if (k == 5) return bracketPackK(src, n, br, dst, 5, true, false, false);
    if (k == 6) return bracketPackK(src, n, br, dst, 6, true, false, false);
    if (k == 7) return bracketPackK(src, n, br, dst, 7, true, false, false);
    return bracketPackK(src, n, br, dst, 8, true, false, false);
  }
  if (k == 1) return bracketPackT(src, n, br, dst, 1);
  if (k == 2) return bracketPackT(src, n, br, dst, 2);
  if (k == 3) return bracketPackT(src, n, br, dst, 3);
  if (k == 4) return bracketPackT(src, n, br, dst, 4);
  if (k == 5) return bracketPackT(src, n, br, dst, 5);
  if (k == 6) return bracketPackT(src, n, br, dst, 6);
  if (k == 7) return bracketPackT(src, n, br, dst, 7);
  return bracketPackT(src, n, br, dst, 8);
}

/**
 * bracketPackK for k brackets whose first may start at −∞ and last end at +∞ (the tails: a
 * percentile near either end of the window, where the bracket then holds the values beyond it
 * too): an open end is neither compared nor counted (nothing lies below −∞), two compares, a
 * count and an and-not fewer a tail for four values.
 */
// @ts-ignore: decorator
@inline function bracketPackT(src: usize, n: i32, br: usize, dst: usize, K: i32): i32 {
  const low = load<f32>(br) == -Infinity;
  const high = load<f32>(br + 32 + (<usize>(K - 1) << 2)) == Infinity;
  if (low) return high ? bracketPackK(src, n, br, dst, K, false, true, true) : bracketPackK(src, n, br, dst, K, false, true, false);
  return high ? bracketPackK(src, n, br, dst, K, false, false, true) : bracketPackK(src, n, br, dst, K, false, false, false);
}

/** Lanes of x inside [lo, hi] (lanes of L and H), as a mask. */
// @ts-ignore: decorator
@inline function inside(x: v128, L: v128, H: v128): v128 {
  return v128.andnot(f32x4.le(x, H), f32x4.lt(x, L));
}

/** inside(), or with `open` (a bracket to +∞) the lanes not below L and not NaN. */
// @ts-ignore: decorator
@inline function insideUp(x: v128, L: v128, H: v128, open: bool): v128 {
  return open ? f32x4.ge(x, L) : inside(x, L, H);
}

// @ts-ignore: decorator
@inline function bracketPackK(src: usize, n: i32, br: usize, dst: usize, K: i32, V: bool, TL: bool, TU: bool): i32 {
  const lo0 = load<f32>(br);
  const lo1 = load<f32>(br, 4);
  const lo2 = load<f32>(br, 8);
  const lo3 = load<f32>(br, 12);
  const lo4 = load<f32>(br, 16);
  const lo5 = load<f32>(br, 20);
  const lo6 = load<f32>(br, 24);
  const lo7 = load<f32>(br, 28);
  const hi0 = load<f32>(br, 32);
  const hi1 = load<f32>(br, 36);
  const hi2 = load<f32>(br, 40);
  const hi3 = load<f32>(br, 44);
  const hi4 = load<f32>(br, 48);
  const hi5 = load<f32>(br, 52);
  const hi6 = load<f32>(br, 56);
  const hi7 = load<f32>(br, 60);
  let c0 = 0;
  let c1 = 0;
  let c2 = 0;
  let c3 = 0;
  let c4 = 0;
  let c5 = 0;
  let c6 = 0;
  let c7 = 0;
  let valid = 0;
  let o: usize = dst;
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    // the ends splatted by loads from the block, not f32x4.splat of the scalars: V8 (Node 20)
    // schedules a pure splat at its use, a broadcast per end in every iteration, and keeps the
    // scalars live across the loop (spilled and reloaded in it); a load stays before the loop
    // (10,000 values, three brackets: 5.5 → 5.1 µs; the same in bracketSplitK, levelCountsK and
    // bracketSizes)
    const L0 = v128.load32_splat(br, 0);
    const L1 = v128.load32_splat(br, 4);
    const L2 = v128.load32_splat(br, 8);
    const L3 = v128.load32_splat(br, 12);
    const L4 = v128.load32_splat(br, 16);
    const L5 = v128.load32_splat(br, 20);
    const L6 = v128.load32_splat(br, 24);
    const L7 = v128.load32_splat(br, 28);
    const H0 = v128.load32_splat(br, 32);
    const H1 = v128.load32_splat(br, 36);
    const H2 = v128.load32_splat(br, 40);
    const H3 = v128.load32_splat(br, 44);
    const H4 = v128.load32_splat(br, 48);
    const H5 = v128.load32_splat(br, 52);
    const H6 = v128.load32_splat(br, 56);
    const H7 = v128.load32_splat(br, 60);
    let b0 = i32x4.splat(0);
    let b1 = i32x4.splat(0);
    let b2 = i32x4.splat(0);
    let b3 = i32x4.splat(0);
    let b4 = i32x4.splat(0);
    let b5 = i32x4.splat(0);
    let b6 = i32x4.splat(0);
    let b7 = i32x4.splat(0);
    let vv = i32x4.splat(0);
    for (; i + 4 <= n; i += 4) {
      const x = v128.load(src + (<usize>i << 2));
      if (V) vv = i32x4.sub(vv, f32x4.eq(x, x));
      // per bracket: the lanes below it counted, the lanes inside it added to w (the engine
      // computes each lt once: inside() repeats the one the count used); with TL the first starts
      // at −∞ (nothing below it), with TU the last ends at +∞ (inside: not below it, not NaN)
      let w: v128;
      if (TL) w = K == 1 && TU ? f32x4.eq(x, x) : f32x4.le(x, H0);
      else {
        b0 = i32x4.sub(b0, f32x4.lt(x, L0));
        w = K == 1 && TU ? f32x4.ge(x, L0) : inside(x, L0, H0);
      }
      if (K > 1) (b1 = i32x4.sub(b1, f32x4.lt(x, L1))), (w = v128.or(w, insideUp(x, L1, H1, K == 2 && TU)));
      if (K > 2) (b2 = i32x4.sub(b2, f32x4.lt(x, L2))), (w = v128.or(w, insideUp(x, L2, H2, K == 3 && TU)));
      if (K > 3) (b3 = i32x4.sub(b3, f32x4.lt(x, L3))), (w = v128.or(w, insideUp(x, L3, H3, K == 4 && TU)));
      if (K > 4) (b4 = i32x4.sub(b4, f32x4.lt(x, L4))), (w = v128.or(w, insideUp(x, L4, H4, K == 5 && TU)));
      if (K > 5) (b5 = i32x4.sub(b5, f32x4.lt(x, L5))), (w = v128.or(w, insideUp(x, L5, H5, K == 6 && TU)));
      if (K > 6) (b6 = i32x4.sub(b6, f32x4.lt(x, L6))), (w = v128.or(w, insideUp(x, L6, H6, K == 7 && TU)));
      if (K > 7) (b7 = i32x4.sub(b7, f32x4.lt(x, L7))), (w = v128.or(w, insideUp(x, L7, H7, TU)));
      const m = i32x4.bitmask(w);
      o = packLanes(o, x, m);
    }
    c0 = laneSum(b0);
    c1 = laneSum(b1);
    c2 = laneSum(b2);
    c3 = laneSum(b3);
    c4 = laneSum(b4);
    c5 = laneSum(b5);
    c6 = laneSum(b6);
    c7 = laneSum(b7);
    valid = laneSum(vv);
  }
  for (; i < n; i++) {
    const x = load<f32>(src + (<usize>i << 2));
    if (V && x == x) valid++;
    c0 += <i32>(x < lo0);
    c1 += <i32>(x < lo1);
    c2 += <i32>(x < lo2);
    c3 += <i32>(x < lo3);
    c4 += <i32>(x < lo4);
    c5 += <i32>(x < lo5);
    c6 += <i32>(x < lo6);
    c7 += <i32>(x < lo7);
    if (
      (x >= lo0 && x <= hi0) ||
      (x >= lo1 && x <= hi1) ||
      (x >= lo2 && x <= hi2) ||
      (x >= lo3 && x <= hi3) ||
      (x >= lo4 && x <= hi4) ||
      (x >= lo5 && x <= hi5) ||
      (x >= lo6 && x <= hi6) ||
      (x >= lo7 && x <= hi7)
    ) {
      store<f32>(o, x);
      o += 4;
    }
  }
  store<i32>(br, c0, 64);
  store<i32>(br, c1, 68);
  store<i32>(br, c2, 72);
  store<i32>(br, c3, 76);
  store<i32>(br, c4, 80);
  store<i32>(br, c5, 84);
  store<i32>(br, c6, 88);
  store<i32>(br, c7, 92);
  if (V) store<i32>(br, valid, 96);
  return <i32>((o - dst) >> 2);
}

/**
 * Splits the union of k (2–8) brackets that bracketPack copied (u values, each in one bracket) by
 * bracket: bracket j's values go to dst + start_j bytes (i32 start_j at br from byte 132), in
 * order; their counts to br (i32 from byte 100). A value belongs to the last bracket whose lower end
 * lo_j (f32 at br) it reaches. Each bracket's area needs room for 4 values more than it receives.
 */
export function bracketSplit(src: usize, u: i32, br: usize, dst: usize, k: i32): void {
  if (k == 2) bracketSplitK(src, u, br, dst, 2);
  else if (k == 3) bracketSplitK(src, u, br, dst, 3);
  else if (k == 4) bracketSplitK(src, u, br, dst, 4);
  else if (k == 5) bracketSplitK(src, u, br, dst, 5);
  else if (k == 6) bracketSplitK(src, u, br, dst, 6);
  else if (k == 7) bracketSplitK(src, u, br, dst, 7);
  else bracketSplitK(src, u, br, dst, 8);
}

/**
 * The distinct values of p[0..s) (compared as floats: −0 and 0 alike), in the order met, up to
 * `most` of them, to out (f32); returns how many, or most + 1 as soon as there are more. On a
 * sample of values that are not a few levels it stops within its first values.
 */
export function sampleLevels(p: usize, s: i32, most: i32, out: usize): i32 {
  let k = 0;
  for (let i = 0; i < s; i++) {
    const x = load<f32>(p + (<usize>i << 2));
    let j = 0;
    while (j < k && load<f32>(out + (<usize>j << 2)) != x) j++;
    if (j < k) continue;
    if (k == most) return most + 1;
    store<f32>(out + (<usize>k << 2), x);
    k++;
  }
  return k;
}

/**
 * For each of k (1–8) values v_j (f32 at lv), the count of src's values below it (i32 at dst + 4j)
 * and equal to it (i32 at dst + 32 + 4j): a window of a few levels, counted without copying
 * anything. NaN is below and equal to none.
 */
export function levelCounts(src: usize, n: i32, lv: usize, k: i32, dst: usize): void {
  if (k == 1) levelCountsK(src, n, lv, dst, 1);
  else if (k == 2) levelCountsK(src, n, lv, dst, 2);
  else if (k == 3) levelCountsK(src, n, lv, dst, 3);
  else if (k == 4) levelCountsK(src, n, lv, dst, 4);
  else if (k == 5) levelCountsK(src, n, lv, dst, 5);
  else if (k == 6) levelCountsK(src, n, lv, dst, 6);
  else if (k == 7) levelCountsK(src, n, lv, dst, 7);
  else levelCountsK(src, n, lv, dst, 8);
}

// @ts-ignore: decorator
@inline function levelCountsK(src: usize, n: i32, lv: usize, dst: usize, K: i32): void {
  // (the values past k are never compared)
  const v0 = load<f32>(lv);
  const v1 = load<f32>(lv, 4);
  const v2 = load<f32>(lv, 8);
  const v3 = load<f32>(lv, 12);
  const v4 = load<f32>(lv, 16);
  const v5 = load<f32>(lv, 20);
  const v6 = load<f32>(lv, 24);
  const v7 = load<f32>(lv, 28);
  let c0 = 0;
  let c1 = 0;
  let c2 = 0;
  let c3 = 0;
  let c4 = 0;
  let c5 = 0;
  let c6 = 0;
  let c7 = 0;
  let e0 = 0;
  let e1 = 0;
  let e2 = 0;
  let e3 = 0;
  let e4 = 0;
  let e5 = 0;
  let e6 = 0;
  let e7 = 0;
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const V0 = v128.load32_splat(lv, 0);
    const V1 = v128.load32_splat(lv, 4);
    const V2 = v128.load32_splat(lv, 8);
    const V3 = v128.load32_splat(lv, 12);
    const V4 = v128.load32_splat(lv, 16);
    const V5 = v128.load32_splat(lv, 20);
    const V6 = v128.load32_splat(lv, 24);
    const V7 = v128.load32_splat(lv, 28);
    let b0 = i32x4.splat(0);
    let b1 = i32x4.splat(0);
    let b2 = i32x4.splat(0);
    let b3 = i32x4.splat(0);
    let b4 = i32x4.splat(0);
    let b5 = i32x4.splat(0);
    let b6 = i32x4.splat(0);
    let b7 = i32x4.splat(0);
    let q0 = i32x4.splat(0);
    let q1 = i32x4.splat(0);
    let q2 = i32x4.splat(0);
    let q3 = i32x4.splat(0);
    let q4 = i32x4.splat(0);
    let q5 = i32x4.splat(0);
    let q6 = i32x4.splat(0);
    let q7 = i32x4.splat(0);
    for (; i + 4 <= n; i += 4) {
      const x = v128.load(src + (<usize>i << 2));
      b0 = i32x4.sub(b0, f32x4.lt(x, V0));
      q0 = i32x4.sub(q0, f32x4.eq(x, V0));
      if (K > 1) (b1 = i32x4.sub(b1, f32x4.lt(x, V1))), (q1 = i32x4.sub(q1, f32x4.eq(x, V1)));
      if (K > 2) (b2 = i32x4.sub(b2, f32x4.lt(x, V2))), (q2 = i32x4.sub(q2, f32x4.eq(x, V2)));
      if (K > 3) (b3 = i32x4.sub(b3, f32x4.lt(x, V3))), (q3 = i32x4.sub(q3, f32x4.eq(x, V3)));
      if (K > 4) (b4 = i32x4.sub(b4, f32x4.lt(x, V4))), (q4 = i32x4.sub(q4, f32x4.eq(x, V4)));
      if (K > 5) (b5 = i32x4.sub(b5, f32x4.lt(x, V5))), (q5 = i32x4.sub(q5, f32x4.eq(x, V5)));
      if (K > 6) (b6 = i32x4.sub(b6, f32x4.lt(x, V6))), (q6 = i32x4.sub(q6, f32x4.eq(x, V6)));
      if (K > 7) (b7 = i32x4.sub(b7, f32x4.lt(x, V7))), (q7 = i32x4.sub(q7, f32x4.eq(x, V7)));
    }
    c0 = laneSum(b0);
    c1 = laneSum(b1);
    c2 = laneSum(b2);
    c3 = laneSum(b3);
    c4 = laneSum(b4);
    c5 = laneSum(b5);
    c6 = laneSum(b6);
    c7 = laneSum(b7);
    e0 = laneSum(q0);
    e1 = laneSum(q1);
    e2 = laneSum(q2);
    e3 = laneSum(q3);
    e4 = laneSum(q4);
    e5 = laneSum(q5);
    e6 = laneSum(q6);
    e7 = laneSum(q7);
  }
  for (; i < n; i++) {
    const x = load<f32>(src + (<usize>i << 2));
    c0 += <i32>(x < v0);
    e0 += <i32>(x == v0);
    c1 += <i32>(x < v1);
    e1 += <i32>(x == v1);
    c2 += <i32>(x < v2);
    e2 += <i32>(x == v2);
    c3 += <i32>(x < v3);
    e3 += <i32>(x == v3);
    c4 += <i32>(x < v4);
    e4 += <i32>(x == v4);
    c5 += <i32>(x < v5);
    e5 += <i32>(x == v5);
    c6 += <i32>(x < v6);
    e6 += <i32>(x == v6);
    c7 += <i32>(x < v7);
    e7 += <i32>(x == v7);
  }
  store<i32>(dst, c0);
  store<i32>(dst, c1, 4);
  store<i32>(dst, c2, 8);
  store<i32>(dst, c3, 12);
  store<i32>(dst, c4, 16);
  store<i32>(dst, c5, 20);
  store<i32>(dst, c6, 24);
  store<i32>(dst, c7, 28);
  store<i32>(dst, e0, 32);
  store<i32>(dst, e1, 36);
  store<i32>(dst, e2, 40);
  store<i32>(dst, e3, 44);
  store<i32>(dst, e4, 48);
  store<i32>(dst, e5, 52);
  store<i32>(dst, e6, 56);
  store<i32>(dst, e7, 60);
}

/**
 * The count of each of k (2–8) brackets among the u values of their union (as bracketSplit would
 * split them), to br (i32 from byte 100): what bracketSplit's areas must hold, when they are
 * placed back to back.
 */
export function bracketSizes(src: usize, u: i32, br: usize, k: i32): void {
  // the values below lo_j (j = 1…k − 1; past it +∞, not read)
  const lo1 = load<f32>(br, 4);
  const lo2 = k > 2 ? load<f32>(br, 8) : Infinity;
  const lo3 = k > 3 ? load<f32>(br, 12) : Infinity;
  const lo4 = k > 4 ? load<f32>(br, 16) : Infinity;
  const lo5 = k > 5 ? load<f32>(br, 20) : Infinity;
  const lo6 = k > 6 ? load<f32>(br, 24) : Infinity;
  const lo7 = k > 7 ? load<f32>(br, 28) : Infinity;
  let c1 = 0;
  let c2 = 0;
  let c3 = 0;
  let c4 = 0;
  let c5 = 0;
  let c6 = 0;
  let c7 = 0;
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const L1 = v128.load32_splat(br, 4);
    const L2 = k > 2 ? v128.load32_splat(br, 8) : f32x4.splat(Infinity);
    const L3 = k > 3 ? v128.load32_splat(br, 12) : f32x4.splat(Infinity);
    const L4 = k > 4 ? v128.load32_splat(br, 16) : f32x4.splat(Infinity);
    const L5 = k > 5 ? v128.load32_splat(br, 20) : f32x4.splat(Infinity);
    const L6 = k > 6 ? v128.load32_splat(br, 24) : f32x4.splat(Infinity);
    const L7 = k > 7 ? v128.load32_splat(br, 28) : f32x4.splat(Infinity);
    let b1 = i32x4.splat(0);
    let b2 = i32x4.splat(0);
    let b3 = i32x4.splat(0);
    let b4 = i32x4.splat(0);
    let b5 = i32x4.splat(0);
    let b6 = i32x4.splat(0);
    let b7 = i32x4.splat(0);
    for (; i + 4 <= u; i += 4) {
      const x = v128.load(src + (<usize>i << 2));
      b1 = i32x4.sub(b1, f32x4.lt(x, L1));
      b2 = i32x4.sub(b2, f32x4.lt(x, L2));
      b3 = i32x4.sub(b3, f32x4.lt(x, L3));
      b4 = i32x4.sub(b4, f32x4.lt(x, L4));
      b5 = i32x4.sub(b5, f32x4.lt(x, L5));
      b6 = i32x4.sub(b6, f32x4.lt(x, L6));
      b7 = i32x4.sub(b7, f32x4.lt(x, L7));
    }
    c1 = laneSum(b1);
    c2 = laneSum(b2);
    c3 = laneSum(b3);
    c4 = laneSum(b4);
    c5 = laneSum(b5);
    c6 = laneSum(b6);
    c7 = laneSum(b7);
  }
  for (; i < u; i++) {
    const x = load<f32>(src + (<usize>i << 2));
    c1 += <i32>(x < lo1);
    c2 += <i32>(x < lo2);
    c3 += <i32>(x < lo3);
    c4 += <i32>(x < lo4);
    c5 += <i32>(x < lo5);
    c6 += <i32>(x < lo6);
    c7 += <i32>(x < lo7);
  }
  // bracket j: below lo_(j+1) (the last: all u), not below lo_j; none past the last
  store<i32>(br, c1, 100);
  store<i32>(br, k == 2 ? u - c1 : c2 - c1, 104);
  store<i32>(br, k == 3 ? u - c2 : k > 3 ? c3 - c2 : 0, 108);
  store<i32>(br, k == 4 ? u - c3 : k > 4 ? c4 - c3 : 0, 112);
  store<i32>(br, k == 5 ? u - c4 : k > 5 ? c5 - c4 : 0, 116);
  store<i32>(br, k == 6 ? u - c5 : k > 6 ? c6 - c5 : 0, 120);
  store<i32>(br, k == 7 ? u - c6 : k > 7 ? c7 - c6 : 0, 124);
  store<i32>(br, k == 8 ? u - c7 : 0, 128);
}

// @ts-ignore: decorator
@inline function bracketSplitK(src: usize, u: i32, br: usize, dst: usize, K: i32): void {
  const lo1 = load<f32>(br, 4);
  const lo2 = load<f32>(br, 8);
  const lo3 = load<f32>(br, 12);
  const lo4 = load<f32>(br, 16);
  const lo5 = load<f32>(br, 20);
  const lo6 = load<f32>(br, 24);
  const lo7 = load<f32>(br, 28);
  let o0: usize = dst + <usize>load<i32>(br, 132);
  let o1: usize = dst + <usize>load<i32>(br, 136);
  let o2: usize = dst + <usize>load<i32>(br, 140);
  let o3: usize = dst + <usize>load<i32>(br, 144);
  let o4: usize = dst + <usize>load<i32>(br, 148);
  let o5: usize = dst + <usize>load<i32>(br, 152);
  let o6: usize = dst + <usize>load<i32>(br, 156);
  let o7: usize = dst + <usize>load<i32>(br, 160);
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const L1 = v128.load32_splat(br, 4);
    const L2 = v128.load32_splat(br, 8);
    const L3 = v128.load32_splat(br, 12);
    const L4 = v128.load32_splat(br, 16);
    const L5 = v128.load32_splat(br, 20);
    const L6 = v128.load32_splat(br, 24);
    const L7 = v128.load32_splat(br, 28);
    for (; i + 4 <= u; i += 4) {
      const x = v128.load(src + (<usize>i << 2));
      // the lanes below each next bracket's lower end (all four past the last bracket); bracket j
      // takes those below lo_(j+1), not below lo_j
      const a = i32x4.bitmask(f32x4.lt(x, L1));
      const b = K > 2 ? i32x4.bitmask(f32x4.lt(x, L2)) : 15;
      const c = K > 3 ? i32x4.bitmask(f32x4.lt(x, L3)) : 15;
      const d = K > 4 ? i32x4.bitmask(f32x4.lt(x, L4)) : 15;
      const e = K > 5 ? i32x4.bitmask(f32x4.lt(x, L5)) : 15;
      const f = K > 6 ? i32x4.bitmask(f32x4.lt(x, L6)) : 15;
      const g = K > 7 ? i32x4.bitmask(f32x4.lt(x, L7)) : 15;
      o0 = packLanes(o0, x, a);
      o1 = packLanes(o1, x, b & ~a);
      if (K > 2) o2 = packLanes(o2, x, c & ~b);
      if (K > 3) o3 = packLanes(o3, x, d & ~c);
      if (K > 4) o4 = packLanes(o4, x, e & ~d);
      if (K > 5) o5 = packLanes(o5, x, f & ~e);
      if (K > 6) o6 = packLanes(o6, x, g & ~f);
      if (K > 7) o7 = packLanes(o7, x, 15 & ~g);
    }
  }
  for (; i < u; i++) {
    const x = load<f32>(src + (<usize>i << 2));
    if (x < lo1 || K < 2) {
      store<f32>(o0, x);
      o0 += 4;
    } else if (x < lo2 || K < 3) {
      store<f32>(o1, x);
      o1 += 4;
    } else if (x < lo3 || K < 4) {
      store<f32>(o2, x);
      o2 += 4;
    } else if (x < lo4 || K < 5) {
      store<f32>(o3, x);
      o3 += 4;
    } else if (x < lo5 || K < 6) {
      store<f32>(o4, x);
      o4 += 4;
    } else if (x < lo6 || K < 7) {
      store<f32>(o5, x);
      o5 += 4;
    } else if (x < lo7 || K < 8) {
      store<f32>(o6, x);
      o6 += 4;
    } else {
      store<f32>(o7, x);
      o7 += 4;
    }
  }
  store<i32>(br, <i32>((o0 - dst - <usize>load<i32>(br, 132)) >> 2), 100);
  store<i32>(br, <i32>((o1 - dst - <usize>load<i32>(br, 136)) >> 2), 104);
  store<i32>(br, <i32>((o2 - dst - <usize>load<i32>(br, 140)) >> 2), 108);
  store<i32>(br, <i32>((o3 - dst - <usize>load<i32>(br, 144)) >> 2), 112);
  store<i32>(br, <i32>((o4 - dst - <usize>load<i32>(br, 148)) >> 2), 116);
  store<i32>(br, <i32>((o5 - dst - <usize>load<i32>(br, 152)) >> 2), 120);
  store<i32>(br, <i32>((o6 - dst - <usize>load<i32>(br, 156)) >> 2), 124);
  store<i32>(br, <i32>((o7 - dst - <usize>load<i32>(br, 160)) >> 2), 128);
}

// ---------- sorting: LSD radix on the values' order keys ----------

/** sortF32's four count tables (256 u32 each), one per byte of the key. */
const RADIX_COUNTS = memory.data(4 * 256 * 4, 16);

/** The u32 whose unsigned order is x's numeric order (−0 before +0), NaN last as TypedArray.sort puts it. */
// @ts-ignore: decorator
@inline function orderKey(x: f32): u32 {
  if (x != x) return 0xffffffff;
  const b = reinterpret<u32>(x);
  return b & 0x80000000 ? ~b : b | 0x80000000;
}

// @ts-ignore: decorator
@inline function fromKey(k: u32): f32 {
  return k == 0xffffffff ? NaN : reinterpret<f32>(k & 0x80000000 ? k ^ 0x80000000 : ~k);
}

/**
 * Sorts the n f32 at p ascending in place, in the order Float32Array.prototype.sort gives (−0
 * before +0, NaN last): each value replaced by its order key, the keys sorted by a stable LSD radix
 * of 8 bits a pass (one count pass for all four bytes; a pass whose byte every key shares is
 * skipped), then turned back. Under 48 values an insertion sort of the keys. tmp: room for n
 * values. V8's own sort of a typed array takes 30–80 ns a value (Node 20); this, a few.
 */
export function sortF32(p: usize, n: i32, tmp: usize): void {
  for (let i = 0; i < n; i++) store<u32>(p + (<usize>i << 2), orderKey(load<f32>(p + (<usize>i << 2))));
  if (n < 48) {
    for (let i = 1; i < n; i++) {
      const k = load<u32>(p + (<usize>i << 2));
      let j = i - 1;
      for (; j >= 0 && load<u32>(p + (<usize>j << 2)) > k; j--) store<u32>(p + (<usize>(j + 1) << 2), load<u32>(p + (<usize>j << 2)));
      store<u32>(p + (<usize>(j + 1) << 2), k);
    }
  } else {
    memory.fill(RADIX_COUNTS, 0, 4 * 256 * 4);
    for (let i = 0; i < n; i++) {
      const k = load<u32>(p + (<usize>i << 2));
      const c0 = RADIX_COUNTS + (<usize>(k & 0xff) << 2);
      const c1 = RADIX_COUNTS + 1024 + (<usize>((k >>> 8) & 0xff) << 2);
      const c2 = RADIX_COUNTS + 2048 + (<usize>((k >>> 16) & 0xff) << 2);
      const c3 = RADIX_COUNTS + 3072 + (<usize>(k >>> 24) << 2);
      store<u32>(c0, load<u32>(c0) + 1);
      store<u32>(c1, load<u32>(c1) + 1);
      store<u32>(c2, load<u32>(c2) + 1);
      store<u32>(c3, load<u32>(c3) + 1);
    }
    let src = p;
    let dst = tmp;
    const first = load<u32>(p);
    for (let d = 0; d < 4; d++) {
      const shift = <u32>(d << 3);
      const counts = RADIX_COUNTS + (<usize>d << 10);
      // every key with the first key's byte: nothing to move
      if (load<u32>(counts + (<usize>((first >>> shift) & 0xff) << 2)) == <u32>n) continue;
      // counts into starts
      let sum: u32 = 0;
      for (let b = 0; b < 256; b++) {
        const c = load<u32>(counts + (<usize>b << 2));
        store<u32>(counts + (<usize>b << 2), sum);
        sum += c;
      }
      for (let i = 0; i < n; i++) {
        const k = load<u32>(src + (<usize>i << 2));
        const at = counts + (<usize>((k >>> shift) & 0xff) << 2);
        const o = load<u32>(at);
        store<u32>(at, o + 1);
        store<u32>(dst + (<usize>o << 2), k);
      }
      const t = src;
      src = dst;
      dst = t;
    }
    if (src != p) memory.copy(p, src, <usize>n << 2);
  }
  for (let i = 0; i < n; i++) store<f32>(p + (<usize>i << 2), fromKey(load<u32>(p + (<usize>i << 2))));
}
