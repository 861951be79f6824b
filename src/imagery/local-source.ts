/**
 * A RasterSource over a local file: an open file descriptor read with positional reads. Reads are
 * synchronous preads: from the page cache that is a memcpy, while the asynchronous fs.read queues
 * every range on libuv's thread pool and back (the raw-tile path reads every block of a window
 * this way). Adjacent ranges (a window's neighbouring tiles, usually stored one after the other)
 * are read by one pread. Bytes read are counted in imagery_read_bytes_total{source="local"}.
 *
 * The path is opened as given: callers resolve and check it first (local-path.ts).
 */
import { closeSync, fstatSync, openSync, readSync } from 'node:fs';
import { recordRead } from './metrics.js';
import { coalesce, splitRuns, type ByteRange, type RasterSource } from './raster-source.js';

export class LocalFileSource implements RasterSource {
  private fd: number | null;

  private constructor(
    readonly id: string,
    fd: number,
    readonly size: number,
  ) {
    this.fd = fd;
  }

  static async open(path: string): Promise<LocalFileSource> {
    const fd = openSync(path, 'r');
    try {
      return new LocalFileSource(path, fd, fstatSync(fd).size);
    } catch (err) {
      closeSync(fd);
      throw err;
    }
  }

  async read(ranges: readonly ByteRange[], signal?: AbortSignal): Promise<Uint8Array[]> {
    signal?.throwIfAborted();
    if (this.fd === null) throw new Error(`${this.id} is closed`);
    const runs = coalesce(ranges, 0);
    const data = runs.map((run) => {
      const end = Math.min(run.end, this.size);
      const buf = new Uint8Array(Math.max(0, end - run.offset));
      let n = 0;
      // A pread may answer fewer bytes than asked; the file's end was taken into account above.
      while (n < buf.length) {
        const got = readSync(this.fd!, buf, n, buf.length - n, run.offset + n);
        if (got === 0) break;
        n += got;
      }
      recordRead('local', n);
      return buf.subarray(0, n);
    });
    return splitRuns(ranges, runs, data);
  }

  async close(): Promise<void> {
    const fd = this.fd;
    this.fd = null;
    if (fd !== null) closeSync(fd);
  }
}
