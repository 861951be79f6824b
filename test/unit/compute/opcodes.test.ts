/**
 * The kernel's op codes are declared once (src/compute/opcodes.ts); assembly/opcodes.ts is
 * generated from that table by scripts/opcodes.mjs (run by scripts/build-wasm.mjs). This fails
 * when the generated file is stale, when the kernel declares a code of its own, or when the
 * ranges the kernel and the JIT test (NEG … LOG unary, ADDC … MAXC with a constant) break.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
// @ts-expect-error: a plain JavaScript build script, without types
import { OPCODES_OUTPUT, opcodesAssembly, readOpcodes } from '../../../scripts/opcodes.mjs';
import { OP as FORMULA_OP } from '../../../src/compute/formula.js';
import { OP } from '../../../src/compute/opcodes.js';
import { packageRoot } from '../../../src/platform/paths.js';

const read = (f: string) => readFileSync(path.join(packageRoot, f), 'utf8');

describe('kernel op codes', () => {
  it('assembly/opcodes.ts is what scripts/opcodes.mjs generates from src/compute/opcodes.ts', async () => {
    expect(await readOpcodes(packageRoot)).toEqual(OP);
    expect(read(OPCODES_OUTPUT), 'stale: run node scripts/opcodes.mjs').toBe(opcodesAssembly(OP));
  });

  it('the kernel imports the generated codes and declares none of its own; the compiler uses the same table', () => {
    const kernel = read('assembly/index.ts');
    expect(kernel).toMatch(/from '\.\/opcodes'/);
    expect(kernel).not.toMatch(/\bconst OP_\w+\s*(:\s*i32)?\s*=/);
    for (const name of kernel.match(/\bOP_\w+/g) ?? []) expect(Object.keys(OP), name).toContain(name.slice(3));
    expect(FORMULA_OP).toBe(OP);
  });

  it('codes are unique and the ranges the kernel and the JIT test hold the operations they mean', () => {
    const codes = Object.values(OP);
    expect(new Set(codes).size).toBe(codes.length);
    const between = (lo: number, hi: number) =>
      Object.keys(OP)
        .filter((k) => OP[k as keyof typeof OP] >= lo && OP[k as keyof typeof OP] <= hi)
        .sort();
    expect(between(OP.NEG, OP.LOG)).toEqual(['ABS', 'EXP', 'LOG', 'NEG', 'SQRT']);
    expect(between(OP.ADDC, OP.MAXC)).toEqual(['ADDC', 'DIVC', 'MAXC', 'MINC', 'MULC', 'RDIVC', 'RSUBC', 'SUBC']);
  });
});
