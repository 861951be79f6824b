/**
 * The Range header's grammar and meaning (RFC 9110 §14.1), platform/http/ranges.ts: each case
 * written out from the RFC's text, with the section that says so.
 */
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../src/platform/errors.js';
import { MAX_RANGES, parseByteRanges, requestedSpan } from '../../../src/platform/http/ranges.js';

const SIZE = 10_000;

describe('parseByteRanges', () => {
  const cases: Array<[string, Array<[number, number]> | null, string]> = [
    ['bytes=0-499', [[0, 499]], '§14.1.2: the first 500 bytes'],
    ['bytes=500-999', [[500, 999]], '§14.1.2: the second 500 bytes'],
    ['bytes=-500', [[9_500, 9_999]], '§14.1.2: the final 500 bytes'],
    ['bytes=9500-', [[9_500, 9_999]], '§14.1.2: the final 500 bytes'],
    [
      'bytes=0-0,-1',
      [
        [0, 0],
        [9_999, 9_999],
      ],
      '§14.1.2: the first and last bytes',
    ],
    ['bytes= 500-600, 601-999', [[500, 999]], '§5.6.1 list whitespace; adjacent ranges combined'],
    ['bytes=500-700,601-999', [[500, 999]], 'overlapping ranges combined'],
    ['bytes=-20000', [[0, 9_999]], '§14.1.2: a suffix longer than the file is all of it'],
    ['bytes=9000-20000', [[9_000, 9_999]], '§14.1.2: a last-pos past the end is the last byte'],
    ['bytes=0-99999999999999999999', [[0, 9_999]], 'a last-pos of any length'],
    ['BYTES=1-2', [[1, 2]], '§14.1: range units are case-insensitive'],
    ['bytes=1-2,,', [[1, 2]], '§5.6.1: empty list elements are ignored'],
    ['bytes=10000-', [], '§14.1.1: a first-pos at or past the end is unsatisfiable'],
    ['bytes=-0', [], '§14.1.1: a suffix of zero is unsatisfiable'],
    ['bytes=10000-10005,-0', [], 'none satisfiable'],
    ['bytes=10000-10005,5-6', [[5, 6]], 'the unsatisfiable one left out'],
    ['bytes=5-3', null, '§14.1.1: last-pos before first-pos is invalid: ignored'],
    ['bytes=1-2x', null, 'not the syntax: ignored'],
    ['bytes=1.5-2', null, 'not the syntax: ignored'],
    ['bytes=+1-2', null, 'not the syntax: ignored'],
    ['bytes=-', null, 'not the syntax: ignored'],
    ['bytes=', null, 'no range: ignored'],
    ['bytes 0-5', null, 'no "=": ignored'],
    ['items=0-5', null, 'another unit: ignored'],
    ['bytes=0x10-20', null, 'hexadecimal is not DIGIT'],
  ];
  for (const [header, want, why] of cases)
    it(`${header} → ${JSON.stringify(want)} (${why})`, () => {
      const got = parseByteRanges(header, SIZE);
      expect(got === null ? null : got.map((s) => [s.start, s.end])).toEqual(want);
    });

  it('an empty file has no satisfiable range', () => {
    expect(parseByteRanges('bytes=0-', 0)).toEqual([]);
    expect(parseByteRanges('bytes=-5', 0)).toEqual([]);
  });

  it(`more than ${MAX_RANGES} ranges are ignored, that many are read`, () => {
    const list = (n: number) => `bytes=${Array.from({ length: n }, (_, i) => `${i * 10}-${i * 10 + 1}`).join(',')}`;
    expect(parseByteRanges(list(MAX_RANGES), SIZE)).toHaveLength(MAX_RANGES);
    expect(parseByteRanges(list(MAX_RANGES + 1), SIZE)).toBeNull();
  });
});

describe('requestedSpan', () => {
  const etag = '"bat_x.10000"';
  it('one range: the span; several, If-Range not the ETag, or no Range: the whole file (null)', () => {
    expect(requestedSpan({ range: 'bytes=5-9' }, SIZE, etag)).toEqual({ start: 5, end: 9 });
    expect(requestedSpan({ range: 'bytes=5-9', 'if-range': etag }, SIZE, etag)).toEqual({ start: 5, end: 9 });
    expect(requestedSpan({ range: 'bytes=5-9', 'if-range': '"bat_x.9999"' }, SIZE, etag)).toBeNull();
    expect(requestedSpan({ range: 'bytes=5-9', 'if-range': `W/${etag}` }, SIZE, etag)).toBeNull();
    expect(requestedSpan({ range: 'bytes=0-1,5-9' }, SIZE, etag)).toBeNull();
    expect(requestedSpan({}, SIZE, etag)).toBeNull();
  });
  it('none satisfiable: a 416 problem naming the size in Content-Range', () => {
    let err: unknown;
    try {
      requestedSpan({ range: 'bytes=10000-' }, SIZE, etag);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(AppError);
    expect(err).toMatchObject({
      code: 'range_not_satisfiable',
      status: 416,
      headers: { 'Content-Range': 'bytes */10000' },
    });
  });
});
