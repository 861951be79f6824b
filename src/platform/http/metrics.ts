/**
 * GET /metrics (Prometheus text format) and the HTTP request histogram by method, route pattern,
 * status and route class (the SLO classes of docker/prometheus/alerts.yml, see routeClass).
 */
import type { FastifyReply, FastifyRequest } from 'fastify';
import { Histogram, type HistogramConfiguration } from 'prom-client';
import { registry, startDefaultMetrics } from '../metrics.js';
import type { Api } from './context.js';

const BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5];
type Label = 'method' | 'route' | 'status_code' | 'route_class';

/** One series of the histogram: counts per bucket (not cumulative), sum and count. */
interface Series {
  labels: Record<Label, string>;
  buckets: Float64Array;
  sum: number;
  count: number;
}

/**
 * prom-client's Histogram for the exposition, with the request series kept here: found by route,
 * method and status in nested maps, without the label object, label validation and label hash
 * that prom-client's `observe` builds on every call (which cost more than the rest of the
 * request's hooks). `/metrics` prints them as prom-client prints its own series (same lines, same
 * order: buckets, +Inf, sum, count per series, series in order of first observation).
 */
export class RequestHistogram extends Histogram<Label> {
  private readonly bounds: readonly number[];
  private readonly metricName: string;
  private series: Map<string, Map<string, Map<number, Series>>> = new Map();
  /** The series in order of first observation (prom-client's order). */
  private order: Series[] = [];

  constructor(config: HistogramConfiguration<Label> & { buckets: number[] }) {
    super(config);
    this.bounds = [...config.buckets];
    this.metricName = config.name;
  }

  /** Histogram.observe with the labels of a request (route_class derived from method and route). */
  observeRequest(method: string, route: string, status: number, seconds: number): void {
    if (!Number.isFinite(seconds)) throw new TypeError(`Value is not a valid number: ${seconds}`);
    let byMethod = this.series.get(route);
    if (!byMethod) {
      byMethod = new Map();
      this.series.set(route, byMethod);
    }
    let byStatus = byMethod.get(method);
    if (!byStatus) {
      byStatus = new Map();
      byMethod.set(method, byStatus);
    }
    let s = byStatus.get(status);
    if (!s) {
      s = {
        labels: { method, route, status_code: String(status), route_class: routeClass(method, route) },
        buckets: new Float64Array(this.bounds.length),
        sum: 0,
        count: 0,
      };
      byStatus.set(status, s);
      this.order.push(s);
    }
    const bounds = this.bounds;
    for (let i = 0; i < bounds.length; i++)
      if (seconds <= bounds[i]!) {
        s.buckets[i]!++;
        break;
      }
    s.sum += seconds;
    s.count++;
  }

  /** What prom-client's Histogram returns for the registry, with these series after its own. */
  async getForPromString(): Promise<{ values: unknown[] }> {
    const data = await (
      Histogram.prototype as unknown as { getForPromString: () => Promise<{ values: unknown[] }> }
    ).getForPromString.call(this);
    const name = this.metricName;
    const bucket = `${name}_bucket`;
    for (const s of this.order) {
      let acc = 0;
      for (let i = 0; i < this.bounds.length; i++) {
        acc += s.buckets[i]!;
        data.values.push({
          labels: { le: this.bounds[i] },
          sharedLabels: s.labels,
          value: acc,
          metricName: bucket,
          exemplar: null,
        });
      }
      data.values.push(
        { labels: { le: '+Inf' }, sharedLabels: s.labels, value: s.count, metricName: bucket, exemplar: null },
        { labels: {}, sharedLabels: s.labels, value: s.sum, metricName: `${name}_sum`, exemplar: undefined },
        { labels: {}, sharedLabels: s.labels, value: s.count, metricName: `${name}_count`, exemplar: undefined },
      );
    }
    return data;
  }

  override reset(): void {
    super.reset();
    this.series = new Map();
    this.order = [];
  }
}

const httpDuration = new RequestHistogram({
  name: 'http_request_duration_seconds',
  help: 'HTTP request duration by method, route pattern, status code and route class (read, heavy_read, write, transfer, other)',
  labelNames: ['method', 'route', 'status_code', 'route_class'] as const,
  buckets: BUCKETS,
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

/** Records one answered request (the route pattern, never the URL: ids in labels would make the series unbounded). */
export function observeRequest(req: FastifyRequest, reply: FastifyReply, route = req.routeOptions.url): void {
  httpDuration.observeRequest(req.method, route ?? 'unmatched', reply.statusCode, reply.elapsedTime / 1000);
}

/**
 * GET /metrics and the process's default metrics; with `observeRequests` (the default) an
 * onResponse hook records every request. The API's app records them in its one onResponse hook
 * beside the request log instead (request-hooks.ts).
 */
export function registerMetrics(app: Api, { observeRequests = true } = {}): void {
  startDefaultMetrics();
  if (observeRequests)
    app.addHook('onResponse', (req, reply, done) => {
      observeRequest(req, reply);
      done();
    });
  app.get('/metrics', { schema: { hide: true } }, async (_req, reply) => {
    reply.type(registry.contentType);
    return registry.metrics();
  });
}
