/**
 * Builds the HTTP application from already-constructed services (src/runtime.ts) and never
 * listens: tests call buildApp() and use inject(); src/main.ts listens. The services plugin
 * decorates the instance; each feature's routes are one plugin that reads them from there.
 */
import fastJsonStringify from 'fast-json-stringify';
import Fastify, { LogController, type FastifyServerOptions } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import { randomUUID } from 'node:crypto';
import { Ajv } from 'ajv';
import { requireApiKey } from './accounts/auth-hook.js';
import { alertRoutes } from './alerts/routes.js';
import { demoCatalogueRoutes } from './imagery/demo-catalogue.js';
import { fieldRoutes } from './fields/routes.js';
import { imageryRoutes } from './imagery/routes.js';
import { indexRoutes } from './indices/routes.js';
import { reportDownloadRoutes, reportRoutes } from './reports/routes.js';
import { batchDownloadRoutes, batchRoutes } from './batch/routes.js';
import { subscriptionRoutes } from './subscriptions/routes.js';
import { webhookRoutes } from './webhooks/routes.js';
import type { Api } from './platform/http/context.js';
import { dashboardRoutes } from './platform/http/dashboard.js';
import { healthRoutes } from './platform/http/health.js';
import { registerMetrics } from './platform/http/metrics.js';
import { registerOpenApi } from './platform/http/openapi.js';
import { registerProblemHandlers } from './platform/http/problems.js';
import { domainProblems } from './problem-map.js';
import { clientErrorHandler, frameworkErrors, registerLingeringAnswers } from './platform/http/connection.js';
import { registerTextGuard } from './platform/http/text-guard.js';
import { registerLoadShedding, registerRateLimit } from './platform/http/protection.js';
import { registerRequestHooks } from './platform/http/request-log.js';
import { dashboardDir } from './platform/paths.js';
import type { Runtime } from './runtime.js';
import { servicesPlugin } from './services.js';

const REQUEST_ID_RE = /^[A-Za-z0-9._:-]{1,128}$/;

// Query strings and paths are text, so they are coerced (`per_page=20` → 20); JSON bodies are
// typed, so they are not (`"name": 42` is an error, not "42"). One of each per process: Ajv keeps
// what it compiled by schema object, and the route schemas are module constants, so an app built
// again in the same process (the suites build hundreds) reuses the validators instead of compiling
// them again (about 0.2 s of CPU an app).
const coercingAjv = new Ajv({
  removeAdditional: false,
  allErrors: true,
  coerceTypes: 'array',
  useDefaults: true,
  strict: false,
});
const strictAjv = new Ajv({
  removeAdditional: false,
  allErrors: true,
  coerceTypes: false,
  useDefaults: true,
  strict: false,
});

/**
 * Response serializers, one per schema object per process, as Fastify's default compiler builds
 * them (fast-json-stringify with no shared schemas: the service adds none) but kept: building them
 * is most of building an app (about 0.15 s of CPU), which the suites do hundreds of times.
 */
const serializers = new WeakMap<object, (data: unknown) => string>();
function serializerOf(schema: unknown): (data: unknown) => string {
  const key = schema as object;
  let f = serializers.get(key);
  if (!f) {
    f = fastJsonStringify(schema as Parameters<typeof fastJsonStringify>[0]) as (data: unknown) => string;
    serializers.set(key, f);
  }
  return f;
}

export interface AppOptions {
  logger?: FastifyServerOptions['logger'];
}

export async function buildApp(s: Runtime, opts: AppOptions = {}): Promise<Api> {
  const app = Fastify({
    logger: opts.logger ?? false,
    bodyLimit: s.config.bodyLimitBytes,
    // Honour a caller's X-Request-Id when it is sane, so a request can be followed across systems.
    genReqId: (req) => {
      const given = req.headers['x-request-id'];
      return typeof given === 'string' && REQUEST_ID_RE.test(given) ? given : randomUUID();
    },
    routerOptions: { ignoreTrailingSlash: true },
    // One line per request, with the route and account, from registerRequestHooks.
    logController: new LogController({ disableRequestLogging: true }),
    // On SIGTERM the server stops accepting connections; a request already on an open connection
    // is served in full (Fastify's default would answer it with a bare 503 while closing).
    return503OnClosing: false,
    // What the HTTP parser and the router refuse is answered as problem+json too (connection.ts).
    clientErrorHandler,
    frameworkErrors,
  }).withTypeProvider<TypeBoxTypeProvider>();

  app.setValidatorCompiler(({ schema, httpPart }) => (httpPart === 'body' ? strictAjv : coercingAjv).compile(schema));
  app.setSerializerCompiler(({ schema }) => serializerOf(schema));

  // Bodies are JSON only: without this, text/plain would be parsed and fail validation as 400
  // instead of being refused as 415.
  app.removeContentTypeParser('text/plain');
  registerProblemHandlers(app, domainProblems);
  // X-Request-Id, the request log and the request histogram: one hook at each end of a request.
  registerRequestHooks(app);
  registerTextGuard(app);
  registerLingeringAnswers(app);
  await app.register(servicesPlugin, s);
  await registerLoadShedding(app, s.config.shed, s.compute);
  await registerOpenApi(app, s.config.publicBaseUrl);
  healthRoutes(app, s);
  // The dashboard page (dist/dashboard, built by npm run build), which talks to /v1 like any client.
  dashboardRoutes(app, dashboardDir);
  registerMetrics(app, { observeRequests: false });

  await app.register(
    async (v1) => {
      await v1.register(requireApiKey);
      await registerRateLimit(v1, s.config);
      for (const routes of [
        fieldRoutes,
        webhookRoutes,
        indexRoutes,
        imageryRoutes,
        subscriptionRoutes,
        alertRoutes,
        reportRoutes,
        batchRoutes,
      ])
        await v1.register(routes);
    },
    { prefix: '/v1' },
  );
  // Pre-signed downloads carry their own authorisation (the link), not an API key.
  await app.register(reportDownloadRoutes, { prefix: '/v1' });
  await app.register(batchDownloadRoutes, { prefix: '/v1' });
  // The demo season's STAC API (a public, read-only catalogue of synthetic Items; 404 without the demo).
  if (s.config.demo) await app.register(demoCatalogueRoutes);

  return app;
}
