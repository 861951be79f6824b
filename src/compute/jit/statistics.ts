/**
 * The statistics accumulated in the same pass as the values. Invalid lanes are replaced by K (add
 * exactly 0, cannot move min or max); count in i32x4 (i16x8 for the integer NDB), min/max in
 * f32x4, Σ(x − K) and Σ(x − K)² in f64x2 (promote_low and a shuffle for the high half); the scalar
 * tail in f64. The fused NDB keeps the interpreter's accumulation (NaN lanes zeroed, their −K and
 * K² taken back out at the end). At the end count, min, max, S, Q (f64) are written at acc.
 */
import { type FuncBuilder, O, T, V } from '../wasm-module.js';
import { type Emitter, P_ACC, P_K, P_START } from './emitter.js';

const HIGH_HALF = [8, 9, 10, 11, 12, 13, 14, 15, 0, 1, 2, 3, 4, 5, 6, 7];

export interface StatsLocals {
  kv: number;
  dk: number;
  cnt: number;
  mn: number;
  mx: number;
  s: number;
  q: number;
  /** x − K per f64x2 quarter of the 8 pixels. */
  d: [number, number, number, number];
  xk: number;
  /** All ones in the lanes without a value, per half. */
  bad: [number, number];
  kd: number;
  tc: number;
  tmn: number;
  tmx: number;
  ts: number;
  tq: number;
  td: number;
}

export function statsLocals(f: FuncBuilder): StatsLocals {
  return {
    kv: f.local(T.v128),
    dk: f.local(T.v128),
    cnt: f.local(T.v128),
    mn: f.local(T.v128),
    mx: f.local(T.v128),
    s: f.local(T.v128),
    q: f.local(T.v128),
    d: [f.local(T.v128), f.local(T.v128), f.local(T.v128), f.local(T.v128)],
    xk: f.local(T.v128),
    bad: [f.local(T.v128), f.local(T.v128)],
    kd: f.local(T.f64),
    tc: f.local(T.f64),
    tmn: f.local(T.f64),
    tmx: f.local(T.f64),
    ts: f.local(T.f64),
    tq: f.local(T.f64),
    td: f.local(T.f64),
  };
}

/** Accumulates half h (result local v, no-value lanes in bad) into count, min, max and x − K. */
export function vAccumulateHalf(e: Emitter, st: StatsLocals, h: number, v: number, bad: number): void {
  const f = e.f;
  if (e.fusedNdb) {
    // the interpreter's fused NDB accumulation (its values are bounded): NaN lanes leave pmin and
    // pmax alone and add 0 − K and K² to the sums, taken back out at the end
    f.get(v).get(bad).simd(V.andnot).set(st.xk);
    if (!e.intNdb) f.get(st.cnt).get(bad).simd(V.i32x4_add).set(st.cnt);
    f.get(st.mn).get(v).simd(V.f32x4_pmin).set(st.mn);
    f.get(st.mx).get(v).simd(V.f32x4_pmax).set(st.mx);
  } else {
    f.get(st.kv).get(v).get(bad).simd(V.bitselect).set(st.xk);
    f.get(st.cnt).get(bad).simd(V.i32x4_add).set(st.cnt);
    f.get(st.mn).get(st.xk).simd(V.f32x4_pmin).set(st.mn);
    f.get(st.mx).get(st.xk).simd(V.f32x4_pmax).set(st.mx);
  }
  f.get(st.xk)
    .simd(V.f64x2_promote_low_f32x4)
    .get(st.dk)
    .simd(V.f64x2_sub)
    .set(st.d[h * 2]!);
  f.get(st.xk)
    .get(st.xk)
    .shuffle(HIGH_HALF)
    .simd(V.f64x2_promote_low_f32x4)
    .get(st.dk)
    .simd(V.f64x2_sub)
    .set(st.d[h * 2 + 1]!);
}

/** Adds the 8 pixels' x − K and (x − K)² to S and Q (and the integer NDB's count). */
export function vAccumulateBlock(e: Emitter, st: StatsLocals): void {
  const f = e.f;
  if (e.intNdb) f.get(st.cnt).get(e.bad).simd(V.i16x8_add).set(st.cnt);
  const [d0, d1, d2, d3] = st.d;
  f.get(st.s)
    .get(d0)
    .get(d1)
    .simd(V.f64x2_add)
    .get(d2)
    .get(d3)
    .simd(V.f64x2_add)
    .simd(V.f64x2_add)
    .simd(V.f64x2_add)
    .set(st.s);
  f.get(st.q);
  f.get(d0).get(d0).simd(V.f64x2_mul).get(d1).get(d1).simd(V.f64x2_mul).simd(V.f64x2_add);
  f.get(d2).get(d2).simd(V.f64x2_mul).get(d3).get(d3).simd(V.f64x2_mul).simd(V.f64x2_add);
  f.simd(V.f64x2_add).simd(V.f64x2_add).set(st.q);
}

/** Accumulates the finished f32 local sx of the scalar tail, when it has a value. */
export function sAccumulate(e: Emitter, st: StatsLocals, sx: number): void {
  const f = e.f;
  f.get(sx).get(sx).op(O.f32_eq).begin(O.if);
  f.get(st.tc).f64(1).op(O.f64_add).set(st.tc);
  f.get(sx).op(O.f64_promote_f32).get(st.kd).op(O.f64_sub).set(st.td);
  f.get(st.ts).get(st.td).op(O.f64_add).set(st.ts);
  f.get(st.tq).get(st.td).get(st.td).op(O.f64_mul, O.f64_add).set(st.tq);
  f.get(st.tmn).get(sx).op(O.f64_promote_f32, O.f64_min).set(st.tmn);
  f.get(st.tmx).get(sx).op(O.f64_promote_f32, O.f64_max).set(st.tmx);
  f.op(O.end);
}

/** Reduces the lanes and the scalar tail's sums and writes count, min, max, S, Q at acc. */
export function writeStats(e: Emitter, st: StatsLocals): void {
  const { f, itmp } = e;
  // count: the cnt lanes hold −1 per lane without a value; itmp = lanes without a value
  f.i32(0);
  if (e.intNdb) for (let l = 0; l < 8; l++) f.get(st.cnt).lane(V.i16x8_extract_lane_s, l).op(O.i32_sub);
  else for (let l = 0; l < 4; l++) f.get(st.cnt).lane(V.i32x4_extract_lane, l).op(O.i32_sub);
  f.set(itmp);
  f.get(P_ACC)
    .get(e.end8)
    .get(P_START)
    .op(O.i32_sub)
    .get(itmp)
    .op(O.i32_sub)
    .op(O.f64_convert_i32_s)
    .get(st.tc)
    .op(O.f64_add)
    .mem(O.f64_store, 0);
  if (e.fusedNdb) {
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
  f.get(P_ACC)
    .get(st.s)
    .lane(V.f64x2_extract_lane, 0)
    .get(st.s)
    .lane(V.f64x2_extract_lane, 1)
    .op(O.f64_add)
    .get(st.ts)
    .op(O.f64_add)
    .mem(O.f64_store, 24);
  f.get(P_ACC)
    .get(st.q)
    .lane(V.f64x2_extract_lane, 0)
    .get(st.q)
    .lane(V.f64x2_extract_lane, 1)
    .op(O.f64_add)
    .get(st.tq)
    .op(O.f64_add)
    .mem(O.f64_store, 32);
}

/** The accumulators' starting values, in the prologue. */
export function initStats(e: Emitter, st: StatsLocals): void {
  const f = e.f;
  f.get(P_K).simd(V.f32x4_splat).set(st.kv);
  f.get(P_K).op(O.f64_promote_f32).tee(st.kd).simd(V.f64x2_splat).set(st.dk);
  f.f32x4(Infinity).set(st.mn);
  f.f32x4(-Infinity).set(st.mx);
  f.f64(Infinity).set(st.tmn);
  f.f64(-Infinity).set(st.tmx);
  // cnt, s, q, tc, ts, tq start at zero (locals are zero-initialised)
}
