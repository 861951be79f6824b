/**
 * The group-commit Batcher behind the delivery worker's claims, records and renewals: items that
 * arrive during a write go together in the next one; a write that never settles (postgres.js can
 * leave a query on a cut connection unsettled) fails its own batch after the timeout and does not
 * hold up the batches after it.
 */
import { describe, expect, it } from 'vitest';
import { BatchWriteTimeout, Batcher } from '../../../src/platform/batcher.js';

describe('Batcher', () => {
  it('writes the first item at once and the ones arriving meanwhile together, in order', async () => {
    const writes: number[][] = [];
    const b = new Batcher<number, number>(async (items) => {
      writes.push(items);
      await new Promise((r) => setTimeout(r, 20));
      return items.map((i) => i * 10);
    });
    const first = b.add(1);
    await new Promise((r) => setImmediate(r));
    const rest = [b.add(2), b.add(3), b.add(4)];
    expect(await Promise.all([first, ...rest])).toEqual([10, 20, 30, 40]);
    expect(writes).toEqual([[1], [2, 3, 4]]);
  });

  it('rejects every item of a failed write, and the next batch still runs', async () => {
    let n = 0;
    const b = new Batcher<string, string>(async (items) => {
      if (n++ === 0) throw new Error('connection refused');
      return items.map((i) => i.toUpperCase());
    });
    await expect(b.add('a')).rejects.toThrow('connection refused');
    expect(await b.add('b')).toBe('B');
  });

  it('fails a write that never settles after the timeout, and the batches after it go ahead', async () => {
    let n = 0;
    const b = new Batcher<string, string>(
      (items) => (n++ === 0 ? new Promise<string[]>(() => {}) : Promise.resolve(items.map((i) => `${i}!`))),
      500,
      50,
    );
    const hung = b.add('lost');
    await new Promise((r) => setImmediate(r));
    const next = b.add('next'); // queued behind the hung write
    await expect(hung).rejects.toBeInstanceOf(BatchWriteTimeout);
    expect(await next).toBe('next!');
    expect(n).toBe(2);
  });

  it('ignores a late result of a timed-out write', async () => {
    let release!: (v: string[]) => void;
    let n = 0;
    const b = new Batcher<string, string>(
      (items) => (n++ === 0 ? new Promise<string[]>((r) => (release = r)) : Promise.resolve(items)),
      500,
      30,
    );
    const slow = b.add('slow');
    await expect(slow).rejects.toBeInstanceOf(BatchWriteTimeout);
    release(['late']);
    expect(await b.add('after')).toBe('after');
  });
});
