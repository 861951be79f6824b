#!/usr/bin/env node
// Bundles the dashboard (web/dashboard: TypeScript, Leaflet and CSS from npm) into dist/dashboard with
// esbuild: one minified script and one stylesheet with content hashes in their names, Leaflet's images
// beside them, and index.html naming them. The service serves that folder at /dashboard
// (src/platform/http/dashboard.ts). Run by `npm run build` and, when web/ changed, by
// scripts/ensure-built.mjs (npm start, npm test).
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
export const DASHBOARD_SRC = path.join(root, 'web', 'dashboard');
export const DASHBOARD_OUT = path.join(root, 'dist', 'dashboard');

/** Builds dist/dashboard; returns the bundle's files with their sizes. */
export async function buildDashboard() {
  const esbuild = await import('esbuild');
  rmSync(DASHBOARD_OUT, { recursive: true, force: true });
  mkdirSync(DASHBOARD_OUT, { recursive: true });
  const result = await esbuild.build({
    entryPoints: [path.join(DASHBOARD_SRC, 'main.ts')],
    bundle: true,
    minify: true,
    format: 'esm',
    target: ['chrome110', 'firefox110', 'safari16'],
    outdir: DASHBOARD_OUT,
    entryNames: '[name]-[hash]',
    assetNames: '[name]-[hash]',
    loader: { '.png': 'file', '.svg': 'file' },
    legalComments: 'none',
    metafile: true,
    logLevel: 'warning',
  });
  const outputs = Object.keys(result.metafile.outputs).map((f) => path.basename(f));
  const js = outputs.find((f) => f.endsWith('.js'));
  const css = outputs.find((f) => f.endsWith('.css'));
  if (!js || !css) throw new Error(`the dashboard bundle lacks a script or a stylesheet: ${outputs.join(', ')}`);
  const html = readFileSync(path.join(DASHBOARD_SRC, 'index.html'), 'utf8')
    .replace('__SCRIPT__', `/dashboard/${js}`)
    .replace('__STYLES__', `/dashboard/${css}`);
  writeFileSync(path.join(DASHBOARD_OUT, 'index.html'), html);
  return outputs;
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const t0 = performance.now();
  const files = await buildDashboard();
  console.error(`[build] dashboard: ${files.length} files in ${((performance.now() - t0) / 1000).toFixed(1)} s`);
}
