/**
 * The service and the keys CLI as a user runs them: the compiled entry points in child processes
 * (npm test builds first), on the embedded database in a temporary DATA_DIR.
 */
import { execFile, spawn } from 'node:child_process';
import { cpSync, existsSync, mkdirSync, mkdtempSync, rmSync, statSync, symlinkSync, utimesSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { promisify } from 'node:util';
import { afterAll, describe, expect, it } from 'vitest';
import { packageRoot } from '../../src/platform/paths.js';

const run = promisify(execFile);
const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fa-e2e-'));
const env = {
  ...process.env,
  DATA_DIR: dataDir,
  DATABASE_URL: '',
  REDIS_URL: '',
  LOG_LEVEL: 'warn',
  COMPUTE_THREADS: '1',
};
const cli = (...args: string[]) =>
  run(process.execPath, [path.join(packageRoot, 'dist/src/cli/keys.js'), ...args], { env });

afterAll(() => rmSync(dataDir, { recursive: true, force: true }));

describe('service start and keys CLI', () => {
  it('start prints a development key once, serves /docs and /v1 with it; the CLI manages keys', async () => {
    const port = 20_000 + Math.floor(Math.random() * 20_000);
    const start = () => {
      const child = spawn(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], {
        env: { ...env, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      return { child, output: () => out };
    };
    // The first start creates the embedded database: on a loaded 2-core machine that can take
    // well over 30 s, so the wait is generous.
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
    // It listens first and writes the demo season afterwards, then prints the demo field.
    const demoLine =
      /\n {2}Demo field fld_\S+: 29 synthetic Sentinel-2 captures of 12 bands, 2025-03-26 to 2025-09-10: \d+\.\d s\n/;
    // The last four dates of the season arrive through the demo subscription's first poll.
    const subscribedLine =
      /\n {2}Demo subscription isub_\S+: 4 captures registered by its first poll \(imagery\.available for the demo field\): \d+\.\d s\n/;
    for (const until = Date.now() + 150_000; !subscribedLine.test(svc.output()) && Date.now() < until; )
      await new Promise((r) => setTimeout(r, 100));
    // A progress line per start-up step, with its time, in order.
    const steps = [
      /(^|\n) {2}Node and modules loaded: \d+\.\d s\n/,
      /\n {2}Database \(embedded PGlite in \S+pgdata, created: first start\): \d+\.\d s\n/,
      /\n {2}Migrations \(\d+ applied\): \d+\.\d s\n/,
      /\n {2}Compute pool warm \(1 thread\): \d+\.\d s\n/,
      /\n {2}Queues \(in the database\): \d+\.\d s\n/,
      /\n {2}HTTP app: \d+\.\d s\n/,
      new RegExp(
        `\\n {2}Field analysis service listening on http://127\\.0\\.0\\.1:${port} \\(\\d+\\.\\d s after the process started\\)\\n`,
      ),
      /\n {2}Demo: writing and registering a season of synthetic Sentinel-2 captures in the background…\n/,
      demoLine,
      subscribedLine,
    ];
    const at = steps.map((re) => svc.output().search(re));
    expect(
      at.every((i) => i >= 0),
      `${steps.filter((_, k) => at[k]! < 0).join(' ')} in\n${svc.output()}`,
    ).toBe(true);
    expect([...at].sort((a, b) => a - b)).toEqual(at);
    const key = /\b(fak_[A-Za-z0-9_-]{43})\b/.exec(svc.output())?.[1];
    expect(key, svc.output()).toBeTruthy();
    expect(svc.output()).toContain(`http://127.0.0.1:${port}/docs`);
    expect((await fetch(`http://127.0.0.1:${port}/docs/`)).status).toBe(200);
    const fields = await fetch(`http://127.0.0.1:${port}/v1/fields`, { headers: { authorization: `Bearer ${key}` } });
    expect(fields.status).toBe(200);
    // The demo: a field and a season of synthetic captures, ready for index calls.
    const demo = ((await fields.json()) as { data: Array<{ id: string; name: string }> }).data.find(
      (f) => f.name === 'Demo field (synthetic)',
    );
    expect(demo, svc.output()).toBeTruthy();
    expect(svc.output()).toContain(demo!.id);
    const ndvi = await fetch(
      `http://127.0.0.1:${port}/v1/fields/${demo!.id}/indices?index=NDVI&date=2025-07-01&zonal_stats=true&geojson=false`,
      { headers: { authorization: `Bearer ${key}` } },
    );
    expect(ndvi.status).toBe(200);
    const body = (await ndvi.json()) as { zonal_stats: { mean: number; count: number } };
    expect(body.zonal_stats.count).toBeGreaterThan(0);
    expect(body.zonal_stats.mean).toBeGreaterThan(0.5);
    const series = await fetch(
      `http://127.0.0.1:${port}/v1/fields/${demo!.id}/indices/timeseries?index=NDVI&start_date=2025-04-01&end_date=2025-10-01`,
      { headers: { authorization: `Bearer ${key}` } },
    );
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
    expect(svc.output()).toMatch(/\n {2}Database \(embedded PGlite in \S+pgdata\): \d+\.\d s\n/); // opened, not created
    expect(svc.output()).not.toContain('Demo');
    expect(
      (await fetch(`http://127.0.0.1:${port}/v1/fields`, { headers: { authorization: `Bearer ${newKey}` } })).status,
    ).toBe(401);
    expect(
      (await fetch(`http://127.0.0.1:${port}/v1/fields`, { headers: { authorization: `Bearer ${key}` } })).status,
    ).toBe(200);
    await stop(svc);
  }, 300_000);

  it('SIGTERM while the demo is being written stops it between captures and exits 0', async () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fa-e2e-demo-'));
    try {
      const port = 20_000 + Math.floor(Math.random() * 20_000);
      const child = spawn(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], {
        env: { ...env, DATA_DIR: dir, PORT: String(port) },
        stdio: ['ignore', 'pipe', 'pipe'],
      });
      let out = '';
      child.stdout.on('data', (c: Buffer) => (out += c.toString()));
      child.stderr.on('data', (c: Buffer) => (out += c.toString()));
      const exited = new Promise((r) => child.once('exit', r));
      for (const until = Date.now() + 150_000; !out.includes('Demo: writing') && Date.now() < until; )
        await new Promise((r) => setTimeout(r, 50));
      child.kill('SIGTERM');
      expect(await exited, out).toBe(0);
      // Stopped, or (on a fast machine) complete before the signal: never failed or cut mid-way.
      expect(out).toMatch(/Demo: stopped by the shutdown before it was complete|Demo field fld_/);
      expect(out).not.toContain('Demo not created');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  }, 200_000);

  it('a bad variable stops the start with one line naming it', async () => {
    const r = await run(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], {
      env: { ...env, PORT: 'eighty' },
    }).catch((e) => e);
    expect(r.code).toBe(78);
    expect(r.stderr.trim()).toBe('invalid configuration: PORT must be a whole number, got "eighty"');
  });
});

describe('npm start on a fresh clone: scripts/ensure-built.mjs', () => {
  it('builds only what is stale, WASM and TypeScript at once, with a line per step and its time', async () => {
    // A copy of the sources with the shared node_modules, and the WASM modules already built except
    // the decoders (one target: compiling all of them would only make the test longer).
    const clone = mkdtempSync(path.join(os.tmpdir(), 'fa-clone-'));
    try {
      for (const p of [
        'src',
        'bench',
        'assembly',
        'web',
        'scripts',
        'test/helpers',
        'package.json',
        'tsconfig.json',
        'asconfig.json',
        'asconfig.decode.json',
      ]) {
        cpSync(path.join(packageRoot, p), path.join(clone, p), { recursive: true });
      }
      symlinkSync(path.join(packageRoot, 'node_modules'), path.join(clone, 'node_modules'));
      mkdirSync(path.join(clone, 'dist/wasm'), { recursive: true });
      for (const f of ['kernel.simd.wasm', 'kernel.scalar.wasm'])
        cpSync(path.join(packageRoot, 'dist/wasm', f), path.join(clone, 'dist/wasm', f));
      const old = new Date(Date.now() - 60_000);
      for (const p of [
        'assembly/index.ts',
        'assembly/decode.ts',
        'asconfig.json',
        'asconfig.decode.json',
        'package.json',
        'tsconfig.json',
      ])
        utimesSync(path.join(clone, p), old, old);
      const build = async (...args: string[]) =>
        (await run(process.execPath, ['scripts/ensure-built.mjs', ...args], { cwd: clone })).stderr;

      const first = await build('start');
      const lines = [
        /^\[build\] dist\/ is out of date: WASM \(decode\) and TypeScript and dashboard, at the same time$/m,
        /^\[build\] dashboard: \d+ files \(esbuild\)$/m,
        /^\[build\] TypeScript: \d{3} files transpiled in \d+\.\d s \(type check: npm run typecheck\)$/m,
        /^\[build\] WASM TIFF decoders: \d+\.\d s$/m,
        /^\[build\] done in \d+\.\d s$/m,
      ];
      for (const re of lines) expect(first).toMatch(re);
      expect(first).not.toMatch(/kernel \(SIMD\)|kernel \(scalar/); // current: not rebuilt
      for (const f of [
        'dist/src/main.js',
        'dist/src/threads/compute-worker.js',
        'dist/wasm/decode.wasm',
        'dist/dashboard/index.html',
      ])
        expect(existsSync(path.join(clone, f)), f).toBe(true);
      expect(existsSync(path.join(clone, 'dist/bench'))).toBe(false); // not needed to start

      expect(await build('start')).toBe(''); // up to date: nothing to do, nothing printed
      // main.ts changed since it was built: its output made older than it (a source stamped in the
      // future would stay newer than every output written in the next seconds, and be rebuilt again).
      const before = new Date(statSync(path.join(clone, 'src/main.ts')).mtimeMs - 1_000);
      utimesSync(path.join(clone, 'dist/src/main.js'), before, before);
      expect(await build('start')).toMatch(
        /^\[build\] dist\/ is out of date: TypeScript\n\[build\] TypeScript: 1 file transpiled in \d+\.\d s/,
      );
      // npm test and npm run bench want the benchmarks too (and what they import from test/helpers).
      expect(await build()).toMatch(
        /^\[build\] dist\/ is out of date: TypeScript\n\[build\] TypeScript: \d+ files transpiled/,
      );
      for (const f of ['dist/bench/run.js', 'dist/test/helpers/tls.js'])
        expect(existsSync(path.join(clone, f)), f).toBe(true);
      expect(await build()).toBe('');
    } finally {
      rmSync(clone, { recursive: true, force: true });
    }
  }, 300_000);
});
