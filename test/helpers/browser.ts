/**
 * Headless Chromium (Debian's, driven by playwright-core) as the dashboard tests use it: a fresh
 * profile, no background traffic, and a record of every console error, page error and failed
 * request, which the tests require to be empty (or exactly the failures they provoke).
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { type BrowserContext, chromium, type Page } from 'playwright-core';
import { CHROMIUM } from './tools.js';

export interface Trouble {
  kind: 'console' | 'pageerror' | 'requestfailed' | 'http' | 'elsewhere';
  text: string;
  url?: string;
}

export interface Browser {
  context: BrowserContext;
  page: Page;
  troubles: Trouble[];
  close(): Promise<void>;
}

/** `origin`: the service's; a request anywhere else (a CDN, a font, a basemap) is a trouble too. */
export async function openBrowser(viewport: { width: number; height: number }, origin: string): Promise<Browser> {
  const profile = mkdtempSync(path.join(os.tmpdir(), 'fa-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--no-sandbox', '--disable-background-networking', '--disable-component-update', '--no-first-run'],
    viewport,
    acceptDownloads: true,
  });
  const page = context.pages()[0] ?? (await context.newPage());
  const troubles: Trouble[] = [];
  page.on('console', (m) => {
    if (m.type() === 'error') troubles.push({ kind: 'console', text: m.text(), url: m.location().url });
  });
  page.on('pageerror', (e) => troubles.push({ kind: 'pageerror', text: e.message }));
  page.on('requestfailed', (r) =>
    troubles.push({ kind: 'requestfailed', text: r.failure()?.errorText ?? 'failed', url: r.url() }),
  );
  page.on('request', (r) => {
    const url = r.url();
    if (!url.startsWith(`${origin}/`) && !url.startsWith('data:') && !url.startsWith('blob:'))
      troubles.push({ kind: 'elsewhere', text: r.method(), url });
  });
  page.on('response', (r) => {
    if (r.status() >= 400) troubles.push({ kind: 'http', text: String(r.status()), url: r.url() });
  });
  return {
    context,
    page,
    troubles,
    async close() {
      await context.close().catch(() => {});
      rmSync(profile, { recursive: true, force: true });
    },
  };
}
