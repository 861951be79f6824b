/**
 * The service as a user runs it, for the benches that measure it over HTTP: `dist/src/main.js` in a
 * child process on the embedded default (no DATABASE_URL or REDIS_URL, no demo), ready once
 * `/readyz` answers.
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
  // BENCH_SERVICE_NODE_ARGS: node flags for the service (e.g. --cpu-prof --cpu-prof-dir=/tmp/p) to profile it.
  const nodeArgs = (process.env.BENCH_SERVICE_NODE_ARGS ?? '').split(' ').filter(Boolean);
  const child = spawn(process.execPath, [...nodeArgs, path.join(packageRoot, 'dist/src/main.js')], {
    env: {
      ...process.env,
      PORT: String(port),
      DATA_DIR: dataDir,
      DATABASE_URL: '',
      REDIS_URL: '',
      DEMO: 'false',
      LOG_LEVEL: 'warn',
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
