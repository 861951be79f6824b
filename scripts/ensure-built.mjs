#!/usr/bin/env node
// Builds (WASM kernel + TypeScript) when dist/ is missing or older than any source file, so that
// `npm start` and `npm test` work on a fresh clone with one command.
import { execSync } from 'node:child_process';
import { existsSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';

const stamp = 'dist/.build-stamp';
function newest(dir) {
  let t = 0;
  if (!existsSync(dir)) return t;
  for (const e of readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    t = Math.max(t, e.isDirectory() ? newest(p) : statSync(p).mtimeMs);
  }
  return t;
}
const sources = Math.max(
  newest('src'), newest('assembly'), newest('bench'),
  ...['package.json', 'tsconfig.json', 'asconfig.json'].map((f) => statSync(f).mtimeMs),
);
if (!existsSync(stamp) || statSync(stamp).mtimeMs < sources) {
  console.error('[build] compiling the WASM kernel and TypeScript…');
  execSync('npm run --silent build', { stdio: 'inherit' });
  execSync(`node -e "require('fs').writeFileSync('${stamp}', String(Date.now()))"`);
}
