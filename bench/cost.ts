/**
 * What a request costs, independent of how loaded the machine is: CPU time of the service
 * processes (api, worker), of the PostgreSQL processes serving the bench (the backends of its
 * database; every process of a private cluster) and of redis-server, read from /proc/<pid>/stat
 * (utime + stime, threads included) before and after a window, divided by the requests answered
 * in it; and the work they asked of the servers: PostgreSQL transactions (pg_stat_database of the
 * bench's database), statements (pg_stat_statements, where the server preloads it) and Redis
 * commands (INFO commandstats; on a shared server these count every client of it).
 */
import { execFileSync } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import { Redis } from 'ioredis';
import type { Database } from '../src/platform/database.js';

const TICK_MS = (() => {
  try {
    return 1000 / Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim());
  } catch {
    return 10;
  }
})();

/** utime + stime of a process (all its threads) in ms, or null when it is gone. */
export function cpuMs(pid: number): number | null {
  try {
    const s = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * TICK_MS;
  } catch {
    return null;
  }
}

/** Pids whose parent is `ppid` (the processes a postmaster forked). */
export function childrenOf(ppid: number): number[] {
  const out: number[] = [];
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const s = readFileSync(`/proc/${d}/stat`, 'utf8');
      const f = s.slice(s.lastIndexOf(')') + 2).split(' ');
      if (Number(f[1]) === ppid) out.push(Number(d));
    } catch {
      /* gone */
    }
  }
  return out;
}

export type Group = 'api' | 'worker' | 'postgres' | 'redis';

export interface CostSources {
  /** Pids per group, asked anew at every snapshot (backends come and go). */
  pids(): Promise<Record<Group, number[]>>;
  db: Database;
  database: string;
  /** pg_stat_statements is loaded (a private cluster started with it). */
  statements: boolean;
  redisUrl: string;
  /** The Redis server serves only this bench (its commandstats are the bench's). */
  privateRedis: boolean;
}

interface Snapshot {
  at: number;
  /** This process: the load generator and the webhook receivers. */
  bench: number;
  cpu: Map<number, { group: Group; ms: number }>;
  xacts: number;
  commands: Map<string, number>;
}

export interface Cost {
  seconds: number;
  requests: number;
  /** CPU ms per request by group, idle background subtracted. */
  cpuPerReq: Record<Group, number>;
  totalPerReq: number;
  /** CPU ms per request of the bench process itself (autocannon, the HTTPS receivers). */
  benchPerReq: number;
  xactsPerReq: number;
  commandsPerReq: number;
  topCommands: Array<[string, number]>;
  topStatements: Array<{ query: string; callsPerReq: number; msPerReq: number }>;
  statementsPerReq: number | null;
}

export class CostMeter {
  private redis: Redis;
  /** CPU ms per second of each group with no load (timers, polls), subtracted from windows. */
  private idle: Record<Group, number> = { api: 0, worker: 0, postgres: 0, redis: 0 };

  constructor(private readonly s: CostSources) {
    this.redis = new Redis(s.redisUrl, { maxRetriesPerRequest: 1, lazyConnect: true });
    this.redis.on('error', () => {});
  }

  async snapshot(): Promise<Snapshot> {
    const pids = await this.s.pids();
    const cpu = new Map<number, { group: Group; ms: number }>();
    for (const [group, list] of Object.entries(pids) as Array<[Group, number[]]>) {
      for (const pid of list) {
        const ms = cpuMs(pid);
        if (ms !== null) cpu.set(pid, { group, ms });
      }
    }
    const [x] = await this.s.db.query<{ n: number }>(
      'SELECT xact_commit::float8 + xact_rollback::float8 AS n FROM pg_stat_database WHERE datname = $1',
      [this.s.database],
    );
    const commands = new Map<string, number>();
    try {
      if (this.redis.status === 'wait') await this.redis.connect();
      const info = await this.redis.info('commandstats');
      for (const m of info.matchAll(/^cmdstat_([^:]+):calls=(\d+)/gm)) commands.set(m[1]!, Number(m[2]));
    } catch {
      /* no figures */
    }
    const own = process.cpuUsage();
    return { at: performance.now(), bench: (own.user + own.system) / 1000, cpu, xacts: x?.n ?? 0, commands };
  }

  /** Clears pg_stat_statements (private cluster only). */
  async resetStatements(): Promise<void> {
    if (this.s.statements) await this.s.db.query('SELECT pg_stat_statements_reset()');
  }

  private cpuDelta(a: Snapshot, b: Snapshot): Record<Group, number> {
    const out: Record<Group, number> = { api: 0, worker: 0, postgres: 0, redis: 0 };
    for (const [pid, e] of b.cpu) out[e.group] += e.ms - (a.cpu.get(pid)?.ms ?? 0);
    return out;
  }

  /** Measures the idle background over `ms` (call before any load). */
  async measureIdle(ms: number): Promise<Record<Group, number>> {
    const a = await this.snapshot();
    await new Promise((r) => setTimeout(r, ms));
    const b = await this.snapshot();
    const d = this.cpuDelta(a, b);
    const s = (b.at - a.at) / 1000;
    for (const g of Object.keys(d) as Group[]) this.idle[g] = d[g] / s;
    return this.idle;
  }

  async cost(a: Snapshot, b: Snapshot, requests: number): Promise<Cost> {
    const seconds = (b.at - a.at) / 1000;
    const d = this.cpuDelta(a, b);
    const n = Math.max(1, requests);
    const cpuPerReq = { api: 0, worker: 0, postgres: 0, redis: 0 } as Record<Group, number>;
    for (const g of Object.keys(d) as Group[]) cpuPerReq[g] = Math.max(0, d[g] - this.idle[g] * seconds) / n;
    const commands: Array<[string, number]> = [];
    for (const [k, v] of b.commands) {
      const dv = v - (a.commands.get(k) ?? 0);
      if (dv > 0) commands.push([k, dv / n]);
    }
    commands.sort((x, y) => y[1] - x[1]);
    let topStatements: Cost['topStatements'] = [];
    let statementsPerReq: number | null = null;
    if (this.s.statements) {
      const rows = await this.s.db.query<{ query: string; calls: number; ms: number }>(
        `SELECT s.query, s.calls::float8 AS calls, s.total_exec_time AS ms
           FROM pg_stat_statements s JOIN pg_database d ON d.oid = s.dbid
          WHERE d.datname = $1 AND s.query NOT LIKE '%pg_stat_statements%' AND s.query NOT LIKE '%pg_stat_database%'
          ORDER BY s.total_exec_time DESC`,
        [this.s.database],
      );
      statementsPerReq = rows.reduce((t, r) => t + r.calls, 0) / n;
      topStatements = rows
        .filter((r) => !/^(BEGIN|COMMIT|ROLLBACK)/i.test(r.query.trim()))
        .slice(0, 6)
        .map((r) => ({
          query: r.query.replace(/\s+/g, ' ').slice(0, 90),
          callsPerReq: r.calls / n,
          msPerReq: r.ms / n,
        }));
    }
    return {
      seconds,
      requests,
      cpuPerReq,
      totalPerReq: cpuPerReq.api + cpuPerReq.worker + cpuPerReq.postgres + cpuPerReq.redis,
      benchPerReq: (b.bench - a.bench) / n,
      xactsPerReq: (b.xacts - a.xacts) / n,
      commandsPerReq: commands.reduce((t, c) => t + c[1], 0),
      topCommands: commands.slice(0, 6),
      topStatements,
      statementsPerReq,
    };
  }

  close(): void {
    this.redis.disconnect();
  }
}

/** The pids of a PostgreSQL cluster: its postmaster and every process it forked. */
export function clusterPids(dataDir: string): number[] {
  try {
    const pm = Number(readFileSync(`${dataDir}/postmaster.pid`, 'utf8').split('\n')[0]);
    return [pm, ...childrenOf(pm)];
  } catch {
    return [];
  }
}

/** The pid of the redis-server listening on `port`, found by its command line. */
export function redisPid(port: number): number | null {
  for (const d of readdirSync('/proc')) {
    if (!/^\d+$/.test(d)) continue;
    try {
      const cmd = readFileSync(`/proc/${d}/cmdline`, 'utf8').split('\0');
      if (!/redis-server/.test(cmd[0] ?? '')) continue;
      if (cmd.join(' ').includes(`:${port}`) || cmd.includes(String(port))) return Number(d);
    } catch {
      /* gone */
    }
  }
  return null;
}
