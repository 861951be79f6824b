/**
 * The band-math formula language: parser, checks, constant folding and compilation to the
 * kernel's bytecode. Domain code: imports nothing from HTTP, database or threads.
 *
 * Grammar (whitespace free):
 *   expr    := term (('+' | '-') term)*
 *   term    := unary (('*' | '/') unary)*
 *   unary   := '-' unary | '+' unary | primary
 *   primary := NUMBER | BAND | FUNC '(' expr (',' expr)* ')' | '(' expr ')'
 * Bands: B01 B02 B03 B04 B05 B06 B07 B08 B8A B09 B11 B12 (upper case, as in the spec).
 * Functions: sqrt(x) abs(x) exp(x) log(x) (natural), pow(x, y), min(x, y, ...), max(x, y, ...).
 * Semantics: reflectance inputs (0..1); x/0 and log/sqrt of invalid inputs give NaN ("no value",
 * null in JSON); any NaN input gives NaN; min/max propagate NaN.
 */
import { OP } from './opcodes.js';

export const BANDS = ['B01', 'B02', 'B03', 'B04', 'B05', 'B06', 'B07', 'B08', 'B8A', 'B09', 'B11', 'B12'] as const;
export type BandId = (typeof BANDS)[number];

export const MAX_FORMULA_LENGTH = 1000;
export const MAX_DEPTH = 64;

export type FormulaErrorCode =
  | 'empty'
  | 'too_long'
  | 'too_deep'
  | 'unexpected_character'
  | 'unknown_band'
  | 'unknown_function'
  | 'unknown_identifier'
  | 'wrong_arity'
  | 'unbalanced_parenthesis'
  | 'unexpected_token'
  | 'trailing_input'
  | 'invalid_number'
  | 'too_complex';

export class FormulaError extends Error {
  constructor(
    readonly code: FormulaErrorCode,
    message: string,
    /** 0-based character offset in the formula. */
    readonly position: number,
  ) {
    super(`${message} (at character ${position + 1})`);
    this.name = 'FormulaError';
  }
}

export type Node =
  | { k: 'num'; v: number }
  | { k: 'band'; b: BandId }
  | { k: 'neg'; a: Node }
  | { k: 'bin'; op: '+' | '-' | '*' | '/'; a: Node; b: Node }
  | { k: 'call'; f: FuncName; args: Node[] };

const FUNCS = { sqrt: [1, 1], abs: [1, 1], exp: [1, 1], log: [1, 1], pow: [2, 2], min: [2, 16], max: [2, 16] } as const;
export type FuncName = keyof typeof FUNCS;

interface Token {
  t: 'num' | 'id' | 'op' | '(' | ')' | ',' | 'end';
  v: string;
  pos: number;
}

function tokenize(src: string): Token[] {
  const out: Token[] = [];
  let i = 0;
  while (i < src.length) {
    const c = src[i]!;
    if (c === ' ' || c === '\t' || c === '\n' || c === '\r') {
      i++;
      continue;
    }
    if ((c >= '0' && c <= '9') || (c === '.' && /[0-9]/.test(src[i + 1] ?? ''))) {
      const m = /^(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?/.exec(src.slice(i))!;
      if (/^[A-Za-z_]/.test(src.slice(i + m[0].length))) {
        throw new FormulaError('invalid_number', `"${src.slice(i, i + m[0].length + 1)}" is not a number`, i);
      }
      out.push({ t: 'num', v: m[0], pos: i });
      i += m[0].length;
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      const m = /^[A-Za-z_][A-Za-z0-9_]*/.exec(src.slice(i))!;
      out.push({ t: 'id', v: m[0], pos: i });
      i += m[0].length;
      continue;
    }
    if ('+-*/'.includes(c)) out.push({ t: 'op', v: c, pos: i });
    else if (c === '(' || c === ')' || c === ',') out.push({ t: c, v: c, pos: i });
    else {
      const shown = c === '^' ? '"^" (use pow(x, y))' : JSON.stringify(c);
      throw new FormulaError('unexpected_character', `unexpected character ${shown}`, i);
    }
    i++;
  }
  out.push({ t: 'end', v: '', pos: src.length });
  return out;
}

class Parser {
  private i = 0;
  private depth = 0;
  constructor(private readonly toks: Token[]) {}

  private peek(): Token {
    return this.toks[this.i]!;
  }
  private next(): Token {
    return this.toks[this.i++]!;
  }
  private enter(pos: number): void {
    if (++this.depth > MAX_DEPTH)
      throw new FormulaError('too_deep', `the formula nests deeper than ${MAX_DEPTH} levels`, pos);
  }

  parse(): Node {
    const n = this.expr();
    const t = this.peek();
    if (t.t === ')') throw new FormulaError('unbalanced_parenthesis', 'unmatched ")"', t.pos);
    if (t.t !== 'end')
      throw new FormulaError('trailing_input', `unexpected "${t.v}" after a complete expression`, t.pos);
    return n;
  }

  private expr(): Node {
    let a = this.term();
    while (this.peek().t === 'op' && (this.peek().v === '+' || this.peek().v === '-')) {
      const op = this.next().v as '+' | '-';
      a = { k: 'bin', op, a, b: this.term() };
    }
    return a;
  }

  private term(): Node {
    let a = this.unary();
    while (this.peek().t === 'op' && (this.peek().v === '*' || this.peek().v === '/')) {
      const op = this.next().v as '*' | '/';
      a = { k: 'bin', op, a, b: this.unary() };
    }
    return a;
  }

  private unary(): Node {
    const t = this.peek();
    if (t.t === 'op' && (t.v === '-' || t.v === '+')) {
      this.next();
      this.enter(t.pos);
      const a = this.unary();
      this.depth--;
      return t.v === '-' ? { k: 'neg', a } : a;
    }
    return this.primary();
  }

  private primary(): Node {
    const t = this.next();
    switch (t.t) {
      case 'num': {
        const v = Number(t.v);
        if (!Number.isFinite(v)) throw new FormulaError('invalid_number', `${t.v} is too large`, t.pos);
        return { k: 'num', v };
      }
      case 'id':
        return this.identifier(t);
      case '(': {
        this.enter(t.pos);
        const e = this.expr();
        const close = this.next();
        if (close.t !== ')') {
          if (close.t === 'end')
            throw new FormulaError('unbalanced_parenthesis', 'missing ")" for the "(" here', t.pos);
          throw new FormulaError('unexpected_token', `expected ")" but found "${close.v}"`, close.pos);
        }
        this.depth--;
        return e;
      }
      case ')':
        throw new FormulaError('unbalanced_parenthesis', 'unmatched ")"', t.pos);
      case 'end':
        throw new FormulaError('unexpected_token', 'the formula ends where a value was expected', t.pos);
      default:
        throw new FormulaError('unexpected_token', `expected a number, a band or a function but found "${t.v}"`, t.pos);
    }
  }

  private identifier(t: Token): Node {
    const name = t.v;
    if (this.peek().t === '(') {
      const fname = name.toLowerCase();
      if (!(fname in FUNCS)) {
        throw new FormulaError(
          'unknown_function',
          `unknown function "${name}"; available: ${Object.keys(FUNCS).join(', ')}`,
          t.pos,
        );
      }
      const open = this.next();
      this.enter(open.pos);
      const args: Node[] = [];
      if (this.peek().t !== ')') {
        args.push(this.expr());
        while (this.peek().t === ',') {
          this.next();
          args.push(this.expr());
        }
      }
      const close = this.next();
      if (close.t !== ')') {
        if (close.t === 'end')
          throw new FormulaError('unbalanced_parenthesis', `missing ")" to close ${fname}(`, open.pos);
        throw new FormulaError(
          'unexpected_token',
          `expected "," or ")" in ${fname}(...) but found "${close.v}"`,
          close.pos,
        );
      }
      this.depth--;
      const [lo, hi] = FUNCS[fname as FuncName];
      if (args.length < lo || args.length > hi) {
        const want = lo === hi ? `${lo}` : `${lo} to ${hi}`;
        throw new FormulaError(
          'wrong_arity',
          `${fname}() takes ${want} argument${hi === 1 ? '' : 's'}, got ${args.length}`,
          t.pos,
        );
      }
      return { k: 'call', f: fname as FuncName, args };
    }
    if ((BANDS as readonly string[]).includes(name)) return { k: 'band', b: name as BandId };
    if ((BANDS as readonly string[]).includes(name.toUpperCase())) {
      throw new FormulaError(
        'unknown_band',
        `band names are upper case: write ${name.toUpperCase()}, not ${name}`,
        t.pos,
      );
    }
    if (/^B\d+[A-Z]?$/i.test(name)) {
      throw new FormulaError('unknown_band', `unknown band "${name}"; bands: ${BANDS.join(', ')}`, t.pos);
    }
    if (name.toLowerCase() in FUNCS)
      throw new FormulaError('unexpected_token', `${name} is a function: write ${name.toLowerCase()}(...)`, t.pos);
    throw new FormulaError(
      'unknown_identifier',
      `unknown name "${name}"; use bands (${BANDS.join(', ')}), numbers and functions`,
      t.pos,
    );
  }
}

/** Parses a formula into its syntax tree (throws FormulaError). */
export function parseFormula(src: unknown): Node {
  if (typeof src !== 'string') throw new FormulaError('empty', 'the formula must be a string', 0);
  if (src.length > MAX_FORMULA_LENGTH)
    throw new FormulaError(
      'too_long',
      `the formula is longer than ${MAX_FORMULA_LENGTH} characters`,
      MAX_FORMULA_LENGTH,
    );
  if (src.trim() === '') throw new FormulaError('empty', 'the formula is empty', 0);
  return new Parser(tokenize(src)).parse();
}

// ---------- evaluation semantics shared by folding and the float64 reference ----------

export function applyBinary(op: '+' | '-' | '*' | '/', a: number, b: number): number {
  switch (op) {
    case '+':
      return a + b;
    case '-':
      return a - b;
    case '*':
      return a * b;
    case '/':
      return b === 0 ? NaN : a / b;
  }
}

export function applyCall(f: FuncName, args: number[]): number {
  switch (f) {
    case 'sqrt':
      return Math.sqrt(args[0]!);
    case 'abs':
      return Math.abs(args[0]!);
    case 'exp':
      return Math.exp(args[0]!);
    case 'log':
      return Math.log(args[0]!);
    case 'pow':
      return args[0]! ** args[1]!;
    case 'min':
      return args.some((x) => Number.isNaN(x)) ? NaN : Math.min(...args);
    case 'max':
      return args.some((x) => Number.isNaN(x)) ? NaN : Math.max(...args);
  }
}

/** Folds constant subtrees (computed in float64, then rounded to the kernel's float32). */
export function fold(n: Node): Node {
  switch (n.k) {
    case 'num':
    case 'band':
      return n;
    case 'neg': {
      const a = fold(n.a);
      return a.k === 'num' ? { k: 'num', v: Math.fround(-a.v) } : a.k === 'neg' ? a.a : { k: 'neg', a };
    }
    case 'bin': {
      const a = fold(n.a);
      const b = fold(n.b);
      if (a.k === 'num' && b.k === 'num') return { k: 'num', v: Math.fround(applyBinary(n.op, a.v, b.v)) };
      return { k: 'bin', op: n.op, a, b };
    }
    case 'call': {
      const args = n.args.map(fold);
      if (args.every((x) => x.k === 'num'))
        return {
          k: 'num',
          v: Math.fround(
            applyCall(
              n.f,
              args.map((x) => (x as { v: number }).v),
            ),
          ),
        };
      return { k: 'call', f: n.f, args };
    }
  }
}

export function bandsOf(n: Node, out = new Set<BandId>()): Set<BandId> {
  if (n.k === 'band') out.add(n.b);
  else if (n.k === 'neg') bandsOf(n.a, out);
  else if (n.k === 'bin') {
    bandsOf(n.a, out);
    bandsOf(n.b, out);
  } else if (n.k === 'call') for (const a of n.args) bandsOf(a, out);
  return out;
}

export function sameTree(a: Node, b: Node): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

// ---------- compilation to bytecode ----------

// The op codes are one table shared with the kernel (src/compute/opcodes.ts).
export { OP };

const CALL_OP: Record<FuncName, number> = {
  sqrt: OP.SQRT,
  abs: OP.ABS,
  exp: OP.EXP,
  log: OP.LOG,
  pow: OP.POW,
  min: OP.MIN,
  max: OP.MAX,
};
const BIN_OP = { '+': OP.ADD, '-': OP.SUB, '*': OP.MUL, '/': OP.DIV } as const;
/** x op c and c op x as one instruction with the constant inside it. */
const CONST_RIGHT = { '+': OP.ADDC, '-': OP.SUBC, '*': OP.MULC, '/': OP.DIVC } as const;
const CONST_LEFT = { '+': OP.ADDC, '-': OP.RSUBC, '*': OP.MULC, '/': OP.RDIVC } as const;
const CONST_OPS = new Set<number>([
  OP.ADDC,
  OP.SUBC,
  OP.RSUBC,
  OP.MULC,
  OP.DIVC,
  OP.RDIVC,
  OP.MINC,
  OP.MAXC,
  OP.MULCADD,
]);

const f32bits = new Int32Array(1);
const f32view = new Float32Array(f32bits.buffer);
/** The bits of a float32 constant as the kernel reads them from an instruction. */
function bitsOf(v: number): number {
  f32view[0] = v;
  return f32bits[0]!;
}

/** A compiled formula: plain data, so it crosses threads by structured clone cheaply. */
export interface Program {
  /** 4 × i32 per instruction: op, dst, a, b. Band loads come first (slot i = bands[i]). */
  code: Int32Array;
  /** Constant registers and their values, filled once per run (constants an instruction cannot hold). */
  consts: Array<[number, number]>;
  bands: BandId[];
  resultReg: number;
  registers: number;
  /** Arithmetic operations in the folded formula (+ − × ÷, negation, functions), however fused. */
  ops: number;
}

// The kernel has 256 registers; the last one is its own scratch.
export const MAX_REGISTERS = 255;

/** Arithmetic operations of a (folded) tree: min/max of k arguments count k − 1. */
export function countOps(n: Node): number {
  switch (n.k) {
    case 'num':
    case 'band':
      return 0;
    case 'neg':
      return 1 + countOps(n.a);
    case 'bin':
      return 1 + countOps(n.a) + countOps(n.b);
    case 'call':
      return Math.max(1, n.args.length - 1) + n.args.reduce((s, a) => s + countOps(a), 0);
  }
}

/** Every constant a program uses, in registers or inside instructions (for tests and debugging). */
export function constantsOf(p: Program): number[] {
  const out = p.consts.map(([, v]) => v);
  for (let i = 0; i < p.code.length; i += 4) {
    if (CONST_OPS.has(p.code[i]!)) {
      f32bits[0] = p.code[i + 3]!;
      out.push(f32view[0]!);
    }
  }
  return out;
}

const isNdShape = (
  n: Node,
): n is { k: 'bin'; op: '/'; a: { k: 'bin'; op: '-'; a: Node; b: Node }; b: { k: 'bin'; op: '+'; a: Node; b: Node } } =>
  n.k === 'bin' &&
  n.op === '/' &&
  n.a.k === 'bin' &&
  n.a.op === '-' &&
  n.b.k === 'bin' &&
  n.b.op === '+' &&
  sameTree(n.a.a, n.b.a) &&
  sameTree(n.a.b, n.b.b);

export function compile(tree: Node): Program {
  const folded = fold(tree);
  const ops = countOps(folded);
  const bands = [...bandsOf(folded)].sort((a, b) => BANDS.indexOf(a) - BANDS.indexOf(b));
  // (Bx - By) / (Bx + By): the whole formula is one fused pass over the two bands.
  if (isNdShape(folded) && folded.a.a.k === 'band' && folded.a.b.k === 'band' && folded.a.a.b !== folded.a.b.b) {
    const slotA = bands.indexOf(folded.a.a.b);
    const slotB = bands.indexOf(folded.a.b.b);
    return { code: Int32Array.from([OP.NDB, 0, slotA, slotB]), consts: [], bands, resultReg: 0, registers: 1, ops };
  }
  const code: number[] = [];
  const bandReg = new Map<BandId, number>();
  // Band and constant registers stay for the whole program; temporaries are recycled.
  const pinned = new Set<number>();
  bands.forEach((b, i) => {
    bandReg.set(b, i);
    pinned.add(i);
    code.push(OP.LOAD, i, i, 0);
  });
  let next = bands.length;
  const free: number[] = [];
  const alloc = (): number => {
    const r = free.pop() ?? next++;
    if (r >= MAX_REGISTERS)
      throw new FormulaError('too_complex', 'the formula needs more registers than the kernel has; simplify it', 0);
    return r;
  };
  const release = (r: number) => {
    if (!pinned.has(r) && !free.includes(r)) free.push(r);
  };
  const constReg = new Map<number, number>();
  const consts: Array<[number, number]> = [];
  // A constant an instruction cannot hold (pow's operands, a constant result) gets a register.
  const constant = (v: number): number => {
    const key = Object.is(v, -0) ? 0 : v;
    let r = constReg.get(key);
    if (r === undefined) {
      // a register no temporary has used: it is filled before the program runs
      r = next++;
      if (r >= MAX_REGISTERS)
        throw new FormulaError('too_complex', 'the formula needs more registers than the kernel has; simplify it', 0);
      pinned.add(r);
      constReg.set(key, r);
      consts.push([r, key]);
    }
    return r;
  };
  const unaryOp = (op: number, a: number): number => {
    release(a);
    const d = alloc();
    code.push(op, d, a, 0);
    return d;
  };
  const withConst = (op: number, a: number, c: number): number => {
    release(a);
    const d = alloc();
    code.push(op, d, a, bitsOf(c));
    return d;
  };
  const binOp = (op: number, a: number, b: number): number => {
    release(a);
    release(b);
    const d = alloc();
    code.push(op, d, a, b);
    return d;
  };
  /** x × c as [x, c] when n is such a product with a constant factor. */
  const scaled = (n: Node): [Node, number] | null => {
    if (n.k !== 'bin' || n.op !== '*') return null;
    if (n.b.k === 'num' && n.a.k !== 'num') return [n.a, n.b.v];
    if (n.a.k === 'num' && n.b.k !== 'num') return [n.b, n.a.v];
    return null;
  };
  const emit = (n: Node): number => {
    switch (n.k) {
      case 'num':
        return constant(n.v);
      case 'band':
        return bandReg.get(n.b)!;
      case 'neg':
        return unaryOp(OP.NEG, emit(n.a));
      case 'bin': {
        // (x - y) / (x + y): one fused normalised-difference pass instead of three.
        if (isNdShape(n)) return binOp(OP.ND, emit(n.a.a), emit(n.a.b));
        if (n.b.k === 'num' && n.a.k !== 'num') return withConst(CONST_RIGHT[n.op], emit(n.a), n.b.v);
        if (n.a.k === 'num' && n.b.k !== 'num') return withConst(CONST_LEFT[n.op], emit(n.b), n.a.v);
        // x × c + y, y + x × c and y − x × c (= y + x × (−c), exactly): one pass.
        if (n.op === '+' || n.op === '-') {
          const right = scaled(n.b);
          const left = n.op === '+' ? scaled(n.a) : null;
          if (right || left) {
            const [x, c] = right ?? left!;
            const yNode = right ? n.a : n.b;
            const y = emit(yNode);
            const xr = emit(x);
            release(xr);
            release(y);
            const d = alloc();
            code.push(OP.MULCADD, d, xr | (y << 16), bitsOf(n.op === '-' ? -c : c));
            return d;
          }
        }
        return binOp(BIN_OP[n.op], emit(n.a), emit(n.b));
      }
      case 'call': {
        if (
          (n.f === 'min' || n.f === 'max') &&
          n.args.length === 2 &&
          (n.args[0]!.k === 'num') !== (n.args[1]!.k === 'num')
        ) {
          const [x, c] =
            n.args[0]!.k === 'num' ? [n.args[1]!, n.args[0]!.v] : [n.args[0]!, (n.args[1] as { v: number }).v];
          return withConst(n.f === 'min' ? OP.MINC : OP.MAXC, emit(x), c);
        }
        const regs = n.args.map(emit);
        const op = CALL_OP[n.f];
        if (regs.length === 1) return unaryOp(op, regs[0]!);
        let d = binOp(op, regs[0]!, regs[1]!);
        for (let i = 2; i < regs.length; i++) d = binOp(op, d, regs[i]!);
        return d;
      }
    }
  };
  let result = emit(folded);
  if (pinned.has(result)) {
    // The whole formula is a band or a constant: give the result a register of its own (x × 1 is x).
    const d = alloc();
    code.push(OP.MULC, d, result, bitsOf(1));
    result = d;
  }
  if (code.length / 4 > 4096)
    throw new FormulaError('too_complex', 'the formula compiles to too many instructions; simplify it', 0);
  return { code: Int32Array.from(code), consts, bands, resultReg: result, registers: next, ops };
}

/** Parses and compiles; throws FormulaError. */
export function compileFormula(src: string): Program {
  return compile(parseFormula(src));
}
