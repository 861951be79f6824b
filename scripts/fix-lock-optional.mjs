#!/usr/bin/env node
// The npm registry mirror reachable here lacks some platform-only optional packages
// (msgpackr-extract's darwin/win32/arm builds, pulled in by bullmq → msgpackr). `npm install`
// then leaves them out of package-lock.json and `npm ci` refuses the lock as out of sync. This
// records them as optional, platform-bound entries (never installed on Linux x64), which is what
// npm itself writes when the registry has them. Run after `npm install` changes the lock.
import { readFileSync, writeFileSync } from 'node:fs';

const lock = JSON.parse(readFileSync('package-lock.json', 'utf8'));
const missing = {
  '@msgpackr-extract/msgpackr-extract-darwin-arm64': { os: ['darwin'], cpu: ['arm64'] },
  '@msgpackr-extract/msgpackr-extract-darwin-x64': { os: ['darwin'], cpu: ['x64'] },
  '@msgpackr-extract/msgpackr-extract-linux-arm': { os: ['linux'], cpu: ['arm'] },
  '@msgpackr-extract/msgpackr-extract-win32-x64': { os: ['win32'], cpu: ['x64'] },
};
let added = 0;
for (const [name, platform] of Object.entries(missing)) {
  const key = `node_modules/${name}`;
  if (lock.packages[key]) continue;
  lock.packages[key] = { version: '3.0.7', cpu: platform.cpu, license: 'MIT', optional: true, os: platform.os };
  added++;
}
lock.packages = Object.fromEntries(
  Object.entries(lock.packages).sort(([a], [b]) => (a === '' ? -1 : b === '' ? 1 : a < b ? -1 : 1)),
);
writeFileSync('package-lock.json', `${JSON.stringify(lock, null, 2)}\n`);
console.log(`added ${added} optional platform entries`);
