/**
 * The bound on heavy work (uncached per-pixel GeoJSON): at most `concurrency` at once, `queue`
 * more waiting in arrival order, and past that an immediate 503 with Retry-After; a slot is handed
 * on when work ends, whether it resolved or threw.
 */
import { describe, expect, it } from 'vitest';
import { AppError } from '../../../../src/platform/errors.js';
import { HeavyWork } from '../../../../src/platform/http/protection.js';

function gate() {
  let open!: () => void;
  const opened = new Promise<void>((r) => (open = r));
  return { open, opened };
}

describe('HeavyWork', () => {
  it('runs `concurrency` at once, queues `queue` in order, refuses the rest with 503 and Retry-After', async () => {
    const heavy = new HeavyWork({ concurrency: 2, queue: 2, retryAfterSeconds: 9 });
    const started: number[] = [];
    const gates = Array.from({ length: 4 }, gate);
    const runs = gates.map((g, i) =>
      heavy.run(async () => {
        started.push(i);
        await g.opened;
        return i;
      }),
    );
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1]);
    expect(heavy.load).toEqual({ running: 2, waiting: 2 });

    const refused = await heavy.run(async () => 'never').catch((e: unknown) => e);
    expect(refused).toBeInstanceOf(AppError);
    expect(refused).toMatchObject({ status: 503, code: 'service_unavailable', headers: { 'Retry-After': '9' } });
    expect((refused as AppError).detail).toMatch(/heavy queue/);

    gates[1]!.open();
    expect(await runs[1]).toBe(1);
    await new Promise((r) => setImmediate(r));
    expect(started).toEqual([0, 1, 2]); // the first in the queue got the slot
    expect(heavy.load).toEqual({ running: 2, waiting: 1 });
    for (const g of gates) g.open();
    expect(await Promise.all(runs)).toEqual([0, 1, 2, 3]);
    expect(heavy.load).toEqual({ running: 0, waiting: 0 });
  });

  it('hands the slot on when the work throws', async () => {
    const heavy = new HeavyWork({ concurrency: 1, queue: 1, retryAfterSeconds: 1 });
    const g = gate();
    const failing = heavy.run(async () => {
      await g.opened;
      throw new Error('boom');
    });
    const next = heavy.run(async () => 'ran');
    g.open();
    await expect(failing).rejects.toThrow('boom');
    expect(await next).toBe('ran');
    expect(heavy.load).toEqual({ running: 0, waiting: 0 });
  });
});
