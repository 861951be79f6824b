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
    if (++this.depth > MAX_DEPTH) throw new FormulaError('too_deep', `the formula nests deeper than ${MAX_DEPTH} levels`, pos);
  }

  parse(): Node {
    const n = this.expr();
    const t = this.peek();
    if (t.t === ')') throw new FormulaError('unbalanced_parenthesis', 'unmatched ")"', t.pos);
    if (t.t !== 'end') throw new FormulaError('trailing_input', `unexpected "${t.v}" after a complete expression`, t.pos);
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
          if (close.t === 'end') throw new FormulaError('unbalanced_parenthesis', 'missing ")" for the "(" here', t.pos);
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
        throw new FormulaError('unknown_function', `unknown function "${name}"; available: ${Object.keys(FUNCS).join(', ')}`, t.pos);
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
        if (close.t === 'end') throw new FormulaError('unbalanced_parenthesis', `missing ")" to close ${fname}(`, open.pos);
        throw new FormulaError('unexpected_token', `expected "," or ")" in ${fname}(...) but found "${close.v}"`, close.pos);
      }
      this.depth--;
      const [lo, hi] = FUNCS[fname as FuncName];
      if (args.length < lo || args.length > hi) {
        const want = lo === hi ? `${lo}` : `${lo} to ${hi}`;
        throw new FormulaError('wrong_arity', `${fname}() takes ${want} argument${hi === 1 ? '' : 's'}, got ${args.length}`, t.pos);
      }
      return { k: 'call', f: fname as FuncName, args };
    }
    if ((BANDS as readonly string[]).includes(name)) return { k: 'band', b: name as BandId };
    if ((BANDS as readonly string[]).includes(name.toUpperCase())) {
      throw new FormulaError('unknown_band', `band names are upper case: write ${name.toUpperCase()}, not ${name}`, t.pos);
    }
    if (/^B\d+[A-Z]?$/i.test(name)) {
      throw new FormulaError('unknown_band', `unknown band "${name}"; bands: ${BANDS.join(', ')}`, t.pos);
    }
    if (name.toLowerCase() in FUNCS) throw new FormulaError('unexpected_token', `${name} is a function: write ${name.toLowerCase()}(...)`, t.pos);
    throw new FormulaError('unknown_identifier', `unknown name "${name}"; use bands (${BANDS.join(', ')}), numbers and functions`, t.pos);
  }
}

/** Parses a formula into its syntax tree (throws FormulaError). */
export function parseFormula(src: unknown): Node {
  if (typeof src !== 'string') throw new FormulaError('empty', 'the formula must be a string', 0);
  if (src.length > MAX_FORMULA_LENGTH) throw new FormulaError('too_long', `the formula is longer than ${MAX_FORMULA_LENGTH} characters`, MAX_FORMULA_LENGTH);
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
      return Math.pow(args[0]!, args[1]!);
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
      if (args.every((x) => x.k === 'num')) return { k: 'num', v: Math.fround(applyCall(n.f, args.map((x) => (x as { v: number }).v))) };
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
  } else if (n.k === 'call') n.args.forEach((a) => bandsOf(a, out));
  return out;
}

export function sameTree(a: Node, b: Node): boolean {
  return JSON.stringify(a) === JSON.stringify(b);
}

// ---------- compilation to bytecode ----------

export const OP = {
  LOAD: 1, ADD: 2, SUB: 3, MUL: 4, DIV: 5, NEG: 6, SQRT: 7, ABS: 8, EXP: 9, LOG: 10, MIN: 11, MAX: 12, POW: 13, ND: 14, NDB: 15,
} as const;

const CALL_OP: Record<FuncName, number> = { sqrt: OP.SQRT, abs: OP.ABS, exp: OP.EXP, log: OP.LOG, pow: OP.POW, min: OP.MIN, max: OP.MAX };
const BIN_OP = { '+': OP.ADD, '-': OP.SUB, '*': OP.MUL, '/': OP.DIV } as const;

/** A compiled formula: plain data, so it crosses threads by structured clone cheaply. */
export interface Program {
  /** 4 × i32 per instruction: op, dst, a, b. Band loads come first (slot i = bands[i]). */
  code: Int32Array;
  /** Constant registers and their values, filled once per run. */
  consts: Array<[number, number]>;
  bands: BandId[];
  resultReg: number;
  registers: number;
  /** Number of non-load instructions (a rough cost measure). */
  ops: number;
}

// The kernel has 256 registers; the last one is its own scratch.
export const MAX_REGISTERS = 255;

export function compile(tree: Node): Program {
  const folded = fold(tree);
  const bands = [...bandsOf(folded)].sort((a, b) => BANDS.indexOf(a) - BANDS.indexOf(b));
  // (Bx - By) / (Bx + By): the whole formula is one fused pass over the two bands.
  if (folded.k === 'bin' && folded.op === '/' && folded.a.k === 'bin' && folded.a.op === '-' && folded.b.k === 'bin' && folded.b.op === '+' &&
      folded.a.a.k === 'band' && folded.a.b.k === 'band' && sameTree(folded.a.a, folded.b.a) && sameTree(folded.a.b, folded.b.b) && folded.a.a.b !== folded.a.b.b) {
    const slotA = bands.indexOf(folded.a.a.b);
    const slotB = bands.indexOf(folded.a.b.b);
    return { code: Int32Array.from([OP.NDB, 0, slotA, slotB]), consts: [], bands, resultReg: 0, registers: 1, ops: 1 };
  }
  const code: number[] = [];
  const bandReg = new Map<BandId, number>();
  bands.forEach((b, i) => {
    bandReg.set(b, i);
    code.push(OP.LOAD, i, i, 0);
  });
  let next = bands.length;
  const constReg = new Map<number, number>();
  const consts: Array<[number, number]> = [];
  const constant = (v: number): number => {
    const key = Object.is(v, -0) ? 0 : v;
    let r = constReg.get(key);
    if (r === undefined) {
      r = next++;
      constReg.set(key, r);
      consts.push([r, key]);
    }
    return r;
  };
  // Constants first, so that temporaries can be recycled above them.
  const collect = (n: Node): void => {
    if (n.k === 'num') constant(n.v);
    else if (n.k === 'neg') collect(n.a);
    else if (n.k === 'bin') {
      collect(n.a);
      collect(n.b);
    } else if (n.k === 'call') n.args.forEach(collect);
  };
  collect(folded);
  const firstTemp = next;
  const free: number[] = [];
  const alloc = (): number => {
    const r = free.pop() ?? next++;
    if (r >= MAX_REGISTERS) throw new FormulaError('too_complex', 'the formula needs more registers than the kernel has; simplify it', 0);
    return r;
  };
  const release = (r: number) => {
    if (r >= firstTemp && !free.includes(r)) free.push(r);
  };
  let ops = 0;
  const emit = (n: Node): number => {
    switch (n.k) {
      case 'num':
        return constant(n.v);
      case 'band':
        return bandReg.get(n.b)!;
      case 'neg': {
        const a = emit(n.a);
        release(a);
        const d = alloc();
        code.push(OP.NEG, d, a, 0);
        ops++;
        return d;
      }
      case 'bin': {
        // (x - y) / (x + y): one fused normalised-difference pass instead of three.
        if (n.op === '/' && n.a.k === 'bin' && n.a.op === '-' && n.b.k === 'bin' && n.b.op === '+' && sameTree(n.a.a, n.b.a) && sameTree(n.a.b, n.b.b)) {
          const x = emit(n.a.a);
          const y = emit(n.a.b);
          release(x);
          release(y);
          const d = alloc();
          code.push(OP.ND, d, x, y);
          ops++;
          return d;
        }
        const a = emit(n.a);
        const b = emit(n.b);
        release(a);
        release(b);
        const d = alloc();
        code.push(BIN_OP[n.op], d, a, b);
        ops++;
        return d;
      }
      case 'call': {
        const regs = n.args.map(emit);
        regs.forEach(release);
        const d = alloc();
        const op = CALL_OP[n.f];
        if (regs.length === 1) code.push(op, d, regs[0]!, 0);
        else {
          code.push(op, d, regs[0]!, regs[1]!);
          for (let i = 2; i < regs.length; i++) code.push(op, d, d, regs[i]!);
        }
        ops += Math.max(1, regs.length - 1);
        return d;
      }
    }
  };
  let result = emit(folded);
  if (result < firstTemp) {
    // The whole formula is a band or a constant: give the result a register of its own.
    const d = alloc();
    code.push(OP.ADD, d, result, constant(0));
    result = d;
  }
  if (code.length / 4 > 4096) throw new FormulaError('too_complex', 'the formula compiles to too many instructions; simplify it', 0);
  return { code: Int32Array.from(code), consts, bands, resultReg: result, registers: next, ops };
}

/** Parses and compiles; throws FormulaError. */
export function compileFormula(src: string): Program {
  return compile(parseFormula(src));
}
