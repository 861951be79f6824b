/**
 * One JSON log line per request, written when the response is sent: request id (`reqId`, from the
 * logger's bindings), account id when authenticated (bound by requireApiKey, never the key), method,
 * route pattern, path without the query string (signed download links carry their signature
 * there), status and duration. Replaces Fastify's own two lines per request.
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';

/** Whether the logger writes `level` (pino's check; a logger without one is asked to write). */
const enabled = (log: FastifyBaseLogger, level: string) =>
  (log as { isLevelEnabled?: (l: string) => boolean }).isLevelEnabled?.(level) ?? true;

export function registerRequestLog(app: FastifyInstance): void {
  // Each line is built only when its level is on (the check is a comparison; the line is an
  // object, a split and a rounding per request).
  app.addHook('onRequest', async (req) => {
    if (enabled(req.log, 'debug'))
      req.log.debug({ method: req.method, path: req.url.split('?')[0] }, 'request received');
  });
  app.addHook('onResponse', async (req, reply) => {
    const status = reply.statusCode;
    const level = status >= 500 ? 'error' : 'info';
    if (!enabled(req.log, level)) return;
    const line = {
      method: req.method,
      route: req.routeOptions.url ?? null,
      path: req.url.split('?')[0],
      status,
      duration_ms: Math.round(reply.elapsedTime * 10) / 10,
    };
    req.log[level](line, 'request completed');
  });
}
