/**
 * One byte range of a download (RFC 9110 §14): a client that lost a 1 GB batch file half-way asks
 * for the rest (`curl -C -`, browsers, download managers) instead of starting again.
 *
 * - no `Range`, one that is not `bytes=` or not the RFC's syntax, a range whose last byte comes
 *   before its first, more than MAX_RANGES ranges, or several that do not combine into one: the
 *   whole file, 200 (the RFC lets a server ignore a Range; a multipart answer is not offered);
 * - `If-Range` that is not the file's strong ETag (a date, another tag): the whole file, 200;
 * - one range (after overlapping and adjacent ones are combined): 206 with `Content-Range`;
 * - none of the ranges within the file (`bytes=size-`, `bytes=-0`, any range of an empty file):
 *   416 `range_not_satisfiable`, its Content-Range giving the size alone.
 *
 * Our own parser, not range-parser (Express's): its 1.x, the last for Node 20, reads a suffix longer
 * than the file (`bytes=-5000` of 4,000 bytes) as unsatisfiable where §14.1.2 means the whole file,
 * and takes `bytes=1-2x` for 1-2 (parseInt). Checked after the link's signature and the file's
 * existence: a range never tells a client without a valid link anything.
 */
import type { IncomingHttpHeaders } from 'node:http';
import { AppError } from '../errors.js';

/** Bytes `start` to `end`, both included. */
export interface ByteSpan {
  start: number;
  end: number;
}

/** More ranges than this in one header are ignored (the whole file): a client resuming asks for one. */
export const MAX_RANGES = 100;

const RANGE_SPEC = /^(?:(\d+)-(\d*)|-(\d+))$/;

/**
 * The ranges of a `bytes=` header within a file of `size` bytes, combined and in order: null when
 * the header is to be ignored, [] when none is satisfiable.
 */
export function parseByteRanges(header: string, size: number): ByteSpan[] | null {
  const m = /^bytes=(.*)$/i.exec(header.trim());
  if (!m) return null;
  // 1#range-spec: elements separated by commas and optional whitespace; empty elements are allowed.
  const specs = m[1]!
    .split(',')
    .map((x) => x.trim())
    .filter((x) => x !== '');
  if (specs.length === 0 || specs.length > MAX_RANGES) return null;
  const spans: ByteSpan[] = [];
  for (const spec of specs) {
    const r = RANGE_SPEC.exec(spec);
    if (!r) return null;
    if (r[3] !== undefined) {
      const suffix = Number(r[3]);
      if (suffix > 0 && size > 0) spans.push({ start: Math.max(0, size - suffix), end: size - 1 });
      continue;
    }
    const first = Number(r[1]);
    const last = r[2] === '' ? Number.POSITIVE_INFINITY : Number(r[2]);
    if (last < first) return null; // an invalid range-spec: the whole header is ignored
    if (first < size) spans.push({ start: first, end: Math.min(last, size - 1) });
  }
  spans.sort((a, b) => a.start - b.start);
  const out: ByteSpan[] = [];
  for (const s of spans) {
    const prev = out[out.length - 1];
    if (prev && s.start <= prev.end + 1) prev.end = Math.max(prev.end, s.end);
    else out.push({ ...s });
  }
  return out;
}

/** The one range to send of a file of `size` bytes whose ETag is `etag`, or null for the whole file. */
export function requestedSpan(headers: IncomingHttpHeaders, size: number, etag: string): ByteSpan | null {
  const header = headers.range;
  if (header === undefined) return null;
  const ifRange = headers['if-range'];
  if (ifRange !== undefined && (typeof ifRange !== 'string' || ifRange.trim() !== etag)) return null;
  const spans = parseByteRanges(header, size);
  if (spans === null) return null;
  if (spans.length === 0)
    throw new AppError('range_not_satisfiable', `no byte of the range ${header} lies within the file's ${size} bytes`, {
      headers: { 'Content-Range': `bytes */${size}` },
    });
  return spans.length === 1 ? spans[0]! : null;
}
