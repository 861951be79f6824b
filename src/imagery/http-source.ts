/**
 * A RasterSource over HTTP(S) range requests (COGs), through the imagery HTTP client
 * (http-client.ts: SSRF checks on the address connected to, a deadline, no redirects, bytes
 * counted). Ranges less than MAX_GAP apart are fetched by one request, the runs in parallel.
 *
 * The first PREFIX bytes are fetched once, on the first read that needs them, and kept: a COG puts
 * its header, IFDs and tile tables there, and the structure check and geotiff.js's parser read them
 * in many small pieces (geotiff.js's own remote source kept 64 KiB blocks for the same reason).
 */
import { TimedFetchClient } from './http-client.js';
import { coalesce, splitRuns, type ByteRange, type RasterSource } from './raster-source.js';

/** Bytes at the start of the file fetched once and kept. */
const PREFIX = 65_536;
/** Ranges at most this far apart are fetched by one request (the gap is read and dropped). */
const MAX_GAP = 65_536;

/** What the source needs of a client: one request, its status, headers and body. */
export interface RangeClient {
  request(options: {
    headers?: Record<string, string>;
    signal?: AbortSignal;
  }): Promise<{ status: number; getHeader(name: string): string | undefined; getData(): Promise<ArrayBuffer> }>;
}

export class HttpRangeSource implements RasterSource {
  readonly size = undefined;
  private prefix: Promise<Uint8Array> | undefined;
  private closed = false;

  constructor(
    readonly id: string,
    private readonly client: RangeClient = new TimedFetchClient(id),
  ) {}

  async read(ranges: readonly ByteRange[], signal?: AbortSignal): Promise<Uint8Array[]> {
    signal?.throwIfAborted();
    if (this.closed) throw new Error(`${this.id} is closed`);
    const out: Uint8Array[] = ranges.map(() => new Uint8Array(0));
    const rest: number[] = [];
    let head: Uint8Array | undefined;
    for (let i = 0; i < ranges.length; i++) {
      const { offset, length } = ranges[i]!;
      if (length <= 0) continue;
      if (offset + length > PREFIX) {
        rest.push(i);
        continue;
      }
      head ??= await this.head();
      signal?.throwIfAborted();
      out[i] = head.slice(Math.min(offset, head.length), Math.min(offset + length, head.length));
    }
    if (rest.length) {
      const far = rest.map((i) => ranges[i]!);
      const runs = coalesce(far, MAX_GAP);
      const data = await Promise.all(runs.map((run) => this.fetchRange(run.offset, run.end, signal)));
      for (const [k, d] of splitRuns(far, runs, data).entries()) out[rest[k]!] = d;
    }
    return out;
  }

  /** The prefix, shared by every read: fetched without the reader's signal (the client's deadline bounds it). */
  private head(): Promise<Uint8Array> {
    if (!this.prefix) {
      this.prefix = this.fetchRange(0, PREFIX);
      // A failed fetch is not kept: the next read tries again.
      this.prefix.catch(() => (this.prefix = undefined));
    }
    return this.prefix;
  }

  /** Bytes [start, end) of the file, fewer when it ends first. */
  private async fetchRange(start: number, end: number, signal?: AbortSignal): Promise<Uint8Array> {
    const res = await this.client.request({ headers: { Range: `bytes=${start}-${end - 1}` }, signal });
    // 416: the range starts past the end of the file.
    if (res.status === 416) return new Uint8Array(0);
    if (res.status === 200) throw new Error('Server responded with full file');
    if (res.status !== 206) throw new Error(`Error fetching data (HTTP ${res.status})`);
    const data = new Uint8Array(await res.getData());
    const m = /^bytes (\d+)-/.exec(res.getHeader('content-range') ?? '');
    if (m && Number(m[1]) !== start)
      throw new Error(`Error fetching data: asked for bytes from ${start}, the server answered from ${m[1]}`);
    return data.length > end - start ? data.subarray(0, end - start) : data;
  }

  async close(): Promise<void> {
    this.closed = true;
    this.prefix = undefined;
  }
}
