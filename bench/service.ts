/**
 * The service as a user runs it, for the benches that measure it over HTTP: `dist/src/main.js` in a
 * child process on the embedded default (no DATABASE_URL or REDIS_URL, no demo), ready once
 * `/readyz` answers; and other processes started the same way (bench/hello.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import path from 'node:path';
import { packageRoot } from '../src/platform/paths.js';

export interface Service {
  child: ChildProcess;
  base: string;
  output: () => string;
}

export async function startService(
  dataDir: string,
  port: number,
  env: NodeJS.ProcessEnv = {},
  /** How long to wait for /readyz (a first start on a loaded machine creates the database slowly). */
  startTimeoutMs = 60_000,
): Promise<Service> {
  return startProcess(
    'dist/src/main.js',
    port,
    { DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', DEMO: 'false', LOG_LEVEL: 'warn', ...env },
    startTimeoutMs,
  );
}

/**
 * A script of the package (`dist/...`) in a child process with PORT set, ready once `/readyz`
 * answers. BENCH_NODE_ARGS (space-separated) go before the script, e.g.
 * `--cpu-prof --cpu-prof-dir=/tmp/prof` for a CPU profile of each process under a bench's load
 * (written when the process exits on SIGTERM).
 */
export async function startProcess(
  script: string,
  port: number,
  env: NodeJS.ProcessEnv = {},
  startTimeoutMs = 60_000,
): Promise<Service> {
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((a) => a);
  const child = spawn(process.execPath, [...nodeArgs, path.join(packageRoot, script)], {
    env: {
      ...process.env,
      PORT: String(port),
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < startTimeoutMs / 100; i++) {
    try {
      if ((await fetch(`${base}/readyz`)).ok) return { child, base, output: () => out };
    } catch {
      /* starting */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`service did not start:\n${out}`);
}

export async function stopService(s: Service): Promise<void> {
  s.child.kill('SIGTERM');
  await new Promise((r) => s.child.once('exit', r));
}

/** A synthetic capture as `writeSyntheticSeason` writes it. */
export interface SeasonCapture {
  date: string;
  files: Record<string, string>;
  scl: string;
}

/**
 * Registers each capture (Sentinel-2 L2A, the processing-baseline offset, its SCL mask) with the
 * running service and returns the imagery ids in order; a refused registration throws.
 */
export async function registerCaptures(base: string, key: string, caps: readonly SeasonCapture[]): Promise<string[]> {
  const ids: string[] = [];
  for (const c of caps) {
    const r = await fetch(`${base}/v1/imagery`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
      body: JSON.stringify({
        source: 'sentinel-2-l2a',
        capture_date: c.date,
        bands: c.files,
        mask: { href: c.scl, kind: 'scl' },
        scale: 0.0001,
        offset: -0.1,
      }),
    });
    if (!r.ok) throw new Error(`registration: ${r.status} ${await r.text()}`);
    ids.push(((await r.json()) as { id: string }).id);
  }
  return ids;
}
