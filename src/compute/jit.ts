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
import { OP, type Program } from './formula.js';
import { encodeModule, FuncBuilder, O, T, V } from './wasm-module.js';

export type JitDtype = 'f32' | 'u16' | 'i16' | 'u8';

export interface JitBand {
  dtype: JitDtype;
  scale?: number;
  offset?: number;
  nodata?: number | null;
}

export type JitFn = (start: number, end: number, dst: number, mask: number, acc: number, k: number, ...ptrs: number[]) => void;

export interface JitKernel {
  values: JitFn;
  stats: JitFn;
}

interface Band {
  dtype: JitDtype;
  scale: number;
  offset: number;
  nodata: number;
  hasNodata: boolean;
  /** The integer nodata the interpreter compares DNs with (0: none). */
  nd: number;
}

function normalise(b: JitBand): Band {
  const hasNodata = b.nodata !== undefined && b.nodata !== null;
  const nodata = Math.fround(b.nodata ?? 0);
  // AssemblyScript's <i32>f32 (saturating)
  const nd = hasNodata ? (Number.isNaN(nodata) ? 0 : Math.max(-2147483648, Math.min(2147483647, Math.trunc(nodata)))) : 0;
  return { dtype: b.dtype, scale: Math.fround(b.scale ?? 1), offset: Math.fround(b.offset ?? 0), nodata, hasNodata, nd };
}

const UNSUPPORTED = new Set<number>([OP.EXP, OP.LOG, OP.POW]);

/** Whether the program can be compiled (no exp, log or pow). */
export function jitSupports(program: Program): boolean {
  for (let k = 0; k < program.code.length; k += 4) if (UNSUPPORTED.has(program.code[k]!)) return false;
  return true;
}

const f32bits = new Int32Array(1);
const f32view = new Float32Array(f32bits.buffer);
const bitsToF32 = (b: number) => {
  f32bits[0] = b;
  return f32view[0]!;
};

/** Whether NDB on these bands takes the interpreter's integer path (ndMode 2). */
function ndbIntMath(a: Band, b: Band): boolean {
  return a.dtype === 'u16' && b.dtype === 'u16' && a.scale === b.scale && a.scale !== 0 && Number.isFinite(a.scale) && a.offset === 0 && b.offset === 0;
}

/** The scale multiplication and offset addition that change a value (the others are identities). */
function loadArith(b: Band): { mul: boolean; add: boolean } {
  const mul = b.scale !== 1;
  // integers: DN ≠ 0 (DN 0 is masked) × scale ≠ 0 is never −0, so + 0 changes nothing;
  // floats: x × s may be −0, and −0 + 0 is +0: only an offset of −0 can be left out
  const add = b.dtype === 'f32' ? !Object.is(b.offset, -0) : !(b.offset === 0 && b.scale !== 0);
  return { mul, add };
}

/** The binary operations that are one instruction: [f32x4 opcode, f32 opcode]. */
const PLAIN: Record<number, [number, number]> = {
  [OP.ADD]: [V.f32x4_add, O.f32_add], [OP.SUB]: [V.f32x4_sub, O.f32_sub], [OP.MUL]: [V.f32x4_mul, O.f32_mul],
  [OP.MIN]: [V.f32x4_min, O.f32_min], [OP.MAX]: [V.f32x4_max, O.f32_max],
};

/** The forms with a constant operand of the binary operations: [operation, constant on the left]. */
const CONST_FORM: Record<number, [number, boolean]> = {
  [OP.ADDC]: [OP.ADD, false], [OP.SUBC]: [OP.SUB, false], [OP.RSUBC]: [OP.SUB, true], [OP.MULC]: [OP.MUL, false],
  [OP.DIVC]: [OP.DIV, false], [OP.RDIVC]: [OP.DIV, true], [OP.MINC]: [OP.MIN, false], [OP.MAXC]: [OP.MAX, false],
};

const SHIFT: Record<JitDtype, number> = { f32: 2, u16: 1, i16: 1, u8: 0 };
const HIGH_HALF = [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7];

// parameters
const P_START = 0;
const P_END = 1;
const P_DST = 2;
const P_MASK = 3;
const P_ACC = 4;
const P_K = 5;
const P_PTR = 6;

interface Opts {
  hasMask: boolean;
  /** Store the values (the values function always stores). */
  store: boolean;
  stats: boolean;
}

function buildFunction(program: Program, bands: Band[], o: Opts): FuncBuilder {
  const f = new FuncBuilder([T.i32, T.i32, T.i32, T.i32, T.i32, T.f32, ...bands.map(() => T.i32)]);
  const code = program.code;
  const nInstr = code.length / 4;
  const whole = nInstr === 1 && code[0] === OP.NDB;
  // NDB of two u16 bands as the whole program: the interpreter's fused loop (ndLoop), validity on
  // the raw lanes and the mask folded in, so its result needs no finishing
  const fusedNdb = whole && bands[code[2]!]!.dtype === 'u16' && bands[code[3]!]!.dtype === 'u16';
  // integer NDB: exactly the lanes of its 16-bit no-value mask are NaN, so the statistics take
  // their masks from it (integer instructions) and count on 16-bit lanes
  const intNdb = fusedNdb && ndbIntMath(bands[code[2]!]!, bands[code[3]!]!);

  const i = f.local(T.i32);
  const end8 = f.local(T.i32);
  // ---- loop-invariant vectors ----
  const vconst = new Map<string, number>();
  const vcInit: Array<() => void> = [];
  /** The local holding constant vector v, filled in the prologue the first time it is asked for. */
  const vconstant = (kind: 'f32' | 'i16' | 'i32', v: number): number => {
    const key = `${kind}:${kind === 'f32' ? Math.fround(v) : kind === 'i16' ? v & 0xffff : v | 0}:${Object.is(v, -0)}`;
    let l = vconst.get(key);
    if (l === undefined) {
      const local = f.local(T.v128);
      l = local;
      vconst.set(key, local);
      vcInit.push(() => (kind === 'f32' ? f.f32x4(v) : kind === 'i32' ? f.i32x4(v) : f.i16x8(v)).set(local));
    }
    return l;
  };
  const vcf = (v: number) => vconstant('f32', v);
  const vci32 = (v: number) => vconstant('i32', v);
  const vci16 = (v: number) => vconstant('i16', v);
  const zero = vcf(0);
  /**
   * All ones in the lanes of local x that are NaN or ±Inf (the interpreter's x − x ≠ 0), on the
   * integer side: exponent bits all set. The float pipes are what these loops are bound by.
   */
  const nonFinite = (x: number) => {
    const e = vci32(0x7f800000);
    f.get(x).get(e).simd(V.and).get(e).simd(V.i32x4_eq);
  };

  // registers: vector locals per half, scalar locals
  const vregs = [new Map<number, number>(), new Map<number, number>()];
  const sregs = new Map<number, number>();
  const vreg = (h: number, r: number) => {
    let l = vregs[h]!.get(r);
    if (l === undefined) {
      l = f.local(T.v128);
      vregs[h]!.set(r, l);
    }
    return l;
  };
  const sreg = (r: number) => {
    let l = sregs.get(r);
    if (l === undefined) {
      l = f.local(T.f32);
      sregs.set(r, l);
    }
    return l;
  };
  // constant registers: the same local for both halves, filled before the loop
  const constInit: Array<() => void> = [];
  for (const [r, v] of program.consts) {
    const l = vcf(v);
    vregs[0]!.set(r, l);
    vregs[1]!.set(r, l);
    const s = sreg(r);
    constInit.push(() => f.f32(v).set(s));
  }
  const vtmp = f.local(T.v128);
  const vtmp2 = f.local(T.v128);
  const stmp = f.local(T.f32);
  const itmp = f.local(T.i32);

  /** Address of pixel i of band slot j. */
  const addr = (j: number) => {
    const sh = SHIFT[bands[j]!.dtype];
    f.get(P_PTR + j).get(i);
    if (sh) f.i32(sh).op(O.i32_shl);
    f.op(O.i32_add);
  };

  // ---- vector emission ----
  const maskBad16 = o.hasMask ? f.local(T.v128) : -1;
  // the OR of the no-value masks (16-bit lanes) of the integer bands and the validity mask
  const badAcc16 = f.local(T.v128);
  let badAcc16Set = false;
  const raw = f.local(T.v128);
  const raw2 = f.local(T.v128);
  const bad = f.local(T.v128);
  const ndbBad16 = bad;
  // the fused NDB's no-value masks per half (reflectance math), kept for the statistics
  const ndbBad32 = [f.local(T.v128), f.local(T.v128)];

  const vLoad = (slot: number, dsts: [number, number]) => {
    const b = bands[slot]!;
    const { mul, add } = loadArith(b);
    if (b.dtype === 'f32') {
      for (let h = 0; h < 2; h++) {
        addr(slot);
        f.vmem(V.load, h * 16);
        if (b.hasNodata) f.tee(vtmp);
        if (mul) f.get(vcf(b.scale)).simd(V.f32x4_mul);
        if (add) f.get(vcf(b.offset)).simd(V.f32x4_add);
        if (b.hasNodata) f.get(vtmp).get(vcf(b.nodata)).simd(V.f32x4_eq).simd(V.or);
        f.set(dsts[h]!);
      }
      return;
    }
    addr(slot);
    f.vmem(b.dtype === 'u8' ? V.load8x8_u : V.load).tee(raw);
    f.get(zero).simd(V.i16x8_eq);
    // the interpreter compares 16-bit lanes with <i16>nd; u8 DNs compare as i32 (nd outside 1..255 never matches)
    const nd16 = b.dtype === 'u8' ? (b.nd >= 1 && b.nd <= 255 ? b.nd : 0) : b.nd & 0xffff;
    if (nd16 !== 0) f.get(raw).get(vci16(nd16)).simd(V.i16x8_eq).simd(V.or);
    // Every operation propagates NaN, so the interpreter's result has no value wherever a band has
    // none: instead of NaN-ing each band, their 16-bit no-value masks are OR-ed together and
    // applied once, when the result is finished (the other lanes compute exactly the same).
    if (badAcc16Set) f.get(badAcc16).simd(V.or);
    f.set(badAcc16);
    badAcc16Set = true;
    const signed = b.dtype === 'i16';
    for (let h = 0; h < 2; h++) {
      f.get(raw).simd(h === 0 ? (signed ? V.i32x4_extend_low_i16x8_s : V.i32x4_extend_low_i16x8_u) : signed ? V.i32x4_extend_high_i16x8_s : V.i32x4_extend_high_i16x8_u);
      f.simd(V.f32x4_convert_i32x4_s);
      if (mul) f.get(vcf(b.scale)).simd(V.f32x4_mul);
      if (add) f.get(vcf(b.offset)).simd(V.f32x4_add);
      f.set(dsts[h]!);
    }
  };

  /** d = x op y on one half, the interpreter's opV. */
  const vBin = (op: number, x: () => void, y: () => void) => {
    const plain = PLAIN[op];
    if (plain) {
      x(), y(), f.simd(plain[0]);
      return;
    }
    switch (op) {
      case OP.DIV:
        y(), f.set(vtmp2);
        x(), f.get(vtmp2).simd(V.f32x4_div).get(vtmp2).get(zero).simd(V.f32x4_eq).simd(V.or);
        return;
      case OP.ND:
        x(), f.set(vtmp);
        y(), f.set(vtmp2);
        f.get(vtmp).get(vtmp2).simd(V.f32x4_sub);
        f.get(vtmp).get(vtmp2).simd(V.f32x4_add).tee(vtmp2).simd(V.f32x4_div);
        f.get(vtmp2).get(zero).simd(V.f32x4_eq).simd(V.or);
        return;
    }
    throw new Error(`jit: binary op ${op}`);
  };

  const vInstr = (k: number) => {
    const op = code[k * 4]!;
    const d = code[k * 4 + 1]!;
    const a = code[k * 4 + 2]!;
    const bField = code[k * 4 + 3]!;
    if (op === OP.LOAD) return vLoad(a, [vreg(0, d), vreg(1, d)]);
    if (op === OP.NDB) {
      const A = bands[a]!;
      const B = bands[bField]!;
      if (fusedNdb) {
        const intMath = ndbIntMath(A, B);
        addr(a);
        f.vmem(V.load).set(raw);
        addr(bField);
        f.vmem(V.load).set(raw2);
        f.get(raw).get(raw2).simd(V.i16x8_min_u).get(zero).simd(V.i16x8_eq);
        if (A.nd & 0xffff) f.get(raw).get(vci16(A.nd & 0xffff)).simd(V.i16x8_eq).simd(V.or);
        if (B.nd & 0xffff) f.get(raw2).get(vci16(B.nd & 0xffff)).simd(V.i16x8_eq).simd(V.or);
        if (whole && o.hasMask) f.get(maskBad16).simd(V.or);
        f.set(bad);
        if (!intMath) {
          // reflectance math: (x − y)/(x + y), then non-finite or invalid → NaN
          for (let h = 0; h < 2; h++) {
            const ext = h === 0 ? V.i32x4_extend_low_i16x8_u : V.i32x4_extend_high_i16x8_u;
            for (const [r, B_, t] of [[raw, A, vtmp], [raw2, B, vtmp2]] as const) {
              const { mul, add } = loadArith(B_);
              f.get(r).simd(ext).simd(V.f32x4_convert_i32x4_s);
              if (mul) f.get(vcf(B_.scale)).simd(V.f32x4_mul);
              if (add) f.get(vcf(B_.offset)).simd(V.f32x4_add);
              f.set(t);
            }
            const d = vreg(h, code[1]!);
            f.get(vtmp).get(vtmp2).simd(V.f32x4_sub).get(vtmp).get(vtmp2).simd(V.f32x4_add).simd(V.f32x4_div).tee(d);
            nonFinite(d);
            f.get(bad).simd(h === 0 ? V.i32x4_extend_low_i16x8_s : V.i32x4_extend_high_i16x8_s).simd(V.or).tee(ndbBad32[h]!);
            f.simd(V.or).set(d);
          }
          return;
        }
        f.get(raw).get(bad).simd(V.andnot).set(raw);
        f.get(raw2).get(bad).simd(V.andnot).set(raw2);
        for (let h = 0; h < 2; h++) {
          const ext = h === 0 ? V.i32x4_extend_low_i16x8_u : V.i32x4_extend_high_i16x8_u;
          f.get(raw).simd(ext).set(vtmp);
          f.get(raw2).simd(ext).set(vtmp2);
          f.get(vtmp).get(vtmp2).simd(V.i32x4_sub).simd(V.f32x4_convert_i32x4_s);
          f.get(vtmp).get(vtmp2).simd(V.i32x4_add).simd(V.f32x4_convert_i32x4_s);
          f.simd(V.f32x4_div).set(vreg(h, d));
        }
        return;
      }
      // reflectance math: LOAD, LOAD, ND (what the interpreter's other paths amount to)
      const ta = [f.local(T.v128), f.local(T.v128)] as [number, number];
      const tb = [f.local(T.v128), f.local(T.v128)] as [number, number];
      vLoad(a, ta);
      vLoad(bField, tb);
      for (let h = 0; h < 2; h++) {
        vBin(OP.ND, () => f.get(ta[h]!), () => f.get(tb[h]!));
        f.set(vreg(h, d));
      }
      return;
    }
    for (let h = 0; h < 2; h++) {
      if (op >= OP.ADDC && op <= OP.MAXC) {
        const c = bitsToF32(bField);
        const x = () => f.get(vreg(h, a));
        const cv = () => f.get(vcf(c));
        if (op === OP.DIVC) {
          // or(x / c, c == 0): all ones when c is 0, else the quotient
          if (c === 0) f.i32x4(-1);
          else x(), cv(), f.simd(V.f32x4_div);
        } else {
          const [bop, constFirst] = CONST_FORM[op]!;
          if (constFirst) vBin(bop, cv, x);
          else vBin(bop, x, cv);
        }
      } else if (op === OP.MULCADD) {
        f.get(vreg(h, a & 0xffff)).get(vcf(bitsToF32(bField))).simd(V.f32x4_mul).get(vreg(h, a >>> 16)).simd(V.f32x4_add);
      } else if (op === OP.NEG || op === OP.SQRT || op === OP.ABS) {
        f.get(vreg(h, a)).simd(op === OP.NEG ? V.f32x4_neg : op === OP.SQRT ? V.f32x4_sqrt : V.f32x4_abs);
      } else {
        vBin(op, () => f.get(vreg(h, a)), () => f.get(vreg(h, bField)));
      }
      f.set(vreg(h, d));
    }
  };

  // ---- scalar emission (the interpreter's scalar loops) ----
  const sLoad = (slot: number, dst: number) => {
    const b = bands[slot]!;
    const { mul, add } = loadArith(b);
    if (b.dtype === 'f32') {
      addr(slot);
      f.mem(O.f32_load).set(stmp);
      if (b.hasNodata) f.f32(NaN);
      f.get(stmp);
      if (mul) f.f32(b.scale).op(O.f32_mul);
      if (add) f.f32(b.offset).op(O.f32_add);
      if (b.hasNodata) f.get(stmp).f32(b.nodata).op(O.f32_eq, O.select);
      f.set(dst);
      return;
    }
    addr(slot);
    f.mem(b.dtype === 'u16' ? O.i32_load16_u : b.dtype === 'i16' ? O.i32_load16_s : O.i32_load8_u).set(itmp);
    f.f32(NaN);
    f.get(itmp).op(O.f32_convert_i32_s);
    if (mul) f.f32(b.scale).op(O.f32_mul);
    if (add) f.f32(b.offset).op(O.f32_add);
    f.get(itmp).op(O.i32_eqz);
    if (b.nd !== 0) f.get(itmp).i32(b.nd).op(O.i32_eq, O.i32_or);
    f.op(O.select).set(dst);
  };

  const sBin = (op: number, x: () => void, y: () => void) => {
    const plain = PLAIN[op];
    if (plain) {
      x(), y(), f.op(plain[1]);
      return;
    }
    switch (op) {
      case OP.DIV: {
        const t = f.local(T.f32);
        y(), f.set(t);
        f.f32(NaN);
        x(), f.get(t).op(O.f32_div);
        f.get(t).f32(0).op(O.f32_eq, O.select);
        return;
      }
      case OP.ND: {
        const tx = f.local(T.f32);
        const ty = f.local(T.f32);
        const ts = f.local(T.f32);
        x(), f.set(tx);
        y(), f.set(ty);
        f.f32(NaN);
        f.get(tx).get(ty).op(O.f32_sub);
        f.get(tx).get(ty).op(O.f32_add).tee(ts).op(O.f32_div);
        f.get(ts).f32(0).op(O.f32_eq, O.select);
        return;
      }
    }
    throw new Error(`jit: binary op ${op}`);
  };

  const sInstr = (k: number) => {
    const op = code[k * 4]!;
    const d = code[k * 4 + 1]!;
    const a = code[k * 4 + 2]!;
    const bField = code[k * 4 + 3]!;
    if (op === OP.LOAD) return sLoad(a, sreg(d));
    if (op === OP.NDB) {
      // the interpreter's last len % 8 pixels: LOAD + ND
      const ta = f.local(T.f32);
      const tb = f.local(T.f32);
      sLoad(a, ta);
      sLoad(bField, tb);
      sBin(OP.ND, () => f.get(ta), () => f.get(tb));
      f.set(sreg(d));
      return;
    }
    if (op >= OP.ADDC && op <= OP.MAXC) {
      const c = bitsToF32(bField);
      const x = () => f.get(sreg(a));
      const cv = () => f.f32(c);
      const [bop, constFirst] = CONST_FORM[op]!;
      if (constFirst) sBin(bop, cv, x);
      else sBin(bop, x, cv);
    } else if (op === OP.MULCADD) {
      f.get(sreg(a & 0xffff)).f32(bitsToF32(bField)).op(O.f32_mul).get(sreg(a >>> 16)).op(O.f32_add);
    } else if (op === OP.NEG || op === OP.SQRT || op === OP.ABS) {
      f.get(sreg(a)).op(op === OP.NEG ? O.f32_neg : op === OP.SQRT ? O.f32_sqrt : O.f32_abs);
    } else {
      sBin(op, () => f.get(sreg(a)), () => f.get(sreg(bField)));
    }
    f.set(sreg(d));
  };

  // ---- statistics state ----
  const st = o.stats
    ? {
        kv: f.local(T.v128), dk: f.local(T.v128), cnt: f.local(T.v128), mn: f.local(T.v128), mx: f.local(T.v128), s: f.local(T.v128), q: f.local(T.v128),
        d: [f.local(T.v128), f.local(T.v128), f.local(T.v128), f.local(T.v128)],
        xk: f.local(T.v128), bad: [f.local(T.v128), f.local(T.v128)],
        kd: f.local(T.f64), tc: f.local(T.f64), tmn: f.local(T.f64), tmx: f.local(T.f64), ts: f.local(T.f64), tq: f.local(T.f64), td: f.local(T.f64),
      }
    : null;
  const val = [f.local(T.v128), f.local(T.v128)];
  const sx = f.local(T.f32);

  // ================= the body =================
  // The loops are emitted first (they ask for the vector constants they need); the prologue that
  // fills those constants is emitted last and moved in front of them.
  // vector loop
  f.get(P_START).get(P_END).get(P_START).op(O.i32_sub).i32(-8).op(O.i32_and, O.i32_add).set(end8);
  f.get(P_START).set(i);
  f.begin(O.block);
  f.get(i).get(end8).op(O.i32_ge_s).br(O.br_if, 0);
  f.begin(O.loop);
  if (o.hasMask) {
    f.get(P_MASK).get(i).op(O.i32_add).vmem(V.load8x8_u).get(zero).simd(V.i16x8_eq).tee(maskBad16);
    f.set(badAcc16);
    badAcc16Set = !fusedNdb; // the fused NDB folds the mask in itself
  }
  for (let k = 0; k < nInstr; k++) vInstr(k);
  for (let h = 0; h < 2; h++) {
    const v = vreg(h, program.resultReg);
    // bad: all ones where there is no value (the interpreter's NOT ok: non-finite or masked)
    const bad = st ? st.bad[h]! : vtmp;
    if (fusedNdb) {
      f.get(v).set(val[h]!);
      if (st && intNdb) f.get(ndbBad16).simd(h === 0 ? V.i32x4_extend_low_i16x8_s : V.i32x4_extend_high_i16x8_s).set(bad);
      else if (st) f.get(ndbBad32[h]!).set(bad);
    } else {
      nonFinite(v);
      if (badAcc16Set) f.get(badAcc16).simd(h === 0 ? V.i32x4_extend_low_i16x8_s : V.i32x4_extend_high_i16x8_s).simd(V.or);
      f.tee(bad);
      f.get(v).simd(V.or).set(val[h]!);
    }
    if (o.store) {
      f.get(P_DST).get(i).i32(2).op(O.i32_shl, O.i32_add).get(val[h]!).vmem(V.store, h * 16);
    }
    if (st && fusedNdb) {
      // the interpreter's fused NDB accumulation (its values are bounded): NaN lanes leave pmin and
      // pmax alone and add 0 − K and K² to the sums, taken back out at the end
      f.get(v).get(bad).simd(V.andnot).set(st.xk);
      if (!intNdb) f.get(st.cnt).get(bad).simd(V.i32x4_add).set(st.cnt);
      f.get(st.mn).get(v).simd(V.f32x4_pmin).set(st.mn);
      f.get(st.mx).get(v).simd(V.f32x4_pmax).set(st.mx);
    } else if (st) {
      f.get(st.kv).get(v).get(bad).simd(V.bitselect).set(st.xk);
      f.get(st.cnt).get(bad).simd(V.i32x4_add).set(st.cnt);
      f.get(st.mn).get(st.xk).simd(V.f32x4_pmin).set(st.mn);
      f.get(st.mx).get(st.xk).simd(V.f32x4_pmax).set(st.mx);
    }
    if (st) {
      f.get(st.xk).simd(V.f64x2_promote_low_f32x4).get(st.dk).simd(V.f64x2_sub).set(st.d[h * 2]!);
      f.get(st.xk).get(st.xk).shuffle(HIGH_HALF).simd(V.f64x2_promote_low_f32x4).get(st.dk).simd(V.f64x2_sub).set(st.d[h * 2 + 1]!);
    }
  }
  if (st && intNdb) f.get(st.cnt).get(ndbBad16).simd(V.i16x8_add).set(st.cnt);
  if (st) {
    const [d0, d1, d2, d3] = st.d as [number, number, number, number];
    f.get(st.s).get(d0).get(d1).simd(V.f64x2_add).get(d2).get(d3).simd(V.f64x2_add).simd(V.f64x2_add).simd(V.f64x2_add).set(st.s);
    f.get(st.q);
    f.get(d0).get(d0).simd(V.f64x2_mul).get(d1).get(d1).simd(V.f64x2_mul).simd(V.f64x2_add);
    f.get(d2).get(d2).simd(V.f64x2_mul).get(d3).get(d3).simd(V.f64x2_mul).simd(V.f64x2_add);
    f.simd(V.f64x2_add).simd(V.f64x2_add).set(st.q);
  }
  f.get(i).i32(8).op(O.i32_add).tee(i).get(end8).op(O.i32_lt_s).br(O.br_if, 0);
  f.op(O.end); // loop
  f.op(O.end); // block

  // scalar tail
  f.begin(O.block);
  f.get(i).get(P_END).op(O.i32_ge_s).br(O.br_if, 0);
  f.begin(O.loop);
  for (let k = 0; k < nInstr; k++) sInstr(k);
  // finish: masked or non-finite → NaN
  f.f32(NaN).get(sreg(program.resultReg)).tee(sx);
  f.get(sx).op(O.f32_abs).f32(Infinity).op(O.f32_lt, O.i32_eqz);
  if (o.hasMask) f.get(P_MASK).get(i).op(O.i32_add).mem(O.i32_load8_u).op(O.i32_eqz, O.i32_or);
  f.op(O.select).set(sx);
  if (o.store) f.get(P_DST).get(i).i32(2).op(O.i32_shl, O.i32_add).get(sx).mem(O.f32_store);
  if (st) {
    f.get(sx).get(sx).op(O.f32_eq).begin(O.if);
    f.get(st.tc).f64(1).op(O.f64_add).set(st.tc);
    f.get(sx).op(O.f64_promote_f32).get(st.kd).op(O.f64_sub).set(st.td);
    f.get(st.ts).get(st.td).op(O.f64_add).set(st.ts);
    f.get(st.tq).get(st.td).get(st.td).op(O.f64_mul, O.f64_add).set(st.tq);
    f.get(st.tmn).get(sx).op(O.f64_promote_f32, O.f64_min).set(st.tmn);
    f.get(st.tmx).get(sx).op(O.f64_promote_f32, O.f64_max).set(st.tmx);
    f.op(O.end);
  }
  f.get(i).i32(1).op(O.i32_add).tee(i).get(P_END).op(O.i32_lt_s).br(O.br_if, 0);
  f.op(O.end); // loop
  f.op(O.end); // block

  if (st) {
    // count: the cnt lanes hold −1 per lane without a value; itmp = lanes without a value
    f.i32(0);
    if (intNdb) for (let l = 0; l < 8; l++) f.get(st.cnt).lane(V.i16x8_extract_lane_s, l).op(O.i32_sub);
    else for (let l = 0; l < 4; l++) f.get(st.cnt).lane(V.i32x4_extract_lane, l).op(O.i32_sub);
    f.set(itmp);
    f.get(P_ACC).get(end8).get(P_START).op(O.i32_sub).get(itmp).op(O.i32_sub).op(O.f64_convert_i32_s).get(st.tc).op(O.f64_add).mem(O.f64_store, 0);
    if (fusedNdb) {
      // the lanes without a value added 0 − K and K²: S += n·K, Q −= n·K²
      f.get(itmp).op(O.f64_convert_i32_s).set(st.td);
      f.get(st.ts).get(st.td).get(st.kd).op(O.f64_mul, O.f64_add).set(st.ts);
      f.get(st.tq).get(st.td).get(st.kd).get(st.kd).op(O.f64_mul, O.f64_mul, O.f64_sub).set(st.tq);
    }
    f.get(P_ACC);
    f.get(st.mn).lane(V.f32x4_extract_lane, 0).get(st.mn).lane(V.f32x4_extract_lane, 1).op(O.f32_min);
    f.get(st.mn).lane(V.f32x4_extract_lane, 2).get(st.mn).lane(V.f32x4_extract_lane, 3).op(O.f32_min, O.f32_min);
    f.op(O.f64_promote_f32).get(st.tmn).op(O.f64_min).mem(O.f64_store, 8);
    f.get(P_ACC);
    f.get(st.mx).lane(V.f32x4_extract_lane, 0).get(st.mx).lane(V.f32x4_extract_lane, 1).op(O.f32_max);
    f.get(st.mx).lane(V.f32x4_extract_lane, 2).get(st.mx).lane(V.f32x4_extract_lane, 3).op(O.f32_max, O.f32_max);
    f.op(O.f64_promote_f32).get(st.tmx).op(O.f64_max).mem(O.f64_store, 16);
    f.get(P_ACC).get(st.s).lane(V.f64x2_extract_lane, 0).get(st.s).lane(V.f64x2_extract_lane, 1).op(O.f64_add).get(st.ts).op(O.f64_add).mem(O.f64_store, 24);
    f.get(P_ACC).get(st.q).lane(V.f64x2_extract_lane, 0).get(st.q).lane(V.f64x2_extract_lane, 1).op(O.f64_add).get(st.tq).op(O.f64_add).mem(O.f64_store, 32);
  }

  // prologue: constants and accumulators, then the loops above
  const loops = f.code.splice(0);
  for (const init of vcInit) init();
  for (const init of constInit) init();
  if (st) {
    f.get(P_K).simd(V.f32x4_splat).set(st.kv);
    f.get(P_K).op(O.f64_promote_f32).tee(st.kd).simd(V.f64x2_splat).set(st.dk);
    f.f32x4(Infinity).set(st.mn);
    f.f32x4(-Infinity).set(st.mx);
    f.f64(Infinity).set(st.tmn);
    f.f64(-Infinity).set(st.tmx);
    // cnt, s, q, tc, ts, tq start at zero (locals are zero-initialised)
  }
  f.code.push(...loops);
  return f;
}

const MAX_MODULES = 64;
const modules = new Map<string, WebAssembly.Module>();

/** The program's part of a module cache key. */
export function jitProgramKey(program: Program): string {
  return `${program.code.join(',')}|${program.consts.map(([r, v]) => `${r}=${v}`).join(',')}|${program.resultReg}`;
}

/** The band layout's part of a module cache key (what the module is specialised on). */
export function jitLayoutKey(bands: JitBand[]): string {
  return bands.map((x) => `${x.dtype},${Math.fround(x.scale ?? 1)},${Math.fround(x.offset ?? 0)},${Object.is(Math.fround(x.offset ?? 0), -0) ? 'n' : ''},${x.nodata ?? ''}`).join(';');
}

/** A key for the module cache: the program, the band layout, the mask and whether values are stored. */
export function jitKey(programKey: string, layoutKey: string, hasMask: boolean, store: boolean): string {
  return `${programKey}|${layoutKey}|${hasMask ? 1 : 0}${store ? 1 : 0}`;
}

/** The module's bytes (for tests and debugging). */
export function jitModuleBytes(program: Program, bands: JitBand[], hasMask: boolean, store: boolean): Uint8Array | null {
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
