/**
 * End to end: autocannon against the running service (a child process, embedded database) for a
 * 100 ha field (100 × 100 pixels at 10 m) on synthetic Sentinel-2 captures:
 * - GET indices with zonal statistics, cold (first read of the files, fresh process) and warm;
 * - a one-year weekly time series over cached statistics;
 * - beside it, the peer: a Python script with rasterio and numpy computing the same statistics for
 *   the same field from the same files (Debian's python3-rasterio); our rate ÷ theirs.
 */
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import autocannon from 'autocannon';
import { packageRoot } from '../src/platform/paths.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../src/imagery/synthetic.js';

interface Service {
  child: ChildProcess;
  base: string;
  output: () => string;
}

async function startService(dataDir: string, port: number): Promise<Service> {
  const child = spawn(process.execPath, [path.join(packageRoot, 'dist/src/main.js')], {
    env: { ...process.env, PORT: String(port), DATA_DIR: dataDir, DATABASE_URL: '', REDIS_URL: '', DEMO: 'false', LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const base = `http://127.0.0.1:${port}`;
  for (let i = 0; i < 600; i++) {
    try {
      if ((await fetch(`${base}/readyz`)).ok) return { child, base, output: () => out };
    } catch {
      /* starting */
    }
    await new Promise((r) => setTimeout(r, 100));
  }
  throw new Error(`service did not start:\n${out}`);
}

async function stop(s: Service): Promise<void> {
  s.child.kill('SIGTERM');
  await new Promise((r) => s.child.once('exit', r));
}

async function cannon(url: string, key: string, seconds: number, connections = 4) {
  const r = await autocannon({ url, connections, duration: seconds, headers: { authorization: `Bearer ${key}` } });
  return { rps: r.requests.average, p50: r.latency.p50, p99: r.latency.p99, errors: r.errors + r.non2xx };
}

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
    const f = await (await fetch(`${svc.base}/v1/fields`, { method: 'POST', headers: auth, body: JSON.stringify({ name: 'bench 100 ha', boundary: field }) })).json() as { id: string; area_ha: number };
    const ids: string[] = [];
    for (const c of caps) {
      const r = await fetch(`${svc.base}/v1/imagery`, { method: 'POST', headers: auth, body: JSON.stringify({ source: 'sentinel-2-l2a', capture_date: c.date, bands: c.files, mask: { href: c.scl, kind: 'scl' }, scale: 0.0001, offset: -0.1 }) });
      ids.push(((await r.json()) as { id: string }).id);
    }
    await stop(svc);

    // Cold: a fresh process, each request the first read of its capture's files.
    svc = await startService(dataDir, port);
    const cold: number[] = [];
    for (let k = 0; k < 10; k++) {
      const t = performance.now();
      const r = await fetch(`${svc.base}/v1/fields/${f.id}/indices?index=NDVI&date=${dates[20 + k]}&imagery_id=${ids[20 + k]}&zonal_stats=true&geojson=false`, { headers: auth });
      await r.text();
      cold.push(performance.now() - t);
    }
    cold.sort((a, b) => a - b);
    const one = `${svc.base}/v1/fields/${f.id}/indices?index=NDVI&date=${dates[26]}&zonal_stats=true&geojson=false`;
    const sample = (await (await fetch(one, { headers: auth })).json()) as { zonal_stats: { mean: number; count: number } };
    const warm = await cannon(one, key, 8);
    const warmGeo = await cannon(one.replace('&geojson=false', ''), key, 6);
    const series = `${svc.base}/v1/fields/${f.id}/indices/timeseries?index=NDVI&start_date=2025-01-01&end_date=2025-12-31&interval=weekly&max_cloud_cover=100`;
    await (await fetch(series, { headers: auth })).text(); // fills the statistics cache
    const seriesRun = await cannon(series, key, 6);
    await stop(svc);

    let peer: { runs_per_s: number; ms_per_run: number; mean: number; count: number } | null = null;
    try {
      const job = { B04: caps[26]!.files.B04, B08: caps[26]!.files.B08, SCL: caps[26]!.scl, field, runs: 60 };
      peer = JSON.parse(execFileSync('/usr/bin/python3', [path.join(packageRoot, 'bench', 'peer_rasterio.py'), JSON.stringify(job)], { encoding: 'utf8' }));
    } catch (err) {
      console.log(`peer skipped: python3-rasterio is not installed (apt-get install python3-rasterio) — ${(err as Error).message.split('\n')[0]}`);
    }

    console.log(`field ${f.area_ha} ha, ${sample.zonal_stats.count} valid pixels; ${caps.length} weekly captures; NDVI mean ours ${sample.zonal_stats.mean.toFixed(6)}${peer ? `, peer ${peer.mean.toFixed(6)} (${peer.count} px)` : ''}`);
    console.table([
      { what: 'GET indices, zonal_stats, cold (fresh process, first read of the files)', 'req/s': '', 'p50 ms': cold[4]!.toFixed(1), 'p99 ms': cold[9]!.toFixed(1), errors: 0 },
      { what: 'GET indices, zonal_stats, warm', 'req/s': warm.rps.toFixed(0), 'p50 ms': warm.p50.toFixed(1), 'p99 ms': warm.p99.toFixed(1), errors: warm.errors },
      { what: 'GET indices, zonal_stats + per-pixel GeoJSON, warm', 'req/s': warmGeo.rps.toFixed(0), 'p50 ms': warmGeo.p50.toFixed(1), 'p99 ms': warmGeo.p99.toFixed(1), errors: warmGeo.errors },
      { what: 'GET one-year weekly time series, cached statistics', 'req/s': seriesRun.rps.toFixed(0), 'p50 ms': seriesRun.p50.toFixed(1), 'p99 ms': seriesRun.p99.toFixed(1), errors: seriesRun.errors },
      ...(peer ? [{ what: 'peer: rasterio + numpy, one request = open, read, mask, compute', 'req/s': peer.runs_per_s.toFixed(0), 'p50 ms': peer.ms_per_run.toFixed(1), 'p99 ms': '', errors: 0 }] : []),
    ]);
    if (peer) console.log(`ours (warm) ÷ peer: ${(warm.rps / peer.runs_per_s).toFixed(1)}×; ours (cold p50) vs peer per request: ${(peer.ms_per_run / cold[4]!).toFixed(2)}× faster`);
  } finally {
    rmSync(dataDir, { recursive: true, force: true });
  }
}
