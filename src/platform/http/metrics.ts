/** GET /metrics (Prometheus text format) and the HTTP request histogram by method, route pattern and status. */
import { Histogram } from 'prom-client';
import { registry, startDefaultMetrics } from '../metrics.js';
import type { Api } from './context.js';

const httpDuration = new Histogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request duration by method, route pattern and status code',
  labelNames: ['method', 'route', 'status_code'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

export function registerMetrics(app: Api): void {
  startDefaultMetrics();
  app.addHook('onResponse', async (req, reply) => {
    // The route pattern, never the URL: ids in labels would make the series unbounded.
    const route = req.routeOptions.url ?? 'unmatched';
    httpDuration.observe(
      { method: req.method, route, status_code: String(reply.statusCode) },
      reply.elapsedTime / 1000,
    );
  });
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
}
