/**
 * Process start-up for the operational benchmarks (bench/load, bench/faults), kept in one file:
 * service processes by ROLE (node dist/src/main.js with env), a scratch database on a PostgreSQL
 * server, and private Redis and PostgreSQL instances that the fault drills may stop and start.
 * Relies only on what main.ts and runtime.ts do today: an `api` process serves /readyz on PORT;
 * a `worker` process serves no HTTP (METRICS_PORT is passed for when it does), so a worker counts
 * as ready once BullMQ lists it among the consumers of the `reports` queue.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { chownSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import net from 'node:net';
import os from 'node:os';
import path from 'node:path';
import { Queue } from 'bullmq';
import { Redis } from 'ioredis';
import postgres from 'postgres';
import { packageRoot } from '../src/platform/paths.js';

export const sleep = (ms: number) => new Promise<void>((r) => setTimeout(r, ms));

/** Polls `cond` every `everyMs` until it holds or `ms` have passed; returns whether it held. */
export async function until(cond: () => boolean | Promise<boolean>, ms: number, everyMs = 100): Promise<boolean> {
  const end = Date.now() + ms;
  for (;;) {
    try {
      if (await cond()) return true;
    } catch {
      /* not yet */
    }
    if (Date.now() >= end) return false;
    await sleep(everyMs);
  }
}

/** A port nobody listens on right now (the kernel picks it). */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = net.createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const port = (s.address() as net.AddressInfo).port;
      s.close(() => resolve(port));
    });
  });
}

/** Peak resident set size of a live process in MiB (/proc/<pid>/status VmHWM), null when gone. */
export function peakRssMiB(pid: number | undefined): number | null {
  if (!pid) return null;
  try {
    const m = /VmHWM:\s+(\d+)\s+kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) / 1024 : null;
  } catch {
    return null;
  }
}

const TAIL = 64 * 1024;

export interface ServiceProcess {
  name: string;
  role: 'api' | 'worker';
  child: ChildProcess;
  /** http://127.0.0.1:PORT for an api process. */
  base?: string;
  /** Highest VmHWM seen (sampled by peak() and before the process is stopped or killed). */
  peakMiB: number;
  /** The last 64 KiB of stdout and stderr. */
  output(): string;
  /** Samples VmHWM and returns the peak so far. */
  peak(): number;
}

function spawnService(name: string, role: 'api' | 'worker', env: Record<string, string>, port: number): ServiceProcess {
  // BENCH_NODE_ARGS (space-separated) go before the script, e.g. `--cpu-prof --cpu-prof-dir=DIR`
  // for a CPU profile of each process (written when it exits on SIGTERM).
  const nodeArgs = (process.env.BENCH_NODE_ARGS ?? '').split(' ').filter((a) => a);
  const child = spawn(process.execPath, [...nodeArgs, path.join(packageRoot, 'dist/src/main.js')], {
    env: { ...process.env, ...env, ROLE: role, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  const keep = (c: Buffer) => {
    out += c.toString();
    if (out.length > 2 * TAIL) out = out.slice(-TAIL);
  };
  child.stdout!.on('data', keep);
  child.stderr!.on('data', keep);
  const p: ServiceProcess = {
    name,
    role,
    child,
    base: role === 'api' ? `http://127.0.0.1:${port}` : undefined,
    peakMiB: 0,
    output: () => out.slice(-TAIL),
    peak: () => (p.peakMiB = Math.max(p.peakMiB, peakRssMiB(child.pid) ?? 0)),
  };
  return p;
}

async function exited(child: ChildProcess, ms: number): Promise<boolean> {
  if (child.exitCode !== null || child.signalCode !== null) return true;
  return Promise.race([new Promise<boolean>((r) => child.once('exit', () => r(true))), sleep(ms).then(() => false)]);
}

export interface ClusterOptions {
  databaseUrl: string;
  redisUrl: string;
  queuePrefix: string;
  /** Extra environment for every process (DATA_DIR, IMAGERY_ROOTS, NODE_EXTRA_CA_CERTS, …). */
  env: Record<string, string>;
}

/** Two (or n) ROLE=api and ROLE=worker processes on one database and one Redis. */
export class Cluster {
  readonly apis: ServiceProcess[] = [];
  readonly workers: ServiceProcess[] = [];
  /** Processes that were killed or replaced, kept for the peak-memory table. */
  readonly retired: ServiceProcess[] = [];
  private readonly probe: Queue;

  constructor(private readonly o: ClusterOptions) {
    const u = new URL(o.redisUrl);
    this.probe = new Queue('reports', {
      connection: { host: u.hostname, port: Number(u.port || 6379), maxRetriesPerRequest: null },
      prefix: `fa:${o.queuePrefix}`,
    });
    this.probe.on('error', () => {});
  }

  private env(): Record<string, string> {
    return {
      ...this.o.env,
      DATABASE_URL: this.o.databaseUrl,
      REDIS_URL: this.o.redisUrl,
      QUEUE_PREFIX: this.o.queuePrefix,
    };
  }

  async start(apis = 2, workers = 2): Promise<void> {
    const starting: Array<Promise<unknown>> = [];
    for (let i = 0; i < apis; i++) starting.push(this.startApi());
    for (let i = 0; i < workers; i++) starting.push(this.startWorker());
    await Promise.all(starting);
  }

  async startApi(): Promise<ServiceProcess> {
    const port = await freePort();
    const p = spawnService(`api-${this.apis.length + 1}`, 'api', this.env(), port);
    this.apis.push(p);
    const ok = await until(async () => (await fetch(`${p.base}/readyz`)).ok || p.child.exitCode !== null, 120_000, 100);
    if (!ok || p.child.exitCode !== null) throw new Error(`${p.name} did not become ready:\n${p.output()}`);
    return p;
  }

  async startWorker(): Promise<ServiceProcess> {
    const before = await this.probe.getWorkersCount().catch(() => 0);
    const metricsPort = await freePort();
    const p = spawnService(
      `worker-${this.workers.length + this.retired.filter((r) => r.role === 'worker').length + 1}`,
      'worker',
      { ...this.env(), METRICS_PORT: String(metricsPort) },
      0,
    );
    this.workers.push(p);
    const ok = await until(
      async () => p.child.exitCode !== null || (await this.probe.getWorkersCount()) > before,
      120_000,
      100,
    );
    if (!ok || p.child.exitCode !== null) throw new Error(`${p.name} did not start consuming:\n${p.output()}`);
    return p;
  }

  /** BullMQ consumers of the `reports` queue on this prefix right now. */
  consumers(): Promise<number> {
    return this.probe.getWorkersCount();
  }

  /** Whether a `reports` job is waiting, delayed or running (the report is queued, not lost). */
  async reportJobPending(jobId: string): Promise<boolean> {
    const job = await this.probe.getJob(jobId);
    return !!job && ['waiting', 'delayed', 'active', 'prioritized'].includes(await job.getState());
  }

  /** SIGKILLs a worker (no goodbye: its jobs stay active until their lock expires). */
  async kill9Worker(index: number): Promise<ServiceProcess> {
    const p = this.workers[index]!;
    p.peak();
    p.child.kill('SIGKILL');
    await exited(p.child, 10_000);
    this.workers.splice(index, 1);
    this.retired.push(p);
    return p;
  }

  /** Samples every live process's VmHWM. */
  sample(): void {
    for (const p of [...this.apis, ...this.workers]) p.peak();
  }

  memoryTable(): Array<{ process: string; role: string; 'peak RSS MiB': string; state: string }> {
    this.sample();
    return [...this.apis, ...this.workers, ...this.retired].map((p) => ({
      process: p.name,
      role: p.role,
      'peak RSS MiB': p.peakMiB.toFixed(0),
      state: this.retired.includes(p)
        ? 'killed'
        : p.child.exitCode !== null || p.child.signalCode !== null
          ? `DIED (${p.child.exitCode ?? p.child.signalCode})`
          : 'running',
    }));
  }

  /** Processes that exited without being told to, each with the end of its output. */
  casualties(): string[] {
    return [...this.apis, ...this.workers]
      .filter((p) => p.child.exitCode !== null || p.child.signalCode !== null)
      .map(
        (p) =>
          `${p.name} exited (${p.child.exitCode ?? p.child.signalCode}); its last output:\n${p.output().slice(-3000)}`,
      );
  }

  /** SIGTERM to everything (SIGKILL after `graceMs`), then the probe connection. */
  async stop(graceMs = 15_000): Promise<void> {
    this.sample();
    const all = [...this.apis, ...this.workers];
    for (const p of all) if (p.child.exitCode === null) p.child.kill('SIGTERM');
    await Promise.all(
      all.map(async (p) => {
        if (!(await exited(p.child, graceMs))) {
          p.child.kill('SIGKILL');
          await exited(p.child, 5000);
        }
      }),
    );
    await this.probe.close().catch(() => {});
  }
}

/** A database of its own on a PostgreSQL server (CREATE DATABASE), dropped by drop(). */
export async function scratchDatabase(
  serverUrl: string,
  name: string,
): Promise<{ url: string; drop(): Promise<void> }> {
  if (!/^[a-z_][a-z0-9_]{0,62}$/.test(name)) throw new Error(`bad database name ${name}`);
  const admin = postgres(serverUrl, { max: 1, onnotice: () => {} });
  await admin.unsafe(`CREATE DATABASE ${name}`);
  const u = new URL(serverUrl);
  u.pathname = `/${name}`;
  return {
    url: u.toString(),
    async drop() {
      await admin
        .unsafe(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`)
        .catch((err) => console.error(`could not drop database ${name}: ${(err as Error).message}`));
      await admin.end({ timeout: 5 });
    },
  };
}

/** Deletes every key under the queue prefix `fa:<prefix>:` (SCAN, never FLUSH: the Redis is shared). */
export async function deleteQueueKeys(redisUrl: string, prefix: string): Promise<number> {
  const redis = new Redis(redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
  redis.on('error', () => {});
  let n = 0;
  try {
    await redis.connect();
    let cursor = '0';
    do {
      const [next, keys] = await redis.scan(cursor, 'MATCH', `fa:${prefix}:*`, 'COUNT', 1000);
      cursor = next;
      if (keys.length) n += await redis.del(...keys);
    } while (cursor !== '0');
  } finally {
    redis.disconnect();
  }
  return n;
}

/** A redis-server of our own (no persistence), which a drill may stop and start on the same port. */
export class PrivateRedis {
  private child: ChildProcess | null = null;
  private constructor(readonly port: number) {}

  static async start(): Promise<PrivateRedis> {
    const r = new PrivateRedis(await freePort());
    await r.up();
    return r;
  }

  get url(): string {
    return `redis://127.0.0.1:${this.port}`;
  }

  async up(): Promise<void> {
    this.child = spawn(
      'redis-server',
      [
        '--port',
        String(this.port),
        '--bind',
        '127.0.0.1',
        '--save',
        '',
        '--appendonly',
        'no',
        '--daemonize',
        'no',
        '--loglevel',
        'warning',
      ],
      { stdio: 'ignore' },
    );
    const ok = await until(
      () =>
        new Promise<boolean>((resolve) => {
          const s = net.connect(this.port, '127.0.0.1', () => {
            s.end();
            resolve(true);
          });
          s.on('error', () => resolve(false));
        }),
      10_000,
      50,
    );
    if (!ok) throw new Error(`redis-server on port ${this.port} did not start`);
  }

  /** Stops the server (SIGTERM; no persistence, so every key is gone). */
  async down(): Promise<void> {
    const c = this.child;
    if (!c) return;
    this.child = null;
    c.kill('SIGTERM');
    if (!(await exited(c, 5000))) {
      c.kill('SIGKILL');
      await exited(c, 5000);
    }
  }
}

/** A throw-away PostgreSQL cluster (initdb into a temp dir, trust auth, loopback only). */
export class PrivatePostgres {
  private constructor(
    readonly dir: string,
    readonly port: number,
    private readonly bin: string,
    private readonly asPostgres: boolean,
    private readonly settings: string[] = [],
  ) {}

  /**
   * `settings`: server options (`-c name=value` each) in place of the drills' default (fsync off:
   * a throw-away cluster need not survive a machine crash).
   */
  static async start(settings = ['fsync=off']): Promise<PrivatePostgres> {
    const versions = execFileSync('sh', ['-c', 'ls -d /usr/lib/postgresql/*/bin 2>/dev/null || true'], {
      encoding: 'utf8',
    })
      .trim()
      .split('\n')
      .filter(Boolean);
    const bin = versions.sort(
      (a, b) => Number(/\/(\d+)\/bin$/.exec(b)?.[1] ?? 0) - Number(/\/(\d+)\/bin$/.exec(a)?.[1] ?? 0),
    )[0];
    if (!bin) throw new Error('no PostgreSQL server binaries under /usr/lib/postgresql/*/bin');
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fa-faults-pg-'));
    const asPostgres = process.getuid?.() === 0; // initdb refuses to run as root
    if (asPostgres) {
      const uid = Number(execFileSync('id', ['-u', 'postgres'], { encoding: 'utf8' }).trim());
      const gid = Number(execFileSync('id', ['-g', 'postgres'], { encoding: 'utf8' }).trim());
      chownSync(dir, uid, gid);
    }
    const pg = new PrivatePostgres(dir, await freePort(), bin, asPostgres, settings);
    try {
      pg.run('initdb', ['-D', path.join(dir, 'data'), '-U', 'postgres', '--auth=trust', '-E', 'UTF8', '--no-sync']);
      await pg.up();
    } catch (err) {
      pg.remove();
      throw err;
    }
    return pg;
  }

  get url(): string {
    return `postgres://postgres@127.0.0.1:${this.port}/postgres`;
  }

  get dataDir(): string {
    return path.join(this.dir, 'data');
  }

  private run(tool: string, args: string[]): void {
    const cmd = path.join(this.bin, tool);
    const [file, argv] = this.asPostgres ? ['runuser', ['-u', 'postgres', '--', cmd, ...args]] : [cmd, args];
    execFileSync(file, argv, { stdio: ['ignore', 'ignore', 'pipe'], timeout: 60_000 });
  }

  async up(): Promise<void> {
    this.run('pg_ctl', [
      '-D',
      path.join(this.dir, 'data'),
      '-l',
      path.join(this.dir, 'log'),
      '-w',
      '-t',
      '60',
      '-o',
      [
        `-p ${this.port} -k ${this.dir} -c listen_addresses=127.0.0.1 -c max_connections=200`,
        ...this.settings.map((s) => `-c ${s}`),
      ].join(' '),
      'start',
    ]);
  }

  /** Fast shutdown: open sessions are ended, in-flight transactions rolled back. */
  async down(): Promise<void> {
    this.run('pg_ctl', ['-D', path.join(this.dir, 'data'), '-m', 'fast', '-w', '-t', '60', 'stop']);
  }

  /** Stops the server if it runs and deletes its directory. */
  remove(): void {
    try {
      this.run('pg_ctl', ['-D', path.join(this.dir, 'data'), '-m', 'immediate', '-w', '-t', '30', 'stop']);
    } catch {
      /* not running */
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}
