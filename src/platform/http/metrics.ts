/**
 * GET /metrics (Prometheus text format) and the HTTP request histogram by method, route pattern,
 * status and route class (the SLO classes of docker/prometheus/alerts.yml, see routeClass).
 */
import { Histogram } from 'prom-client';
import { registry, startDefaultMetrics } from '../metrics.js';
import type { Api } from './context.js';

const httpDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request duration by method, route pattern, status code and route class (read, heavy_read, write, transfer, other)',
  labelNames: ['method', 'route', 'status_code', 'route_class'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

export type RouteClass = 'read' | 'heavy_read' | 'write' | 'transfer' | 'other';

/** GET routes whose answer is computed from pixels in the compute pool (an index, a time series). */
const HEAVY_READS = new Set(['/v1/fields/:id/indices', '/v1/fields/:id/indices/timeseries']);
/** Routes whose duration is set by the bytes moved and the client's bandwidth, not by the service. */
const TRANSFERS = new Set(['POST /v1/imagery/upload', 'GET /v1/reports/:id/download']);
const READ_METHODS = new Set(['GET', 'HEAD', 'OPTIONS']);

/**
 * The class of a request for the availability and latency SLOs: `read` (cheap GETs of /v1: lists
 * and records), `heavy_read` (GETs computed from pixels), `write` (POST, PUT, PATCH, DELETE of
 * /v1), `transfer` (upload and report download), `other` (everything outside /v1: operations
 * routes, docs, the demo catalogue, unmatched URLs).
 */
export function routeClass(method: string, route: string): RouteClass {
  if (!route.startsWith('/v1/')) return 'other';
  if (TRANSFERS.has(`${method} ${route}`)) return 'transfer';
  if (!READ_METHODS.has(method)) return 'write';
  return HEAVY_READS.has(route) ? 'heavy_read' : 'read';
}

export function registerMetrics(app: Api): void {
  startDefaultMetrics();
  app.addHook('onResponse', async (req, reply) => {
    // The route pattern, never the URL: ids in labels would make the series unbounded.
    const route = req.routeOptions.url ?? 'unmatched';
    httpDuration.observe(
      { method: req.method, route, status_code: String(reply.statusCode), route_class: routeClass(req.method, route) },
      reply.elapsedTime / 1000,
    );
  });
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
}
