/**
 * Starts the service by ROLE: `api` serves HTTP, `worker` runs queues and compute, `all` both.
 * Loads configuration, opens the runtime, listens, and shuts down gracefully on SIGTERM/SIGINT.
 */
import { buildApp } from './app.js';
import { bootstrapDevelopmentAccount } from './accounts/bootstrap.js';
import { createDemo } from './imagery/demo.js';
import { ConfigError, loadConfig, type Config } from './platform/config.js';
import { openRuntime } from './platform/runtime.js';

function loggerOptions(config: Config) {
  const pretty = process.stdout.isTTY && process.env.NODE_ENV !== 'production';
  return {
    level: config.logLevel,
    redact: ['req.headers.authorization'],
    ...(pretty ? { transport: { target: 'pino-pretty', options: { translateTime: 'HH:MM:ss.l', ignore: 'pid,hostname' } } } : {}),
  };
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

  const runtime = await openRuntime(config);
  const app = await buildApp(runtime, { logger: loggerOptions(config) });

  if (config.devBootstrap) {
    const dev = await bootstrapDevelopmentAccount(runtime.db);
    if (dev) {
      console.log(`\n  Development API key (account "${dev.account}"), shown once:\n\n    ${dev.key}\n`);
      console.log(`  Try: curl -H "Authorization: Bearer ${dev.key}" ${config.publicBaseUrl}/v1/fields\n`);
      if (config.demo) {
        const demo = await createDemo({ db: runtime.db, compute: runtime.compute, roots: config.imageryRoots, maxAreaHa: config.maxFieldAreaHa }, dev.accountId);
        console.log(`  Demo field ${demo.fieldId}: ${demo.captures} synthetic Sentinel-2 captures, ${demo.firstDate} to ${demo.lastDate}`);
        console.log(`  Try: curl -H "Authorization: Bearer ${dev.key}" "${config.publicBaseUrl}/v1/fields/${demo.fieldId}/indices?index=NDVI&date=2025-07-01&zonal_stats=true&geojson=false"\n`);
      }
    }
  }

  let closing = false;
  const shutdown = async (signal: string) => {
    if (closing) return;
    closing = true;
    app.log.info({ signal }, 'shutting down');
    const timer = setTimeout(() => {
      app.log.error('grace period over, exiting');
      process.exit(1);
    }, config.shutdownGraceMs).unref();
    try {
      await app.close();
      await runtime.close();
      clearTimeout(timer);
      process.exit(0);
    } catch (err) {
      app.log.error({ err }, 'shutdown failed');
      process.exit(1);
    }
  };
  process.on('SIGTERM', () => void shutdown('SIGTERM'));
  process.on('SIGINT', () => void shutdown('SIGINT'));

  if (config.role !== 'worker') {
    await app.listen({ port: config.port, host: config.host });
    console.log(`  Field analysis service listening on ${config.publicBaseUrl}`);
    console.log(`  API docs: ${config.publicBaseUrl}/docs   OpenAPI: ${config.publicBaseUrl}/openapi.json`);
    console.log(`  Storage: ${config.databaseUrl ? 'PostgreSQL' : `embedded PGlite in ${config.dataDir}`}; role ${config.role}\n`);
  }
}

main().catch((err) => {
  console.error(`fatal: ${(err as Error).message}`);
  process.exit(1);
});
