/**
 * Imagery metrics: bytes read from GeoTIFFs by source (local file or HTTP range requests) and the
 * time spent decoding a band window, by compression. Pixels are read and decoded in the compute
 * pool's worker threads, whose prom-client registry nobody scrapes: there the figures are summed
 * and posted on a BroadcastChannel once per turn of the thread's event loop, and the main thread
 * (collectImageryMetrics, started by the runtime) adds them to the process registry.
 */
import { BroadcastChannel } from 'node:worker_threads';
import { isWorkerThread } from 'piscina';
import { Counter, Histogram } from 'prom-client';
import { registry } from '../platform/metrics.js';

export type ReadSource = 'local' | 'http';

const CHANNEL = 'field-analysis:imagery-metrics';

const readBytes = new Counter({
  name: 'imagery_read_bytes_total',
  help: 'Bytes read from GeoTIFF files (headers, tags and pixel blocks), by source: local file or http range requests',
  labelNames: ['source'] as const,
  registers: [registry],
});

const decodeDuration = new Histogram({
  name: 'imagery_decode_duration_seconds',
  help: 'Time to decode the blocks of one band window, by compression (none, lzw, deflate, other)',
  labelNames: ['compression'] as const,
  buckets: [0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 1],
  registers: [registry],
});

const decodeErrors = new Counter({
  name: 'imagery_decode_errors_total',
  help: 'Band windows whose pixel blocks could not be decoded (corrupt or unsupported data), by compression',
  labelNames: ['compression'] as const,
  registers: [registry],
});
// Every bounded label value from the start, so that a first error is an increase from 0.
for (const compression of ['none', 'lzw', 'deflate', 'other']) decodeErrors.inc({ compression }, 0);

/** TIFF Compression tag → bounded label. */
export function compressionName(code: number): string {
  if (code === 1) return 'none';
  if (code === 5) return 'lzw';
  if (code === 8 || code === 32946) return 'deflate';
  return 'other';
}

interface Batch {
  bytes: Partial<Record<ReadSource, number>>;
  decodes: Array<[string, number]>;
  errors: string[];
}

let pending: Batch | null = null;
let channel: BroadcastChannel | null = null;

function batch(): Batch {
  if (!pending) {
    pending = { bytes: {}, decodes: [], errors: [] };
    setImmediate(flush).unref();
  }
  return pending;
}

function flush(): void {
  const b = pending;
  pending = null;
  if (!b) return;
  if (!channel) {
    channel = new BroadcastChannel(CHANNEL);
    channel.unref();
  }
  channel.postMessage(b);
}

function apply(b: Batch): void {
  for (const [source, n] of Object.entries(b.bytes)) if (n) readBytes.inc({ source }, n);
  for (const [compression, seconds] of b.decodes) decodeDuration.observe({ compression }, seconds);
  for (const compression of b.errors ?? []) decodeErrors.inc({ compression });
}

export function recordRead(source: ReadSource, bytes: number): void {
  if (bytes <= 0) return;
  if (!isWorkerThread) return void readBytes.inc({ source }, bytes);
  const b = batch();
  b.bytes[source] = (b.bytes[source] ?? 0) + bytes;
}

export function recordDecode(compression: number, seconds: number): void {
  const name = compressionName(compression);
  if (!isWorkerThread) return void decodeDuration.observe({ compression: name }, seconds);
  batch().decodes.push([name, seconds]);
}

export function recordDecodeError(compression: number): void {
  const name = compressionName(compression);
  if (!isWorkerThread) return void decodeErrors.inc({ compression: name });
  batch().errors.push(name);
}

/** Main thread: adds what the compute threads report to this process's registry until closed. */
export function collectImageryMetrics(): () => void {
  const listener = new BroadcastChannel(CHANNEL);
  listener.unref();
  listener.onmessage = (e) => apply((e as { data: Batch }).data);
  return () => listener.close();
}
