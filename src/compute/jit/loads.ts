/**
 * LOAD and the fused NDB: DN → f32, × scale, + offset, with the no-value lanes the interpreter
 * has (DN 0 and the declared nodata on 16-bit lanes in the vector loop, on the i32 DN in the
 * scalar tail; f32 inputs: nodata → NaN).
 */
import { O, V } from '../wasm-module.js';
import { loadArith, ndbIntMath } from './bands.js';
import type { Emitter } from './emitter.js';

/** Band `slot` of 8 pixels into the two f32x4 locals `dsts`. */
export function vLoad(e: Emitter, slot: number, dsts: [number, number]): void {
  const f = e.f;
  const b = e.bands[slot]!;
  const { mul, add } = loadArith(b);
  if (b.dtype === 'f32') {
    for (let h = 0; h < 2; h++) {
      e.addr(slot);
      f.vmem(V.load, h * 16);
      if (b.hasNodata) f.tee(e.vtmp);
      if (mul) f.get(e.vcf(b.scale)).simd(V.f32x4_mul);
      if (add) f.get(e.vcf(b.offset)).simd(V.f32x4_add);
      if (b.hasNodata) f.get(e.vtmp).get(e.vcf(b.nodata)).simd(V.f32x4_eq).simd(V.or);
      f.set(dsts[h]!);
    }
    return;
  }
  e.addr(slot);
  f.vmem(b.dtype === 'u8' ? V.load8x8_u : V.load).tee(e.raw);
  f.get(e.zero).simd(V.i16x8_eq);
  // the interpreter compares 16-bit lanes with <i16>nd; u8 DNs compare as i32 (nd outside 1..255 never matches)
  const nd16 = b.dtype === 'u8' ? (b.nd >= 1 && b.nd <= 255 ? b.nd : 0) : b.nd & 0xffff;
  if (nd16 !== 0) f.get(e.raw).get(e.vci16(nd16)).simd(V.i16x8_eq).simd(V.or);
  // Every operation propagates NaN, so the interpreter's result has no value wherever a band has
  // none: instead of NaN-ing each band, their 16-bit no-value masks are OR-ed together and
  // applied once, when the result is finished (the other lanes compute exactly the same).
  if (e.badAcc16Set) f.get(e.badAcc16).simd(V.or);
  f.set(e.badAcc16);
  e.badAcc16Set = true;
  const signed = b.dtype === 'i16';
  for (let h = 0; h < 2; h++) {
    f.get(e.raw).simd(
      h === 0
        ? signed
          ? V.i32x4_extend_low_i16x8_s
          : V.i32x4_extend_low_i16x8_u
        : signed
          ? V.i32x4_extend_high_i16x8_s
          : V.i32x4_extend_high_i16x8_u,
    );
    f.simd(V.f32x4_convert_i32x4_s);
    if (mul) f.get(e.vcf(b.scale)).simd(V.f32x4_mul);
    if (add) f.get(e.vcf(b.offset)).simd(V.f32x4_add);
    f.set(dsts[h]!);
  }
}

/**
 * NDB of two u16 bands as the whole program (the interpreter's fused loop): validity on the raw
 * lanes with the mask folded in; on the digital numbers (integer math) when the bands allow it,
 * else (x − y)/(x + y) on reflectances, non-finite or invalid → NaN.
 */
export function vFusedNdb(e: Emitter, a: number, b: number, d: number): void {
  const f = e.f;
  const A = e.bands[a]!;
  const B = e.bands[b]!;
  const { raw, raw2, bad, vtmp, vtmp2, zero } = e;
  const intMath = ndbIntMath(A, B);
  e.addr(a);
  f.vmem(V.load).set(raw);
  e.addr(b);
  f.vmem(V.load).set(raw2);
  f.get(raw).get(raw2).simd(V.i16x8_min_u).get(zero).simd(V.i16x8_eq);
  if (A.nd & 0xffff)
    f.get(raw)
      .get(e.vci16(A.nd & 0xffff))
      .simd(V.i16x8_eq)
      .simd(V.or);
  if (B.nd & 0xffff)
    f.get(raw2)
      .get(e.vci16(B.nd & 0xffff))
      .simd(V.i16x8_eq)
      .simd(V.or);
  if (e.whole && e.o.hasMask) f.get(e.maskBad16).simd(V.or);
  f.set(bad);
  if (!intMath) {
    // reflectance math: (x − y)/(x + y), then non-finite or invalid → NaN
    for (let h = 0; h < 2; h++) {
      const ext = h === 0 ? V.i32x4_extend_low_i16x8_u : V.i32x4_extend_high_i16x8_u;
      for (const [r, B_, t] of [
        [raw, A, vtmp],
        [raw2, B, vtmp2],
      ] as const) {
        const { mul, add } = loadArith(B_);
        f.get(r).simd(ext).simd(V.f32x4_convert_i32x4_s);
        if (mul) f.get(e.vcf(B_.scale)).simd(V.f32x4_mul);
        if (add) f.get(e.vcf(B_.offset)).simd(V.f32x4_add);
        f.set(t);
      }
      const dh = e.vreg(h, e.code[1]!);
      f.get(vtmp).get(vtmp2).simd(V.f32x4_sub).get(vtmp).get(vtmp2).simd(V.f32x4_add).simd(V.f32x4_div).tee(dh);
      e.nonFinite(dh);
      f.get(bad)
        .simd(h === 0 ? V.i32x4_extend_low_i16x8_s : V.i32x4_extend_high_i16x8_s)
        .simd(V.or)
        .tee(e.ndbBad32[h]!);
      f.simd(V.or).set(dh);
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
    f.simd(V.f32x4_div).set(e.vreg(h, d));
  }
}

/** Band `slot` of pixel i into the f32 local `dst` (the interpreter's scalar loops). */
export function sLoad(e: Emitter, slot: number, dst: number): void {
  const f = e.f;
  const b = e.bands[slot]!;
  const { mul, add } = loadArith(b);
  if (b.dtype === 'f32') {
    e.addr(slot);
    f.mem(O.f32_load).set(e.stmp);
    if (b.hasNodata) f.f32(NaN);
    f.get(e.stmp);
    if (mul) f.f32(b.scale).op(O.f32_mul);
    if (add) f.f32(b.offset).op(O.f32_add);
    if (b.hasNodata) f.get(e.stmp).f32(b.nodata).op(O.f32_eq, O.select);
    f.set(dst);
    return;
  }
  e.addr(slot);
  f.mem(b.dtype === 'u16' ? O.i32_load16_u : b.dtype === 'i16' ? O.i32_load16_s : O.i32_load8_u).set(e.itmp);
  f.f32(NaN);
  f.get(e.itmp).op(O.f32_convert_i32_s);
  if (mul) f.f32(b.scale).op(O.f32_mul);
  if (add) f.f32(b.offset).op(O.f32_add);
  f.get(e.itmp).op(O.i32_eqz);
  if (b.nd !== 0) f.get(e.itmp).i32(b.nd).op(O.i32_eq, O.i32_or);
  f.op(O.select).set(dst);
}
