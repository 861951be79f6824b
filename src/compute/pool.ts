/**
 * The compute pool: Piscina worker threads, each holding one warmed-up kernel. Callers never
 * touch pixels on their own thread. Band buffers are transferred to the worker (the caller's
 * arrays are detached afterwards) and values come back transferred.
 */
import os from 'node:os';
import path from 'node:path';
import v8 from 'node:v8';
import { Piscina } from 'piscina';
import { Histogram } from 'prom-client';
import { registry } from '../platform/metrics.js';
import { packageRoot } from '../platform/paths.js';
import type {
  CoverageBatchResult,
  CoverageBatchTask,
  CoverageResult,
  CoverageTask,
  FieldIndexResult,
  FieldIndexTask,
  FieldStatsBatchResult,
  FieldStatsBatchTask,
  FieldRasterResult,
  FieldRasterTask,
  IndexResult,
  IndexTask,
  InspectResult,
  InspectTask,
  Task,
} from './tasks.js';

export const computeTaskDuration = new Histogram({
  name: 'compute_task_duration_seconds',
  help: 'Compute task duration in the worker pool (queueing included), by kind',
  labelNames: ['kind'] as const,
  buckets: [0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5],
  registers: [registry],
});

export interface ComputePoolOptions {
  /** Worker threads; default the number of cores. */
  size?: number;
  /** Tasks waiting beyond this are refused (load shedding); default 1000 per thread. */
  maxQueue?: number;
  /**
   * Tasks handed to a thread at once; default 2. With one, a thread that finishes a task idles
   * until the caller's thread has taken the result and sent the next (a round trip through both
   * event loops); with two, the next task is already waiting in its port, and a task that waits for
   * file reads leaves the thread to the other. Tasks use the thread's kernel only in synchronous
   * stretches (after their reads), so two on one thread never share it.
   */
  tasksPerThread?: number;
  /**
   * Threads for background work (Linux: SCHED_IDLE, else nice 19, both per thread): they run
   * only on cores that the API thread and the other pool leave idle.
   */
  background?: boolean;
  /** More data for the thread entry (Piscina's workerData): the composition's own settings. */
  threadData?: Record<string, unknown>;
}

/**
 * Runs on the caller's thread before a task that reads a capture goes to a thread, and makes what
 * the capture names readable there (the runtime injects one: uploaded files are copied into the
 * local read cache, since threads have no database). Resolves to a function called once the task
 * is done (the files may be evicted again). A rejection fails the task.
 */
export type PrepareCapture = (capture: unknown) => Promise<() => void>;

/**
 * The old space a compute thread's heap starts with (MiB). A thread's heap holds ~17 MB of live
 * objects while a capture's registration passes ~100 MB of short-lived buffers through it
 * (inflated tiles, HTTP bodies): from V8's default start each thread mark-compacted ~8 times per
 * capture of bench/subscriptions, and the marking took V8's helper threads a third of the
 * process's CPU. Starting at this size (a limit V8 moves as usual, not a reservation) cut the
 * threads' mark-compacts during a 10-Item poll from about 70 to 9 (128 MiB: 4, for 45 MB more
 * peak RSS).
 */
export const THREAD_INITIAL_OLD_SPACE_MB = 64;

/** How long close() waits for threads that are still loading their entry. */
const LOAD_WAIT_MS = 15_000;

export class ComputePool {
  private readonly piscina: Piscina;
  private readonly loaded: Promise<void>;
  private prepare: PrepareCapture | undefined;

  constructor(opts: ComputePoolOptions = {}) {
    const size = opts.size ?? os.availableParallelism();
    // Read by V8 when each thread's isolate is created (V8's flags are the process's; the main
    // thread's heap, configured at start-up, keeps its own).
    v8.setFlagsFromString(`--initial-old-space-size=${THREAD_INITIAL_OLD_SPACE_MB}`);
    this.piscina = new Piscina({
      // The thread entry sits in the composition layer (it wires the kernel to the imagery readers):
      // a file name, not an import, so compute/ still imports no feature.
      filename: path.join(packageRoot, 'dist', 'src', 'threads', 'compute-worker.js'),
      minThreads: size,
      maxThreads: size,
      maxQueue: opts.maxQueue ?? size * 1000,
      concurrentTasksPerWorker: opts.tasksPerThread ?? 2,
      idleTimeout: Number.MAX_SAFE_INTEGER,
      // geotiff.js loads the web-worker shim, which reads `workerData` in any worker thread and
      // fails when it is absent; an object makes it behave as on the main thread.
      workerData: { ...opts.threadData, background: !!opts.background },
    });
    // Each thread posts one message when its entry has loaded (threads/compute-worker.ts).
    let pending = size;
    this.loaded = new Promise<void>((resolve) => {
      const onMessage = (m: unknown): void => {
        if ((m as { computeWorkerLoaded?: boolean } | null)?.computeWorkerLoaded && --pending === 0) {
          this.piscina.off('message', onMessage);
          resolve();
        }
      };
      this.piscina.on('message', onMessage);
    });
  }

  /** Sets the hook run before every task that reads a capture (field-index, field-raster, inspect, coverage, coverage-batch). */
  setPrepare(hook: PrepareCapture | undefined): void {
    this.prepare = hook;
  }

  get size(): number {
    return this.piscina.threads.length;
  }

  /** Share of time the threads were busy since start (0..1). */
  get utilization(): number {
    return this.piscina.utilization;
  }

  get queueSize(): number {
    return this.piscina.queueSize;
  }

  async runIndex(task: Omit<IndexTask, 'kind' | 'v'>, signal?: AbortSignal): Promise<IndexResult> {
    const msg: IndexTask = { kind: 'index', v: 1, ...task };
    const transferList = [...task.bands.map((b) => b.data.buffer), ...(task.mask ? [task.mask.buffer] : [])].filter(
      (b, i, all): b is ArrayBuffer => b instanceof ArrayBuffer && all.indexOf(b) === i,
    );
    const end = computeTaskDuration.startTimer({ kind: 'index' });
    try {
      return (await this.piscina.run(msg, { transferList, signal })) as IndexResult;
    } finally {
      end();
    }
  }

  async runFieldIndex<C, G>(
    task: Omit<FieldIndexTask<C, G>, 'kind' | 'v'>,
    signal?: AbortSignal,
  ): Promise<FieldIndexResult> {
    return this.prepared(task.capture, () =>
      this.timed('field-index', { kind: 'field-index', v: 1, ...task }, signal),
    ) as Promise<FieldIndexResult>;
  }

  /** A field's index as a COG, a PNG or a map tile (the bytes are transferred back). */
  async runFieldRaster<C, G>(
    task: Omit<FieldRasterTask<C, G>, 'kind' | 'v'>,
    signal?: AbortSignal,
  ): Promise<FieldRasterResult> {
    return this.prepared(task.capture, () =>
      this.timed('field-raster', { kind: 'field-raster', v: 1, ...task }, signal),
    ) as Promise<FieldRasterResult>;
  }

  async inspect<C>(task: Omit<InspectTask<C>, 'kind' | 'v'>): Promise<InspectResult> {
    return this.prepared(task.capture, () =>
      this.timed('inspect', { kind: 'inspect', v: 1, ...task }),
    ) as Promise<InspectResult>;
  }

  async coverage<C, G>(task: Omit<CoverageTask<C, G>, 'kind' | 'v'>): Promise<CoverageResult> {
    return this.prepared(task.capture, () =>
      this.timed('coverage', { kind: 'coverage', v: 1, ...task }),
    ) as Promise<CoverageResult>;
  }

  /** Coverage of one capture over a group of nearby fields (the files read once for the group). */
  async coverageBatch<C, G>(task: Omit<CoverageBatchTask<C, G>, 'kind' | 'v'>): Promise<CoverageBatchResult> {
    return this.prepared(task.capture, () =>
      this.timed('coverage-batch', { kind: 'coverage-batch', v: 1, ...task }),
    ) as Promise<CoverageBatchResult>;
  }

  /** Batch statistics of one capture over a group of nearby fields (the files read once for the group). */
  async fieldStatsBatch<C, G>(task: Omit<FieldStatsBatchTask<C, G>, 'kind' | 'v'>): Promise<FieldStatsBatchResult> {
    return this.prepared(task.capture, () =>
      this.timed('field-stats-batch', { kind: 'field-stats-batch', v: 1, ...task }),
    ) as Promise<FieldStatsBatchResult>;
  }

  /** `run` after the prepare hook made the capture readable, and the hook's release after it. */
  private async prepared(capture: unknown, run: () => Promise<unknown>): Promise<unknown> {
    const release = this.prepare ? await this.prepare(capture) : undefined;
    try {
      return await run();
    } finally {
      release?.();
    }
  }

  private async timed(kind: string, msg: Task, signal?: AbortSignal): Promise<unknown> {
    return this.timedTransfer(kind, msg, undefined, signal);
  }

  private async timedTransfer(
    kind: string,
    msg: Task,
    transferList: ArrayBuffer[] | undefined,
    signal?: AbortSignal,
  ): Promise<unknown> {
    const end = computeTaskDuration.startTimer({ kind });
    try {
      return await this.piscina.run(msg, { signal, ...(transferList ? { transferList } : {}) });
    } finally {
      end();
    }
  }

  /** gzip of `data`, whose buffer is transferred (detached here); the result is transferred back. */
  async gzip(data: Uint8Array, level: number): Promise<Uint8Array> {
    return this.timedTransfer('gzip', { kind: 'gzip', v: 1, data, level }, [
      data.buffer as ArrayBuffer,
    ]) as Promise<Uint8Array>;
  }

  async ping(): Promise<void> {
    await this.piscina.run({ kind: 'ping', v: 1 } satisfies Task);
  }

  /**
   * Destroys the threads once each has loaded its entry: on Node 20, terminating a thread in the
   * middle of its require(esm) of the entry aborts the process (v8::Module::IsGraphAsync on a module
   * that is not instantiated), which a pool closed right after it was created would otherwise hit.
   * A thread that never loads (a broken build) costs at most LOAD_WAIT_MS.
   */
  async close(): Promise<void> {
    let timer: NodeJS.Timeout | undefined;
    await Promise.race([
      this.loaded,
      new Promise<void>((r) => {
        timer = setTimeout(r, LOAD_WAIT_MS).unref();
      }),
    ]);
    clearTimeout(timer);
    await this.piscina.destroy();
  }
}
