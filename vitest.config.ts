import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    pool: 'forks',
    // 2 cores: two files at a time keeps PGlite start-up and the worker pools from thrashing.
    maxWorkers: 2,
    testTimeout: 30_000,
    hookTimeout: 60_000,
    // In CI every test is listed with its backend ("… on postgres", "… bullmq on redis"), so the
    // log shows that the real-service suites ran.
    reporters: process.env.CI ? ['verbose'] : ['default'],
  },
});
