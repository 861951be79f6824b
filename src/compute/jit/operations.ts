/**
 * The instructions of a program, as the interpreter computes them: on two f32x4 halves in the
 * vector loop, on f32 in the scalar tail. x/0 → NaN (OR with an all-ones mask), ND = (a − b)/(a + b)
 * with a zero sum → NaN, min/max propagate NaN.
 */
import { OP } from '../opcodes.js';
import { O, T, V } from '../wasm-module.js';
import type { Emitter } from './emitter.js';
import { sLoad, vFusedNdb, vLoad } from './loads.js';

/** The binary operations that are one instruction: [f32x4 opcode, f32 opcode]. */
const PLAIN: Record<number, [number, number]> = {
  [OP.ADD]: [V.f32x4_add, O.f32_add],
  [OP.SUB]: [V.f32x4_sub, O.f32_sub],
  [OP.MUL]: [V.f32x4_mul, O.f32_mul],
  [OP.MIN]: [V.f32x4_min, O.f32_min],
  [OP.MAX]: [V.f32x4_max, O.f32_max],
};

/** The forms with a constant operand of the binary operations: [operation, constant on the left]. */
const CONST_FORM: Record<number, [number, boolean]> = {
  [OP.ADDC]: [OP.ADD, false],
  [OP.SUBC]: [OP.SUB, false],
  [OP.RSUBC]: [OP.SUB, true],
  [OP.MULC]: [OP.MUL, false],
  [OP.DIVC]: [OP.DIV, false],
  [OP.RDIVC]: [OP.DIV, true],
  [OP.MINC]: [OP.MIN, false],
  [OP.MAXC]: [OP.MAX, false],
};

const f32bits = new Int32Array(1);
const f32view = new Float32Array(f32bits.buffer);
/** The f32 whose bits an instruction's operand field holds. */
const bitsToF32 = (b: number) => {
  f32bits[0] = b;
  return f32view[0]!;
};

/** Instruction k: [op, dst, a, b]. */
function instruction(e: Emitter, k: number): [number, number, number, number] {
  const c = e.code;
  return [c[k * 4]!, c[k * 4 + 1]!, c[k * 4 + 2]!, c[k * 4 + 3]!];
}

/** d = x op y on one half, the interpreter's opV. */
function vBin(e: Emitter, op: number, x: () => void, y: () => void): void {
  const { f, vtmp, vtmp2, zero } = e;
  const plain = PLAIN[op];
  if (plain) {
    x();
    y();
    f.simd(plain[0]);
    return;
  }
  switch (op) {
    case OP.DIV:
      y();
      f.set(vtmp2);
      x();
      f.get(vtmp2).simd(V.f32x4_div).get(vtmp2).get(zero).simd(V.f32x4_eq).simd(V.or);
      return;
    case OP.ND:
      x();
      f.set(vtmp);
      y();
      f.set(vtmp2);
      f.get(vtmp).get(vtmp2).simd(V.f32x4_sub);
      f.get(vtmp).get(vtmp2).simd(V.f32x4_add).tee(vtmp2).simd(V.f32x4_div);
      f.get(vtmp2).get(zero).simd(V.f32x4_eq).simd(V.or);
      return;
  }
  throw new Error(`jit: binary op ${op}`);
}

/** Instruction k on both halves of 8 pixels. */
export function vInstr(e: Emitter, k: number): void {
  const f = e.f;
  const [op, d, a, bField] = instruction(e, k);
  if (op === OP.LOAD) {
    vLoad(e, a, [e.vreg(0, d), e.vreg(1, d)]);
    return;
  }
  if (op === OP.NDB) {
    if (e.fusedNdb) {
      vFusedNdb(e, a, bField, d);
      return;
    }
    // reflectance math: LOAD, LOAD, ND (what the interpreter's other paths amount to)
    const ta = [f.local(T.v128), f.local(T.v128)] as [number, number];
    const tb = [f.local(T.v128), f.local(T.v128)] as [number, number];
    vLoad(e, a, ta);
    vLoad(e, bField, tb);
    for (let h = 0; h < 2; h++) {
      vBin(
        e,
        OP.ND,
        () => f.get(ta[h]!),
        () => f.get(tb[h]!),
      );
      f.set(e.vreg(h, d));
    }
    return;
  }
  for (let h = 0; h < 2; h++) {
    if (op >= OP.ADDC && op <= OP.MAXC) {
      const c = bitsToF32(bField);
      const x = () => f.get(e.vreg(h, a));
      const cv = () => f.get(e.vcf(c));
      if (op === OP.DIVC) {
        // or(x / c, c == 0): all ones when c is 0, else the quotient
        if (c === 0) f.i32x4(-1);
        else {
          x();
          cv();
          f.simd(V.f32x4_div);
        }
      } else {
        const [bop, constFirst] = CONST_FORM[op]!;
        if (constFirst) vBin(e, bop, cv, x);
        else vBin(e, bop, x, cv);
      }
    } else if (op === OP.MULCADD) {
      f.get(e.vreg(h, a & 0xffff))
        .get(e.vcf(bitsToF32(bField)))
        .simd(V.f32x4_mul)
        .get(e.vreg(h, a >>> 16))
        .simd(V.f32x4_add);
    } else if (op === OP.NEG || op === OP.SQRT || op === OP.ABS) {
      f.get(e.vreg(h, a)).simd(op === OP.NEG ? V.f32x4_neg : op === OP.SQRT ? V.f32x4_sqrt : V.f32x4_abs);
    } else {
      vBin(
        e,
        op,
        () => f.get(e.vreg(h, a)),
        () => f.get(e.vreg(h, bField)),
      );
    }
    f.set(e.vreg(h, d));
  }
}

/** x op y on f32, the interpreter's scalar op. */
function sBin(e: Emitter, op: number, x: () => void, y: () => void): void {
  const f = e.f;
  const plain = PLAIN[op];
  if (plain) {
    x();
    y();
    f.op(plain[1]);
    return;
  }
  switch (op) {
    case OP.DIV: {
      const t = f.local(T.f32);
      y();
      f.set(t);
      f.f32(NaN);
      x();
      f.get(t).op(O.f32_div);
      f.get(t).f32(0).op(O.f32_eq, O.select);
      return;
    }
    case OP.ND: {
      const tx = f.local(T.f32);
      const ty = f.local(T.f32);
      const ts = f.local(T.f32);
      x();
      f.set(tx);
      y();
      f.set(ty);
      f.f32(NaN);
      f.get(tx).get(ty).op(O.f32_sub);
      f.get(tx).get(ty).op(O.f32_add).tee(ts).op(O.f32_div);
      f.get(ts).f32(0).op(O.f32_eq, O.select);
      return;
    }
  }
  throw new Error(`jit: binary op ${op}`);
}

/** Instruction k on pixel i (the scalar tail). */
export function sInstr(e: Emitter, k: number): void {
  const f = e.f;
  const [op, d, a, bField] = instruction(e, k);
  if (op === OP.LOAD) {
    sLoad(e, a, e.sreg(d));
    return;
  }
  if (op === OP.NDB) {
    // the interpreter's last len % 8 pixels: LOAD + ND
    const ta = f.local(T.f32);
    const tb = f.local(T.f32);
    sLoad(e, a, ta);
    sLoad(e, bField, tb);
    sBin(
      e,
      OP.ND,
      () => f.get(ta),
      () => f.get(tb),
    );
    f.set(e.sreg(d));
    return;
  }
  if (op >= OP.ADDC && op <= OP.MAXC) {
    const c = bitsToF32(bField);
    const x = () => f.get(e.sreg(a));
    const cv = () => f.f32(c);
    const [bop, constFirst] = CONST_FORM[op]!;
    if (constFirst) sBin(e, bop, cv, x);
    else sBin(e, bop, x, cv);
  } else if (op === OP.MULCADD) {
    f.get(e.sreg(a & 0xffff))
      .f32(bitsToF32(bField))
      .op(O.f32_mul)
      .get(e.sreg(a >>> 16))
      .op(O.f32_add);
  } else if (op === OP.NEG || op === OP.SQRT || op === OP.ABS) {
    f.get(e.sreg(a)).op(op === OP.NEG ? O.f32_neg : op === OP.SQRT ? O.f32_sqrt : O.f32_abs);
  } else {
    sBin(
      e,
      op,
      () => f.get(e.sreg(a)),
      () => f.get(e.sreg(bField)),
    );
  }
  f.set(e.sreg(d));
}
