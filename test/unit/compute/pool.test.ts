import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { indexProgram } from '../../../src/compute/catalog.js';
import { ComputePool } from '../../../src/compute/pool.js';
import type { FieldIndexResult } from '../../../src/compute/tasks.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../../../src/imagery/synthetic.js';
import type { CaptureSource } from '../../../src/imagery/window-reader.js';
import { referenceStats, referenceValues } from '../../../src/compute/reference.js';
import { registry } from '../../../src/platform/metrics.js';
import { npPercentile } from '../../helpers/numpy.js';

describe('compute pool', () => {
  let pool: ComputePool;
  beforeAll(() => {
    pool = new ComputePool({ size: 2 });
  });
  afterAll(async () => pool.close());

  it('runs an index in a worker: transfers inputs (caller buffers detached) and returns values and statistics', async () => {
    const n = 10_000;
    const red = Uint16Array.from({ length: n }, (_, i) => 300 + (i % 700));
    const nir = Uint16Array.from({ length: n }, (_, i) => (i % 50 === 0 ? 0 : 2000 + ((i * 7) % 3000)));
    const mask = Uint8Array.from({ length: n }, (_, i) => (i % 10 === 0 ? 0 : 1));
    const expected = referenceValues(
      '(B08 - B04) / (B08 + B04)',
      {
        B04: { data: red.slice(), spec: { dtype: 'u16', scale: 0.0001, offset: -0.1 } },
        B08: { data: nir.slice(), spec: { dtype: 'u16', scale: 0.0001, offset: -0.1 } },
      },
      n,
      mask.slice(),
    );
    const program = indexProgram('NDVI');
    const result = await pool.runIndex({
      program,
      bands: [
        { dtype: 'u16', scale: 0.0001, offset: -0.1, data: red },
        { dtype: 'u16', scale: 0.0001, offset: -0.1, data: nir },
      ],
      mask,
      values: true,
      orderStats: true,
      histogram: { lo: -1, hi: 1, bins: 20 },
    });
    expect(red.byteLength).toBe(0); // transferred, not copied
    expect(nir.byteLength).toBe(0);
    expect(mask.byteLength).toBe(0);
    const ref = referenceStats(expected);
    expect(result.stats.count).toBe(ref.count);
    expect(Math.abs(result.stats.mean - ref.mean)).toBeLessThan(1e-6);
    expect(Math.abs(result.stats.std - ref.std)).toBeLessThan(1e-6);
    expect(result.values).toBeInstanceOf(Float32Array);
    expect(result.values!.length).toBe(n);
    for (let i = 0; i < n; i += 97) {
      if (Number.isNaN(expected[i]!)) expect(result.values![i]).toBeNaN();
      else expect(Math.abs(result.values![i]! - expected[i]!)).toBeLessThan(1e-6);
    }
    expect(result.order!.median).toBeGreaterThan(ref.min);
    expect(result.histogram!.reduce((a, b) => a + b, 0)).toBe(ref.count);
    expect(result.kernelMs).toBeGreaterThan(0);
  });

  it("a window of 1.5 M pixels: the order statistics placed in the run equal numpy's percentiles of the values returned", async () => {
    // from 2^20 pixels the worker places them in the run (Kernel.runWithPercentiles); the values it
    // returns equal the reference in float32 arithmetic (Math.fround at each step), and the order
    // statistics numpy's linear percentiles of those values, exactly
    const n = 1_500_000;
    const red = Uint16Array.from({ length: n }, (_, i) => 300 + ((i * 7919) % 2700));
    const nir = Uint16Array.from({ length: n }, (_, i) => (i % 53 === 0 ? 0 : 1500 + ((i * 104_729) % 4100)));
    const mask = Uint8Array.from({ length: n }, (_, i) => (i % 11 === 0 ? 0 : 1));
    const spec = { dtype: 'u16' as const, scale: 0.0001, offset: -0.1 };
    const expected = referenceValues(
      '(B08 - B04) / (B08 + B04)',
      { B04: { data: red.slice(), spec }, B08: { data: nir.slice(), spec } },
      n,
      mask.slice(),
      Math.fround,
    );
    const result = await pool.runIndex({
      program: indexProgram('NDVI'),
      bands: [
        { ...spec, data: red },
        { ...spec, data: nir },
      ],
      mask,
      values: true,
      orderStats: true,
    });
    const values = result.values!;
    let differ = 0;
    for (let i = 0; i < n; i++) if (!Object.is(values[i], expected[i]) && values[i] !== expected[i]) differ++;
    expect(differ).toBe(0);
    const sorted = Float64Array.from(values.filter((v) => !Number.isNaN(v))).sort();
    expect(result.stats.count).toBe(sorted.length);
    const np = (p: number) => npPercentile(sorted, p);
    expect(result.order).toEqual({ p10: np(10), p25: np(25), median: np(50), p75: np(75), p90: np(90) });
  });

  it('runs many tasks in parallel without blocking the event loop', async () => {
    const program = indexProgram('EVI');
    let ticks = 0;
    const timer = setInterval(() => ticks++, 1);
    const tasks = Array.from({ length: 200 }, (_, t) =>
      pool.runIndex({
        program,
        bands: program.bands.map((_, j) => ({
          dtype: 'u16' as const,
          scale: 0.0001,
          data: Uint16Array.from({ length: 10_000 }, (_, i) => 500 + ((i * (j + 3) + t) % 4000)),
        })),
      }),
    );
    const results = await Promise.all(tasks);
    clearInterval(timer);
    expect(results.every((r) => r.stats.count === 10_000)).toBe(true);
    expect(ticks).toBeGreaterThan(0);
    const metrics = await registry.getSingleMetricAsString('compute_task_duration_seconds');
    expect(metrics).toMatch(/compute_task_duration_seconds_count\{kind="index"\} \d+/);
  });

  it('a bad task rejects with an error and the pool keeps working', async () => {
    const program = indexProgram('NDVI');
    await expect(
      pool.runIndex({
        program,
        bands: [
          { dtype: 'u16', data: new Uint16Array(10) },
          { dtype: 'u16', data: new Uint16Array(11) },
        ],
      }),
    ).rejects.toThrow(/pixels/);
    await pool.ping();
  });
});

describe('compute pool, several tasks per thread', () => {
  // Tasks handed to one thread at once share its kernel; a field-index task awaits its file reads
  // and then uses the kernel without yielding, so interleaved tasks must give exactly the results
  // they give one at a time.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'pool-interleave-'));
  afterAll(() => rmSync(dir, { recursive: true, force: true }));

  it('interleaved field-index and index tasks on one thread equal the same tasks run one at a time', async () => {
    const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 100, seed: 11 };
    const caps = writeSyntheticSeason(dir, spec, datesEvery('2025-06-02', '2025-07-14', 7), '2025-04-01', '2025-09-30');
    const source = (c: (typeof caps)[number]): CaptureSource => ({
      bands: Object.fromEntries(Object.entries(c.files).map(([b, href]) => [b, { href }])),
      mask: { href: c.scl, kind: 'scl' },
      scale: 0.0001,
      offset: -0.1,
    });
    const programs = [indexProgram('NDVI'), indexProgram('EVI'), indexProgram('NDRE')];
    const fieldTasks = caps.flatMap((c, k) =>
      programs.map((program, j) => ({
        capture: source(c),
        boundary: sceneField(spec, 0.3 + 0.1 * ((k + j) % 4)),
        program,
        roots: [dir],
        values: true,
        orderStats: true,
      })),
    );
    const red = Uint16Array.from({ length: 5000 }, (_, i) => 300 + ((i * 11) % 2500));
    const nir = Uint16Array.from({ length: 5000 }, (_, i) => (i % 37 === 0 ? 0 : 1800 + ((i * 5) % 3500)));
    const indexTask = () => ({
      program: programs[0]!,
      bands: [
        { dtype: 'u16' as const, scale: 0.0001, data: red.slice() },
        { dtype: 'u16' as const, scale: 0.0001, data: nir.slice() },
      ],
      orderStats: true,
    });

    const strip = (r: FieldIndexResult) => ({ ...r, kernelMs: 0 });
    const oneAtATime = new ComputePool({ size: 1, tasksPerThread: 1 });
    const expected: FieldIndexResult[] = [];
    for (const t of fieldTasks) expected.push(strip(await oneAtATime.runFieldIndex(t)));
    const expectedIndex = strip((await oneAtATime.runIndex(indexTask())) as FieldIndexResult);
    await oneAtATime.close();

    const interleaved = new ComputePool({ size: 1, tasksPerThread: 4 });
    try {
      // every field task twice, with index tasks between them, all submitted at once
      const runs = [...fieldTasks, ...fieldTasks].map((t, i) => ({
        i: i % fieldTasks.length,
        p: interleaved.runFieldIndex(t),
      }));
      const index = Array.from({ length: 12 }, () => interleaved.runIndex(indexTask()));
      for (const { i, p } of runs) {
        const got = strip(await p);
        const want = expected[i]!;
        expect(got.stats).toEqual(want.stats);
        expect(got.order).toEqual(want.order);
        expect(got.window).toEqual(want.window);
        expect(Buffer.from(got.values!.buffer).equals(Buffer.from(want.values!.buffer))).toBe(true);
        expect(Buffer.from(got.inside!.buffer).equals(Buffer.from(want.inside!.buffer))).toBe(true);
      }
      for (const p of index) expect(strip((await p) as FieldIndexResult)).toEqual(expectedIndex);
    } finally {
      await interleaved.close();
    }
  }, 60_000);
});
