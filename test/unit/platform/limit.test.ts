/**
 * limit and keyedLimit (src/platform/limit.ts): at most n calls at once (of one key), in the order
 * they came; a call with a free slot starts before the caller goes on; other keys are not held up.
 */
import { describe, expect, it } from 'vitest';
import { keyedLimit, limit } from '../../../src/platform/limit.js';

const tick = (ms = 5) => new Promise((r) => setTimeout(r, ms));

describe('limit', () => {
  it('starts a call with a free slot at once, queues the rest in order, and is idle when all are done', async () => {
    const run = limit(2);
    const started: number[] = [];
    const call = (i: number) =>
      run(async () => {
        started.push(i);
        await tick();
        return i;
      });
    const all = [call(1), call(2), call(3)];
    expect(started).toEqual([1, 2]); // synchronously: the direct webhook sink relies on it
    expect(run.idle()).toBe(false);
    expect(await Promise.all(all)).toEqual([1, 2, 3]);
    expect(started).toEqual([1, 2, 3]);
    expect(run.idle()).toBe(true);
  });
});

describe('keyedLimit', () => {
  it('runs at most n calls of a key at once, in order, and other keys beside them', async () => {
    const run = keyedLimit(2);
    const running = new Map<string, number>();
    let most = 0;
    const order: string[] = [];
    const call = (key: string, i: number) =>
      run(key, async () => {
        running.set(key, (running.get(key) ?? 0) + 1);
        most = Math.max(most, running.get(key)!);
        order.push(`${key}${i}`);
        await tick();
        running.set(key, running.get(key)! - 1);
        return i;
      });
    const results = await Promise.all([call('a', 1), call('a', 2), call('a', 3), call('a', 4), call('b', 1)]);
    expect(results).toEqual([1, 2, 3, 4, 1]);
    expect(most).toBe(2);
    // b did not wait behind a's queue
    expect(order.indexOf('b1')).toBeLessThan(order.indexOf('a3'));
    expect(order.filter((x) => x.startsWith('a'))).toEqual(['a1', 'a2', 'a3', 'a4']);
  });

  it('passes a rejection through and frees the slot', async () => {
    const run = keyedLimit(1);
    await expect(run('k', async () => Promise.reject(new Error('boom')))).rejects.toThrow('boom');
    await expect(run('k', async () => 'next')).resolves.toBe('next');
  });
});
