#!/usr/bin/env node
// Renders one PDF of each report type from the demo field (the synthetic 2025 maize season that
// `npm start` creates) and turns every page into PNG with pdftoppm (poppler-utils), to look at the
// pages as a person would. Usage: node scripts/render-reports.mjs [out-dir] (default
// data/rendered-reports). Builds first when dist/ is stale; runs on an in-memory database.
// Without pdftoppm it says what to install and exits 69 (EX_UNAVAILABLE) before doing anything.
import { execFileSync, spawnSync } from 'node:child_process';
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const POPPLER = `pdftoppm comes with poppler:
  Debian, Ubuntu: sudo apt-get install poppler-utils
  Fedora, RHEL:   sudo dnf install poppler-utils
  Alpine:         apk add poppler-utils
  macOS:          brew install poppler`;
const probe = spawnSync('pdftoppm', ['-v'], { stdio: 'ignore' });
if (probe.error) {
  const why =
    probe.error.code === 'ENOENT' ? 'is not installed (not found on PATH)' : `cannot be run (${probe.error.message})`;
  console.error(`render-reports: pdftoppm, which turns the PDF pages into PNG, ${why}.\n${POPPLER}`);
  process.exit(69);
}

const root = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
execFileSync(process.execPath, [path.join(root, 'scripts/ensure-built.mjs')], { stdio: 'inherit' });
const { openDatabase } = await import('../dist/src/platform/database.js');
const { loadConfig } = await import('../dist/src/platform/config.js');
const { openRuntime } = await import('../dist/src/runtime.js');
const { buildApp } = await import('../dist/src/app.js');
const { createApiKey, findOrCreateAccount } = await import('../dist/src/accounts/api-keys.js');
const { createDemo } = await import('../dist/src/imagery/demo.js');

const out = path.resolve(process.argv[2] ?? 'data/rendered-reports');
mkdirSync(out, { recursive: true });
const imagery = mkdtempSync(path.join(os.tmpdir(), 'render-reports-'));
const db = await openDatabase({});
const config = loadConfig({
  IMAGERY_ROOTS: imagery,
  PUBLIC_BASE_URL: 'http://localhost:3000',
  LOG_LEVEL: 'silent',
  COMPUTE_THREADS: '2',
  DEMO: 'false',
});
const runtime = await openRuntime(config, { db, pollMs: 50, log: () => {} });
const app = await buildApp(runtime);
try {
  const account = await findOrCreateAccount(db, 'render');
  const { key } = await createApiKey(db, account.id);
  const auth = { authorization: `Bearer ${key}` };
  const demo = await createDemo(
    { db, compute: runtime.compute, roots: [imagery], maxAreaHa: config.maxFieldAreaHa },
    account.id,
  );
  console.log(`demo field ${demo.fieldId}: ${demo.captures} captures ${demo.firstDate}..${demo.lastDate}`);
  // An alert rule, then three captures of the season registered again so that it is judged on
  // them (rules run on new captures): the health summary then has an alert history to show.
  await app.inject({
    method: 'POST',
    url: `/v1/fields/${demo.fieldId}/alerts`,
    headers: auth,
    payload: { alert_type: 'crop_health', index: 'NDVI', operator: 'below', threshold: 0.8 },
  });
  const own = await db.query(
    `SELECT bands, mask, capture_date::text AS d FROM imagery WHERE capture_date IN ('2025-06-06', '2025-06-24', '2025-08-17') ORDER BY capture_date`,
  );
  for (const c of own) {
    const bands = Object.fromEntries(Object.entries(c.bands).map(([b, v]) => [b, v.href]));
    const res = await app.inject({
      method: 'POST',
      url: '/v1/imagery',
      headers: auth,
      payload: {
        source: 'sentinel-2-l2a',
        capture_date: c.d,
        bands,
        mask: { href: c.mask.href, kind: 'scl' },
        offset: -0.1,
      },
    });
    if (res.statusCode !== 201) throw new Error(res.body);
  }
  const requests = [
    { type: 'scouting', format: 'pdf', options: { date: '2025-06-06' } },
    { type: 'seasonal', format: 'pdf' },
    { type: 'health_summary', format: 'pdf', options: { start_date: '2025-06-02', end_date: '2025-08-24' } },
    { type: 'prescription', format: 'pdf', options: { date: '2025-06-06', prescription_input: 'nitrogen', zones: 4 } },
  ];
  for (const body of requests) {
    const t0 = performance.now();
    const res = await app.inject({
      method: 'POST',
      url: `/v1/fields/${demo.fieldId}/reports`,
      headers: auth,
      payload: body,
    });
    if (res.statusCode !== 202) throw new Error(res.body);
    let r = res.json();
    while (r.status === 'pending' || r.status === 'processing') {
      await new Promise((s) => setTimeout(s, 50));
      r = (await app.inject({ method: 'GET', url: `/v1/reports/${r.id}`, headers: auth })).json();
    }
    if (r.status !== 'ready') throw new Error(`${body.type}: ${r.error}`);
    const u = new URL(r.download_url);
    const file = await app.inject({ method: 'GET', url: u.pathname + u.search });
    const pdf = path.join(out, `${body.type}.pdf`);
    writeFileSync(pdf, file.rawPayload);
    const png = spawnSync('pdftoppm', ['-r', '80', '-png', pdf, path.join(out, body.type)], { encoding: 'utf8' });
    if (png.error || png.status !== 0) {
      console.error(
        `render-reports: pdftoppm failed on ${pdf}: ${(png.error?.message ?? png.stderr.trim()) || `exit ${png.status}`}`,
      );
      process.exitCode = 1;
      break;
    }
    console.log(
      `${body.type}: ${(file.rawPayload.length / 1024).toFixed(0)} kB, ready in ${(performance.now() - t0).toFixed(0)} ms -> ${out}/${body.type}-*.png`,
    );
  }
} finally {
  await app.close();
  await runtime.close();
  await db.close();
  rmSync(imagery, { recursive: true, force: true });
}
