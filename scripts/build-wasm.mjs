#!/usr/bin/env node
// Compiles the AssemblyScript modules: the kernel with SIMD (what the service runs), the TIFF block
// decoders (LZW, predictor; asconfig.decode.json) and the kernel without SIMD (what the tests and
// the benchmark compare against). Usage: node scripts/build-wasm.mjs [simd|decode|scalar ...]
// (default all three). Flags live in asconfig.json and asconfig.decode.json. All targets compile in
// this one process: the compiler and Binaryen then warm up once, which makes the second and third
// targets a fraction of the first (a process per target cost three times the CPU). One progress
// line per target, with its time, on stderr; the compiler's own messages only when it fails.
// The kernel's op codes come from src/compute/opcodes.ts: assembly/opcodes.ts is regenerated from
// it first (scripts/opcodes.mjs).
import { mkdirSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { writeOpcodes } from './opcodes.mjs';

export const WASM_TARGETS = {
  simd: { config: 'asconfig.json', target: 'simd', out: 'dist/wasm/kernel.simd.wasm', what: 'kernel (SIMD)' },
  decode: { config: 'asconfig.decode.json', target: 'release', out: 'dist/wasm/decode.wasm', what: 'TIFF decoders' },
  scalar: {
    config: 'asconfig.json',
    target: 'scalar',
    out: 'dist/wasm/kernel.scalar.wasm',
    what: 'kernel (scalar, for tests and benchmarks)',
  },
};

export const seconds = (ms) => `${(ms / 1000).toFixed(1)} s`;

export async function buildWasm(names = Object.keys(WASM_TARGETS)) {
  const { default: asc } = await import('assemblyscript/asc');
  mkdirSync('dist/wasm', { recursive: true });
  if (names.some((n) => WASM_TARGETS[n]?.config === 'asconfig.json') && (await writeOpcodes()))
    console.error('[build] assembly/opcodes.ts regenerated from src/compute/opcodes.ts');
  for (const name of names) {
    const t = WASM_TARGETS[name];
    if (!t) throw new Error(`unknown WASM target "${name}" (${Object.keys(WASM_TARGETS).join(', ')})`);
    const t0 = performance.now();
    const { error, stderr } = await asc.main(['--config', t.config, '--target', t.target]);
    if (error) {
      process.stderr.write(stderr.toString());
      throw new Error(`WASM ${t.what}: ${error.message}`);
    }
    console.error(`[build] WASM ${t.what}: ${seconds(performance.now() - t0)}`);
  }
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  process.chdir(path.dirname(path.dirname(fileURLToPath(import.meta.url))));
  try {
    await buildWasm(process.argv.length > 2 ? process.argv.slice(2) : undefined);
  } catch (err) {
    console.error(`[build] ${err.message}`);
    process.exit(1);
  }
}
