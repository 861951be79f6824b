#!/usr/bin/env node
// Brings dist/ up to date so that `npm start`, `npm test`, `npm run keys` and `npm run bench` work
// on a fresh clone with one command, as fast as a small machine allows. Two steps run at the same
// time, each only when its output is missing or older than its sources, with progress lines and
// their times on stderr:
// - WASM: scripts/build-wasm.mjs in a child process. `ensure-built.mjs start` asks only for what the
//   service runs (the SIMD kernel and the TIFF decoders, and src/ of the TypeScript); the scalar
//   kernel and bench/, for the tests and benchmarks, are built when one of those commands runs.
// - TypeScript: every source file transpiled on its own (TypeScript's transpileModule), in this
//   process, and only the files changed since their output was written. No type check here:
//   tsconfig.json's `isolatedModules` makes `npm run typecheck` refuse whatever would compile
//   differently one file at a time, so the JavaScript is what tsc writes. `npm run build` is the
//   full, type-checked build.
import { spawn } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { buildDashboard, DASHBOARD_OUT, DASHBOARD_SRC } from './build-dashboard.mjs';
import { seconds, WASM_TARGETS } from './build-wasm.mjs';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
process.chdir(root);
const forStart = process.argv[2] === 'start';
const mtime = (f) => (existsSync(f) ? statSync(f).mtimeMs : 0);
const walk = (dir, keep) =>
  existsSync(dir)
    ? readdirSync(dir, { recursive: true })
        .map((f) => path.join(dir, f))
        .filter(keep)
    : [];
const isSource = (f) => f.endsWith('.ts') && !f.endsWith('.d.ts');
const configTime = Math.max(mtime('tsconfig.json'), mtime('package.json'));
const tsconfig = JSON.parse(readFileSync('tsconfig.json', 'utf8'));
const outDir = tsconfig.compilerOptions.outDir;
const outputOf = (src) =>
  path.join(outDir, path.relative(tsconfig.compilerOptions.rootDir ?? '.', src)).replace(/\.ts$/, '.js');
const staleOutput = (src) => mtime(outputOf(src)) < Math.max(mtime(src), configTime);

// WASM: the targets asked for whose module is missing or older than the kernel sources (with the
// op-code table they are generated from), their asconfig or the lock file (the compiler's version).
const wasmSources = Math.max(
  ...walk('assembly', () => true).map(mtime),
  mtime('package-lock.json'),
  mtime('src/compute/opcodes.ts'),
);
const wasm = (forStart ? ['simd', 'decode'] : Object.keys(WASM_TARGETS)).filter(
  (t) => mtime(WASM_TARGETS[t].out) < Math.max(wasmSources, mtime(WASM_TARGETS[t].config)),
);

// TypeScript: a source of the included folders without a current output, or a source of one of the
// outputs (files outside those folders that they import, such as test/helpers/tls.ts) newer than it.
// `start` needs src/ only (not bench/).
const includeDirs = forStart ? ['src'] : [...new Set(tsconfig.include.map((p) => p.split('/')[0]))];
const tsStale =
  includeDirs.some((d) => walk(d, isSource).some(staleOutput)) ||
  walk(
    forStart ? path.join(outDir, 'src') : outDir,
    (f) => f.endsWith('.js') && !f.startsWith(path.join(outDir, 'wasm')),
  ).some((js) => {
    const src = path.relative(outDir, js).replace(/\.js$/, '.ts');
    return existsSync(src) && staleOutput(src);
  });

// The dashboard (esbuild, in its own process): when web/, its build script or the lock file is newer.
const webStale =
  mtime(path.join(DASHBOARD_OUT, 'index.html')) <
  Math.max(
    ...walk(DASHBOARD_SRC, () => true).map(mtime),
    mtime('scripts/build-dashboard.mjs'),
    mtime('package-lock.json'),
  );

if (wasm.length || tsStale || webStale) {
  const t0 = performance.now();
  const parts = [
    wasm.length ? `WASM (${wasm.join(', ')})` : '',
    tsStale ? 'TypeScript' : '',
    webStale ? 'dashboard' : '',
  ].filter(Boolean);
  console.error(`[build] dist/ is out of date: ${parts.join(' and ')}${parts.length > 1 ? ', at the same time' : ''}`);
  const child = wasm.length ? spawn(process.execPath, ['scripts/build-wasm.mjs', ...wasm], { stdio: 'inherit' }) : null;
  const wasmDone = child ? new Promise((resolve) => child.once('exit', (code) => resolve(code))) : Promise.resolve(0);
  const webDone = webStale
    ? buildDashboard().then(
        (files) => {
          console.error(`[build] dashboard: ${files.length} files (esbuild)`);
          return true;
        },
        (err) => {
          console.error(`[build] dashboard: ${err.message}`);
          return false;
        },
      )
    : Promise.resolve(true);
  let ok = true;
  if (tsStale) ok = transpile();
  const code = await wasmDone;
  if (!(await webDone)) ok = false;
  if (!ok || code !== 0) process.exit(1);
  console.error(`[build] done in ${seconds(performance.now() - t0)}`);
}

/** Transpiles the sources whose output is stale; false (after printing why) on a syntax error. */
function transpile() {
  const t0 = performance.now();
  const ts = createRequire(import.meta.url)('typescript');
  const parsed = ts.getParsedCommandLineOfConfigFile(
    'tsconfig.json',
    {},
    {
      ...ts.sys,
      onUnRecoverableConfigFileDiagnostic: (d) => {
        throw new Error(ts.flattenDiagnosticMessageText(d.messageText, '\n'));
      },
    },
  );
  const { outDir: _o, rootDir: _r, declaration: _d, ...options } = parsed.options;
  // Every file is an ES module (package.json "type": "module"), as NodeNext compiles them.
  Object.assign(options, {
    module: ts.ModuleKind.ESNext,
    moduleResolution: ts.ModuleResolutionKind.Bundler,
    moduleDetection: ts.ModuleDetectionKind.Force,
  });
  const queue = parsed.fileNames
    .map((f) => path.relative(root, f))
    .filter((f) => isSource(f) && includeDirs.includes(f.split(path.sep)[0]));
  const seen = new Set(queue);
  let n = 0;
  const errors = [];
  while (queue.length) {
    const src = queue.pop();
    const text = readFileSync(src, 'utf8');
    // Relative imports outside the included folders are compiled too, as tsc does.
    for (const { fileName } of ts.preProcessFile(text, true, false).importedFiles) {
      if (!fileName.startsWith('.')) continue;
      const dep = path.join(path.dirname(src), fileName.replace(/\.js$/, '.ts'));
      if (isSource(dep) && !seen.has(dep) && existsSync(dep)) {
        seen.add(dep);
        queue.push(dep);
      }
    }
    if (!staleOutput(src)) continue;
    const out = ts.transpileModule(text, { compilerOptions: options, fileName: src, reportDiagnostics: true });
    if (out.diagnostics?.length) {
      errors.push(
        ts.formatDiagnostics(out.diagnostics, {
          getCanonicalFileName: (f) => f,
          getCurrentDirectory: () => root,
          getNewLine: () => '\n',
        }),
      );
      continue;
    }
    const js = outputOf(src);
    mkdirSync(path.dirname(js), { recursive: true });
    if (out.sourceMapText) {
      const map = JSON.parse(out.sourceMapText);
      map.sources = [path.relative(path.dirname(js), src)];
      writeFileSync(`${js}.map`, JSON.stringify(map));
    }
    writeFileSync(js, out.outputText);
    n++;
  }
  if (errors.length) {
    console.error(errors.join(''));
    console.error(`[build] TypeScript: ${errors.length} file(s) do not compile`);
    return false;
  }
  console.error(
    `[build] TypeScript: ${n} file${n === 1 ? '' : 's'} transpiled in ${seconds(performance.now() - t0)} (type check: npm run typecheck)`,
  );
  return true;
}
