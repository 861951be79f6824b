/**
 * The service as operators run it: compiled `dist/src/main.js` in child processes (npm test builds
 * first), a private PostgreSQL database on the shared server, a unique queue prefix on the shared
 * Redis, and a parser for the Prometheus text the processes serve.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer } from 'node:net';
import path from 'node:path';
import { Redis } from 'ioredis';
import postgres from 'postgres';
import { packageRoot } from '../../src/platform/paths.js';
import { uniqueName } from './backends.js';

export interface Service {
  child: ChildProcess;
  /** stdout + stderr so far. */
  output(): string;
  /** Resolves with the exit code. */
  exited: Promise<number | null>;
}

export function startService(env: Record<string, string>): Service {
  const child = spawn(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], {
    env: {
      ...process.env,
      DATABASE_URL: '',
      REDIS_URL: '',
      LOG_LEVEL: 'warn',
      COMPUTE_THREADS: '1',
      NODE_ENV: 'production',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<number | null>((r) => child.once('exit', (code) => r(code)));
  return { child, output: () => out, exited };
}

/** SIGTERM and the exit code. */
export async function stopService(s: Service, signal: NodeJS.Signals = 'SIGTERM'): Promise<number | null> {
  if (s.child.exitCode !== null) return s.child.exitCode;
  s.child.kill(signal);
  return s.exited;
}

export async function waitUntil(
  what: string,
  cond: () => boolean | Promise<boolean>,
  ms = 60_000,
  stepMs = 100,
): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    try {
      if (await cond()) return;
    } catch {
      /* not yet */
    }
    await new Promise((r) => setTimeout(r, stepMs));
  }
  throw new Error(`timed out waiting for ${what}`);
}

/** Waits for GET url to answer 200 (or the process to die, which fails with its output). */
export async function waitReady(s: Service, url: string, ms = 90_000): Promise<void> {
  await waitUntil(
    `${url} (output: ${s.output().slice(-2000)})`,
    async () => {
      if (s.child.exitCode !== null) throw new Error(`the service exited with ${s.child.exitCode}: ${s.output()}`);
      return (await fetch(url)).ok;
    },
    ms,
  );
}

export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const srv = createServer();
    srv.once('error', reject);
    srv.listen(0, '127.0.0.1', () => {
      const { port } = srv.address() as { port: number };
      srv.close(() => resolve(port));
    });
  });
}

/** A database of its own on the shared PostgreSQL server (dropped by the returned function). */
export async function privateDatabase(serverUrl: string): Promise<{ url: string; drop(): Promise<void> }> {
  const name = uniqueName('fa_ops');
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  await admin.end();
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      const a = postgres(serverUrl, { max: 1, onnotice: () => {} });
      await a.unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`).catch(() => {});
      await a.end();
    },
  };
}

/** Deletes the Redis keys of a queue prefix (`fa:<prefix>:…`). */
export async function dropRedisPrefix(redisUrl: string, prefix: string): Promise<void> {
  const r = new Redis(redisUrl, { maxRetriesPerRequest: 1 });
  try {
    let cursor = '0';
    do {
      const [next, keys] = await r.scan(cursor, 'MATCH', `fa:${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) await r.del(...keys);
    } while (cursor !== '0');
  } finally {
    r.disconnect();
  }
}

export interface MetricSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Prometheus text exposition → samples (comments skipped). */
export function parseMetrics(text: string): MetricSample[] {
  const out: MetricSample[] = [];
  for (const line of text.split('\n')) {
    if (!line || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)/.exec(line);
    if (!m) continue;
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g)) labels[l[1]!] = l[2]!;
    out.push({ name: m[1]!, labels, value: Number(m[3]) });
  }
  return out;
}

/** Sum of the samples of `name` whose labels include `match`. */
export function metricSum(samples: MetricSample[], name: string, match: Record<string, string> = {}): number {
  return samples
    .filter((s) => s.name === name && Object.entries(match).every(([k, v]) => s.labels[k] === v))
    .reduce((a, s) => a + s.value, 0);
}

export async function scrape(url: string): Promise<MetricSample[]> {
  const res = await fetch(url);
  if (!res.ok) throw new Error(`${url} answered ${res.status}`);
  return parseMetrics(await res.text());
}

/** The development key a first start prints. */
export function devKey(s: Service): string | undefined {
  return /\b(fak_[A-Za-z0-9_-]{43})\b/.exec(s.output())?.[1];
}

/**
 * The demo field id a first start prints once it has written the demo season (in the background,
 * after it started listening); undefined if the demo fails, the process ends or `ms` pass first.
 */
export async function demoField(s: Service, ms = 180_000): Promise<string | undefined> {
  const find = () => /Demo field (fld_[A-Za-z0-9_-]+)/.exec(s.output())?.[1];
  await waitUntil(
    'the demo field',
    () => find() !== undefined || /Demo not created|Demo: stopped/.test(s.output()) || s.child.exitCode !== null,
    ms,
  ).catch(() => {});
  return find();
}

/** Every series name a scrape declares, samples or not (a labelled counter never incremented has none). */
export async function scrapeNames(url: string): Promise<Set<string>> {
  const text = await (await fetch(url)).text();
  const names = new Set(parseMetrics(text).map((s) => s.name));
  for (const m of text.matchAll(/^# TYPE (\S+) (\S+)$/gm)) {
    names.add(m[1]!);
    if (m[2] === 'histogram' || m[2] === 'summary')
      for (const suffix of ['_bucket', '_sum', '_count']) names.add(m[1]! + suffix);
  }
  return names;
}

/** A Node script (a child of the fault tests, e.g. test/helpers/report-worker-child.mjs) with its output kept. */
export interface ScriptChild {
  proc: ChildProcess;
  /** stdout + stderr so far. */
  out: () => string;
}

/** Runs `script` (a path from the package root) with the test's environment plus `env`. */
export function startScript(script: string, env: Record<string, string>): ScriptChild {
  const proc = spawn(process.execPath, [path.join(packageRoot, script)], {
    env: { ...process.env, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  return { proc, out: () => out };
}

/**
 * Polls `cond` every 50 ms until it holds; throws after `ms` naming `what`, and at once, with its
 * output, when `child` has exited meanwhile.
 */
export async function untilOrExit(
  what: string,
  cond: () => boolean | Promise<boolean>,
  ms: number,
  child?: ScriptChild,
): Promise<void> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (await cond()) return;
    if (child && child.proc.exitCode !== null)
      throw new Error(`child exited while waiting for ${what}:\n${child.out()}`);
    await new Promise((r) => setTimeout(r, 50));
  }
  throw new Error(`timed out waiting for ${what}${child ? `\n${child.out()}` : ''}`);
}

/** SIGKILL, and its exit. */
export async function kill9(c: ScriptChild): Promise<void> {
  if (c.proc.exitCode !== null) return;
  const exited = new Promise((r) => c.proc.once('exit', r));
  c.proc.kill('SIGKILL');
  await exited;
}
