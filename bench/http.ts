/**
 * End to end: autocannon against the running service (a child process, embedded database) for a
 * 100 ha field (100 × 100 pixels at 10 m) on synthetic Sentinel-2 captures:
 * - GET indices with zonal statistics, cold (first read of the files, fresh process) and warm;
 * - the framework's limit: Fastify's hello-world answering the same body (bench/hello.ts, a process
 *   started the same way), in rounds alternating with the warm request's, the ratio of their
 *   rates and of their CPU per request (goal ≥ 0.5×, issue 25); BENCH_HTTP_QUICK=1 runs only
 *   these two rows;
 * - the same with the per-pixel GeoJSON, plain and gzip;
 * - a one-year weekly time series over cached statistics;
 * - beside it, the peer: a Python script with rasterio and numpy computing the same statistics for
 *   the same field from the same files (Debian's python3-rasterio), run before and after ours;
 *   our rate ÷ theirs, and PASS/MISS for each target. The service's CPU µs per request (from
 *   /proc) is printed too: it moves less than latency when others load the machine;
 * - starvation: the warm zonal-statistics request's p99 alone, then with HEAVY_CLIENTS clients
 *   asking for per-pixel GeoJSON that no cache holds (from a worker thread, so that their reading
 *   does not delay this thread's clock), in alternating rounds, and the ratio against the goal
 *   (mixed ≤ 2× alone).
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import http from 'node:http';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isMainThread, parentPort, Worker, workerData } from 'node:worker_threads';
import autocannon from 'autocannon';
import { packageRoot } from '../src/platform/paths.js';
import { type Service, startProcess, startService, stopService, registerCaptures } from './service.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../src/imagery/synthetic.js';

async function cannon(url: string, key: string, seconds: number, connections = 4) {
  const r = await autocannon({ url, connections, duration: seconds, headers: { authorization: `Bearer ${key}` } });
  return {
    rps: r.requests.average,
    p50: r.latency.p50,
    p99: r.latency.p99,
    errors: r.errors + r.non2xx,
    total: r.requests.total,
    seconds: r.duration,
  };
}

/**
 * A keep-alive load loop on node:http that reads bodies as bytes: autocannon appends each body to
 * a string, which on gzip (random-looking bytes) costs the client more than the server's work.
 */
async function loop(
  url: string | ((i: number) => string),
  headers: Record<string, string>,
  seconds: number | (() => boolean),
  connections = 4,
) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: connections });
  const lat: number[] = [];
  let errors = 0;
  let shed = 0;
  let bytes = 0;
  let sent = 0;
  const one = () =>
    new Promise<void>((resolve) => {
      const t = performance.now();
      const req = http.get(typeof url === 'string' ? url : url(sent++), { agent, headers }, (res) => {
        let n = 0;
        res.on('data', (c: Buffer) => (n += c.length));
        res.on('end', () => {
          if (res.statusCode === 503) {
            // Load shedding: a client that honours Retry-After (at most 1 s here, to keep the run short).
            shed++;
            setTimeout(resolve, Math.min(1000, Number(res.headers['retry-after'] ?? 1) * 1000));
            return;
          }
          if (res.statusCode !== 200) errors++;
          bytes = n;
          lat.push(performance.now() - t);
          resolve();
        });
      });
      req.on('error', () => {
        errors++;
        resolve();
      });
    });
  const t0 = performance.now();
  const going = typeof seconds === 'number' ? () => performance.now() < t0 + seconds * 1000 : seconds;
  await Promise.all(
    Array.from({ length: connections }, async () => {
      while (going()) await one();
    }),
  );
  const elapsed = (performance.now() - t0) / 1000;
  agent.destroy();
  return { ...summary(lat, elapsed), errors, shed, bytes, lat };
}

/** Rate, median and 99th percentile of latencies (ms) measured over `seconds`. */
function summary(lat: number[], seconds: number) {
  const s = [...lat].sort((a, b) => a - b);
  return {
    rps: s.length / seconds,
    p50: s[Math.floor(s.length * 0.5)] ?? NaN,
    p99: s[Math.floor(s.length * 0.99)] ?? NaN,
    total: s.length,
  };
}

type LoopResult = Awaited<ReturnType<typeof loop>>;

const HEAVY_CLIENTS = 8;
/** Alone and mixed alternate, so that the machine's other load falls on both alike. */
const STARVATION_ROUNDS = 3;
const STARVATION_S = 5;
/** Fields the heavy clients cycle over (× 5 indices × 52 captures: far more than the body cache holds). */
const HEAVY_FIELDS = 5;

/** In a worker thread: `connections` clients cycling through `urls` until the parent says stop. */
if (!isMainThread && workerData?.role === 'heavy-clients') {
  const w = workerData as { urls: string[]; headers: Record<string, string>; connections: number };
  let stop = false;
  parentPort!.once('message', () => (stop = true));
  void loop(
    (i) => w.urls[i % w.urls.length]!,
    w.headers,
    () => !stop,
    w.connections,
  ).then((r) => parentPort!.postMessage(r));
}

/** Starts the heavy clients in a worker thread; `stop()` ends them and returns their figures. */
function heavyClients(
  urls: string[],
  headers: Record<string, string>,
  connections: number,
): { stop(): Promise<LoopResult> } {
  const worker = new Worker(fileURLToPath(import.meta.url), {
    workerData: { role: 'heavy-clients', urls, headers, connections },
  });
  const done = new Promise<LoopResult>((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return {
    async stop() {
      worker.postMessage('stop');
      const r = await done;
      await worker.terminate();
      return r;
    },
  };
}

/** CPU time (user + system, all threads) of a process in ms, from /proc; null elsewhere. */
const ticks = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();
function cpuMs(pid: number): number | null {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / ticks;
  } catch {
    return null;
  }
}

/** Runs `fn` and adds the service's CPU ms per request. */
async function measured<T extends { total: number }>(
  svc: Service,
  fn: () => Promise<T>,
): Promise<T & { cpu: number | null }> {
  const c0 = cpuMs(svc.child.pid!);
  const r = await fn();
  const c1 = cpuMs(svc.child.pid!);
  return { ...r, cpu: c0 !== null && c1 !== null && r.total ? (c1 - c0) / r.total : null };
}

type Measured = Awaited<ReturnType<typeof cannon>> & { cpu: number | null };

/**
 * Rounds of one URL on each process in turn (a, b, a, b, …), so that the machine's other load
 * falls on both alike; per process: the rate over all its rounds, the median of the rounds' p50,
 * the worst round's p99, errors, and the process's CPU ms per request over all its rounds.
 */
async function alternate(
  runs: Array<{ svc: Service; url: string }>,
  key: string,
  rounds: number,
  seconds: number,
): Promise<Measured[]> {
  const got: Measured[][] = runs.map(() => []);
  for (let i = 0; i < rounds; i++)
    for (const [k, r] of runs.entries()) got[k]!.push(await measured(r.svc, () => cannon(r.url, key, seconds)));
  return got.map((rs) => {
    const total = rs.reduce((n, r) => n + r.total, 0);
    const cpus = rs.map((r) => r.cpu);
    const p50s = rs.map((r) => r.p50).sort((a, b) => a - b);
    return {
      rps: total / rs.reduce((n, r) => n + r.seconds, 0),
      p50: p50s[Math.floor(p50s.length / 2)]!,
      p99: Math.max(...rs.map((r) => r.p99)),
      errors: rs.reduce((n, r) => n + r.errors, 0),
      total,
      seconds: rs.reduce((n, r) => n + r.seconds, 0),
      cpu: cpus.every((c) => c !== null) ? rs.reduce((n, r) => n + r.cpu! * r.total, 0) / total : null,
    };
  });
}

interface Peer {
  runs_per_s: number;
  ms_per_run: number;
  mean: number;
  count: number;
}

function runPeer(job: unknown): Peer | null {
  try {
    return JSON.parse(
      execFileSync('/usr/bin/python3', [path.join(packageRoot, 'bench', 'peer_rasterio.py'), JSON.stringify(job)], {
        encoding: 'utf8',
      }),
    );
  } catch (err) {
    console.log(
      `peer skipped: python3-rasterio is not installed (apt-get install python3-rasterio) — ${(err as Error).message.split('\n')[0]}`,
    );
    return null;
  }
}

const TARGET = { warmP99: 50, peerRatio: 5, seriesMs: 20, starvation: 2, helloRatio: 0.5 };
/** The warm request and the framework's hello-world: rounds of each in turn. */
const HELLO_ROUNDS = 3;
const HELLO_S = 4;

const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(1))
    .join(' ');
/** The service's CPU per request in µs (ms/req from `measured` × 1000). */
const cpu = (r: { cpu: number | null }) => (r.cpu === null ? '' : (r.cpu * 1000).toFixed(0));
const row = (what: string, r: { rps: number; p50: number; p99: number; errors: number; cpu: number | null }) => ({
  what,
  'req/s': r.rps.toFixed(0),
  'p50 ms': r.p50.toFixed(1),
  'p99 ms': r.p99.toFixed(1),
  'CPU µs/req': cpu(r),
  errors: r.errors,
});

export default async function httpBench(): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fa-bench-'));
  const port = 21_000 + Math.floor(Math.random() * 10_000);
  try {
    const imgDir = path.join(dataDir, 'imagery', 'bench');
    const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 256, seed: 11 };
    const dates = datesEvery('2025-01-06', '2025-12-29', 7); // a year of weekly captures
    const caps = writeSyntheticSeason(imgDir, spec, dates, '2025-04-01', '2025-09-30');
    const field = sceneField(spec, 100 / 256); // 100 × 100 px of 10 m = 100 ha

    let svc = await startService(dataDir, port);
    const key = /\b(fak_[A-Za-z0-9_-]{43})\b/.exec(svc.output())![1]!;
    const auth = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    const f = (await (
      await fetch(`${svc.base}/v1/fields`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ name: 'bench 100 ha', boundary: field }),
      })
    ).json()) as { id: string; area_ha: number };
    // Fields one pixel smaller each side, for the heavy clients of the starvation row.
    const heavyFields = [f.id];
    for (let k = 1; k < HEAVY_FIELDS; k++) {
      const r = await fetch(`${svc.base}/v1/fields`, {
        method: 'POST',
        headers: auth,
        body: JSON.stringify({ name: `bench heavy ${k}`, boundary: sceneField(spec, (100 - 2 * k) / 256) }),
      });
      heavyFields.push(((await r.json()) as { id: string }).id);
    }
    const ids = await registerCaptures(svc.base, key, caps);
    await stopService(svc);

    // The peer before and after our runs (the machine is shared): the faster of the two counts.
    const job = { B04: caps[26]!.files.B04, B08: caps[26]!.files.B08, SCL: caps[26]!.scl, field, runs: 60 };
    const peers = [process.env.BENCH_HTTP_QUICK ? null : runPeer(job)];

    // Cold: a fresh process, each request the first read of its capture's files.
    svc = await startService(dataDir, port);
    const cold: number[] = [];
    for (let k = 0; k < 10; k++) {
      const t = performance.now();
      const r = await fetch(
        `${svc.base}/v1/fields/${f.id}/indices?index=NDVI&date=${dates[20 + k]}&imagery_id=${ids[20 + k]}&zonal_stats=true&geojson=false`,
        { headers: auth },
      );
      await r.text();
      cold.push(performance.now() - t);
    }
    cold.sort((a, b) => a - b);
    const one = `${svc.base}/v1/fields/${f.id}/indices?index=NDVI&date=${dates[26]}&zonal_stats=true&geojson=false`;
    const sample = (await (await fetch(one, { headers: auth })).json()) as {
      zonal_stats: { mean: number; count: number };
    };
    // The framework's limit: Fastify's hello-world answering this very body (bench/hello.ts).
    const hello = await startProcess('dist/bench/hello.js', port + 1, {
      BENCH_HELLO_BODY: JSON.stringify(sample),
    });
    const helloUrl = `${hello.base}${new URL(one).pathname}${new URL(one).search}`;
    const [warm, helloRun] = (await alternate(
      [
        { svc, url: one },
        { svc: hello, url: helloUrl },
      ],
      key,
      HELLO_ROUNDS,
      HELLO_S,
    )) as [Measured, Measured];
    await stopService(hello);
    const verdict = (ok: boolean) => (ok ? 'PASS' : 'MISS');
    const helloLines = () => {
      const ratio = warm.rps / helloRun.rps;
      const us = (r: Measured) => (r.cpu === null ? '?' : (r.cpu * 1000).toFixed(0));
      console.log(
        `target: warm single-date statistics ≥ ${TARGET.helloRatio}× Fastify's hello-world answering the same body (same run, ${HELLO_ROUNDS} alternating rounds of ${HELLO_S} s, 4 connections): ${warm.rps.toFixed(0)} ÷ ${helloRun.rps.toFixed(0)} req/s = ${ratio.toFixed(2)}× → ${verdict(ratio >= TARGET.helloRatio)}`,
      );
      if (warm.cpu !== null && helloRun.cpu !== null) {
        const cpuRatio = helloRun.cpu / warm.cpu;
        console.log(
          `  by CPU per request of each server process (load-independent): service ${us(warm)} µs, hello-world ${us(helloRun)} µs → ${cpuRatio.toFixed(2)}× → ${verdict(cpuRatio >= TARGET.helloRatio)}`,
        );
      }
    };
    if (process.env.BENCH_HTTP_QUICK) {
      await stopService(svc);
      console.log(`quick run (BENCH_HTTP_QUICK): warm statistics and hello-world only; load average ${loadavg()}`);
      console.table([
        row('GET indices, zonal_stats, warm (autocannon)', warm),
        row("Fastify's hello-world, same body", helloRun),
      ]);
      helloLines();
      return;
    }
    const geoUrl = one.replace('&geojson=false', '');
    await (await fetch(geoUrl, { headers: auth })).arrayBuffer();
    await (await fetch(geoUrl, { headers: { ...auth, 'accept-encoding': 'gzip' } })).arrayBuffer();
    const warmGeo = await measured(svc, () => cannon(geoUrl, key, 6));
    const geoPlain = await measured(svc, () => loop(geoUrl, { authorization: `Bearer ${key}` }, 5));
    const geoGzip = await measured(svc, () =>
      loop(geoUrl, { authorization: `Bearer ${key}`, 'accept-encoding': 'gzip' }, 5),
    );
    const series = `${svc.base}/v1/fields/${f.id}/indices/timeseries?index=NDVI&start_date=2025-01-01&end_date=2025-12-31&interval=weekly&max_cloud_cover=100`;
    await (await fetch(series, { headers: auth })).text(); // fills the statistics cache
    const seriesRun = await measured(svc, () => cannon(series, key, 8));
    const seriesOne = await measured(svc, () => cannon(series, key, 6, 1));
    // Starvation: the cheap request alone, then beside clients asking for GeoJSON that no cache
    // holds (every field × index × capture in turn: far more bodies than GEOJSON_CACHE_MB keeps),
    // in alternating rounds; each phase's latencies pooled.
    const heavyUrls = heavyFields.flatMap((fid) =>
      ['NDVI', 'NDRE', 'EVI', 'SAVI', 'MSAVI2'].flatMap((ix) =>
        ids.map(
          (id, k) =>
            `${svc.base}/v1/fields/${fid}/indices?index=${ix}&date=${dates[k]}&imagery_id=${id}&zonal_stats=true`,
        ),
      ),
    );
    const bearer = { authorization: `Bearer ${key}` };
    const aloneLat: number[] = [];
    const mixedLat: number[] = [];
    const heavyRuns: LoopResult[] = [];
    let heavySent = 0;
    const c0 = cpuMs(svc.child.pid!);
    for (let round = 0; round < STARVATION_ROUNDS; round++) {
      for (const v of (await loop(one, bearer, STARVATION_S)).lat) aloneLat.push(v); // spread overflows the stack past ~120k
      const heavy = heavyClients(
        [...heavyUrls.slice(heavySent), ...heavyUrls.slice(0, heavySent)],
        { ...bearer, 'accept-encoding': 'gzip' },
        HEAVY_CLIENTS,
      );
      await new Promise((r) => setTimeout(r, 500));
      for (const v of (await loop(one, bearer, STARVATION_S)).lat) mixedLat.push(v);
      const h = await heavy.stop();
      heavySent = (heavySent + h.total + h.shed) % heavyUrls.length;
      heavyRuns.push(h);
    }
    const alone = { ...summary(aloneLat, STARVATION_ROUNDS * STARVATION_S), errors: 0, cpu: null };
    const mixed = { ...summary(mixedLat, STARVATION_ROUNDS * STARVATION_S), errors: 0, cpu: null };
    const heavyRun = {
      ...summary(
        heavyRuns.flatMap((h) => h.lat),
        STARVATION_ROUNDS * (STARVATION_S + 0.5),
      ),
      errors: heavyRuns.reduce((n, h) => n + h.errors, 0),
      shed: heavyRuns.reduce((n, h) => n + h.shed, 0),
      cpu: null,
    };
    const starvationCpuS = c0 === null ? null : ((cpuMs(svc.child.pid!) ?? c0) - c0) / 1000;
    await stopService(svc);
    peers.push(runPeer(job));
    const peer = peers.filter((p): p is Peer => !!p).sort((a, b) => b.runs_per_s - a.runs_per_s)[0] ?? null;

    console.log(
      `field ${f.area_ha} ha, ${sample.zonal_stats.count} valid pixels; ${caps.length} weekly captures; NDVI mean ours ${sample.zonal_stats.mean.toFixed(6)}${peer ? `, peer ${peer.mean.toFixed(6)} (${peer.count} px)` : ''}; 4 connections; load average ${loadavg()}`,
    );
    console.table([
      {
        what: 'GET indices, zonal_stats, cold (fresh process, first read of the files; p99 = worst of 10)',
        'req/s': '',
        'p50 ms': cold[4]!.toFixed(1),
        'p99 ms': cold[9]!.toFixed(1),
        'CPU µs/req': '',
        errors: 0,
      },
      row(`GET indices, zonal_stats, warm (autocannon; ${HELLO_ROUNDS} rounds of ${HELLO_S} s)`, warm),
      row(`Fastify's hello-world answering the same body (bench/hello.ts; rounds between those)`, helloRun),
      row('GET indices, zonal_stats + per-pixel GeoJSON, warm (autocannon)', warmGeo),
      row(`  same, node:http client, identity (${(geoPlain.bytes / 1e6).toFixed(2)} MB)`, geoPlain),
      row(`  same, node:http client, gzip (${(geoGzip.bytes / 1e6).toFixed(2)} MB)`, geoGzip),
      row('GET one-year weekly time series (53 intervals), cached statistics (autocannon)', seriesRun),
      row('  same, 1 connection', seriesOne),
      row(
        `GET indices, zonal_stats, warm, alone (node:http client; ${STARVATION_ROUNDS} rounds of ${STARVATION_S} s)`,
        alone,
      ),
      row(
        `  same, beside ${HEAVY_CLIENTS} clients asking for uncached per-pixel GeoJSON (gzip), rounds between those`,
        mixed,
      ),
      row(`  the ${HEAVY_CLIENTS} GeoJSON clients meanwhile (${heavyRun.shed} shed with 503)`, heavyRun),
      ...peers
        .map((p, i) =>
          p
            ? {
                what: `peer: rasterio + numpy, one request = open, read, mask, compute (${i ? 'after' : 'before'} ours)`,
                'req/s': p.runs_per_s.toFixed(0),
                'p50 ms': p.ms_per_run.toFixed(1),
                'p99 ms': '',
                'CPU µs/req': '',
                errors: 0,
              }
            : null,
        )
        .filter((x) => x),
    ]);
    helloLines();
    console.log(
      `target: warm single-date p99 < ${TARGET.warmP99} ms: ${warm.p99.toFixed(1)} ms → ${verdict(warm.p99 < TARGET.warmP99)}`,
    );
    if (peer) {
      const ratio = warm.rps / peer.runs_per_s;
      console.log(
        `target: warm rate ≥ ${TARGET.peerRatio}× the peer's: ours ${warm.rps.toFixed(0)} req/s ÷ peer ${peer.runs_per_s.toFixed(0)} runs/s (faster of its two runs) = ${ratio.toFixed(1)}× → ${verdict(ratio >= TARGET.peerRatio)}`,
      );
      console.log(
        `cold p50 vs one peer run: ${(peer.ms_per_run / cold[4]!).toFixed(2)}× (above 1: our cold request is faster)`,
      );
    } else {
      console.log(`target: warm rate ≥ ${TARGET.peerRatio}× the peer's: not measured (no peer)`);
    }
    for (const [n, r] of [
      [4, seriesRun],
      [1, seriesOne],
    ] as const) {
      console.log(
        `target: one-year weekly series under ${TARGET.seriesMs} ms at ${n} connection${n > 1 ? 's' : ''}: p50 ${r.p50.toFixed(1)} ms, p99 ${r.p99.toFixed(1)} ms → ${verdict(r.p99 < TARGET.seriesMs && r.p50 < TARGET.seriesMs)}`,
      );
    }
    console.log(`GeoJSON gzip: ${(geoPlain.bytes / geoGzip.bytes).toFixed(1)}× fewer bytes`);
    const starved = mixed.p99 / alone.p99;
    console.log(
      `target: warm zonal_stats p99 beside ${HEAVY_CLIENTS} uncached GeoJSON clients ≤ ${TARGET.starvation}× alone: ${alone.p99.toFixed(1)} ms alone, ${mixed.p99.toFixed(1)} ms mixed = ${starved.toFixed(2)}× → ${verdict(starved <= TARGET.starvation)}` +
        ` (service CPU during the starvation rounds ${starvationCpuS === null ? '?' : starvationCpuS.toFixed(1)} s; load average ${loadavg()})`,
    );
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
