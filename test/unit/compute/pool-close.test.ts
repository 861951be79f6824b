import { describe, it } from 'vitest';
import { ComputePool } from '../../../src/compute/pool.js';

// Node 20 aborts the whole process (FATAL ERROR: v8::Module::IsGraphAsync must be used on an
// instantiated module) when a thread is terminated in the middle of its require(esm) of the pool's
// entry. A pool closed right after it was created used to do exactly that, now and then; close()
// now waits for every thread to load. If this regresses, vitest reports the file's worker as exited.
describe('compute pool close', () => {
  it('closes cleanly right after it was created, many times over', async () => {
    for (let i = 0; i < 8; i++) {
      const pool = new ComputePool({ size: 2 });
      await pool.close();
    }
    const pool = new ComputePool({ size: 1 });
    await pool.ping();
    await pool.close();
  }, 180_000);

  it('still computes after a quick open and close', async () => {
    const quick = new ComputePool({ size: 1 });
    await quick.close();
    const pool = new ComputePool({ size: 1 });
    try {
      await pool.ping();
    } finally {
      await pool.close();
    }
  });
});
