/**
 * The dashboard as a person uses it: the service started as `npm start` starts it (compiled, on
 * the embedded database of a fresh DATA_DIR, with its demo field and season), and Debian's chromium
 * driven headless by playwright-core. At desktop width: paste the key, open the demo field from the
 * keyboard, switch index and capture and see overlay tiles load, a custom formula's error at its
 * character, read a value on the series and click it onto the map, request a report and download
 * it, register webhooks (a failing test delivery shown; one whose endpoint later answers 410 Gone),
 * its delivery log, re-enable it and redeliver, the alerts and subscriptions lists. At phone width:
 * a wrong key shown as the API's problem, then every screen again, without sideways scrolling. Each
 * screen is written to docs/screenshots/ at both widths. Any console error, page error, failed
 * request, HTTP error or request outside the service fails the test, except the exact ones it
 * provokes (listed where it provokes them).
 */
import { mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/platform/paths.js';
import { type Browser, openBrowser, type Trouble } from '../helpers/browser.js';
import {
  demoField,
  devKey,
  freePort,
  type Service,
  startService,
  stopService,
  waitReady,
  waitUntil,
} from '../helpers/processes.js';
import { makePki, type Receiver, startReceiver } from '../helpers/tls.js';
import { hasChromium } from '../helpers/tools.js';

const SHOTS = path.join(packageRoot, 'docs', 'screenshots');
const DESKTOP = { width: 1280, height: 860 };
const PHONE = { width: 390, height: 844 };

const run = hasChromium();

describe.skipIf(!run)('dashboard in headless Chromium', () => {
  let svc: Service;
  let base = '';
  let key = '';
  let field = '';
  let rx: Receiver;
  let scratch = '';
  let desktop: Browser;
  /** Failures a step provokes on purpose: they must occur, and nothing else may. */
  const expected: Array<(t: Trouble) => boolean> = [];
  const api = async <T>(p: string, init: RequestInit = {}): Promise<T> => {
    const res = await fetch(`${base}/v1${p}`, {
      ...init,
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json', ...init.headers },
    });
    expect(res.ok, `${p}: ${res.status}`).toBe(true);
    return (res.status === 204 ? undefined : await res.json()) as T;
  };
  /** The troubles since the last call that no step provoked on purpose. */
  const unexpected = (b: Browser) => b.troubles.splice(0).filter((t) => !expected.some((ok) => ok(t)));
  const shot = async (b: Browser, screen: string, width: 'desktop' | 'phone') => {
    // Every API call and tile settled, every tile drawn (Leaflet shows a tile once its image loaded).
    // (a function, not a string: the page's Content-Security-Policy forbids eval, and is kept on.)
    await b.page.waitForFunction(
      () => {
        type Flagged = { complete: boolean; dataset: Record<string, string | undefined> };
        const d = (
          globalThis as unknown as {
            document: { documentElement: Flagged; querySelectorAll(s: string): ArrayLike<Flagged> };
          }
        ).document;
        return (
          (d.documentElement.dataset.pending ?? '0') === '0' &&
          Array.from(d.querySelectorAll('.index-overlay img')).every((i) => i.complete && Boolean(i.dataset.loaded))
        );
      },
      undefined,
      { timeout: 60_000 },
    );
    await b.page.screenshot({ path: path.join(SHOTS, `dashboard-${screen}-${width}.png`), fullPage: true });
  };

  beforeAll(async () => {
    scratch = mkdtempSync(path.join(os.tmpdir(), 'fa-dash-'));
    mkdirSync(SHOTS, { recursive: true });
    const pki = makePki();
    writeFileSync(path.join(scratch, 'ca.pem'), pki.ca);
    rx = await startReceiver(pki);
    const port = await freePort();
    base = `http://127.0.0.1:${port}`;
    svc = startService({
      DATA_DIR: path.join(scratch, 'data'),
      PORT: String(port),
      LOG_LEVEL: 'info',
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      NODE_EXTRA_CA_CERTS: path.join(scratch, 'ca.pem'),
    });
    await waitReady(svc, `${base}/healthz`, 180_000);
    key = devKey(svc) ?? '';
    expect(key, svc.output()).toMatch(/^fak_/);
    field = (await demoField(svc)) ?? '';
    expect(field, svc.output()).toMatch(/^fld_/);
    // The last captures of the season arrive by the demo subscription's first poll: wait for them,
    // so that the capture list the page loads is the whole season.
    await waitUntil(
      'the demo subscription',
      () => /Demo subscription isub_\S+: \d+ captures registered/.test(svc.output()),
      180_000,
    );
    desktop = await openBrowser(DESKTOP, base);
  }, 300_000);

  afterAll(async () => {
    await desktop?.close();
    await rx?.close();
    if (svc) await stopService(svc);
    if (scratch) rmSync(scratch, { recursive: true, force: true });
  });

  it('serves the page with its content types and caching; / leads to it', async () => {
    const root = await fetch(`${base}/`, { redirect: 'manual' });
    expect(root.status).toBe(302);
    expect(root.headers.get('location')).toBe('/dashboard/');
    const html = await fetch(`${base}/dashboard`);
    expect(html.headers.get('content-type')).toBe('text/html; charset=utf-8');
    expect(html.headers.get('cache-control')).toBe('no-cache');
    expect(html.headers.get('content-security-policy')).toContain("default-src 'self'");
    const text = await html.text();
    const assets = [...text.matchAll(/(?:src|href)="(\/dashboard\/[^"]+)"/g)].map((m) => m[1]!);
    expect(assets.some((a) => a.endsWith('.js')) && assets.some((a) => a.endsWith('.css'))).toBe(true);
    for (const a of assets) {
      const res = await fetch(`${base}${a}`, { headers: { 'accept-encoding': 'gzip' } });
      expect(res.status).toBe(200);
      expect(res.headers.get('content-type')).toBe(
        a.endsWith('.js') ? 'text/javascript; charset=utf-8' : 'text/css; charset=utf-8',
      );
      expect(res.headers.get('cache-control')).toBe('public, max-age=31536000, immutable');
      // Revalidation answers 304 without a body.
      const again = await fetch(`${base}${a}`, { headers: { 'if-none-match': res.headers.get('etag')! } });
      expect(again.status).toBe(304);
    }
    // No stylesheet loads anything from elsewhere (no CDN, no web fonts); the browser tests below
    // also fail on any request the page makes outside the service.
    for (const a of assets.filter((x) => x.endsWith('.css'))) {
      const css = await (await fetch(`${base}${a}`)).text();
      expect(css).not.toMatch(/@import|@font-face|url\(\s*['"]?(https?:)?\/\//);
    }
    expect(text).not.toMatch(/(src|href)="(https?:)?\/\//);
    // A missing asset is a problem, not a blank page.
    const missing = await fetch(`${base}/dashboard/nothing.js`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toContain('application/problem+json');
  });

  it('desktop: key, demo field, index and capture overlays, formula error, series value onto the map', async () => {
    const { page } = desktop;
    await page.goto(`${base}/dashboard`);
    await shot(desktop, 'key', 'desktop');
    await page.fill('#api-key', key);
    await page.press('#api-key', 'Enter');
    await page.locator('.field-item').first().waitFor();
    // The key is kept for the session, never in a URL.
    expect(await page.evaluate<string[]>('Object.values(sessionStorage)')).toContain(key);
    expect(page.url()).not.toContain(key);
    // Search narrows the list.
    await page.fill('#field-search', 'no such field');
    await expect.poll(() => page.locator('.field-item').count()).toBe(0);
    await page.fill('#field-search', 'demo');
    await expect.poll(() => page.locator('.field-item').count()).toBe(1);
    await expect.poll(() => page.textContent('#field-count')).toBe('1 of 1 field');

    // Open it from the keyboard; its details, captures and statistics appear.
    const tiles = (want: (u: URL) => boolean) =>
      page.waitForResponse(
        (r) => {
          const u = new URL(r.url());
          return /\/indices\/tiles\/\d+\/\d+\/\d+\.png$/.test(u.pathname) && r.status() === 200 && want(u);
        },
        { timeout: 60_000 },
      );
    const firstTile = tiles(() => true);
    await page.locator('.field-item').first().focus();
    await page.keyboard.press('Enter');
    await page.locator('#stats-table').waitFor({ timeout: 60_000 });
    const details = await page.textContent('#field-details');
    const f = await api<{ crop_type: string; area_ha: number; planting_date: string }>(`/fields/${field}`);
    expect(details).toContain(f.crop_type);
    expect(details).toContain(`${f.area_ha.toFixed(2)} ha`);
    expect(details).toContain(f.planting_date);
    const tile = await firstTile;
    expect(tile.headers()['content-type']).toBe('image/png');
    // The same tile fetched outside the browser is a 256 × 256 PNG.
    const png = Buffer.from(
      await (await fetch(tile.url(), { headers: { authorization: `Bearer ${key}` } })).arrayBuffer(),
    );
    expect(png.subarray(1, 4).toString()).toBe('PNG');
    expect([png.readUInt32BE(16), png.readUInt32BE(20)]).toEqual([256, 256]);
    await expect
      .poll(() => page.locator('.index-overlay img[data-loaded]').count(), { timeout: 60_000 })
      .toBeGreaterThan(0);
    // The tiles are shown: decoded images of 256 × 256 in the overlay.
    expect(
      await page
        .locator('.index-overlay img[data-loaded]')
        .first()
        .evaluate((img) => [
          (img as { naturalWidth: number }).naturalWidth,
          (img as { naturalHeight: number }).naturalHeight,
        ]),
    ).toEqual([256, 256]);
    // The capture list shows each capture with its cloud cover.
    const captures = (
      await api<{ data: Array<{ id: string; capture_date: string; cloud_cover: number }> }>(
        `/fields/${field}/imagery?per_page=100`,
      )
    ).data;
    const options = await page.locator('#date-select option').allTextContents();
    expect(options).toHaveLength(captures.length);
    for (const c of captures)
      expect(options).toContain(`${c.capture_date} · cloud ${c.cloud_cover.toFixed(0)} % · sentinel-2-l2a`);

    // Another index: tiles of that index load, and the statistics are the API's for it.
    const ndre = tiles((u) => u.searchParams.get('index') === 'NDRE');
    await page.selectOption('#index-select', 'NDRE');
    await ndre;
    // Another date: a clear capture in July.
    const july = captures.find((c) => c.capture_date.startsWith('2025-07') && c.cloud_cover === 0)!;
    const julyTiles = tiles(
      (u) => u.searchParams.get('date') === july.capture_date && u.searchParams.get('index') === 'NDRE',
    );
    await page.selectOption('#date-select', july.id);
    await julyTiles;
    const want = await api<{ zonal_stats: { mean: number; count: number } }>(
      `/fields/${field}/indices?index=NDRE&date=${july.capture_date}&imagery_id=${july.id}&zonal_stats=true&geojson=false`,
    );
    await expect
      .poll(() => page.textContent('#stats-table'), { timeout: 30_000 })
      .toContain(`Mean${want.zonal_stats.mean.toFixed(3)}`);
    expect(await page.textContent('#stats-table')).toContain(`Valid pixels${want.zonal_stats.count} `);
    expect(await page.textContent('#legend')).toContain('NDRE');
    await shot(desktop, 'fields', 'desktop');

    // A custom formula: a typo is shown at its character (the API's 400 is provoked on purpose).
    expected.push(
      (t) => t.url?.includes('/v1/indices/validate') === true && (t.kind === 'http' || t.kind === 'console'),
    );
    await page.selectOption('#index-select', 'custom');
    await page.fill('#formula', '(B08 - B04) / (B08 + B4)');
    await page.locator('#formula-caret').waitFor();
    const caret = (await page.textContent('#formula-caret'))!.split('\n');
    expect(caret[0]).toBe('(B08 - B04) / (B08 + B4)');
    expect(caret[1]).toBe(`${' '.repeat('(B08 - B04) / (B08 + '.length)}^`);
    expect(await page.textContent('#formula-detail')).toContain('unknown band "B4"');
    const customTiles = tiles((u) => u.searchParams.get('formula') === '(B08 - B03) / (B08 + B03)');
    await page.fill('#formula', '(B08 - B03) / (B08 + B03)');
    await expect.poll(() => page.textContent('#formula-message')).toBe('Valid: reads B03, B08.');
    await customTiles;

    // The series: NDVI weekly; the value under the pointer is the API's, and a click shows that date.
    await page.selectOption('#index-select', 'NDVI');
    await page.locator('#series circle.point').first().waitFor({ timeout: 60_000 });
    const series = await api<Array<{ date: string; mean: number | null; min: number | null; max: number | null }>>(
      `/fields/${field}/indices/timeseries?index=NDVI&start_date=${captures[0]!.capture_date}&end_date=${captures.at(-1)!.capture_date}&interval=weekly`,
    );
    const valued = series.filter((p) => p.mean !== null);
    expect(await page.locator('#series circle.point').count()).toBe(valued.length);
    // Gaps are gaps: one marker per empty interval, and no line across them.
    expect(await page.locator('#series rect.gap').count()).toBe(series.length - valued.length);
    const pick = valued.find((p) => p.date.startsWith('2025-06')) ?? valued[Math.floor(valued.length / 2)]!;
    await page.hover(`#series circle.point[data-date="${pick.date}"]`);
    await expect
      .poll(() => page.textContent('#series-readout'))
      .toBe(`${pick.date}: mean ${pick.mean!.toFixed(3)} (min ${pick.min!.toFixed(3)}, max ${pick.max!.toFixed(3)})`);
    const picked = tiles((u) => u.searchParams.get('date') === pick.date && u.searchParams.get('index') === 'NDVI');
    await page.click(`#series circle.point[data-date="${pick.date}"]`);
    await picked;
    expect(await page.locator('#date-select option:checked').textContent()).toContain(pick.date);
    await shot(desktop, 'series', 'desktop');
    // Biweekly: the API's intervals; a point chosen from the keyboard (Tab to it, Enter) shows its date.
    const biweekly = await api<Array<{ date: string; mean: number | null }>>(
      `/fields/${field}/indices/timeseries?index=NDVI&start_date=${captures[0]!.capture_date}&end_date=${captures.at(-1)!.capture_date}&interval=biweekly`,
    );
    await page.selectOption('#interval-select', 'biweekly');
    await expect
      .poll(() => page.locator('#series circle.point').count())
      .toBe(biweekly.filter((p) => p.mean !== null).length);
    expect(await page.locator('#series rect.gap').count()).toBe(biweekly.filter((p) => p.mean === null).length);
    const last = biweekly.filter((p) => p.mean !== null).at(-1)!;
    const lastTiles = tiles((u) => u.searchParams.get('date') === last.date);
    await page.focus(`#series circle.point[data-date="${last.date}"]`);
    await page.keyboard.press('Enter');
    await lastTiles;
    expect(await page.locator('#date-select option:checked').textContent()).toContain(last.date);
    expect(unexpected(desktop)).toEqual([]);
  }, 240_000);

  let webhookId = '';
  it('desktop: webhooks: a failing test delivery shown, then one registered', async () => {
    const { page } = desktop;
    rx.respond = (r) => ({ status: r.headers['x-service-event'] === 'webhook.test' ? 200 : 410 });
    await page.click('nav a[data-view=webhooks]');
    await page.locator('#webhook-form').waitFor();
    // One screen at a time.
    const display = (id: string) => page.evaluate<string>(`getComputedStyle(document.getElementById('${id}')).display`);
    expect([await display('view-fields'), await display('view-reports'), await display('view-webhooks')]).toEqual([
      'none',
      'none',
      'block',
    ]);
    // Nothing listens on port 9 of this host: the test delivery fails and the API's 422 is shown.
    expected.push((t) => t.url === `${base}/v1/webhooks` && (t.kind === 'http' || t.kind === 'console'));
    await page.fill('#webhook-url', 'https://127.0.0.1:9/hook');
    await page.click('#webhook-form button[type=submit]');
    await expect.poll(() => page.textContent('#register-outcome')).toMatch(/^Test delivery: no answer \(\w+\)/);
    expect(await page.textContent('#problem .problem-title')).toBe('The webhook test delivery failed');
    expect(await page.textContent('#problem .problem-detail')).toContain('Nothing was stored');
    await page.fill('#webhook-url', rx.url);
    await page.click('#webhook-form button[type=submit]');
    await expect
      .poll(() => page.textContent('#register-outcome'))
      .toMatch(/^Registered wh_\S+: the test delivery was answered 200\./);
    webhookId = /Registered (wh_\S+):/.exec((await page.textContent('#register-outcome'))!)![1]!;
    expect(rx.received.filter((r) => r.headers['x-service-event'] === 'webhook.test')).toHaveLength(1);
    await page.locator(`#webhook-list tr[data-id="${webhookId}"]`).waitFor();
    expect(unexpected(desktop)).toEqual([]);
  });

  let reportId = '';
  it('desktop: request a report, watch it become ready, download it', async () => {
    const { page } = desktop;
    await page.click('nav a[data-view=reports]');
    await page.locator('#report-form').waitFor();
    await page.selectOption('#report-type', 'scouting');
    await page.selectOption('#report-format', 'pdf');
    await page.fill('#opt-date', '2025-07-01');
    await page.click('#report-form button[type=submit]');
    await page.locator('#report-list tbody tr').first().waitFor();
    reportId = (await page.locator('#report-list tbody tr').first().getAttribute('data-id'))!;
    expect(reportId).toMatch(/^rpt_/);
    const row = page.locator(`#report-list tr[data-id="${reportId}"]`);
    await expect.poll(() => row.locator('.status').textContent(), { timeout: 120_000, interval: 500 }).toBe('ready');
    const [download] = await Promise.all([
      page.waitForEvent('download'),
      row.locator('a', { hasText: 'Download' }).click(),
    ]);
    const file = path.join(scratch, download.suggestedFilename());
    await download.saveAs(file);
    expect(download.suggestedFilename()).toMatch(new RegExp(`^scouting_.*_${reportId}\\.pdf$`));
    expect(readFileSync(file).subarray(0, 5).toString()).toBe('%PDF-');
    const r = await api<{ options: Record<string, unknown>; size_bytes: number }>(`/reports/${reportId}`);
    expect(r.options.date).toBe('2025-07-01');
    expect(readFileSync(file).length).toBe(r.size_bytes);
    // The filters: by status and type.
    await page.selectOption('#filter-status', 'failed');
    await expect.poll(() => page.locator('#report-list tbody tr').count()).toBe(0);
    await page.selectOption('#filter-status', 'ready');
    await expect.poll(() => page.locator(`#report-list tr[data-id="${reportId}"]`).count()).toBe(1);
    await shot(desktop, 'reports', 'desktop');
    expect(unexpected(desktop)).toEqual([]);
  }, 180_000);

  it('desktop: the report.ready delivery answered 410 disabled the webhook; re-enable it and redeliver', async () => {
    const { page } = desktop;
    await expect
      .poll(async () => (await api<{ status: string }>(`/webhooks/${webhookId}`)).status, { timeout: 60_000 })
      .toBe('disabled');
    await page.click('nav a[data-view=webhooks]');
    const row = page.locator(`#webhook-list tr[data-id="${webhookId}"]`);
    await expect.poll(() => row.locator('.status').textContent()).toContain('disabled');
    expect(await row.locator('.status').textContent()).toContain('410');
    await row.locator('button', { hasText: 'Deliveries' }).click();
    const delivery = page.locator('#deliveries tbody tr').first();
    await delivery.waitFor();
    expect(await delivery.textContent()).toContain('report.ready');
    expect(await delivery.locator('.attempts').textContent()).toContain('HTTP 410');
    await shot(desktop, 'webhooks', 'desktop');
    rx.respond = () => ({ status: 200 });
    await row.locator('button', { hasText: 'Re-enable' }).click();
    await expect.poll(() => row.locator('.status').textContent()).toBe('active');
    const wh = await api<{ status: string; consecutive_failures: number }>(`/webhooks/${webhookId}`);
    expect(wh).toMatchObject({ status: 'active', consecutive_failures: 0 });
    // Redeliver the report.ready delivery: the receiver gets it again with the same delivery id.
    const deliveryId = await delivery.getAttribute('data-id');
    await delivery.locator('button', { hasText: 'Redeliver' }).click();
    await expect
      .poll(() => rx.received.filter((r) => r.headers['x-service-delivery'] === deliveryId).length, { timeout: 30_000 })
      .toBe(2);
    expect(unexpected(desktop)).toEqual([]);
  }, 120_000);

  it('desktop: alerts and subscriptions lists', async () => {
    const { page } = desktop;
    await page.click('nav a[data-view=alerts]');
    await expect.poll(() => page.textContent('#view-alerts')).toContain('No alert has triggered.');
    await shot(desktop, 'alerts', 'desktop');
    await page.click('nav a[data-view=subscriptions]');
    const subs = await api<{ data: Array<{ id: string }> }>('/imagery/subscriptions');
    expect(subs.data.length).toBeGreaterThan(0);
    await page.locator(`#view-subscriptions tr[data-id="${subs.data[0]!.id}"]`).waitFor();
    await shot(desktop, 'subscriptions', 'desktop');
    expect(unexpected(desktop)).toEqual([]);
  });

  it('phone width: every screen fits without sideways scrolling; delete the report', async () => {
    const phone = await openBrowser(PHONE, base);
    try {
      const { page } = phone;
      const fits = () => page.evaluate<boolean>('document.documentElement.scrollWidth <= window.innerWidth');
      await page.goto(`${base}/dashboard`);
      await shot(phone, 'key', 'phone');
      // A wrong key: the API's 401 is shown as its problem (provoked on purpose), and the key is not kept.
      // (the two first calls, the fields and the catalogue, go out together: both answer 401)
      const refused = [`${base}/v1/fields?per_page=100&page=1`, `${base}/v1/indices/catalog`];
      expected.push((t) => refused.includes(t.url ?? '') && (t.kind === 'http' || t.kind === 'console'));
      await page.fill('#api-key', `fak_${'x'.repeat(43)}`);
      await page.press('#api-key', 'Enter');
      await expect.poll(() => page.textContent('#problem .problem-title')).toBe('Missing or invalid API key');
      expect(await page.evaluate<string[]>('Object.values(sessionStorage)')).toEqual([]);
      await page.fill('#api-key', key);
      await page.press('#api-key', 'Enter');
      await page.locator('.field-item').first().click();
      await page.locator('#stats-table').waitFor({ timeout: 60_000 });
      await expect
        .poll(() => page.locator('.index-overlay img[data-loaded]').count(), { timeout: 60_000 })
        .toBeGreaterThan(0);
      await page.locator('#series circle.point').first().waitFor({ timeout: 60_000 });
      expect(await fits()).toBe(true);
      await shot(phone, 'fields', 'phone');
      await page.locator('#series').scrollIntoViewIfNeeded();
      await shot(phone, 'series', 'phone');
      for (const screen of ['reports', 'webhooks', 'alerts', 'subscriptions']) {
        await page.click(`nav a[data-view=${screen}]`);
        expect(await fits(), screen).toBe(true);
        await shot(phone, screen, 'phone');
      }
      // Delete the report from the list (after confirming).
      await page.click('nav a[data-view=reports]');
      page.once('dialog', (d) => void d.accept());
      await page.locator(`#report-list tr[data-id="${reportId}"] button.danger`).click();
      await expect.poll(() => page.locator(`#report-list tr[data-id="${reportId}"]`).count()).toBe(0);
      expect(
        (await fetch(`${base}/v1/reports/${reportId}`, { headers: { authorization: `Bearer ${key}` } })).status,
      ).toBe(404);
      expect(unexpected(phone)).toEqual([]);
    } finally {
      await phone.close();
    }
  }, 180_000);
});
