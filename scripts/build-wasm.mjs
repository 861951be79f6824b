#!/usr/bin/env node
// Compiles the AssemblyScript kernel twice: with SIMD (what the service runs) and without
// (what the benchmark compares against). Flags live in asconfig.json.
// The TIFF block decoders (LZW, predictor) are a module of their own (asconfig.decode.json).
import { execFileSync } from 'node:child_process';
import { mkdirSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';

const require = createRequire(import.meta.url);
const asc = path.join(path.dirname(require.resolve('assemblyscript/package.json')), 'bin', 'asc.js');
mkdirSync('dist/wasm', { recursive: true });
for (const target of ['simd', 'scalar']) {
  execFileSync(process.execPath, [asc, '--config', 'asconfig.json', '--target', target], { stdio: 'inherit' });
}
execFileSync(process.execPath, [asc, '--config', 'asconfig.decode.json', '--target', 'release'], { stdio: 'inherit' });
