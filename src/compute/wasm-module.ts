/**
 * A tiny WebAssembly binary writer: just enough to emit the per-formula kernels of jit/ (one
 * imported memory, exported functions, locals, structured control flow, scalar and SIMD
 * instructions). Opcodes follow the core spec and the SIMD proposal's binary encoding
 * (0xFD prefix + LEB128 opcode); test/unit/compute/jit.test.ts checks them against binaryen.
 */

export const T = { i32: 0x7f, i64: 0x7e, f32: 0x7d, f64: 0x7c, v128: 0x7b } as const;
export type ValType = (typeof T)[keyof typeof T];

/** Core (single byte) opcodes used here. */
export const O = {
  block: 0x02,
  loop: 0x03,
  if: 0x04,
  else: 0x05,
  end: 0x0b,
  br: 0x0c,
  br_if: 0x0d,
  select: 0x1b,
  local_get: 0x20,
  local_set: 0x21,
  local_tee: 0x22,
  f32_load: 0x2a,
  f32_store: 0x38,
  f64_store: 0x39,
  i32_load8_u: 0x2d,
  i32_load16_s: 0x2e,
  i32_load16_u: 0x2f,
  i32_const: 0x41,
  f32_const: 0x43,
  f64_const: 0x44,
  i32_eqz: 0x45,
  i32_eq: 0x46,
  i32_lt_s: 0x48,
  i32_ge_s: 0x4e,
  f32_eq: 0x5b,
  f32_ne: 0x5c,
  f32_lt: 0x5d,
  i32_add: 0x6a,
  i32_sub: 0x6b,
  i32_and: 0x71,
  i32_or: 0x72,
  i32_shl: 0x74,
  f32_abs: 0x8b,
  f32_neg: 0x8c,
  f32_sqrt: 0x91,
  f32_add: 0x92,
  f32_sub: 0x93,
  f32_mul: 0x94,
  f32_div: 0x95,
  f32_min: 0x96,
  f32_max: 0x97,
  f64_add: 0xa0,
  f64_sub: 0xa1,
  f64_mul: 0xa2,
  f64_min: 0xa4,
  f64_max: 0xa5,
  f32_convert_i32_s: 0xb2,
  f64_convert_i32_s: 0xb7,
  f64_promote_f32: 0xbb,
} as const;

/** SIMD opcodes (after the 0xFD prefix). */
export const V = {
  load: 0,
  load8x8_u: 2,
  store: 11,
  const: 12,
  shuffle: 13,
  i16x8_splat: 16,
  i32x4_splat: 17,
  f32x4_splat: 19,
  f64x2_splat: 20,
  i32x4_extract_lane: 27,
  f32x4_extract_lane: 31,
  f64x2_extract_lane: 33,
  i16x8_extract_lane_s: 24,
  i16x8_eq: 45,
  i32x4_eq: 55,
  f32x4_eq: 65,
  f32x4_ne: 66,
  not: 77,
  and: 78,
  andnot: 79,
  or: 80,
  bitselect: 82,
  f64x2_promote_low_f32x4: 95,
  i16x8_extend_low_i8x16_u: 137,
  i16x8_add: 142,
  i16x8_min_u: 151,
  i32x4_extend_low_i16x8_s: 167,
  i32x4_extend_high_i16x8_s: 168,
  i32x4_extend_low_i16x8_u: 169,
  i32x4_extend_high_i16x8_u: 170,
  i32x4_add: 174,
  i32x4_sub: 177,
  f32x4_abs: 224,
  f32x4_neg: 225,
  f32x4_sqrt: 227,
  f32x4_add: 228,
  f32x4_sub: 229,
  f32x4_mul: 230,
  f32x4_div: 231,
  f32x4_min: 232,
  f32x4_max: 233,
  f32x4_pmin: 234,
  f32x4_pmax: 235,
  f64x2_add: 240,
  f64x2_sub: 241,
  f64x2_mul: 242,
  f32x4_convert_i32x4_s: 250,
} as const;

function uleb(out: number[], v: number): void {
  v >>>= 0;
  do {
    let b = v & 0x7f;
    v >>>= 7;
    if (v) b |= 0x80;
    out.push(b);
  } while (v);
}

function sleb(out: number[], v: number): void {
  v |= 0;
  for (;;) {
    const b = v & 0x7f;
    v >>= 7;
    if ((v === 0 && !(b & 0x40)) || (v === -1 && b & 0x40)) {
      out.push(b);
      return;
    }
    out.push(b | 0x80);
  }
}

const scratch = new DataView(new ArrayBuffer(16));

/** One function body under construction: locals are declared as they are allocated. */
export class FuncBuilder {
  readonly code: number[] = [];
  private readonly localTypes: ValType[] = [];

  constructor(
    readonly params: ValType[],
    readonly results: ValType[] = [],
  ) {}

  local(t: ValType): number {
    this.localTypes.push(t);
    return this.params.length + this.localTypes.length - 1;
  }

  op(...bytes: number[]): this {
    this.code.push(...bytes);
    return this;
  }
  /** An instruction with a local index. */
  private withLocal(op: number, l: number): this {
    this.code.push(op);
    uleb(this.code, l);
    return this;
  }
  get(l: number): this {
    return this.withLocal(O.local_get, l);
  }
  set(l: number): this {
    return this.withLocal(O.local_set, l);
  }
  tee(l: number): this {
    return this.withLocal(O.local_tee, l);
  }
  i32(v: number): this {
    this.code.push(O.i32_const);
    sleb(this.code, v);
    return this;
  }
  f32(v: number): this {
    this.code.push(O.f32_const);
    scratch.setFloat32(0, v, true);
    for (let i = 0; i < 4; i++) this.code.push(scratch.getUint8(i));
    return this;
  }
  f64(v: number): this {
    this.code.push(O.f64_const);
    scratch.setFloat64(0, v, true);
    for (let i = 0; i < 8; i++) this.code.push(scratch.getUint8(i));
    return this;
  }
  /** A scalar memory access with its memarg (alignment hint 0, offset). */
  mem(opcode: number, offset = 0): this {
    this.code.push(opcode, 0);
    uleb(this.code, offset);
    return this;
  }
  /** A label-taking instruction (br, br_if). */
  br(opcode: number, depth: number): this {
    this.code.push(opcode);
    uleb(this.code, depth);
    return this;
  }
  /** block / loop / if with no result. */
  begin(opcode: number): this {
    this.code.push(opcode, 0x40);
    return this;
  }
  simd(opcode: number): this {
    this.code.push(0xfd);
    uleb(this.code, opcode);
    return this;
  }
  /** v128.load / store / load8x8_u with offset. */
  vmem(opcode: number, offset = 0): this {
    this.simd(opcode);
    this.code.push(0);
    uleb(this.code, offset);
    return this;
  }
  lane(opcode: number, lane: number): this {
    this.simd(opcode);
    this.code.push(lane);
    return this;
  }
  /** v128.const of 16 bytes. */
  v128(bytes: ArrayLike<number>): this {
    this.simd(V.const);
    for (let i = 0; i < 16; i++) this.code.push(bytes[i]! & 0xff);
    return this;
  }
  f32x4(v: number): this {
    for (let i = 0; i < 4; i++) scratch.setFloat32(i * 4, v, true);
    return this.v128(new Uint8Array(scratch.buffer.slice(0)));
  }
  i32x4(v: number): this {
    for (let i = 0; i < 4; i++) scratch.setInt32(i * 4, v, true);
    return this.v128(new Uint8Array(scratch.buffer.slice(0)));
  }
  i16x8(v: number): this {
    for (let i = 0; i < 8; i++) scratch.setInt16(i * 2, v, true);
    return this.v128(new Uint8Array(scratch.buffer.slice(0)));
  }
  f64x2(v: number): this {
    for (let i = 0; i < 2; i++) scratch.setFloat64(i * 8, v, true);
    return this.v128(new Uint8Array(scratch.buffer.slice(0)));
  }
  shuffle(lanes: number[]): this {
    this.simd(V.shuffle);
    for (const l of lanes) this.code.push(l);
    return this;
  }

  /** The body as it goes into the code section: size, locals, instructions, end. */
  encode(): number[] {
    const body: number[] = [];
    // one entry per run of equal types
    const runs: Array<[number, ValType]> = [];
    for (const t of this.localTypes) {
      const last = runs[runs.length - 1];
      if (last && last[1] === t) last[0]++;
      else runs.push([1, t]);
    }
    uleb(body, runs.length);
    for (const [n, t] of runs) {
      uleb(body, n);
      body.push(t);
    }
    body.push(...this.code, O.end);
    const out: number[] = [];
    uleb(out, body.length);
    out.push(...body);
    return out;
  }
}

function section(out: number[], id: number, content: number[]): void {
  out.push(id);
  uleb(out, content.length);
  out.push(...content);
}

function name(out: number[], s: string): void {
  const b = Buffer.from(s, 'utf8');
  uleb(out, b.length);
  out.push(...b);
}

/** A module that imports env.memory and exports each function under its name. */
export function encodeModule(funcs: Array<{ name: string; fn: FuncBuilder }>): Uint8Array {
  const out: number[] = [0x00, 0x61, 0x73, 0x6d, 0x01, 0x00, 0x00, 0x00];
  const types: number[] = [];
  uleb(types, funcs.length);
  for (const { fn } of funcs) {
    types.push(0x60);
    uleb(types, fn.params.length);
    types.push(...fn.params);
    uleb(types, fn.results.length);
    types.push(...fn.results);
  }
  section(out, 1, types);
  const imports: number[] = [1];
  name(imports, 'env');
  name(imports, 'memory');
  imports.push(0x02, 0x00, 0x00); // memory, limits: min 0, no max
  section(out, 2, imports);
  const fsec: number[] = [];
  uleb(fsec, funcs.length);
  for (let i = 0; i < funcs.length; i++) uleb(fsec, i);
  section(out, 3, fsec);
  const exps: number[] = [];
  uleb(exps, funcs.length);
  funcs.forEach(({ name: n }, i) => {
    name(exps, n);
    exps.push(0x00);
    uleb(exps, i);
  });
  section(out, 7, exps);
  const code: number[] = [];
  uleb(code, funcs.length);
  for (const { fn } of funcs) code.push(...fn.encode());
  section(out, 10, code);
  return Uint8Array.from(out);
}
