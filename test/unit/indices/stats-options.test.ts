/**
 * The statistics options' parser (src/indices/stats-options.ts) on what users type: a query's
 * comma-separated text and a JSON body's numbers and arrays. Every problem is one issue with a
 * stable code, named at the option, and the message quotes what was given.
 */
import { describe, expect, it } from 'vitest';
import { parseStatsOptions, type RawStatsOptions } from '../../../src/indices/stats-options.js';
import { AppError } from '../../../src/platform/errors.js';

const at = (name: string) => `/query/${name}`;

/** The one issue the options raise (or throws if they parse). */
function issue(raw: RawStatsOptions): { path: string; code: string; message: string } {
  try {
    parseStatsOptions(raw, at);
  } catch (e) {
    expect(e).toBeInstanceOf(AppError);
    const err = e as AppError;
    expect(err.code).toBe('validation_failed');
    expect(err.errors).toHaveLength(1);
    return err.errors![0]! as { path: string; code: string; message: string };
  }
  throw new Error(`${JSON.stringify(raw)} parsed`);
}

describe('list options: empty items are refused, not dropped', () => {
  it.each([
    ['percentiles', '5,,50', 'item 2 of 3 is empty'],
    ['percentiles', ',5', 'item 1 of 2 is empty'],
    ['percentiles', '5,50,', 'item 3 of 3 is empty'],
    ['percentiles', ',', 'item 1 of 2 is empty'],
    ['histogram', '0,,1', 'item 2 of 3 is empty'],
    ['histogram', '0,1,', 'item 3 of 3 is empty'],
    ['scl_exclude', '3,,9', 'item 2 of 3 is empty'],
    ['scl_exclude', '3, ,9', 'item 2 of 3 is empty'],
  ] as const)('%s=%s', (name, text, message) => {
    const i = issue({ [name]: text });
    expect(i).toMatchObject({ path: `/query/${name}`, code: 'empty_list_item' });
    expect(i.message).toContain(message);
  });

  it('spaces around items and a wholly empty scl_exclude (none) still parse', () => {
    expect(parseStatsOptions({ percentiles: ' 5 , 50 ' }, at).stats.percentiles).toEqual([5, 50]);
    expect(parseStatsOptions({ scl_exclude: '' }, at).mask.scl_exclude).toEqual([]);
    expect(parseStatsOptions({ scl_exclude: ' 9 , 3 ,9' }, at).mask.scl_exclude).toEqual([3, 9]);
  });

  it('an empty percentiles or histogram value asks for values', () => {
    expect(issue({ percentiles: '' })).toMatchObject({
      code: 'invalid_percentiles',
      message: 'give 1 to 100 percentiles',
    });
    expect(issue({ percentiles: [] }).code).toBe('invalid_percentiles');
    expect(issue({ histogram: '' }).code).toBe('invalid_histogram');
    expect(issue({ histogram: [] }).code).toBe('invalid_histogram');
  });
});

describe('messages name what was given', () => {
  it('an SCL class that is not a number is quoted, not shown as NaN', () => {
    const i = issue({ scl_exclude: '3,a,12' });
    expect(i.code).toBe('unknown_scl_class');
    expect(i.message).toBe('unknown SCL classes "a", 12: classes are integers 0 to 11');
    expect(issue({ scl_exclude: [1e300] }).message).toBe('unknown SCL class 1e+300: classes are integers 0 to 11');
  });

  it('percentiles out of range or not numbers are listed, the first five', () => {
    expect(issue({ percentiles: '5,abc,101' }).message).toBe(
      'every percentile must be a number in [0, 100], not "abc", 101',
    );
    const many = issue({ percentiles: Array.from({ length: 8 }, (_, k) => 101 + k) });
    expect(many.code).toBe('percentile_out_of_range');
    expect(many.message).toBe('every percentile must be a number in [0, 100], not 101, 102, 103, 104, 105 and 3 more');
  });

  it('a bad count of bins is quoted', () => {
    expect(issue({ histogram: '2.5' }).message).toContain('not 2.5');
    expect(issue({ histogram: 'abc' }).message).toContain('not "abc"');
  });
});

describe('histogram: a number is bins, a JSON array is edges', () => {
  it('a one-element JSON array is one edge, not a count of bins', () => {
    expect(issue({ histogram: [10] })).toMatchObject({
      code: 'invalid_histogram',
      message: 'give a number of bins, or at least two strictly increasing finite edges',
    });
    expect(issue({ histogram: [0.5] }).code).toBe('invalid_histogram');
  });

  it('a number and a query value of one item are bins; two items or an array of two are edges', () => {
    expect(parseStatsOptions({ histogram: 10 }, at).stats.histogram).toEqual({ bins: 10 });
    expect(parseStatsOptions({ histogram: '10' }, at).stats.histogram).toEqual({ bins: 10 });
    expect(parseStatsOptions({ histogram: '0,1' }, at).stats.histogram).toEqual({ edges: [0, 1] });
    expect(parseStatsOptions({ histogram: [0, 1] }, at).stats.histogram).toEqual({ edges: [0, 1] });
  });
});
