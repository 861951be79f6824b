/**
 * One exported function of a JIT module: the vector loop (8 pixels a step, two f32x4 halves), the
 * scalar tail (the last len % 8 pixels, as the interpreter's scalar loop), the statistics, and
 * the prologue that fills the constants. The loops are emitted first (they ask for the vector
 * constants they need); the prologue is emitted last and moved in front of them.
 */
import type { Program } from '../formula.js';
import { FuncBuilder, O, T, V } from '../wasm-module.js';
import type { Band } from './bands.js';
import { Emitter, type Opts, P_DST, P_END, P_MASK, P_START } from './emitter.js';
import { sInstr, vInstr } from './operations.js';
import {
  initStats,
  sAccumulate,
  type StatsLocals,
  statsLocals,
  vAccumulateBlock,
  vAccumulateHalf,
  writeStats,
} from './statistics.js';

export function buildFunction(program: Program, bands: Band[], o: Opts): FuncBuilder {
  const f = new FuncBuilder([T.i32, T.i32, T.i32, T.i32, T.i32, T.f32, ...bands.map(() => T.i32)]);
  const e = new Emitter(f, program, bands, o);
  const st = o.stats ? statsLocals(f) : null;
  const val: [number, number] = [f.local(T.v128), f.local(T.v128)];
  const sx = f.local(T.f32);

  vectorLoop(e, st, val);
  scalarTail(e, st, sx);
  if (st) writeStats(e, st);

  // prologue: constants and accumulators, then the loops above
  const loops = f.code.splice(0);
  e.emitConstants();
  if (st) initStats(e, st);
  f.code.push(...loops);
  return f;
}

/** Pixels [start, end8) 8 at a time: the instructions, finishing, store and statistics. */
function vectorLoop(e: Emitter, st: StatsLocals | null, val: [number, number]): void {
  const { f, i, end8, o } = e;
  f.get(P_START).get(P_END).get(P_START).op(O.i32_sub).i32(-8).op(O.i32_and, O.i32_add).set(end8);
  f.get(P_START).set(i);
  f.begin(O.block);
  f.get(i).get(end8).op(O.i32_ge_s).br(O.br_if, 0);
  f.begin(O.loop);
  if (o.hasMask) {
    f.get(P_MASK).get(i).op(O.i32_add).vmem(V.load8x8_u).get(e.zero).simd(V.i16x8_eq).tee(e.maskBad16);
    f.set(e.badAcc16);
    e.badAcc16Set = !e.fusedNdb; // the fused NDB folds the mask in itself
  }
  for (let k = 0; k < e.nInstr; k++) vInstr(e, k);
  for (let h = 0; h < 2; h++) {
    const v = e.vreg(h, e.program.resultReg);
    // bad: all ones where there is no value (the interpreter's NOT ok: non-finite or masked)
    const bad = st ? st.bad[h]! : e.vtmp;
    vFinish(e, st, h, v, bad, val[h]!);
    if (o.store) {
      f.get(P_DST)
        .get(i)
        .i32(2)
        .op(O.i32_shl, O.i32_add)
        .get(val[h]!)
        .vmem(V.store, h * 16);
    }
    if (st) vAccumulateHalf(e, st, h, v, bad);
  }
  if (st) vAccumulateBlock(e, st);
  f.get(i).i32(8).op(O.i32_add).tee(i).get(end8).op(O.i32_lt_s).br(O.br_if, 0);
  f.op(O.end); // loop
  f.op(O.end); // block
}

/**
 * The finished values of half h of result v into local out: non-finite or without a value → NaN
 * (the fused NDB's result is finished already); its no-value lanes into bad.
 */
function vFinish(e: Emitter, st: StatsLocals | null, h: number, v: number, bad: number, out: number): void {
  const f = e.f;
  const extend = h === 0 ? V.i32x4_extend_low_i16x8_s : V.i32x4_extend_high_i16x8_s;
  if (e.fusedNdb) {
    f.get(v).set(out);
    if (st && e.intNdb) f.get(e.bad).simd(extend).set(bad);
    else if (st) f.get(e.ndbBad32[h]!).set(bad);
    return;
  }
  e.nonFinite(v);
  if (e.badAcc16Set) f.get(e.badAcc16).simd(extend).simd(V.or);
  f.tee(bad);
  f.get(v).simd(V.or).set(out);
}

/** Pixels [end8, end) one at a time, as the interpreter's scalar loop. */
function scalarTail(e: Emitter, st: StatsLocals | null, sx: number): void {
  const { f, i, o } = e;
  f.begin(O.block);
  f.get(i).get(P_END).op(O.i32_ge_s).br(O.br_if, 0);
  f.begin(O.loop);
  for (let k = 0; k < e.nInstr; k++) sInstr(e, k);
  // finish: masked or non-finite → NaN
  f.f32(NaN).get(e.sreg(e.program.resultReg)).tee(sx);
  f.get(sx).op(O.f32_abs).f32(Infinity).op(O.f32_lt, O.i32_eqz);
  if (o.hasMask) f.get(P_MASK).get(i).op(O.i32_add).mem(O.i32_load8_u).op(O.i32_eqz, O.i32_or);
  f.op(O.select).set(sx);
  if (o.store) f.get(P_DST).get(i).i32(2).op(O.i32_shl, O.i32_add).get(sx).mem(O.f32_store);
  if (st) sAccumulate(e, st, sx);
  f.get(i).i32(1).op(O.i32_add).tee(i).get(P_END).op(O.i32_lt_s).br(O.br_if, 0);
  f.op(O.end); // loop
  f.op(O.end); // block
}
