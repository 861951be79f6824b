/**
 * Benchmark runner: `npm run bench` runs every suite; `npm run bench -- kernel pool` runs some.
 * Each suite prints its own table with ratios against a baseline measured in the same run.
 */
type Suite = () => Promise<void>;

const suites: Record<string, () => Promise<Suite>> = {
  kernel: async () => (await import('./kernel.js')).default,
  pool: async () => (await import('./pool.js')).default,
  http: async () => (await import('./http.js')).default,
  webhooks: async () => (await import('./webhooks.js')).default,
  decode: async () => (await import('./decode.js')).default,
  reports: async () => (await import('./reports.js')).default,
  load: async () => (await import('./load.js')).default,
  faults: async () => (await import('./faults.js')).default,
  bombs: async () => (await import('./bombs.js')).default,
  subscriptions: async () => (await import('./subscriptions.js')).default,
  dispatch: async () => (await import('./dispatch.js')).default,
  rasters: async () => (await import('./rasters.js')).default,
  dashboard: async () => (await import('./dashboard.js')).default,
  batch: async () => (await import('./batch.js')).default,
};

async function main(): Promise<void> {
  const wanted = process.argv.slice(2).filter((a) => !a.startsWith('-'));
  const names = wanted.length ? wanted : Object.keys(suites);
  for (const name of names) {
    const load = suites[name];
    if (!load) {
      console.error(`unknown suite "${name}"; suites: ${Object.keys(suites).join(', ')}`);
      process.exit(2);
    }
    console.log(`\n=== ${name} ===`);
    await (await load())();
  }
}

main().catch((err) => {
  console.error(err);
  process.exit(1);
});
