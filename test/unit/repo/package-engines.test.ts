/**
 * `npm ci` warns EBADENGINE for every installed package whose `engines.node` refuses the Node that
 * runs it. Checked here: every package installed from the lock file accepts the running Node, and
 * the project's own `engines.node` (what the README tells users to install) promises no Node that
 * one of them refuses. Optional packages for other platforms are in the lock file but not
 * installed here; npm skips them without a warning, and so does this check. The versions that
 * package.json `overrides` put in place of ones wanting Node 22 are exercised through their
 * dependents, on the calls those make.
 */
import { existsSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import os from 'node:os';
import path from 'node:path';
import Fastify from 'fastify';
import semver from 'semver';
import { describe, expect, it } from 'vitest';
import { packageRoot } from '../../../src/platform/paths.js';

const json = (p: string) => JSON.parse(readFileSync(path.join(packageRoot, p), 'utf8'));
const own = json('package.json').engines.node as string;
const lock = json('package-lock.json') as { packages: Record<string, { version?: string; link?: boolean }> };
const installed = Object.keys(lock.packages)
  .filter((p) => p.startsWith('node_modules/') && existsSync(path.join(packageRoot, p, 'package.json')))
  .map((p) => {
    const pkg = json(path.join(p, 'package.json'));
    return { name: `${pkg.name}@${pkg.version}`, node: pkg.engines?.node as string | undefined };
  })
  .filter((p): p is { name: string; node: string } => typeof p.node === 'string');

describe('engines of the installed packages', () => {
  it('finds the installed packages', () => {
    expect(installed.length).toBeGreaterThan(100);
  });

  it(`every installed package accepts the running Node (${process.version})`, () => {
    const refusing = installed
      .filter((p) => !semver.satisfies(process.version, p.node))
      .map((p) => `${p.name} wants node ${p.node}`);
    expect(refusing).toEqual([]);
  });

  it(`the project's engines.node (${own}) promises no Node that an installed package refuses`, () => {
    expect(semver.satisfies(process.version, own)).toBe(true);
    const narrower = installed.filter((p) => !semver.subset(own, p.node)).map((p) => `${p.name} wants node ${p.node}`);
    expect(narrower).toEqual([]);
  });

  it('the README names the same minimum Node', () => {
    const min = semver.minVersion(own)!;
    const says = `Node.js ${min.major}.${min.minor}`;
    expect(
      readFileSync(path.join(packageRoot, 'README.md'), 'utf8').includes(says),
      `README.md should say "${says}"`,
    ).toBe(true);
  });
});

describe('overridden packages work for their dependents', () => {
  it('light-my-request (fastify inject) encodes cookies with cookie 1.x', async () => {
    const app = Fastify();
    app.get('/', async (req) => ({ cookie: req.headers.cookie }));
    const res = await app.inject({ method: 'GET', url: '/', cookies: { session: 'a b;c', lang: 'fr' } });
    expect(res.json()).toEqual({ cookie: 'session=a%20b%3Bc; lang=fr' });
    await app.close();
  });

  it('@fastify/static (under the docs UI) names downloads with content-disposition 2.x', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'static-'));
    try {
      writeFileSync(path.join(dir, 'report.pdf'), '%PDF');
      const fromUi = createRequire(createRequire(import.meta.url).resolve('@fastify/swagger-ui'));
      const app = Fastify();
      await app.register(fromUi('@fastify/static'), { root: dir, serve: false });
      // download() is decorated by @fastify/static, whose types this file does not load
      app.get('/', (_req, reply) =>
        (reply as unknown as { download(f: string, n: string): unknown }).download('report.pdf', 'résumé 2025.pdf'),
      );
      const res = await app.inject({ method: 'GET', url: '/' });
      expect(res.statusCode).toBe(200);
      expect(res.headers['content-disposition']).toBe(
        `attachment; filename="r?sum? 2025.pdf"; filename*=UTF-8''r%C3%A9sum%C3%A9%202025.pdf`,
      );
      await app.close();
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});
