/**
 * The seam between "where the bytes of a raster are" and "what a TIFF is": a RasterSource reads
 * byte ranges of one file, whatever holds it (a local file: local-source.ts; an HTTP server
 * answering range requests: http-source.ts; memory: memorySource). Everything above it (the
 * structure check, geotiff.js's header parsing, the raw-tile reader) asks for ranges and never
 * learns which kind of source answered. See docs/compute-engine.md, "Reading rasters".
 *
 * The contract (test/unit/imagery/raster-source.test.ts runs every implementation through it):
 * - `read(ranges)` answers one array per range, in the order asked, each the range's bytes; a range
 *   that runs past the end of the file answers the bytes up to the end (shorter, possibly empty),
 *   never padding. The arrays belong to the caller. Ranges may overlap and come in any order; a
 *   source is free to merge neighbouring ones into fewer reads (HTTP does: one request per run).
 * - `size` is the file's length in bytes when the source knows it without reading (a local file:
 *   from fstat when opened; memory), else undefined (HTTP: a server need not say).
 * - `close()` releases what the source holds (a file descriptor); reads after it fail.
 */
import type { GeoTIFF } from 'geotiff';

export interface ByteRange {
  offset: number;
  length: number;
}

export interface RasterSource {
  /** What the source reads: a real path or a URL (cache keys and messages). */
  readonly id: string;
  /** The file's length in bytes, when known without a read. */
  readonly size: number | undefined;
  read(ranges: readonly ByteRange[], signal?: AbortSignal): Promise<Uint8Array[]>;
  close(): Promise<void>;
}

/** A run of ranges read at once: [offset, end) of the file and the indices of the ranges it holds. */
export interface RangeRun {
  offset: number;
  end: number;
  members: number[];
}

/**
 * Ranges grouped into runs to read at once: sorted by offset, a range joins the current run when
 * it starts at most `maxGap` bytes past the run's end (the gap is read and dropped) and the run
 * stays within `maxRun` bytes. Empty ranges join no run.
 */
export function coalesce(ranges: readonly ByteRange[], maxGap: number, maxRun = Infinity): RangeRun[] {
  const order = ranges.map((_, i) => i).filter((i) => ranges[i]!.length > 0);
  order.sort((a, b) => ranges[a]!.offset - ranges[b]!.offset);
  const runs: RangeRun[] = [];
  let run: RangeRun | undefined;
  for (const i of order) {
    const { offset, length } = ranges[i]!;
    const end = offset + length;
    if (run && offset <= run.end + maxGap && Math.max(run.end, end) - run.offset <= maxRun) {
      run.end = Math.max(run.end, end);
      run.members.push(i);
    } else {
      run = { offset, end, members: [i] };
      runs.push(run);
    }
  }
  return runs;
}

/** The bytes of each range of `runs`, cut out of the bytes read for each run (`data[k]` for `runs[k]`, possibly short at the end of the file). */
export function splitRuns(
  ranges: readonly ByteRange[],
  runs: readonly RangeRun[],
  data: readonly Uint8Array[],
): Uint8Array[] {
  const out: Uint8Array[] = ranges.map(() => new Uint8Array(0));
  runs.forEach((run, k) => {
    const bytes = data[k]!;
    for (const i of run.members) {
      const start = ranges[i]!.offset - run.offset;
      out[i] = bytes.subarray(Math.min(start, bytes.length), Math.min(start + ranges[i]!.length, bytes.length));
    }
  });
  return out;
}

/** A source over bytes in memory (uploads being checked, tests). */
export function memorySource(bytes: Uint8Array, id = 'memory'): RasterSource {
  let open = true;
  return {
    id,
    size: bytes.length,
    async read(ranges, signal) {
      signal?.throwIfAborted();
      if (!open) throw new Error(`${id} is closed`);
      // Copies (Uint8Array's slice: a Buffer's is a view), so that the caller owns them.
      return ranges.map(({ offset, length }) =>
        Uint8Array.prototype.slice.call(bytes, Math.min(offset, bytes.length), Math.min(offset + length, bytes.length)),
      );
    },
    async close() {
      open = false;
    },
  };
}

type GeoTiffSource = Parameters<typeof GeoTIFF.fromSource>[0];

/**
 * The source as geotiff.js's public `GeoTIFF.fromSource` takes it. geotiff.js's own sources answer
 * every slice at its full length, zeros past the end of the file; so does this one, so that it
 * parses and decodes exactly as it did with its own.
 */
export function geotiffSource(source: RasterSource): GeoTiffSource {
  const adapter = {
    async fetch(slices: Array<{ offset: number; length: number }>, signal?: AbortSignal): Promise<ArrayBuffer[]> {
      const data = await source.read(slices, signal);
      return data.map((d, i) => {
        const out = new Uint8Array(slices[i]!.length);
        out.set(d);
        return out.buffer;
      });
    },
    async fetchSlice(slice: { offset: number; length: number }, signal?: AbortSignal) {
      const [data] = await adapter.fetch([slice], signal);
      return { ...slice, data: data! };
    },
    get fileSize(): number | null {
      return source.size ?? null;
    },
    close: () => source.close(),
  };
  return adapter as unknown as GeoTiffSource;
}
