/**
 * The service and the keys CLI as a user runs them: the compiled entry points in child processes
 * (npm test builds first), on the embedded database in a temporary DATA_DIR.
 */
import { execFile, spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/platform/paths.js';

const run = promisify(execFile);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fa-e2e-'));
const env = { ...process.env, DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', LOG_LEVEL: 'warn', COMPUTE_THREADS: '1' };
const cli = (...args: string[]) => run(process.execPath, [path.join(packageRoot, 'dist/src/cli/keys.js'), ...args], { env });

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('service start and keys CLI', () => {
  it('start prints a development key once, serves /docs and /v1 with it; the CLI manages keys', async () => {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const start = () => {
      const child = spawn(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], { env: { ...env, PORT: String(port) }, stdio: ['ignore', 'pipe', 'pipe'] });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      return { child, output: () => out };
    };
    // The first start writes the demo season (GeoTIFFs) before listening: on a loaded 2-core
    // machine that can take well over 30 s, so the wait is generous.
    const waitUp = async () => {
      for (const until = Date.now() + 150_000; Date.now() < until; ) {
        try {
          if ((await fetch(`http://127.0.0.1:${port}/healthz`)).ok) return;
        } catch {
          /* not yet */
        }
        await new Promise((r) => setTimeout(r, 100));
      }
      throw new Error('service did not start');
    };
    const stop = async (c: ReturnType<typeof start>) => {
      c.child.kill('SIGTERM');
      const code = await new Promise((r) => c.child.once('exit', r));
      expect(code).toBe(0); // graceful shutdown
    };

    let svc = start();
    await waitUp();
    const key = /\b(fak_[A-Za-z0-9_-]{43})\b/.exec(svc.output())?.[1];
    expect(key, svc.output()).toBeTruthy();
    expect(svc.output()).toContain(`http://127.0.0.1:${port}/docs`);
    expect((await fetch(`http://127.0.0.1:${port}/docs/`)).status).toBe(200);
    const fields = await fetch(`http://127.0.0.1:${port}/v1/fields`, { headers: { authorization: `Bearer ${key}` } });
    expect(fields.status).toBe(200);
    // The demo: a field and a season of synthetic captures, ready for index calls.
    const demo = ((await fields.json()) as { data: Array<{ id: string; name: string }> }).data.find((f) => f.name === 'Demo field (synthetic)');
    expect(demo, svc.output()).toBeTruthy();
    expect(svc.output()).toContain(demo!.id);
    const ndvi = await fetch(`http://127.0.0.1:${port}/v1/fields/${demo!.id}/indices?index=NDVI&date=2025-07-01&zonal_stats=true&geojson=false`, { headers: { authorization: `Bearer ${key}` } });
    expect(ndvi.status).toBe(200);
    const body = (await ndvi.json()) as { zonal_stats: { mean: number; count: number } };
    expect(body.zonal_stats.count).toBeGreaterThan(0);
    expect(body.zonal_stats.mean).toBeGreaterThan(0.5);
    const series = await fetch(`http://127.0.0.1:${port}/v1/fields/${demo!.id}/indices/timeseries?index=NDVI&start_date=2025-04-01&end_date=2025-10-01`, { headers: { authorization: `Bearer ${key}` } });
    expect(((await series.json()) as unknown[]).length).toBe(27);
    // The embedded database allows one process: the CLI refuses while the service runs.
    await expect(cli('list')).rejects.toMatchObject({ stderr: expect.stringMatching(/stop it first/) });
    await stop(svc);

    const created = await cli('create', '--account', 'acme', '--label', 'robot');
    const newKey = /\b(fak_[A-Za-z0-9_-]{43})\b/.exec(created.stdout)?.[1];
    const keyId = /key id (key_[A-Za-z0-9_-]+)/.exec(created.stdout)?.[1];
    expect(newKey && keyId).toBeTruthy();
    const listed = (await cli('list')).stdout;
    expect(listed).toContain('account=acme');
    expect(listed).toContain('account=development');
    expect(listed).not.toContain(newKey!); // only the prefix is ever shown
    expect((await cli('revoke', keyId!)).stdout).toContain('revoked');
    await expect(cli('revoke', keyId!)).rejects.toMatchObject({ code: 1 });
    await expect(cli('frobnicate')).rejects.toMatchObject({ code: 2 });

    svc = start();
    await waitUp();
    expect(svc.output()).not.toMatch(/fak_[A-Za-z0-9_-]{43}/); // printed once, on the first start only
    expect((await fetch(`http://127.0.0.1:${port}/v1/fields`, { headers: { authorization: `Bearer ${newKey}` } })).status).toBe(401);
    expect((await fetch(`http://127.0.0.1:${port}/v1/fields`, { headers: { authorization: `Bearer ${key}` } })).status).toBe(200);
    await stop(svc);
  }, 300_000);

  it('a bad variable stops the start with one line naming it', async () => {
    const r = await run(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], { env: { ...env, PORT: 'eighty' } }).catch((e) => e);
    expect(r.code).toBe(78);
    expect(r.stderr.trim()).toBe('invalid configuration: PORT must be a whole number, got "eighty"');
  });
});
