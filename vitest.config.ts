import { defineConfig } from 'vitest/config';

/**
 * Files that need a process of their own: decode.test.ts compares our readers with geotiff.js's
 * own decoders, which the first file that registers ours (registerFastDecoders, as the compute
 * threads do) replaces for the rest of the process.
 */
const ISOLATED = ['test/unit/imagery/decode.test.ts'];

export default defineConfig({
  test: {
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
    projects: [
      {
        extends: true,
        test: {
          name: 'shared',
          include: ['test/**/*.test.ts'],
          exclude: ISOLATED,
          // Test files share a worker process and its loaded modules: each file's imports (the
          // service's whole module graph) took ~1.6 s of CPU again, 212 s of a CI run. What a file
          // changes in the process is its own to undo; test/helpers/file-env.ts gives the next
          // file the environment back, and the metrics registry is the process's (count deltas).
          isolate: false,
          setupFiles: ['test/helpers/file-env.ts'],
        },
      },
      { extends: true, test: { name: 'isolated', include: ISOLATED, isolate: true } },
    ],
  },
});
