// The pixel kernel: a register virtual machine that runs compiled band-math bytecode over blocks
// of pixels in this module's memory, and reductions over the results.
//
// ABI (the host owns the memory layout above dataBase()):
// - Program: `nInstr` instructions of 4 i32 [op, dst, a, b] at progBase().
// - Band slots (16): at bandBase() + slot*32: ptr i32, dtype i32 (0 f32, 1 u16, 2 i16, 3 u8),
//   scale f32, offset f32, nodata f32, hasNodata i32. LOAD turns a block of a slot into f32
//   reflectance = DN*scale + offset; DN 0 (Sentinel-2's no-data) and DN == nodata become NaN
//   (for f32 inputs only NaN and the declared nodata).
// - Registers: BLOCK f32 each at regBase() + r*BLOCK*4. Constants are filled once per run.
// - Results: NaN marks "no value" (masked, nodata, x/0, NaN input). Non-finite results (±Inf from
//   overflow or log(0)) become NaN on output, so statistics and JSON never see infinities.
// - Statistics (f64) at statsBase(): count, min, max, mean, m2 (sum of squared deviations), merged
//   per block with Chan et al.'s parallel formula after an exact two-pass inside each block.
// Nothing here allocates: the host grows memory and lays out buffers.

// @ts-ignore: decorator
@inline const BLOCK: i32 = 1024;
const MAX_INSTR: i32 = 4096;
const MAX_REGS: i32 = 256;
const SLOTS: i32 = 16;

const PROG: usize = (__heap_base + 63) & ~63;
const BANDS: usize = PROG + <usize>(MAX_INSTR * 16);
const STATS: usize = BANDS + <usize>(SLOTS * 32);
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

// Op codes (keep in step with src/compute/bytecode.ts).
const OP_LOAD: i32 = 1;
const OP_ADD: i32 = 2;
const OP_SUB: i32 = 3;
const OP_MUL: i32 = 4;
const OP_DIV: i32 = 5;
const OP_NEG: i32 = 6;
const OP_SQRT: i32 = 7;
const OP_ABS: i32 = 8;
const OP_EXP: i32 = 9;
const OP_LOG: i32 = 10;
const OP_MIN: i32 = 11;
const OP_MAX: i32 = 12;
const OP_POW: i32 = 13;
const OP_ND: i32 = 14; // (a - b) / (a + b): normalised difference, the commonest index shape
const OP_NDB: i32 = 15; // normalised difference of two band slots, loaded and computed in one pass

// @ts-ignore: decorator
@inline function reg(r: i32): usize { return REGS + <usize>(r * BLOCK * 4); }

export function fillConst(r: i32, value: f32): void {
  const p = reg(r);
  for (let i = 0; i < BLOCK; i++) store<f32>(p + (<usize>i << 2), value);
}

// ---------- LOAD: digital numbers or f32 → reflectance, invalid → NaN ----------

// The signedness choice is a constant of each call: V8 hoists it, and the loop stays branch-free.
// @ts-ignore: decorator
@inline function load16(dst: usize, src: usize, len: i32, scale: f32, offset: f32, nd: i32, signed: bool): i32 {
  const vs = f32x4.splat(scale);
  const vo = f32x4.splat(offset);
  const vn = f32x4.splat(NaN as f32);
  const z16 = i16x8.splat(0);
  const vnd = i16x8.splat(<i16>nd);
  let i = 0;
  for (; i + 8 <= len; i += 8) {
    const raw = v128.load(src + (<usize>i << 1));
    const bad = v128.or(i16x8.eq(raw, z16), i16x8.eq(raw, vnd));
    const lo = signed ? i32x4.extend_low_i16x8_s(raw) : i32x4.extend_low_i16x8_u(raw);
    const hi = signed ? i32x4.extend_high_i16x8_s(raw) : i32x4.extend_high_i16x8_u(raw);
    v128.store(dst + (<usize>i << 2), v128.bitselect(vn, f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(lo), vs), vo), i32x4.extend_low_i16x8_s(bad)));
    v128.store(dst + (<usize>i << 2), v128.bitselect(vn, f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(hi), vs), vo), i32x4.extend_high_i16x8_s(bad)), 16);
  }
  return i;
}

function loadBand(dst: usize, slot: i32, start: i32, len: i32): void {
  const t = BANDS + <usize>(slot * 32);
  const ptr = <usize>load<i32>(t);
  const dtype = load<i32>(t, 4);
  const scale = load<f32>(t, 8);
  const offset = load<f32>(t, 12);
  const nodata = load<f32>(t, 16);
  const hasNodata = load<i32>(t, 20) != 0;
  const nan = NaN as f32;
  let i = 0;
  if (dtype == 1 || dtype == 2) {
    const src = ptr + (<usize>start << 1);
    const nd = hasNodata ? <i32>nodata : 0; // DN 0 is always invalid; nodata 0 changes nothing
    if (ASC_FEATURE_SIMD) {
      if (dtype == 1) i = load16(dst, src, len, scale, offset, nd, false);
      else i = load16(dst, src, len, scale, offset, nd, true);
    }
    for (; i < len; i++) {
      const dn: i32 = dtype == 1 ? <i32>load<u16>(src + (<usize>i << 1)) : <i32>load<i16>(src + (<usize>i << 1));
      store<f32>(dst + (<usize>i << 2), dn == 0 || dn == nd ? nan : <f32>dn * scale + offset);
    }
  } else if (dtype == 3) {
    const src = ptr + <usize>start;
    const nd = hasNodata ? <i32>nodata : 0;
    for (; i < len; i++) {
      const dn = <i32>load<u8>(src + <usize>i);
      store<f32>(dst + (<usize>i << 2), dn == 0 || dn == nd ? nan : <f32>dn * scale + offset);
    }
  } else {
    const src = ptr + (<usize>start << 2);
    if (ASC_FEATURE_SIMD) {
      const vs = f32x4.splat(scale);
      const vo = f32x4.splat(offset);
      const vn = f32x4.splat(nan);
      const vnd = f32x4.splat(hasNodata ? nodata : nan);
      for (; i + 4 <= len; i += 4) {
        const x = v128.load(src + (<usize>i << 2));
        const r = f32x4.add(f32x4.mul(x, vs), vo);
        v128.store(dst + (<usize>i << 2), v128.bitselect(vn, r, f32x4.eq(x, vnd)));
      }
    }
    for (; i < len; i++) {
      const x = load<f32>(src + (<usize>i << 2));
      store<f32>(dst + (<usize>i << 2), hasNodata && x == nodata ? nan : x * scale + offset);
    }
  }
}

// ---------- arithmetic over a block ----------

// One loop per operation (the branch is outside the loop), SIMD body plus scalar tail.
function binary(op: i32, d: usize, a: usize, b: usize, len: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    const vn = f32x4.splat(NaN as f32);
    const vz = f32x4.splat(0);
    if (op == OP_ADD) {
      for (; i + 4 <= len; i += 4) { const o = <usize>i << 2; v128.store(d + o, f32x4.add(v128.load(a + o), v128.load(b + o))); }
    } else if (op == OP_SUB) {
      for (; i + 4 <= len; i += 4) { const o = <usize>i << 2; v128.store(d + o, f32x4.sub(v128.load(a + o), v128.load(b + o))); }
    } else if (op == OP_MUL) {
      for (; i + 4 <= len; i += 4) { const o = <usize>i << 2; v128.store(d + o, f32x4.mul(v128.load(a + o), v128.load(b + o))); }
    } else if (op == OP_DIV) {
      for (; i + 4 <= len; i += 4) {
        const o = <usize>i << 2;
        const y = v128.load(b + o);
        v128.store(d + o, v128.bitselect(vn, f32x4.div(v128.load(a + o), y), f32x4.eq(y, vz)));
      }
    } else if (op == OP_ND) {
      for (; i + 4 <= len; i += 4) {
        const o = <usize>i << 2;
        const x = v128.load(a + o);
        const y = v128.load(b + o);
        const s = f32x4.add(x, y);
        v128.store(d + o, v128.bitselect(vn, f32x4.div(f32x4.sub(x, y), s), f32x4.eq(s, vz)));
      }
    } else if (op == OP_MIN) {
      // f32x4.min propagates NaN, as the formula language promises
      for (; i + 4 <= len; i += 4) { const o = <usize>i << 2; v128.store(d + o, f32x4.min(v128.load(a + o), v128.load(b + o))); }
    } else if (op == OP_MAX) {
      for (; i + 4 <= len; i += 4) { const o = <usize>i << 2; v128.store(d + o, f32x4.max(v128.load(a + o), v128.load(b + o))); }
    }
  }
  for (; i < len; i++) {
    const o = <usize>i << 2;
    const x = load<f32>(a + o);
    const y = load<f32>(b + o);
    let r: f32;
    if (op == OP_ADD) r = x + y;
    else if (op == OP_SUB) r = x - y;
    else if (op == OP_MUL) r = x * y;
    else if (op == OP_DIV) r = y == 0 ? <f32>NaN : x / y;
    else if (op == OP_ND) {
      const s = x + y;
      r = s == 0 ? <f32>NaN : (x - y) / s;
    } else if (op == OP_MIN) r = x != x || y != y ? <f32>NaN : Mathf.min(x, y);
    else if (op == OP_MAX) r = x != x || y != y ? <f32>NaN : Mathf.max(x, y);
    else r = Mathf.pow(x, y);
    store<f32>(d + o, r);
  }
}

function unary(op: i32, d: usize, a: usize, len: i32): void {
  let i = 0;
  if (ASC_FEATURE_SIMD) {
    if (op == OP_NEG || op == OP_SQRT || op == OP_ABS) {
      for (; i + 4 <= len; i += 4) {
        const o = <usize>i << 2;
        const x = v128.load(a + o);
        v128.store(d + o, op == OP_NEG ? f32x4.neg(x) : op == OP_SQRT ? f32x4.sqrt(x) : f32x4.abs(x));
      }
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

// NDVI-shaped formulas on two u16 bands with equal scaling (the usual case) run in one pass: no
// intermediate registers. Other inputs go through the general LOAD + ND path.
function ndBands(dst: usize, slotA: i32, slotB: i32, start: i32, len: i32): void {
  const ta = BANDS + <usize>(slotA * 32);
  const tb = BANDS + <usize>(slotB * 32);
  const fast = ASC_FEATURE_SIMD && load<i32>(ta, 4) == 1 && load<i32>(tb, 4) == 1;
  if (!fast) {
    const rb = reg(MAX_REGS - 1);
    loadBand(dst, slotA, start, len);
    loadBand(rb, slotB, start, len);
    binary(OP_ND, dst, dst, rb, len);
    return;
  }
  const pa = <usize>load<i32>(ta) + (<usize>start << 1);
  const pb = <usize>load<i32>(tb) + (<usize>start << 1);
  const sa = f32x4.splat(load<f32>(ta, 8));
  const oa = f32x4.splat(load<f32>(ta, 12));
  const sb = f32x4.splat(load<f32>(tb, 8));
  const ob = f32x4.splat(load<f32>(tb, 12));
  // Validity is decided on the raw 16-bit lanes (8 pixels per compare): DN 0 or the declared
  // nodata. A zero sum is not checked here: x/0 gives ±Inf or NaN, which finishBlock turns into
  // NaN (NDB is always the whole formula, so no infinity can reach another operation).
  const nda = i16x8.splat(<i16>(load<i32>(ta, 20) ? <i32>load<f32>(ta, 16) : 0));
  const ndb = i16x8.splat(<i16>(load<i32>(tb, 20) ? <i32>load<f32>(tb, 16) : 0));
  const z16 = i16x8.splat(0);
  const vn = f32x4.splat(NaN as f32);
  let i = 0;
  for (; i + 8 <= len; i += 8) {
    const ra = v128.load(pa + (<usize>i << 1));
    const rb = v128.load(pb + (<usize>i << 1));
    const bad = v128.or(v128.or(i16x8.eq(ra, z16), i16x8.eq(ra, nda)), v128.or(i16x8.eq(rb, z16), i16x8.eq(rb, ndb)));
    const xlo = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(ra)), sa), oa);
    const xhi = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(ra)), sa), oa);
    const ylo = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_low_i16x8_u(rb)), sb), ob);
    const yhi = f32x4.add(f32x4.mul(f32x4.convert_i32x4_s(i32x4.extend_high_i16x8_u(rb)), sb), ob);
    v128.store(dst + (<usize>i << 2), v128.bitselect(vn, f32x4.div(f32x4.sub(xlo, ylo), f32x4.add(xlo, ylo)), i32x4.extend_low_i16x8_s(bad)));
    v128.store(dst + (<usize>i << 2), v128.bitselect(vn, f32x4.div(f32x4.sub(xhi, yhi), f32x4.add(xhi, yhi)), i32x4.extend_high_i16x8_s(bad)), 16);
  }
  if (i < len) {
    // scalar tail through the general path on the remaining pixels
    const rb = reg(MAX_REGS - 1);
    loadBand(dst + (<usize>i << 2), slotA, start + i, len - i);
    loadBand(rb, slotB, start + i, len - i);
    binary(OP_ND, dst + (<usize>i << 2), dst + (<usize>i << 2), rb, len - i);
  }
}

function execBlock(nInstr: i32, start: i32, len: i32): void {
  for (let k = 0; k < nInstr; k++) {
    const ip = PROG + <usize>(k * 16);
    const op = load<i32>(ip);
    const d = reg(load<i32>(ip, 4));
    const a = load<i32>(ip, 8);
    if (op == OP_LOAD) loadBand(d, a, start, len);
    else if (op == OP_NDB) ndBands(d, a, load<i32>(ip, 12), start, len);
    else if (op >= OP_NEG && op <= OP_LOG) unary(op, d, reg(a), len);
    else binary(op, d, reg(a), reg(load<i32>(ip, 12)), len);
  }
}

// ---------- finishing a block: mask, non-finite → NaN, store, statistics ----------

// Running statistics (f64) of the current run.
let sCount: f64 = 0;
let sMin: f64 = Infinity;
let sMax: f64 = -Infinity;
let sMean: f64 = 0;
let sM2: f64 = 0;

export function resetStats(): void {
  sCount = 0;
  sMin = Infinity;
  sMax = -Infinity;
  sMean = 0;
  sM2 = 0;
}

/**
 * One pass over a finished block: masked-out pixels and non-finite values become NaN (in the
 * register, and in `out` when given), while count, sum, min and max are gathered; a second pass
 * over the block (still in cache) sums squared deviations from the block mean. Returns nothing:
 * the block's figures are merged into the running statistics.
 */
function finishBlock(r: usize, maskPtr: usize, start: i32, len: i32, out: usize, withStats: bool): void {
  let n: i32 = 0;
  let sum: f64 = 0;
  let mn: f32 = Infinity;
  let mx: f32 = -Infinity;
  let i = 0;
  const nan = NaN as f32;
  if (ASC_FEATURE_SIMD) {
    const vn = f32x4.splat(nan);
    const inf = f32x4.splat(Infinity as f32);
    const ninf = f32x4.splat(-Infinity as f32);
    const vz = i32x4.splat(0);
    let vcount = i32x4.splat(0);
    let vsumLo = f64x2.splat(0);
    let vsumHi = f64x2.splat(0);
    let vmin = inf;
    let vmax = ninf;
    for (; i + 4 <= len; i += 4) {
      const o = <usize>i << 2;
      let x = v128.load(r + o);
      let ok = f32x4.lt(f32x4.abs(x), inf); // false for NaN and ±Inf
      if (maskPtr) {
        const m = i32x4.extend_low_i16x8_u(i16x8.extend_low_i8x16_u(v128.load32_zero(maskPtr + <usize>(start + i))));
        ok = v128.andnot(ok, i32x4.eq(m, vz));
      }
      x = v128.bitselect(x, vn, ok);
      v128.store(r + o, x);
      if (out) v128.store(out + o, x);
      if (withStats) {
        vcount = i32x4.sub(vcount, ok);
        const z = v128.and(x, ok);
        vsumLo = f64x2.add(vsumLo, f64x2.promote_low_f32x4(z));
        vsumHi = f64x2.add(vsumHi, f64x2.promote_low_f32x4(i32x4.shuffle(z, z, 2, 3, 0, 1)));
        vmin = f32x4.pmin(vmin, v128.bitselect(x, inf, ok));
        vmax = f32x4.pmax(vmax, v128.bitselect(x, ninf, ok));
      }
    }
    if (withStats) {
      n = i32x4.extract_lane(vcount, 0) + i32x4.extract_lane(vcount, 1) + i32x4.extract_lane(vcount, 2) + i32x4.extract_lane(vcount, 3);
      const s2 = f64x2.add(vsumLo, vsumHi);
      sum = f64x2.extract_lane(s2, 0) + f64x2.extract_lane(s2, 1);
      mn = Mathf.min(Mathf.min(f32x4.extract_lane(vmin, 0), f32x4.extract_lane(vmin, 1)), Mathf.min(f32x4.extract_lane(vmin, 2), f32x4.extract_lane(vmin, 3)));
      mx = Mathf.max(Mathf.max(f32x4.extract_lane(vmax, 0), f32x4.extract_lane(vmax, 1)), Mathf.max(f32x4.extract_lane(vmax, 2), f32x4.extract_lane(vmax, 3)));
    }
  }
  for (; i < len; i++) {
    const o = <usize>i << 2;
    let x = load<f32>(r + o);
    const masked = maskPtr != 0 && load<u8>(maskPtr + <usize>(start + i)) == 0;
    if (masked || !(Mathf.abs(x) < Infinity)) x = nan;
    store<f32>(r + o, x);
    if (out) store<f32>(out + o, x);
    if (withStats && x == x) {
      n++;
      sum += <f64>x;
      if (x < mn) mn = x;
      if (x > mx) mx = x;
    }
  }
  if (withStats && n > 0) mergeBlock(r, len, n, sum, mn, mx);
}

function writeStats(): void {
  store<f64>(STATS, sCount);
  store<f64>(STATS, sMin, 8);
  store<f64>(STATS, sMax, 16);
  store<f64>(STATS, sMean, 24);
  store<f64>(STATS, sM2, 32);
}

/** Second pass (squared deviations from the block mean) and the merge into the totals. */
function mergeBlock(r: usize, len: i32, n: i32, sum: f64, mn: f32, mx: f32): void {
  let i = 0;
  const mean = sum / <f64>n;
  let m2: f64 = 0;
  if (ASC_FEATURE_SIMD) {
    const vm = f64x2.splat(mean);
    let acc = f64x2.splat(0);
    for (; i + 4 <= len; i += 4) {
      const x = v128.load(r + (<usize>i << 2));
      const ok = f32x4.eq(x, x);
      // invalid lanes contribute (mean - mean)² = 0: replace them by the mean
      const lo = f64x2.promote_low_f32x4(v128.and(x, ok));
      const hi = f64x2.promote_low_f32x4(i32x4.shuffle(v128.and(x, ok), v128.and(x, ok), 2, 3, 0, 1));
      const okLo = i64x2.extend_low_i32x4_s(ok);
      const okHi = i64x2.extend_high_i32x4_s(ok);
      const dlo = v128.and(f64x2.sub(lo, vm), okLo);
      const dhi = v128.and(f64x2.sub(hi, vm), okHi);
      acc = f64x2.add(acc, f64x2.add(f64x2.mul(dlo, dlo), f64x2.mul(dhi, dhi)));
    }
    m2 = f64x2.extract_lane(acc, 0) + f64x2.extract_lane(acc, 1);
  }
  for (; i < len; i++) {
    const x = load<f32>(r + (<usize>i << 2));
    if (x == x) {
      const dx = <f64>x - mean;
      m2 += dx * dx;
    }
  }
  // Chan, Golub & LeVeque: merge (n, mean, m2) of this block into the totals.
  const nb = <f64>n;
  const na = sCount;
  const nt = na + nb;
  const delta = mean - sMean;
  sMean = sMean + delta * (nb / nt);
  sM2 = sM2 + m2 + delta * delta * (na * nb / nt);
  sCount = nt;
  if (<f64>mn < sMin) sMin = <f64>mn;
  if (<f64>mx > sMax) sMax = <f64>mx;
}

/**
 * Runs the program over `nPixels` pixels. `resultReg` holds the value after the last instruction.
 * maskPtr (u8 per pixel, 0 = outside/invalid) and outPtr (f32 per pixel) may be 0. With
 * withStats != 0 the statistics are accumulated (call resetStats() first to start afresh).
 */
export function run(nInstr: i32, nPixels: i32, resultReg: i32, maskPtr: usize, outPtr: usize, withStats: i32): void {
  const r = reg(resultReg);
  for (let start = 0; start < nPixels; start += BLOCK) {
    const len = min(BLOCK, nPixels - start);
    execBlock(nInstr, start, len);
    finishBlock(r, maskPtr, start, len, outPtr ? outPtr + (<usize>start << 2) : 0, withStats != 0);
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
