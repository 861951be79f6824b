/**
 * Starts the service by ROLE: `api` serves HTTP, `worker` runs queues, scheduler and compute (and
 * serves /metrics, /healthz, /readyz on METRICS_PORT, default PORT), `all` both. Loads configuration, opens the
 * runtime, listens, and shuts down gracefully on SIGTERM/SIGINT.
 */
import net from 'node:net';
import v8 from 'node:v8';
import { pino } from 'pino';
import { buildApp } from './app.js';
import { bootstrapDevelopmentAccount } from './accounts/bootstrap.js';
import { createDemo } from './imagery/demo.js';
import { ConfigError, loadConfig, type Config } from './platform/config.js';
import type { Api } from './platform/http/context.js';
import { buildOpsApp } from './platform/http/ops-app.js';
import { backgroundLog, loggerOptions } from './platform/logging.js';
import { openRuntime, type Runtime } from './runtime.js';
import { subscribeToDemo } from './subscriptions/index.js';

const seconds = (ms: number) => `${(ms / 1000).toFixed(1)} s`;

const STEP_LABELS = {
  database: 'Database',
  migrations: 'Migrations',
  compute: 'Compute pool warm',
  queues: 'Queues',
} as const;

/** One start-up progress line: what was done and how long it took. */
function progress(what: string, ms: number, detail = ''): void {
  console.log(`  ${what}${detail ? ` (${detail})` : ''}: ${seconds(ms)}`);
}

/** On the first start of an empty database: the development account, its key printed once. */
async function bootstrap(config: Config, runtime: Runtime): Promise<{ key: string; accountId: string } | null> {
  const dev = await bootstrapDevelopmentAccount(runtime.db, config);
  if (!dev) return null;
  console.log(`\n  Development API key (account "${dev.account}"), shown once:\n\n    ${dev.key}\n`);
  console.log(`  Try: curl -H "Authorization: Bearer ${dev.key}" ${config.publicBaseUrl}/v1/fields\n`);
  return dev;
}

/** Captures of the demo season that arrive through its subscription rather than being registered directly. */
const DEMO_SUBSCRIBED = 4;

/**
 * The demo season, written and registered after the service listens (a first start answers at
 * once; the demo field is printed when it is complete). Its last DEMO_SUBSCRIBED captures are
 * published in the demo catalogue (/demo/stac, the service's own STAC API) and the development
 * account is subscribed to it, so that they arrive through a subscription's first poll (the
 * worker's scheduler looks for due subscriptions every 5 s). Shutdown stops it between captures.
 */
function startDemo(
  config: Config,
  runtime: Runtime,
  dev: { key: string; accountId: string },
): { stop(): Promise<void> } {
  const abort = new AbortController();
  const t0 = performance.now();
  console.log(`  Demo: writing and registering a season of synthetic Sentinel-2 captures in the background…`);
  const done = createDemo({ ...runtime.imagery, maxAreaHa: config.maxFieldAreaHa }, dev.accountId, {
    signal: abort.signal,
    catalogue: { last: DEMO_SUBSCRIBED },
  })
    .then(async (demo) => {
      progress(
        `Demo field ${demo.fieldId}: ${demo.captures} synthetic Sentinel-2 captures of ${demo.bands} bands, ${demo.firstDate} to ${demo.lastDate}`,
        performance.now() - t0,
      );
      console.log(
        `  Try: curl -H "Authorization: Bearer ${dev.key}" "${config.publicBaseUrl}/v1/fields/${demo.fieldId}/indices?index=NDVI&date=2025-07-01&zonal_stats=true&geojson=false"\n`,
      );
      if (!demo.catalogueFrom) return;
      const sub = await subscribeToDemo(runtime.db, config, dev.accountId, demo.catalogueFrom);
      console.log(
        `  Demo subscription ${sub.id}: ${demo.catalogued} more captures (from ${demo.catalogueFrom}) arrive from the demo STAC API ${sub.stac_api_url} at its first poll`,
      );
      console.log(
        `  Try: curl -H "Authorization: Bearer ${dev.key}" ${config.publicBaseUrl}/v1/imagery/subscriptions/${sub.id}\n`,
      );
      const t1 = performance.now();
      // Reports the first poll (the API answers meanwhile); gives up quietly after two minutes.
      for (let k = 0; k < 240 && !abort.signal.aborted; k++) {
        await new Promise((r) => setTimeout(r, 500).unref());
        const [row] = await runtime.db.query<{ n: number; error: string | null; polled: boolean }>(
          `SELECT items_registered AS n, last_error AS error, last_polled_at IS NOT NULL AS polled
             FROM imagery_subscriptions WHERE id = $1`,
          [sub.id],
        );
        if (!row?.polled) continue;
        progress(
          row.error
            ? `Demo subscription ${sub.id} polled: ${row.error}`
            : `Demo subscription ${sub.id}: ${row.n} captures registered by its first poll (imagery.available for the demo field)`,
          performance.now() - t1,
        );
        return;
      }
    })
    .catch((err: Error) =>
      console.error(
        abort.signal.aborted
          ? '  Demo: stopped by the shutdown before it was complete'
          : `  Demo not created: ${err.message}`,
      ),
    );
  return {
    async stop() {
      abort.abort();
      await done;
    },
  };
}

/**
 * Stops listening, then closes the server once every request it has read is answered. A turn of
 * the event loop before and a short pause after stopping to listen let connections the kernel had
 * already queued (the loop may have been busy) be accepted and their request read, so that closing
 * the idle connections (which Node does on close) does not reset a request that was already sent.
 */
async function drainAndClose(app: Api): Promise<void> {
  await new Promise((r) => setImmediate(r));
  net.Server.prototype.close.call(app.server);
  await new Promise((r) => setTimeout(r, 50));
  await app.close();
}

/**
 * Graceful shutdown, in order: stop accepting connections and let in-flight requests finish (the
 * API, then the operations listener), stop the scheduler and dispatcher, let running jobs finish
 * (handing back those still running when the grace period is nearly over), then close the queues
 * and Redis, the compute pool and the database. Exit 0, or 1 if the grace period runs out.
 */
function onSignals(
  config: Config,
  runtime: Runtime,
  servers: () => Api[],
  log: Api['log'],
  background: () => Promise<void>,
): () => boolean {
  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    const deadline = Date.now() + config.shutdownGraceMs;
    log.info({ signal, grace_ms: config.shutdownGraceMs }, 'shutting down');
    setTimeout(() => {
      log.error('grace period over, exiting');
      process.exit(1);
    }, config.shutdownGraceMs).unref();
    try {
      for (const s of servers()) await drainAndClose(s);
      await background();
      // Keep a little of the grace period for closing the pool and the database.
      const reserve = Math.min(2000, config.shutdownGraceMs * 0.2);
      await runtime.close(Math.max(0, deadline - Date.now() - reserve));
      log.info('shut down');
      process.exit(0);
    } catch (err) {
      log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));
  return () => closing;
}

async function main(): Promise<void> {
  let config: Config;
  try {
    config = loadConfig();
  } catch (err) {
    if (err instanceof ConfigError) {
      console.error(err.message);
      process.exit(78); // EX_CONFIG
    }
    throw err;
  }
  if (config.role !== 'all' && !config.databaseUrl) {
    // PGlite lives inside one process: separate api and worker processes need PostgreSQL.
    console.error(
      `invalid configuration: ROLE ${config.role} needs DATABASE_URL (the embedded database serves one process; use ROLE=all)`,
    );
    process.exit(78);
  }

  // A long job allocates hundreds of MB of short-lived objects that outlive a young-generation GC
  // (a batch chunk's statistics and rows live for seconds): with its own factor V8 lets the old
  // generation grow to up to 4× what the last full GC kept before collecting again, so the main
  // heap swung 70-290 MB through a 10,000-parcel batch job. A fixed factor bounds it by the live
  // data (see docs/batch.md for the figures). Read by V8 at every full GC; applies to every thread.
  if (config.heapGrowingPercent > 0) v8.setFlagsFromString(`--heap-growing-percent=${config.heapGrowingPercent}`);
  progress('Node and modules loaded', process.uptime() * 1000);
  const logger = loggerOptions(config);
  const runtime = await openRuntime(config, {
    onStep: (step, ms, detail) => progress(STEP_LABELS[step], ms, detail),
    log: backgroundLog(pino(logger)),
  });
  const t0 = performance.now();
  const api = config.role !== 'worker' ? await buildApp(runtime, { logger }) : null;
  const ops = config.metricsPort !== undefined ? await buildOpsApp(runtime, { logger }) : null;
  progress('HTTP app', performance.now() - t0);
  const servers = [api, ops].filter((s): s is Api => s !== null);
  let demo: { stop(): Promise<void> } | null = null;
  // A worker always has the operations listener (METRICS_PORT, default PORT).
  const closing = onSignals(
    config,
    runtime,
    () => servers,
    (api ?? ops)!.log,
    async () => demo?.stop(),
  );

  const dev = config.devBootstrap && config.role !== 'worker' ? await bootstrap(config, runtime) : null;
  if (closing()) return;

  if (api) {
    await api.listen({ port: config.port, host: config.host });
    console.log(
      `  Field analysis service listening on ${config.publicBaseUrl} (${seconds(process.uptime() * 1000)} after the process started)`,
    );
    console.log(`  API docs: ${config.publicBaseUrl}/docs   OpenAPI: ${config.publicBaseUrl}/openapi.json`);
  }
  if (ops) {
    const address = await ops.listen({ port: config.metricsPort!, host: config.host });
    console.log(`  Metrics: ${address}/metrics`);
  }
  console.log(
    `  Storage: ${config.databaseUrl ? 'PostgreSQL' : `embedded PGlite in ${config.dataDir}`}; queues: ${config.redisUrl ? 'BullMQ on Redis' : 'in the database'}; role ${config.role}\n`,
  );
  if (dev && config.demo) demo = startDemo(config, runtime, dev);
}

main().catch((err) => {
  console.error(`fatal: ${(err as Error).message}`);
  process.exit(1);
});
