/**
 * Messages between the pool and its workers (versioned: `{kind, v, ...}`). Typed arrays travel as
 * transferred buffers, never as copied JSON; a program is plain data (a small Int32Array).
 */
import type { BandSpec, OrderStats, Stats } from './kernel-host.js';
import type { Program } from './formula.js';

export interface BandInput extends BandSpec {
  /** Digital numbers or reflectance, one per pixel; its buffer is transferred to the worker. */
  data: Float32Array | Uint16Array | Int16Array | Uint8Array;
}

export interface IndexTask {
  kind: 'index';
  v: 1;
  program: Program;
  /** In program.bands order. */
  bands: BandInput[];
  /** 1 = counted, 0 = outside the field or invalid (clouds, ...). Optional. */
  mask?: Uint8Array;
  /** Return the per-pixel values (transferred back). */
  values?: boolean;
  /** Median and percentiles. */
  orderStats?: boolean;
  histogram?: { lo: number; hi: number; bins: number };
}

export interface IndexResult {
  stats: Stats;
  order?: OrderStats | null;
  values?: Float32Array;
  histogram?: Uint32Array;
  /** Worker time in ms (kernel only, no queueing). */
  kernelMs: number;
}

export interface PingTask {
  kind: 'ping';
  v: 1;
}

export type Task = IndexTask | PingTask;
