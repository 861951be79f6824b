/**
 * Decode benchmark: full-image decode rates (Mpx/s, one thread) of a 4096 × 4096 uint16 GeoTIFF in
 * 512² tiles, DEFLATE and LZW, each with and without the horizontal predictor: ours (raw tiles,
 * node:zlib / WebAssembly LZW and predictor, rows copied into the output array) beside GDAL in the
 * same run (python3-gdal, reopened each run so its block cache does not help) and geotiff.js's
 * readRasters with its default decoders. The files are written by GDAL when it is installed (an
 * independent encoder), else by our own writer.
 *
 * Then the field-window read for a 100 ha field (100 × 100 px at 10 m; B04, B08 and the SCL mask):
 * cold in a fresh process, again with the files open (decode, no window cache), and cached.
 */
import { execFileSync } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fromFile } from 'geotiff';
import { packageRoot } from '../src/platform/paths.js';
import { LocalFileSource } from '../src/imagery/local-source.js';
import { firstImage, openRaster } from '../src/imagery/raster.js';
import { readWindowRaw } from '../src/imagery/raw-window.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../src/imagery/synthetic.js';
import { writeGeoTiff } from '../src/imagery/tiff-writer.js';
import { getWindow, putWindow, windowKey } from '../src/imagery/window-cache.js';
import { readFieldWindow, type CaptureBand, type CaptureSource } from '../src/imagery/window-reader.js';

const SIZE = Number(process.env.BENCH_DECODE_SIZE ?? 4096);
const RUNS = Number(process.env.BENCH_DECODE_RUNS ?? 5);
const TILE = 512;
const TARGET: Record<string, number> = { DEFLATE: 0.6, LZW: 0.5 };

/** Sentinel-2-like digital numbers: parcels of different brightness, a gentle relief, sensor noise. */
function scene(n: number): Uint16Array {
  const out = new Uint16Array(n * n);
  let s = 12345;
  const rand = () => {
    s ^= s << 13;
    s ^= s >>> 17;
    s ^= s << 5;
    return (s >>> 0) / 4294967296;
  };
  const parcel = (cx: number, cy: number) =>
    (Math.imul((cx * 73856093) ^ (cy * 19349663), 0x9e3779b1) >>> 0) / 4294967296;
  for (let y = 0; y < n; y++) {
    for (let x = 0; x < n; x++) {
      const base = 800 + 3000 * parcel(Math.floor(x / 97), Math.floor(y / 131));
      out[y * n + x] = Math.round(base + 200 * Math.sin(x / 300) * Math.cos(y / 250) + (rand() - 0.5) * 80);
    }
  }
  return out;
}

function gdalPython(): string | null {
  for (const py of ['/usr/bin/python3', 'python3']) {
    try {
      execFileSync(py, ['-c', 'from osgeo import gdal'], { stdio: 'ignore' });
      return py;
    } catch {
      /* next */
    }
  }
  return null;
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

/** Seconds per full decode, [wall, CPU] medians. CPU time counts every thread of the process (file reads included). */
async function timeOurs(file: string): Promise<[number, number]> {
  const raster = await firstImage(await openRaster(await LocalFileSource.open(file)));
  const win: [number, number, number, number] = [0, 0, raster.image.getWidth(), raster.image.getHeight()];
  // Like GDAL's side, decoding into one reused output array: the decode is measured, not page faults.
  const into = new Uint16Array(SIZE * SIZE);
  await readWindowRaw(raster, win, 0, { into }); // warm-up: WebAssembly tiers up, the file is in the page cache
  const wall: number[] = [];
  const cpu: number[] = [];
  for (let r = 0; r < RUNS; r++) {
    const c = process.cpuUsage();
    const t = performance.now();
    const out = await readWindowRaw(raster, win, 0, { into });
    wall.push((performance.now() - t) / 1000);
    const u = process.cpuUsage(c);
    cpu.push((u.user + u.system) / 1e6);
    if (!out || out.length !== SIZE * SIZE) throw new Error(`${file}: the fast path did not read the file`);
  }
  return [median(wall), median(cpu)];
}

async function timeGeotiffJs(file: string): Promise<number> {
  const image = await (await fromFile(file)).getImage();
  const t = performance.now();
  await image.readRasters({ samples: [0] });
  return (performance.now() - t) / 1000;
}

async function fieldWindow(dir: string): Promise<void> {
  const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 1024, seed: 5 };
  const [cap] = writeSyntheticSeason(
    path.join(dir, 'scene'),
    spec,
    datesEvery('2025-06-15', '2025-06-15', 1),
    '2025-04-01',
    '2025-09-30',
  );
  const field = sceneField(spec, 100 / 1024);
  const capture: CaptureSource = {
    bands: { B04: { href: cap!.files.B04! }, B08: { href: cap!.files.B08! } },
    mask: { href: cap!.scl, kind: 'scl' },
    scale: 0.0001,
    offset: -0.1,
  };
  const bands: CaptureBand[] = ['B04', 'B08'];
  const roots = [dir];
  // Cold: a fresh process reading the capture for the first time (module load excluded, file open and header parse included).
  const script = `
    const { readFieldWindow } = await import(${JSON.stringify(path.join(packageRoot, 'dist/src/imagery/window-reader.js'))});
    const t = performance.now();
    const w = await readFieldWindow(${JSON.stringify(capture)}, ${JSON.stringify(field)}, ${JSON.stringify(bands)}, { roots: ${JSON.stringify(roots)} });
    console.log(JSON.stringify({ ms: performance.now() - t, px: w.width * w.height, field: w.fieldPixels }));`;
  const colds: Array<{ ms: number; px: number; field: number }> = [];
  for (let k = 0; k < 5; k++)
    colds.push(JSON.parse(execFileSync(process.execPath, ['--input-type=module', '-e', script], { encoding: 'utf8' })));
  const cold = median(colds.map((c) => c.ms));
  // Files open, window decoded again each time (what a request for another field of the same capture costs).
  await readFieldWindow(capture, field, bands, { roots });
  const open: number[] = [];
  for (let k = 0; k < 30; k++) {
    const t = performance.now();
    await readFieldWindow(capture, field, bands, { roots });
    open.push(performance.now() - t);
  }
  // Cached: the per-thread window cache the workers use (key hashing included).
  putWindow(windowKey(capture, field, bands), await readFieldWindow(capture, field, bands, { roots }));
  const cached: number[] = [];
  for (let k = 0; k < 1000; k++) {
    const t = performance.now();
    if (!getWindow(windowKey(capture, field, bands))) throw new Error('window cache miss');
    cached.push(performance.now() - t);
  }
  console.log(
    `\nfield window, 100 ha (${colds[0]!.field} field pixels, window ${colds[0]!.px} px on the 10 m grid; B04, B08 at 10 m, SCL at 20 m; DEFLATE + predictor, 256² tiles):`,
  );
  console.table([
    { read: 'cold: fresh process, first read of the files', 'median ms': cold.toFixed(2) },
    { read: 'files open, decoded again (no window cache)', 'median ms': median(open).toFixed(2) },
    { read: 'cached (window cache hit)', 'median ms': median(cached).toFixed(4) },
  ]);
}

export default async function decodeBench(): Promise<void> {
  const dir = mkdtempSync(path.join(os.tmpdir(), 'fa-decode-'));
  try {
    const py = gdalPython();
    const data = scene(SIZE);
    const cases: Array<{ codec: 'DEFLATE' | 'LZW'; predictor: 1 | 2; file: string }> = [];
    for (const codec of ['DEFLATE', 'LZW'] as const)
      for (const predictor of [1, 2] as const)
        cases.push({ codec, predictor, file: path.join(dir, `${codec}-p${predictor}.tif`) });
    if (py) {
      const raw = path.join(dir, 'scene.u16');
      writeFileSync(raw, data);
      for (const c of cases) {
        execFileSync(py, [
          path.join(packageRoot, 'bench', 'gdal_decode.py'),
          'write',
          raw,
          String(SIZE),
          String(SIZE),
          c.file,
          `COMPRESS=${c.codec}`,
          `PREDICTOR=${c.predictor}`,
          'TILED=YES',
          `BLOCKXSIZE=${TILE}`,
          `BLOCKYSIZE=${TILE}`,
        ]);
      }
    } else {
      console.log('GDAL NOT FOUND: no python3 with osgeo (python3-gdal), so there is no GDAL column and no ratio.');
      console.log(
        '  Install it with: apt-get install gdal-bin python3-gdal   (the files below are written by our own writer)',
      );
      for (const c of cases) {
        writeFileSync(
          c.file,
          writeGeoTiff({
            width: SIZE,
            height: SIZE,
            data,
            epsg: 32632,
            originX: 500000,
            originY: 5600000,
            resolution: 10,
            tileSize: TILE,
            predictor: c.predictor === 2,
            compression: c.codec === 'LZW' ? 'lzw' : 'deflate',
          }),
        );
      }
    }
    const mpx = (s: number) => (SIZE * SIZE) / s / 1e6;
    const fmt = (x: number, d = 0) => (Number.isNaN(x) ? 'n/a' : x.toFixed(d));
    const rows = [];
    for (const c of cases) {
      // GDAL and ours alternate on each file, three rounds each, so that both see the same load.
      const g: Array<[number, number]> = [];
      const o: Array<[number, number]> = [];
      for (let round = 0; round < 3; round++) {
        if (py)
          g.push(
            JSON.parse(
              execFileSync(py, [path.join(packageRoot, 'bench', 'gdal_decode.py'), 'time', String(RUNS), c.file], {
                encoding: 'utf8',
              }),
            )[c.file],
          );
        o.push(await timeOurs(c.file));
      }
      const oursWall = mpx(median(o.map((x) => x[0])));
      const oursCpu = mpx(median(o.map((x) => x[1])));
      const [gWall, gCpu] = py ? [mpx(median(g.map((x) => x[0]))), mpx(median(g.map((x) => x[1])))] : [NaN, NaN];
      const js = process.env.BENCH_SKIP_GEOTIFFJS ? NaN : mpx(await timeGeotiffJs(c.file));
      const ratio = oursCpu / gCpu;
      rows.push({
        file: `${c.codec}${c.predictor === 2 ? ' + predictor 2' : ''}`,
        'ours Mpx/s (wall)': fmt(oursWall),
        'GDAL Mpx/s (wall)': fmt(gWall),
        'ours Mpx/s (CPU)': fmt(oursCpu),
        'GDAL Mpx/s (CPU)': fmt(gCpu),
        'ours ÷ GDAL wall': fmt(oursWall / gWall, 2),
        'ours ÷ GDAL CPU': fmt(ratio, 2),
        target: `≥ ${TARGET[c.codec]}`,
        met: Number.isNaN(ratio)
          ? 'n/a'
          : ratio >= TARGET[c.codec]! && oursWall / gWall >= TARGET[c.codec]!
            ? 'yes'
            : 'NO',
        'geotiff.js default Mpx/s (wall)': Number.isNaN(js) ? 'skipped' : js.toFixed(1),
      });
    }
    console.log(
      `full-image decode, ${SIZE}×${SIZE} uint16, ${TILE}² tiles, files written by ${py ? 'GDAL' : 'our writer'}; one thread; GDAL and ours alternating, 3 rounds of ${RUNS} runs, medians (geotiff.js: one run); Mpx/s per second of wall-clock and per CPU-second; met = both ratios reach the target`,
    );
    console.table(rows);
    await fieldWindow(dir);
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}
