/**
 * Batch statistics (issue 22): `npm run bench -- batch`. The demo season (the demo scene, its 29
 * captures every 6 days) written and registered in a service started as a user starts it
 * (bench/service.ts, embedded default, 2 compute threads); then, in a fresh service process each,
 * jobs of 100, 1,000 and 10,000 ad-hoc parcels (quadrilaterals of 1–50 ha, random in size, aspect,
 * rotation and place over the scene, so they overlap) × NDVI × weekly intervals over the season.
 * Per size: parcels × intervals per second, seconds from POST to ready, the service's CPU seconds,
 * bytes it read (rchar: every read() of the files, page cache included; read_bytes: from the disk)
 * and its peak RSS (VmHWM). Beside it, in the same run, a rasterio + numpy loop over the same
 * parcels and files (bench/peer_rasterio.py batch): per parcel, per capture, read the window,
 * mask, NDVI statistics — what a Python script over rasterio does. BATCH_BENCH_SIZES and
 * BATCH_BENCH_PEER_SIZES (comma lists) shorten a run while iterating.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { DEMO_DATES, DEMO_SCENE, DEMO_SEASON } from '../src/imagery/demo.js';
import { toWgs84 } from '../src/imagery/crs.js';
import { writeSyntheticSeason } from '../src/imagery/synthetic.js';
import { packageRoot } from '../src/platform/paths.js';
import { type Service, startService, stopService, registerCaptures } from './service.js';

const GOAL = { vsRasterio: 20, seconds10k: 60, rssGrowth: 1.2 };
const sizes = (v: string | undefined, d: number[]) => (v ? v.split(',').map(Number) : d);
const SIZES = sizes(process.env.BATCH_BENCH_SIZES, [100, 1000, 10_000]);
const PEER_SIZES = sizes(process.env.BATCH_BENCH_PEER_SIZES, [100, 1000]);
const RANGE = { start_date: DEMO_DATES[0]!, end_date: DEMO_DATES[DEMO_DATES.length - 1]! };
const WEEKS = Math.floor((Date.parse(RANGE.end_date) - Date.parse(RANGE.start_date)) / 86_400_000 / 7) + 1;

const ticks = (() => {
  try {
    return Number(execFileSync('getconf', ['CLK_TCK'], { encoding: 'utf8' }).trim()) || 100;
  } catch {
    return 100;
  }
})();

/** CPU seconds (user + system, every thread), bytes read and peak RSS of a process, from /proc. */
function procStats(pid: number): { cpuS: number; rchar: number; readBytes: number; hwmMb: number } {
  const stat = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1]!.split(' ');
  const io = Object.fromEntries(
    readFileSync(`/proc/${pid}/io`, 'utf8')
      .trim()
      .split('\n')
      .map((l) => l.split(': ') as [string, string]),
  );
  const hwm = /VmHWM:\s+(\d+) kB/.exec(readFileSync(`/proc/${pid}/status`, 'utf8'))![1]!;
  return {
    cpuS: (Number(stat[11]) + Number(stat[12])) / ticks,
    rchar: Number(io.rchar),
    readBytes: Number(io.read_bytes),
    hwmMb: Number(hwm) / 1024,
  };
}

/** Deterministic parcels of 1–50 ha inside the scene, each a rotated rectangle, in WGS84. */
function parcels(n: number, seed = 22) {
  let s = seed >>> 0;
  const rand = () => {
    s = (Math.imul(s, 1_664_525) + 1_013_904_223) >>> 0;
    return s / 4_294_967_296;
  };
  const inv = toWgs84(DEMO_SCENE.epsg);
  const ext = DEMO_SCENE.size * 10;
  const out = [];
  for (let i = 0; i < n; i++) {
    const ha = 1 + 49 * rand() ** 2; // more small parcels than large ones
    const aspect = 1 + 2 * rand();
    const w = Math.sqrt((ha * 10_000) / aspect);
    const h = w * aspect;
    const a = rand() * Math.PI;
    const r = Math.hypot(w, h) / 2;
    const cx = r + rand() * Math.max(1, ext - 2 * r);
    const cy = r + rand() * Math.max(1, ext - 2 * r);
    const corner = (dx: number, dy: number): [number, number] =>
      inv([
        DEMO_SCENE.originX + cx + dx * Math.cos(a) - dy * Math.sin(a),
        DEMO_SCENE.originY - cy - (dx * Math.sin(a) + dy * Math.cos(a)),
      ]);
    const ring = [corner(-w / 2, -h / 2), corner(w / 2, -h / 2), corner(w / 2, h / 2), corner(-w / 2, h / 2)];
    out.push({
      type: 'Feature' as const,
      id: `p${i}`,
      properties: {},
      geometry: { type: 'Polygon' as const, coordinates: [[...ring, ring[0]!]] },
    });
  }
  return out;
}

const verdict = (ok: boolean) => (ok ? 'PASS' : 'MISS');
const mb = (b: number) => (b / 1_048_576).toFixed(1);

export default async function batchBench(): Promise<void> {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'bench-batch-'));
  const port = 3900 + Math.floor(Math.random() * 500);
  let svc: Service | undefined;
  try {
    const imgDir = path.join(dataDir, 'imagery', 'bench');
    const caps = writeSyntheticSeason(imgDir, DEMO_SCENE, DEMO_DATES, DEMO_SEASON.planting, DEMO_SEASON.harvest, {
      deflateLevel: 1,
    });
    svc = await startService(dataDir, port, { COMPUTE_THREADS: '2' }, 300_000);
    const key = /\b(fak_[A-Za-z0-9_-]{43})\b/.exec(svc.output())![1]!;
    const json = { authorization: `Bearer ${key}`, 'content-type': 'application/json' };
    await registerCaptures(svc.base, key, caps);
    await stopService(svc);
    svc = undefined;
    console.log(
      `demo scene ${DEMO_SCENE.size * 10} m square (${DEMO_SCENE.size}² px at 10 m), ${caps.length} captures ${RANGE.start_date}..${RANGE.end_date}, ${WEEKS} weekly intervals; NDVI; 2 compute threads; load average ${os
        .loadavg()
        .map((x) => x.toFixed(1))
        .join(' ')}`,
    );

    const ours = new Map<number, { s: number; cpuS: number; rows: number; rssMb: number }>();
    const peer = new Map<number, number>();
    for (const n of SIZES) {
      const features = parcels(n);
      const areaHa = features.reduce((a, f) => a + polygonHa(f.geometry.coordinates[0]!), 0);
      svc = await startService(dataDir, port, { COMPUTE_THREADS: '2' }, 300_000);
      const pid = svc.child.pid!;
      const before = procStats(pid);
      const t0 = performance.now();
      const res = await fetch(`${svc.base}/v1/batch/statistics`, {
        method: 'POST',
        headers: json,
        body: JSON.stringify({
          features: { type: 'FeatureCollection', features },
          indices: ['NDVI'],
          ...RANGE,
          interval: 'weekly',
          format: 'csv',
        }),
      });
      if (res.status !== 202) throw new Error(`POST: ${res.status} ${await res.text()}`);
      const id = ((await res.json()) as { id: string }).id;
      const tPosted = performance.now();
      let job: Record<string, any>;
      for (;;) {
        job = (await (await fetch(`${svc.base}/v1/batch/statistics/${id}`, { headers: json })).json()) as Record<
          string,
          any
        >;
        if (['ready', 'failed', 'cancelled'].includes(job.status)) break;
        await new Promise((r) => setTimeout(r, 100));
      }
      const s = (performance.now() - t0) / 1000;
      const after = procStats(pid);
      if (job.status !== 'ready') throw new Error(`job ${job.status}: ${job.error}`);
      const file = await (await fetch(job.download_url)).text();
      const rows = file.split('\n').length - 2;
      if (rows !== n * WEEKS) throw new Error(`${rows} rows, expected ${n * WEEKS}`);
      ours.set(n, { s, cpuS: after.cpuS - before.cpuS, rows, rssMb: after.hwmMb });
      console.log(
        `  ours ${String(n).padStart(6)} parcels (${(areaHa / n).toFixed(1)} ha mean): ${s.toFixed(2)} s (POST ${((tPosted - t0) / 1000).toFixed(2)} s), ` +
          `${((n * WEEKS) / s).toFixed(0)} parcels×weeks/s, service CPU ${(after.cpuS - before.cpuS).toFixed(1)} s, ` +
          `read ${mb(after.rchar - before.rchar)} MB (disk ${mb(after.readBytes - before.readBytes)} MB), peak RSS ${after.hwmMb.toFixed(0)} MB, file ${mb(file.length)} MB`,
      );
      await stopService(svc);
      svc = undefined;
      if (PEER_SIZES.includes(n)) {
        const jobFile = path.join(dataDir, `peer-${n}.json`);
        writeFileSync(
          jobFile,
          JSON.stringify({
            mode: 'batch',
            parcels: features.map((f) => f.geometry),
            captures: caps.map((c) => ({ date: c.date, B04: c.files.B04, B08: c.files.B08, SCL: c.scl })),
          }),
        );
        const out = JSON.parse(
          execFileSync('/usr/bin/python3', [path.join(packageRoot, 'bench', 'peer_rasterio.py'), `@${jobFile}`], {
            encoding: 'utf8',
            maxBuffer: 64 * 1_048_576,
          }),
        ) as { seconds: number; cpu_seconds: number; peak_rss_mb: number; means: Record<string, number> };
        peer.set(n, out.seconds);
        // The same numbers: our rows' means against rasterio's for the same parcel and capture.
        let maxDiff = 0;
        let compared = 0;
        for (const line of file.split('\n').slice(1)) {
          const c = line.split(',');
          if (c.length < 10 || c[5] === '') continue;
          const want = out.means[`${c[0]}|${c[4]}`];
          if (want === undefined) continue;
          maxDiff = Math.max(maxDiff, Math.abs(Number(c[9]) - want));
          compared++;
        }
        console.log(
          `  rasterio ${String(n).padStart(4)} parcels × ${caps.length} captures: ${out.seconds.toFixed(2)} s, CPU ${out.cpu_seconds.toFixed(1)} s, peak RSS ${out.peak_rss_mb.toFixed(0)} MB; ` +
            `ours ${(out.seconds / s).toFixed(1)}× faster; means of ${compared} rows within ${maxDiff.toExponential(1)} of rasterio's`,
        );
      }
    }

    console.log('goals:');
    const k1 = ours.get(1000);
    const p1 = peer.get(1000);
    if (k1 && p1)
      console.log(
        `  ≥ ${GOAL.vsRasterio}× the rasterio loop at 1,000 parcels: ${(p1 / k1.s).toFixed(1)}× (wall), ${verdict(p1 / k1.s >= GOAL.vsRasterio)}`,
      );
    const k10 = ours.get(10_000);
    if (k1 && k10) {
      const growth = k10.s / k1.s;
      console.log(
        `  time no worse than linear 1,000 → 10,000: ×${growth.toFixed(1)} wall, ×${(k10.cpuS / k1.cpuS).toFixed(1)} CPU for ×10 parcels, ${verdict(growth <= 10)}`,
      );
      console.log(
        `  10,000 parcels × ${WEEKS} weeks < ${GOAL.seconds10k} s: ${k10.s.toFixed(1)} s, ${verdict(k10.s < GOAL.seconds10k)}`,
      );
    }
    // Peak RSS of the service process (the only one: embedded database and queue, 2 compute
    // threads) at 10,000 parcels against 1,000 (else the largest size against the next smaller
    // one of at least 1,000): "independent of the parcel count" is within 20 % for ×10 parcels.
    const big = [...ours.keys()].sort((a, b) => b - a);
    const base = big.includes(1000) && big[0]! > 1000 ? 1000 : big.find((n) => n >= 1000 && n < big[0]!);
    if (base !== undefined) {
      const a = ours.get(base)!;
      const b = ours.get(big[0]!)!;
      console.log(
        `  peak RSS independent of the parcel count (service process at ${big[0]} ≤ ${GOAL.rssGrowth}× at ${base} parcels): ` +
          `${a.rssMb.toFixed(0)} → ${b.rssMb.toFixed(0)} MB, ×${(b.rssMb / a.rssMb).toFixed(2)}, ${verdict(b.rssMb <= GOAL.rssGrowth * a.rssMb)}`,
      );
    }
    console.log(`  load average at the end ${os.loadavg()[0]!.toFixed(1)}`);
  } finally {
    if (svc) await stopService(svc);
    rmSync(dataDir, { recursive: true, force: true });
  }
}

/** Planar area of a lon/lat ring in ha (equirectangular at its latitude: enough for a label). */
function polygonHa(ring: Array<[number, number]>): number {
  const lat = (ring[0]![1] * Math.PI) / 180;
  const kx = 111_320 * Math.cos(lat);
  const ky = 110_540;
  let a = 0;
  for (let i = 0; i + 1 < ring.length; i++)
    a += ring[i]![0] * kx * ring[i + 1]![1] * ky - ring[i + 1]![0] * kx * ring[i]![1] * ky;
  return Math.abs(a) / 2 / 10_000;
}
