/**
 * The compute threads' entry (Piscina `filename`, dist/src/threads/compute-worker.js): it wires the
 * kernel (compute/) to the imagery readers, so it lives in the composition layer. One Kernel per
 * thread, instantiated and warmed up when the thread starts (V8 keeps fresh WebAssembly on its
 * baseline compiler for a while; a warm-up pass gets the optimised code in before the first
 * request, the per-formula JIT modules of the common layouts included).
 */
import { execFileSync } from 'node:child_process';
import { readlinkSync } from 'node:fs';
import os from 'node:os';
import { gzipSync } from 'node:zlib';
import { parentPort, workerData } from 'node:worker_threads';
import { move, transferableSymbol, valueSymbol } from 'piscina';
import { compileFormula } from '../compute/formula.js';
import { Kernel, ORDER_PS, orderFrom, type Stats } from '../compute/kernel-host.js';
import { histogramOf, weightedPercentilesBySelection, weightedStats } from '../compute/zonal.js';
import type {
  CoverageBatchResult,
  CoverageBatchTask as AnyCoverageBatchTask,
  CoverageResult,
  CoverageTask as AnyCoverageTask,
  FieldIndexResult,
  FieldIndexTask as AnyFieldIndexTask,
  FieldRasterResult,
  FieldRasterTask as AnyFieldRasterTask,
  FieldStatsBatchResult,
  FieldStatsBatchTask as AnyFieldStatsBatchTask,
  GzipTask,
  IndexResult,
  IndexTask,
  InspectTask as AnyInspectTask,
  MaskRequest,
  PingTask,
} from '../compute/tasks.js';
import type { Boundary } from '../fields/boundary.js';
// The readers themselves, not the imagery entry: a thread loads no service, database or HTTP code.
import { inspectCapture } from '../imagery/inspect.js';
import {
  coverageBands,
  readFieldCoverages,
  readFieldWindow,
  touchedWeights,
  readFieldWindows,
  type GroupWindows,
  type CaptureBand,
  type CaptureSource,
  type FieldWindow,
} from '../imagery/window-reader.js';
import { registerFastDecoders } from '../imagery/decoders.js';
import { getWindow, putWindow, windowKey } from '../imagery/window-cache.js';
import { pixelGeoJson } from '../imagery/pixel-geojson.js';
import { setUploadCacheDir } from '../imagery/upload-ref.js';
import { layerFor, renderRaster, toLayer } from './field-raster.js';

type FieldIndexTask = AnyFieldIndexTask<CaptureSource, Boundary>;
type FieldRasterTask = AnyFieldRasterTask<CaptureSource, Boundary>;
type CoverageTask = AnyCoverageTask<CaptureSource, Boundary>;
type CoverageBatchTask = AnyCoverageBatchTask<CaptureSource, Boundary>;
type FieldStatsBatchTask = AnyFieldStatsBatchTask<CaptureSource, Boundary>;
type Task =
  | IndexTask
  | FieldIndexTask
  | FieldRasterTask
  | AnyInspectTask<CaptureSource>
  | CoverageTask
  | CoverageBatchTask
  | FieldStatsBatchTask
  | GzipTask
  | PingTask;

registerFastDecoders();
// Uploaded files (upload://<id>) are read from the process's local read cache (runtime.ts).
setUploadCacheDir((workerData as { uploadCacheDir?: string } | undefined)?.uploadCacheDir);

// Threads for background work (ComputePoolOptions.background) run under SCHED_IDLE on Linux: the
// scheduler gives them a core only when nothing else wants it, and takes it back the moment
// something wakes. Nice 19 where chrt (util-linux) is missing: also per thread on Linux.
if ((workerData as { background?: boolean } | undefined)?.background && process.platform === 'linux') {
  try {
    execFileSync('chrt', ['--idle', '-p', '0', readlinkSync('/proc/thread-self').split('/').pop()!], {
      stdio: 'ignore',
    });
  } catch {
    os.setPriority(19);
  }
}

/** The field window, from the cache when this thread read it before. */
async function windowFor(
  capture: FieldIndexTask['capture'],
  boundary: FieldIndexTask['boundary'],
  bands: CaptureBand[],
  roots: string[],
  mask?: MaskRequest,
  weighting?: 'centre' | 'coverage',
): Promise<FieldWindow> {
  const read = { ...(mask ? { mask } : {}), ...(weighting === 'coverage' ? { weighting } : {}) };
  const key = windowKey(capture, boundary, bands, read);
  const hit = getWindow(key);
  if (hit) return hit;
  const win = await readFieldWindow(capture, boundary, bands, { roots, ...read });
  putWindow(key, win);
  return win;
}

const kernel = new Kernel();

function warmUp(): void {
  const n = 1 << 16;
  // NDVI and EVI through the per-formula JIT; a formula with log through the interpreter
  const programs = [
    compileFormula('(B08 - B04) / (B08 + B04)'),
    compileFormula('2.5 * (B08 - B04) / (B08 + 6 * B04 - 7.5 * B02 + 1)'),
    compileFormula('log(B08) - B04'),
  ];
  // Sentinel-2 L2A before and since processing baseline 04.00 (offset 0 and −0.1), with and without
  // a mask (field windows have one): the JIT compiles a module per band layout, so the common ones
  // are compiled and optimised here
  for (const p of programs) {
    for (const offset of [0, -0.1]) {
      for (const mask of [false, true]) {
        const prep = kernel.prepare(
          n,
          p.bands.map(() => ({ dtype: 'u16' as const, scale: 0.0001, offset })),
          { mask },
        );
        prep.bands.forEach((b, j) => {
          for (let i = 0; i < n; i++) b[i] = 500 + ((i * (7 + j)) % 4000);
        });
        prep.mask?.fill(1);
        for (let r = 0; r < 9; r++) kernel.run(p);
        kernel.runWithPercentiles(p, ORDER_PS);
      }
    }
  }
}
warmUp();

function runIndex(t: IndexTask): IndexResult {
  const started = performance.now();
  const n = t.bands[0]?.data.length ?? t.mask?.length ?? 0;
  const prep = kernel.prepare(
    n,
    t.bands.map(({ data: _d, ...spec }) => spec),
    { mask: !!t.mask },
  );
  t.bands.forEach((b, i) => {
    if (b.data.length !== n) throw new Error(`band ${i} has ${b.data.length} pixels, expected ${n}`);
    prep.bands[i]!.set(b.data as never);
  });
  if (t.mask) prep.mask!.set(t.mask);
  // the order statistics in the run (runWithPercentiles), or the run alone (values and statistics)
  const { stats, percentiles } = t.orderStats
    ? kernel.runWithPercentiles(t.program, ORDER_PS)
    : { stats: kernel.run(t.program), percentiles: null };
  const result: IndexResult = { stats, kernelMs: 0 };
  if (t.orderStats) result.order = orderFrom(percentiles);
  if (t.histogram) result.histogram = kernel.histogram(t.histogram.lo, t.histogram.hi, t.histogram.bins);
  if (t.values) result.values = kernel.copyValues(new Float32Array(n));
  result.kernelMs = performance.now() - started;
  return result;
}

/**
 * Reads the field window straight from the files and runs the program on it, in this thread. The
 * pool hands a thread more than one task at once (COMPUTE_TASKS_PER_THREAD): after the window is
 * read, everything that touches the thread's kernel runs without yielding (no await), so another
 * task never finds the kernel half-prepared (test/unit/compute/pool.test.ts checks it).
 */
async function runFieldIndex(t: FieldIndexTask): Promise<FieldIndexResult> {
  const started = performance.now();
  // A formula that reads no band (a constant) still has a value on the capture's usable field
  // pixels only: the window and validity mask of the coverage bands.
  const read = t.program.bands.length ? (t.program.bands as CaptureBand[]) : coverageBands(t.capture);
  const win = await windowFor(t.capture, t.boundary, read, t.roots, t.mask, t.stats?.weighting);
  const result = statsOn(win, t.program, t.stats, t.orderStats) as FieldIndexResult;
  const n = win.width * win.height;
  if (t.geojson)
    result.geojson = pixelGeoJson(result.window, kernel.copyValues(new Float32Array(n)), win.inside, t.geojson);
  else if (t.values) {
    result.values = kernel.copyValues(new Float32Array(n));
    result.inside = win.inside.slice(); // transferred back: the cached window keeps its own
  }
  result.kernelMs = performance.now() - started;
  return result;
}

/**
 * The program's statistics over a field window, in this thread's kernel, synchronously (no await:
 * see runFieldIndex); the kernel keeps the values for the caller's per-pixel outputs.
 */
function statsOn(
  win: FieldWindow,
  program: FieldIndexTask['program'],
  req: FieldIndexTask['stats'],
  orderStats: boolean | undefined,
): FieldIndexResult {
  const n = win.width * win.height;
  const prep = kernel.prepare(
    n,
    program.bands.map((b) => {
      const wb = win.bands[b as CaptureBand]!;
      return { dtype: wb.dtype, scale: wb.scale, offset: wb.offset, nodata: wb.nodata };
    }),
    { mask: true },
  );
  for (const [j, b] of program.bands.entries()) prep.bands[j]!.set(win.bands[b as CaptureBand]!.data as never);
  prep.mask!.set(win.valid);
  const weights = win.weights;
  // zonal_stats' order statistics and the percentiles asked are placed together, as one list: unweighted
  // in the run (runWithPercentiles: one pass over the values for both), weighted by one selection
  const asked = req?.percentiles?.length ? req.percentiles : undefined;
  const list = orderStats || asked ? bothLists(orderStats ? ORDER_PS : [], asked ?? []) : undefined;
  let unweighted: Stats;
  let placed: number[] | null = null;
  if (list && !weights) ({ stats: unweighted, percentiles: placed } = kernel.runWithPercentiles(program, list));
  else unweighted = kernel.run(program);
  // weighting=coverage: the kernel's pass counted every touched pixel once; the partial ones are reweighted
  // (masked pixels are NaN in the values, and skipped)
  const stats = weights ? weightedStats(unweighted, kernel.values(), weights, win.partial!) : unweighted;
  const result: FieldIndexResult = {
    stats,
    kernelMs: 0,
    window: {
      width: win.width,
      height: win.height,
      epsg: win.epsg,
      originX: win.originX,
      originY: win.originY,
      resX: win.resX,
      resY: win.resY,
    },
    fieldPixels: win.fieldPixels,
    validPixels: win.validPixels,
    // the usable pixels whose value the formula left NaN: ÷0, or non-finite
    reasons: { ...win.reasons, non_finite: win.validPixels - unweighted.count },
    ...(win.fieldWeight !== undefined ? { fieldWeight: win.fieldWeight } : {}),
  };
  if (weights) {
    if (req?.histogram)
      result.bins = histogramOf(kernel, req.histogram, stats.count ? { min: stats.min, max: stats.max } : null, {
        weights,
        partial: win.partial!,
      });
    // by selection around each percentile's place (the values of the ranks near it, by the kernel's
    // buckets), not by sorting the window
    if (list)
      placed = weightedPercentilesBySelection(
        () => kernel.values(),
        weights,
        win.partial!,
        unweighted.count,
        list,
        (qs) => kernel.percentiles(qs, unweighted),
        (ranges) => kernel.rankWindows(ranges, unweighted),
        () => kernel.levelsOf(unweighted),
      );
  } else if (req?.histogram) {
    const range = stats.count ? { min: stats.min, max: stats.max } : null;
    result.bins = histogramOf(kernel, req.histogram, range);
  }
  if (list && orderStats) result.order = orderFrom(pickOf(placed, list, ORDER_PS));
  if (list && asked) result.percentiles = pickOf(placed, list, asked);
  return result;
}

/** The percentiles of both lists, ascending, each once. */
function bothLists(a: readonly number[], b: readonly number[]): number[] {
  return [...new Set([...a, ...b])].sort((x, y) => x - y);
}

/** The values of percentiles ps (each in `list`) from those placed for `list` (null: no value). */
function pickOf(placed: number[] | null, list: readonly number[], ps: readonly number[]): number[] | null {
  return placed && ps.map((p) => placed[list.indexOf(p)]!);
}

/**
 * Batch statistics: the capture read once per band set over the group's fields (the coverage
 * bands for the counts; each program's bands, weighted as asked, for its statistics), then the
 * kernel per field and program on the shared pixels. Each field's window is cut when its turn
 * comes and dropped after it: the thread holds the union's pixels and one field's window.
 */
async function runFieldStatsBatch(t: FieldStatsBatchTask): Promise<FieldStatsBatchResult> {
  const n = t.boundaries.length;
  // One read per band set (and weighting): the counts and the programs that read the same bands
  // share it, and each field's window is cut once for all of them.
  const reads = new Map<
    string,
    { bands: CaptureBand[]; weighting?: 'coverage'; coverage: boolean; programs: number[] }
  >();
  const use = (bands: CaptureBand[], weighting?: 'centre' | 'coverage') => {
    const key = `${[...bands].sort().join(',')}|${weighting ?? 'centre'}`;
    let r = reads.get(key);
    if (!r) {
      r = { bands, ...(weighting === 'coverage' ? { weighting } : {}), coverage: false, programs: [] };
      reads.set(key, r);
    }
    return r;
  };
  if (t.coverage.length) use(coverageBands(t.capture)).coverage = true;
  for (const [p, { program }] of t.programs.entries())
    use(
      program.bands.length ? (program.bands as CaptureBand[]) : coverageBands(t.capture),
      t.stats?.weighting,
    ).programs.push(p);
  const out: FieldStatsBatchResult = {
    coverage: new Array(n).fill(null),
    stats: t.programs.map(() => new Array(n).fill(null)),
  };
  const counted = new Set(t.coverage);
  const wanted = t.programs.map(({ fields }) => new Set(fields));
  for (const r of reads.values()) {
    const fields = new Set<number>(r.coverage ? t.coverage : []);
    for (const p of r.programs) for (const i of t.programs[p]!.fields) fields.add(i);
    if (!fields.size) continue;
    const wins: GroupWindows = await readFieldWindows(t.capture, t.boundaries, r.bands, {
      roots: t.roots,
      ...(t.mask ? { mask: t.mask } : {}),
      ...(r.weighting ? { weighting: r.weighting } : {}),
    });
    for (const i of [...fields].sort((a, b) => a - b)) {
      let w = wins.window(i);
      if (w instanceof Promise) w = await w;
      if (r.coverage && counted.has(i))
        out.coverage[i] =
          'error' in w
            ? { error: w.error }
            : await withTouched({ fieldPixels: w.fieldPixels, validPixels: w.validPixels }, () =>
                touchedWeights(t.capture, t.boundaries[i]!, r.bands, {
                  roots: t.roots,
                  ...(t.mask ? { mask: t.mask } : {}),
                }),
              );
      for (const p of r.programs) {
        if (!wanted[p]!.has(i)) continue;
        if ('error' in w) {
          out.stats[p]![i] = { error: w.error };
          continue;
        }
        // No await from here to the result: the kernel is this task's (see runFieldIndex).
        const s = statsOn(w, t.programs[p]!.program, t.stats, false);
        out.stats[p]![i] = {
          stats: s.stats,
          fieldPixels: s.fieldPixels,
          ...(s.percentiles !== undefined ? { percentiles: s.percentiles } : {}),
          ...(s.bins ? { bins: s.bins } : {}),
          ...(s.reasons ? { reasons: s.reasons } : {}),
          ...(s.fieldWeight !== undefined ? { fieldWeight: s.fieldWeight } : {}),
        };
      }
    }
  }
  return out;
}

/** The index as an image: the layer (values over the window) from this thread's cache or the kernel. */
async function runFieldRaster(t: FieldRasterTask): Promise<FieldRasterResult> {
  if (t.layerData) return renderRaster(t.layerData, t.output, t.tileMap);
  const layer = await layerFor(t.layer, async () => {
    const r = await runFieldIndex({
      kind: 'field-index',
      v: 1,
      capture: t.capture,
      boundary: t.boundary,
      program: t.program,
      roots: t.roots,
      values: true,
    });
    return toLayer(r.window, r.values!, r.inside!);
  });
  return { ...renderRaster(layer, t.output, t.tileMap), layerData: layer };
}

async function runCoverage(t: CoverageTask): Promise<CoverageResult> {
  const opts = { roots: t.roots, ...(t.mask ? { mask: t.mask } : {}) };
  const win = await readFieldWindow(t.capture, t.boundary, t.bands as CaptureBand[], opts);
  return withTouched({ fieldPixels: win.fieldPixels, validPixels: win.validPixels }, () =>
    touchedWeights(t.capture, t.boundary, t.bands as CaptureBand[], opts),
  );
}

/** Counts with no pixel centre inside get the weights of the pixels touched (a failure leaves them as they are). */
async function withTouched(
  c: CoverageResult,
  weigh: () => Promise<CoverageResult['touched']>,
): Promise<CoverageResult> {
  if (c.fieldPixels > 0) return c;
  const touched = await weigh().catch(() => undefined);
  return touched ? { ...c, touched } : c;
}

async function runCoverageBatch(t: CoverageBatchTask): Promise<CoverageBatchResult> {
  return {
    fields: await readFieldCoverages(t.capture, t.boundaries, t.bands as CaptureBand[], {
      roots: t.roots,
      ...(t.mask ? { mask: t.mask } : {}),
    }),
  };
}

/** A result whose typed arrays are transferred back, not copied. */
class Movable {
  constructor(private readonly value: IndexResult) {}
  get [transferableSymbol](): ArrayBuffer[] {
    const v = this.value as FieldIndexResult;
    return [v.values?.buffer, v.histogram?.buffer, v.inside?.buffer, v.geojson?.buffer].filter(
      (b, i, all): b is ArrayBuffer => b instanceof ArrayBuffer && all.indexOf(b) === i,
    );
  }
  get [valueSymbol](): IndexResult {
    return this.value;
  }
}

/** A raster result whose file is transferred back, not copied. */
class MovableBytes {
  constructor(private readonly value: FieldRasterResult) {}
  get [transferableSymbol](): ArrayBuffer[] {
    return [this.value.bytes!.buffer as ArrayBuffer];
  }
  get [valueSymbol](): FieldRasterResult {
    return this.value;
  }
}

export default async function handle(task: Task): Promise<unknown> {
  switch (task.kind) {
    case 'ping':
      return { ok: true };
    case 'index':
      if (task.v !== 1) throw new Error(`unsupported index task version ${task.v}`);
      return move(new Movable(runIndex(task)) as never);
    case 'field-index':
      return move(new Movable(await runFieldIndex(task)) as never);
    case 'field-raster': {
      const r = await runFieldRaster(task);
      return r.bytes ? move(new MovableBytes(r) as never) : r;
    }
    case 'inspect':
      return inspectCapture(task.capture, task.roots);
    case 'coverage':
      return runCoverage(task);
    case 'coverage-batch':
      return runCoverageBatch(task);
    case 'field-stats-batch':
      return runFieldStatsBatch(task);
    case 'gzip': {
      const z = gzipSync(task.data, { level: task.level });
      // A small result sits in Node's shared buffer pool: transfer a copy that owns its memory.
      const own = z.byteOffset === 0 && z.byteLength === z.buffer.byteLength ? z : new Uint8Array(z);
      return move(own as never);
    }
    default:
      throw new Error(`unknown task kind ${(task as { kind: string }).kind}`);
  }
}

// Tell the pool this thread has finished loading its entry: terminating a thread while it is still
// inside Node 20's require(esm) of this file aborts the whole process, so ComputePool.close waits for
// this message. A microtask: it runs once the synchronous require() has returned (the module facade
// is built after evaluation), not while this module is still evaluating; not setImmediate, which
// waits behind Piscina's Atomics.wait loop until the first task.
queueMicrotask(() => parentPort?.postMessage({ computeWorkerLoaded: true }));
