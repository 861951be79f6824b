/**
 * Pool throughput: 10,000 tasks of a 100 ha field (10,000 pixels, NDVI with statistics) on 2
 * worker threads, against the same work done inline on one thread by the kernel (the baseline),
 * with one and with two (the default) tasks handed to a thread at once, and the per-task overhead
 * in microseconds (a pool round trip minus the kernel's own time).
 */
import { indexProgram } from '../src/compute/catalog.js';
import { Kernel } from '../src/compute/kernel-host.js';
import { ComputePool } from '../src/compute/pool.js';

export default async function poolBench(): Promise<void> {
  const N = 10_000;
  const TASKS = 10_000;
  const program = indexProgram('NDVI');
  const red = Uint16Array.from({ length: N }, (_, i) => 300 + ((i * 7) % 3000));
  const nir = Uint16Array.from({ length: N }, (_, i) => 2000 + ((i * 13) % 4000));

  const kernel = new Kernel();
  const inline = () => {
    const prep = kernel.prepare(N, [
      { dtype: 'u16', scale: 0.0001 },
      { dtype: 'u16', scale: 0.0001 },
    ]);
    prep.bands[0]!.set(red);
    prep.bands[1]!.set(nir);
    return kernel.run(program);
  };
  for (let i = 0; i < 2000; i++) inline();
  const t0 = performance.now();
  for (let i = 0; i < TASKS; i++) inline();
  const inlineMs = performance.now() - t0;

  const concurrent = async (tasksPerThread: number) => {
    const pool = new ComputePool({ size: 2, maxQueue: 20_000, tasksPerThread });
    await Promise.all(
      Array.from({ length: 2000 }, () =>
        pool.runIndex({
          program,
          bands: [
            { dtype: 'u16', scale: 0.0001, data: red.slice() },
            { dtype: 'u16', scale: 0.0001, data: nir.slice() },
          ],
        }),
      ),
    );
    const inputs = Array.from({ length: TASKS }, () => [red.slice(), nir.slice()] as const);
    const t0 = performance.now();
    let kernelMs = 0;
    await Promise.all(
      inputs.map(async ([r, n]) => {
        const res = await pool.runIndex({
          program,
          bands: [
            { dtype: 'u16', scale: 0.0001, data: r },
            { dtype: 'u16', scale: 0.0001, data: n },
          ],
        });
        kernelMs += res.kernelMs;
      }),
    );
    const ms = performance.now() - t0;
    return { pool, ms, kernelMs };
  };
  // one round each way, then the better of two per setting (the machine is shared)
  const one = await concurrent(1);
  await one.pool.close();
  const two = await concurrent(2);
  await two.pool.close();
  const one2 = await concurrent(1);
  await one2.pool.close();
  const { pool, ms: poolMs2, kernelMs } = await concurrent(2);
  const poolMs1 = Math.min(one.ms, one2.ms);
  const poolMs = Math.min(two.ms, poolMs2);
  // A no-op task (no buffers, a tiny result): what Piscina's round trip costs by itself.
  await Promise.all(Array.from({ length: 2000 }, () => pool.ping()));
  const tp = performance.now();
  await Promise.all(Array.from({ length: TASKS }, () => pool.ping()));
  const pingMs = performance.now() - tp;
  // Sequential round trips: latency of one task through the pool.
  const seq = 500;
  const t = performance.now();
  let seqKernel = 0;
  for (let i = 0; i < seq; i++) {
    const res = await pool.runIndex({
      program,
      bands: [
        { dtype: 'u16', scale: 0.0001, data: red.slice() },
        { dtype: 'u16', scale: 0.0001, data: nir.slice() },
      ],
    });
    seqKernel += res.kernelMs;
  }
  const seqMs = performance.now() - t;
  await pool.close();
  console.table([
    {
      what: `inline on one thread (baseline), ${TASKS} × ${N} px`,
      'tasks/s': ((TASKS / inlineMs) * 1000).toFixed(0),
      'Mpx/s': ((TASKS * N) / inlineMs / 1000).toFixed(0),
    },
    {
      what: `pool of 2 workers, ${TASKS} concurrent tasks, 1 task per thread at once`,
      'tasks/s': ((TASKS / poolMs1) * 1000).toFixed(0),
      'Mpx/s': ((TASKS * N) / poolMs1 / 1000).toFixed(0),
      'pool ÷ inline': (inlineMs / poolMs1).toFixed(2),
    },
    {
      what: `pool of 2 workers, ${TASKS} concurrent tasks, 2 per thread (the default)`,
      'tasks/s': ((TASKS / poolMs) * 1000).toFixed(0),
      'Mpx/s': ((TASKS * N) / poolMs / 1000).toFixed(0),
      'pool ÷ inline': (inlineMs / poolMs).toFixed(2),
    },
    {
      what: `pool of 2 workers, ${TASKS} concurrent no-op tasks (ping)`,
      'tasks/s': ((TASKS / pingMs) * 1000).toFixed(0),
    },
    {
      what: 'one task at a time through the pool',
      'tasks/s': ((seq / seqMs) * 1000).toFixed(0),
      'µs per task': ((seqMs / seq) * 1000).toFixed(1),
      'overhead µs (round trip − kernel)': (((seqMs - seqKernel) / seq) * 1000).toFixed(1),
    },
  ]);
  console.log(`mean kernel time per task inside the workers: ${((kernelMs / TASKS) * 1000).toFixed(1)} µs`);
}
