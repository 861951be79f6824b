/**
 * The state one JIT function is emitted with: the builder, the program and bands, the parameters
 * and the locals every part shares (loop counter, scratch vectors, the no-value masks), the
 * registers and the loop-invariant constants. Locals are numbered in the order they are asked
 * for, so the order of the allocations below is part of the emitted code.
 */
import type { Program } from '../formula.js';
import { OP } from '../opcodes.js';
import { type FuncBuilder, O, T, V } from '../wasm-module.js';
import { type Band, ndbIntMath, SHIFT } from './bands.js';

// parameters: values/stats(start, end, dst, mask, acc, K, ptr0 … ptrN)
export const P_START = 0;
export const P_END = 1;
export const P_DST = 2;
export const P_MASK = 3;
export const P_ACC = 4;
export const P_K = 5;
export const P_PTR = 6;

export interface Opts {
  hasMask: boolean;
  /** Store the values (the values function always stores). */
  store: boolean;
  stats: boolean;
}

export class Emitter {
  readonly code: ArrayLike<number>;
  readonly nInstr: number;
  /** NDB is the whole program. */
  readonly whole: boolean;
  /**
   * NDB of two u16 bands as the whole program: the interpreter's fused loop (ndLoop), validity on
   * the raw lanes and the mask folded in, so its result needs no finishing.
   */
  readonly fusedNdb: boolean;
  /**
   * Integer NDB: exactly the lanes of its 16-bit no-value mask are NaN, so the statistics take
   * their masks from it (integer instructions) and count on 16-bit lanes.
   */
  readonly intNdb: boolean;

  private readonly vconst = new Map<string, number>();
  private readonly vcInit: Array<() => void> = [];
  private readonly vregs = [new Map<number, number>(), new Map<number, number>()];
  private readonly sregs = new Map<number, number>();
  private readonly constInit: Array<() => void> = [];

  readonly i: number;
  readonly end8: number;
  readonly zero: number;
  readonly vtmp: number;
  readonly vtmp2: number;
  readonly stmp: number;
  readonly itmp: number;
  /** The validity mask's no-value lanes (16-bit), when there is a mask. */
  readonly maskBad16: number;
  /** The OR of the no-value masks (16-bit lanes) of the integer bands and the validity mask. */
  readonly badAcc16: number;
  badAcc16Set = false;
  readonly raw: number;
  readonly raw2: number;
  /** The fused NDB's 16-bit no-value mask. */
  readonly bad: number;
  /** The fused NDB's no-value masks per half (reflectance math), kept for the statistics. */
  readonly ndbBad32: [number, number];

  constructor(
    readonly f: FuncBuilder,
    readonly program: Program,
    readonly bands: Band[],
    readonly o: Opts,
  ) {
    const code = program.code;
    this.code = code;
    this.nInstr = code.length / 4;
    this.whole = this.nInstr === 1 && code[0] === OP.NDB;
    this.fusedNdb = this.whole && bands[code[2]!]!.dtype === 'u16' && bands[code[3]!]!.dtype === 'u16';
    this.intNdb = this.fusedNdb && ndbIntMath(bands[code[2]!]!, bands[code[3]!]!);

    this.i = f.local(T.i32);
    this.end8 = f.local(T.i32);
    this.zero = this.vcf(0);
    // constant registers: the same local for both halves, filled before the loop
    for (const [r, v] of program.consts) {
      const l = this.vcf(v);
      this.vregs[0]!.set(r, l);
      this.vregs[1]!.set(r, l);
      const s = this.sreg(r);
      this.constInit.push(() => f.f32(v).set(s));
    }
    this.vtmp = f.local(T.v128);
    this.vtmp2 = f.local(T.v128);
    this.stmp = f.local(T.f32);
    this.itmp = f.local(T.i32);
    this.maskBad16 = o.hasMask ? f.local(T.v128) : -1;
    this.badAcc16 = f.local(T.v128);
    this.raw = f.local(T.v128);
    this.raw2 = f.local(T.v128);
    this.bad = f.local(T.v128);
    this.ndbBad32 = [f.local(T.v128), f.local(T.v128)];
  }

  /** The local holding constant vector v, filled in the prologue the first time it is asked for. */
  vconstant(kind: 'f32' | 'i16' | 'i32', v: number): number {
    const key = `${kind}:${kind === 'f32' ? Math.fround(v) : kind === 'i16' ? v & 0xffff : v | 0}:${Object.is(v, -0)}`;
    let l = this.vconst.get(key);
    if (l === undefined) {
      const local = this.f.local(T.v128);
      l = local;
      this.vconst.set(key, local);
      const f = this.f;
      this.vcInit.push(() => (kind === 'f32' ? f.f32x4(v) : kind === 'i32' ? f.i32x4(v) : f.i16x8(v)).set(local));
    }
    return l;
  }
  vcf(v: number): number {
    return this.vconstant('f32', v);
  }
  vci32(v: number): number {
    return this.vconstant('i32', v);
  }
  vci16(v: number): number {
    return this.vconstant('i16', v);
  }

  /**
   * All ones in the lanes of local x that are NaN or ±Inf (the interpreter's x − x ≠ 0), on the
   * integer side: exponent bits all set. The float pipes are what these loops are bound by.
   */
  nonFinite(x: number): void {
    const e = this.vci32(0x7f800000);
    this.f.get(x).get(e).simd(V.and).get(e).simd(V.i32x4_eq);
  }

  /** The vector local of register r in half h. */
  vreg(h: number, r: number): number {
    let l = this.vregs[h]!.get(r);
    if (l === undefined) {
      l = this.f.local(T.v128);
      this.vregs[h]!.set(r, l);
    }
    return l;
  }

  /** The scalar local of register r. */
  sreg(r: number): number {
    let l = this.sregs.get(r);
    if (l === undefined) {
      l = this.f.local(T.f32);
      this.sregs.set(r, l);
    }
    return l;
  }

  /** Address of pixel i of band slot j. */
  addr(j: number): void {
    const sh = SHIFT[this.bands[j]!.dtype];
    this.f.get(P_PTR + j).get(this.i);
    if (sh) this.f.i32(sh).op(O.i32_shl);
    this.f.op(O.i32_add);
  }

  /** Fills the constant vectors and constant registers the loops asked for. */
  emitConstants(): void {
    for (const init of this.vcInit) init();
    for (const init of this.constInit) init();
  }
}
