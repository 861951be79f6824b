/**
 * The operations listener: /healthz, /readyz and /metrics only, on METRICS_PORT. A ROLE=worker
 * process serves nothing else; an api/all process serves it beside the API when METRICS_PORT is
 * set (so Prometheus can scrape a port that is not exposed to clients).
 */
import Fastify, { LogController, type FastifyServerOptions } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { clientErrorHandler, frameworkErrors } from './connection.js';
import type { Api, PlatformServices } from './context.js';
import { healthRoutes } from './health.js';
import { registerMetrics } from './metrics.js';
import { registerProblemHandlers } from './problems.js';

export async function buildOpsApp(
  s: PlatformServices,
  opts: { logger?: FastifyServerOptions['logger'] } = {},
): Promise<Api> {
  const app = Fastify({
    logger: opts.logger ?? false,
    logController: new LogController({ disableRequestLogging: true }),
    clientErrorHandler,
    frameworkErrors,
  }).withTypeProvider<TypeBoxTypeProvider>();
  registerProblemHandlers(app);
  healthRoutes(app, s);
  registerMetrics(app);
  await app.ready();
  return app;
}
