import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // 2 cores, three files at a time: much of the suite waits (killed workers, leases, retries,
    // receivers), so a third file uses the idle CPU. A clean clone's `.ci/run` took 984 s of vitest
    // with 2 on a quiet machine and 553 s with 3 under a load average of 7 (1,833 tests passed).
    maxWorkers: 3,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // In CI every test is listed with its backend ("… on postgres", "… bullmq on redis"), so the
    // log shows that the real-service suites ran.
    reporters: process.env.CI ? ['verbose'] : ['default'],
  },
});
