/**
 * Setup file (vitest.config.ts): each test file gets the environment it started with back when
 * it ends. Test files share a worker process (`isolate: false`), and some set a variable for
 * their own servers (IMAGERY_ALLOW_PRIVATE_NETWORKS for a COG server on 127.0.0.1) that must not
 * reach the next file (whose test may be that private addresses are refused).
 */
import { afterAll } from 'vitest';

const started = { ...process.env };

afterAll(() => {
  for (const k of Object.keys(process.env)) if (!(k in started)) delete process.env[k];
  Object.assign(process.env, started);
});
