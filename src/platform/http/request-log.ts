/**
 * The per-request work of every route, in one hook at each end of the request:
 *
 * - onRequest: the `X-Request-Id` response header (the caller's own when sane, see genReqId in
 *   app.ts) and, at debug level, a `request received` line.
 * - onResponse: the request histogram (metrics.ts) and one JSON log line per request, written when
 *   the response is sent: request id (`reqId`, from the logger's bindings), account id when
 *   authenticated (bound by requireApiKey, never the key), method, route pattern, path without the
 *   query string (signed download links carry their signature there), status and duration.
 *   Replaces Fastify's own two lines per request.
 *
 * Both are callback hooks that finish synchronously: no promise and no extra hook step per request
 * (each separate async hook cost a promise and a microtask turn on every request).
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import { observeRequest } from './metrics.js';

/** Whether the logger writes `level` (pino's check; a logger without one is asked to write). */
const enabled = (log: FastifyBaseLogger, level: string) =>
  (log as { isLevelEnabled?: (l: string) => boolean }).isLevelEnabled?.(level) ?? true;

const pathOf = (url: string) => {
  const q = url.indexOf('?');
  return q < 0 ? url : url.slice(0, q);
};

/** On the root instance, before the routes. */
export function registerRequestHooks(app: FastifyInstance): void {
  app.addHook('onRequest', (req, reply, done) => {
    reply.header('X-Request-Id', req.id);
    // Each line is built only when its level is on (the check is a comparison).
    if (enabled(req.log, 'debug')) req.log.debug({ method: req.method, path: pathOf(req.url) }, 'request received');
    done();
  });
  app.addHook('onResponse', (req, reply, done) => {
    const route = req.routeOptions.url;
    observeRequest(req, reply, route);
    const status = reply.statusCode;
    const level = status >= 500 ? 'error' : 'info';
    if (enabled(req.log, level)) {
      const line = {
        method: req.method,
        route: route ?? null,
        path: pathOf(req.url),
        status,
        duration_ms: Math.round(reply.elapsedTime * 10) / 10,
      };
      req.log[level](line, 'request completed');
    }
    done();
  });
}
