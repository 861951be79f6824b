/**
 * The dashboard's weight and first paint (issue 20: ≤ 300 kB of JavaScript and CSS gzip in all;
 * the field list painted < 1 s on the demo).
 * - Sizes: every script and stylesheet of dist/dashboard gzipped as the service sends them (level
 *   9), against Leaflet's own script and stylesheet gzipped alike (the baseline: what the map costs).
 * - First paint: the service started as `npm start` starts it (embedded database, demo season), and
 *   Debian's chromium driven headless by playwright-core with the key already in the session: the
 *   time from navigation start until the field names are painted (Element Timing's renderTime of
 *   the list), over repeated reloads with a warm HTTP cache, as a returning person sees it, and
 *   with the cache disabled, as on a first visit. Baseline in the same browser: the first
 *   contentful paint of the page shell (the key form, no API call).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { createRequire } from 'node:module';
import { gzipSync } from 'node:zlib';
import { chromium, type Page } from 'playwright-core';
import { dashboardDir, packageRoot } from '../src/platform/paths.js';
import { demoField, devKey, freePort, startService, stopService, waitReady } from '../test/helpers/processes.js';

const SIZE_GOAL_KB = 300;
const PAINT_GOAL_MS = 1000;
const RELOADS = 15;
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium';

const gz = (buf: Buffer) => gzipSync(buf, { level: 9 }).length;
const kb = (n: number) => (n / 1000).toFixed(1);
const pct = (xs: number[], p: number) =>
  [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor(xs.length * p))]!;

function sizes(): void {
  const files = readdirSync(dashboardDir).filter((f) => f.endsWith('.js') || f.endsWith('.css'));
  const rows = files.map((f) => {
    const body = readFileSync(path.join(dashboardDir, f));
    return { file: f, raw: body.length, gzip: gz(body) };
  });
  const req = createRequire(path.join(packageRoot, 'package.json'));
  const leaflet = ['leaflet/dist/leaflet.js', 'leaflet/dist/leaflet.css'].reduce(
    (a, m) => a + gz(readFileSync(req.resolve(m))),
    0,
  );
  const total = rows.reduce((a, r) => a + r.gzip, 0);
  console.log('file                         raw kB   gzip kB');
  for (const r of rows) console.log(`${r.file.padEnd(28)} ${kb(r.raw).padStart(6)}   ${kb(r.gzip).padStart(7)}`);
  console.log(
    `${'JS + CSS'.padEnd(28)} ${kb(rows.reduce((a, r) => a + r.raw, 0)).padStart(6)}   ${kb(total).padStart(7)}`,
  );
  console.log(
    `baseline: Leaflet's own leaflet.js + leaflet.css, gzip ${kb(leaflet)} kB; the dashboard is ${(total / leaflet).toFixed(2)}× that`,
  );
  console.log(
    `goal: JS + CSS ≤ ${SIZE_GOAL_KB} kB gzip: ${kb(total)} kB ${total <= SIZE_GOAL_KB * 1000 ? 'PASS' : 'MISS'}`,
  );
}

/** ms from navigation start to the field list's paint (Element Timing), after a reload. */
async function listPaint(page: Page): Promise<number> {
  await page.reload();
  return page.evaluate<number>(`new Promise((resolve) => {
    new PerformanceObserver((list) => {
      const e = list.getEntries().find((x) => x.identifier === 'field-list');
      if (e) resolve(e.renderTime || e.loadTime);
    }).observe({ type: 'element', buffered: true });
  })`);
}

async function shellPaint(page: Page): Promise<number> {
  await page.reload();
  return page.evaluate<number>(`new Promise((resolve) => {
    new PerformanceObserver((list) => {
      const e = list.getEntries().find((x) => x.name === 'first-contentful-paint');
      if (e) resolve(e.startTime);
    }).observe({ type: 'paint', buffered: true });
  })`);
}

export default async function dashboard(): Promise<void> {
  sizes();
  try {
    execFileSync(CHROMIUM, ['--version'], { stdio: 'ignore' });
  } catch {
    console.log(`first paint: SKIPPED, no chromium at ${CHROMIUM} (apt-get install chromium)`);
    return;
  }
  const scratch = mkdtempSync(path.join(os.tmpdir(), 'fa-bench-dash-'));
  const port = await freePort();
  const base = `http://127.0.0.1:${port}`;
  const svc = startService({ DATA_DIR: path.join(scratch, 'data'), PORT: String(port), LOG_LEVEL: 'info' });
  const context = await (async () => {
    await waitReady(svc, `${base}/healthz`, 180_000);
    if (!(await demoField(svc))) throw new Error(`no demo field: ${svc.output().slice(-2000)}`);
    return chromium.launchPersistentContext(path.join(scratch, 'profile'), {
      executablePath: CHROMIUM,
      headless: true,
      args: ['--no-sandbox', '--disable-background-networking'],
      viewport: { width: 1280, height: 860 },
    });
  })();
  try {
    // Two tabs: sessionStorage is per tab, so one holds the key (the list) and one does not (the shell).
    const page = context.pages()[0] ?? (await context.newPage());
    await page.goto(`${base}/dashboard`);
    await page.fill('#api-key', devKey(svc)!);
    await page.press('#api-key', 'Enter');
    await page.locator('.field-item').first().waitFor();
    const bare = await context.newPage();
    await bare.goto(`${base}/dashboard`);
    const runs = { shellWarm: [] as number[], warm: [] as number[], shellCold: [] as number[], cold: [] as number[] };
    for (let i = 0; i < RELOADS; i++) {
      runs.shellWarm.push(await shellPaint(bare));
      runs.warm.push(await listPaint(page));
    }
    for (const p of [page, bare])
      await (await context.newCDPSession(p)).send('Network.setCacheDisabled', { cacheDisabled: true });
    for (let i = 0; i < RELOADS; i++) {
      runs.shellCold.push(await shellPaint(bare));
      runs.cold.push(await listPaint(page));
    }
    const line = (label: string, xs: number[], base: number[]) =>
      console.log(
        `${label.padEnd(44)} ${pct(xs, 0.5).toFixed(0).padStart(6)} ${pct(xs, 0.9).toFixed(0).padStart(6)} ${(pct(xs, 0.5) / pct(base, 0.5)).toFixed(2).padStart(8)}`,
      );
    console.log(`\n${RELOADS} reloads each, interleaved                     p50 ms p90 ms  ÷ shell`);
    line('page shell, first contentful paint, cache warm', runs.shellWarm, runs.shellWarm);
    line('field list painted, cache warm', runs.warm, runs.shellWarm);
    line('page shell, first contentful paint, no cache', runs.shellCold, runs.shellCold);
    line('field list painted, no cache', runs.cold, runs.shellCold);
    const cold = runs.cold;
    const worst = pct(cold, 0.5);
    console.log(
      `goal: field list painted < ${PAINT_GOAL_MS} ms (p50, cache disabled): ${worst.toFixed(0)} ms ${worst < PAINT_GOAL_MS ? 'PASS' : 'MISS'}`,
    );
    console.log(
      `load average: ${os
        .loadavg()
        .map((l) => l.toFixed(2))
        .join(' ')}`,
    );
  } finally {
    await context.close().catch(() => {});
    await stopService(svc);
    rmSync(scratch, { recursive: true, force: true });
  }
}
