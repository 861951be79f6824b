/**
 * Protection of the API: load shedding (@fastify/under-pressure), a separate bound on heavy work
 * (HeavyWork) and per-key rate limits (@fastify/rate-limit). All answer with a problem+json and
 * Retry-After through the common error handler. Operations routes (/healthz, /readyz, /metrics,
 * docs) are never shed nor limited: an overloaded process must still say so.
 */
import rateLimit from '@fastify/rate-limit';
import underPressure from '@fastify/under-pressure';
import type { FastifyInstance, FastifyRequest } from 'fastify';
import { Redis } from 'ioredis';
import { Counter } from 'prom-client';
import type { Config } from '../config.js';
import { AppError } from '../errors.js';
import { registry } from '../metrics.js';

const shed = new Counter({
  name: 'http_requests_shed_total',
  help: 'Requests refused with 503 by load shedding, by reason',
  labelNames: ['reason'] as const,
  registers: [registry],
});

const limited = new Counter({
  name: 'http_requests_rate_limited_total',
  help: 'Requests refused with 429 by the per-key rate limit',
  registers: [registry],
});

const REASONS: Record<string, string> = {
  eventLoopDelay: 'event_loop_delay',
  heapUsedBytes: 'heap_used',
  rssBytes: 'rss',
  healthCheck: 'compute_queue',
  eventLoopUtilization: 'event_loop_utilization',
};
// Every reason from the start, so that a first refusal is an increase from 0 for rate() and increase().
for (const reason of [...Object.values(REASONS), 'heavy_queue']) shed.inc({ reason }, 0);

/** Only API routes are shed: operations routes must answer while the process is saturated. */
const shedsRoute = (req: FastifyRequest) => req.url.startsWith('/v1/');

export async function registerLoadShedding(
  app: FastifyInstance,
  shedCfg: Config['shed'],
  pool: { readonly queueSize: number },
): Promise<void> {
  const { maxEventLoopDelayMs, maxHeapUsedBytes, maxPoolQueue, retryAfterSeconds } = shedCfg;
  await app.register(underPressure, {
    maxEventLoopDelay: maxEventLoopDelayMs,
    maxHeapUsedBytes,
    retryAfter: retryAfterSeconds,
    // The compute queue is sampled like the other figures (every 250 ms), not read per request.
    ...(maxPoolQueue > 0 ? { healthCheck: async () => pool.queueSize <= maxPoolQueue, healthCheckInterval: 250 } : {}),
    pressureHandler: (req, reply, type) => {
      if (!shedsRoute(req)) return undefined;
      const reason = REASONS[type] ?? type;
      shed.inc({ reason });
      reply.header('Retry-After', String(retryAfterSeconds));
      return Promise.reject(
        new AppError(
          'service_unavailable',
          `The service is overloaded (${reason.replace(/_/g, ' ')}); retry after ${retryAfterSeconds} s`,
        ),
      );
    },
  });
}

/**
 * A bound of its own for heavy work (per-pixel GeoJSON: a compute task that writes megabytes, then
 * gzip): at most `concurrency` at once and `queue` more waiting in order; past that a request is
 * refused at once with 503 and Retry-After, as load shedding does. Cheap requests never wait here
 * (and the work itself runs in low-priority threads of its own, runtime.ts), so a burst of heavy
 * requests delays only other heavy ones.
 */
export class HeavyWork {
  private running = 0;
  private readonly waiting: Array<() => void> = [];

  constructor(
    private readonly limits: Pick<Config['heavy'], 'concurrency' | 'queue'> & { retryAfterSeconds: number },
  ) {}

  /** Heavy work running and waiting for a slot. */
  get load(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  async run<T>(work: () => Promise<T>): Promise<T> {
    if (this.running < this.limits.concurrency) this.running++;
    else if (this.waiting.length < this.limits.queue)
      await new Promise<void>((r) => this.waiting.push(r)); // the slot is handed over
    else {
      shed.inc({ reason: 'heavy_queue' });
      const { concurrency, queue, retryAfterSeconds } = this.limits;
      throw new AppError(
        'service_unavailable',
        `The service is overloaded (heavy queue: ${concurrency} per-pixel GeoJSON requests running, ${queue} waiting); retry after ${retryAfterSeconds} s`,
        {
          headers: { 'Retry-After': String(retryAfterSeconds) },
        },
      );
    }
    try {
      return await work();
    } finally {
      const next = this.waiting.shift();
      if (next) next();
      else this.running--;
    }
  }
}

/**
 * Per-key limit for an authenticated scope (register after requireApiKey, before its routes):
 * counted per API key id (never the key itself), in Redis when configured so that every replica
 * shares the budget. A Redis outage lets requests through rather than failing them.
 */
export async function registerRateLimit(
  scope: FastifyInstance,
  config: Pick<Config, 'rateLimitPerMinute' | 'redisUrl' | 'queuePrefix'>,
): Promise<void> {
  if (config.rateLimitPerMinute <= 0) return;
  let redis: Redis | undefined;
  if (config.redisUrl) {
    redis = new Redis(config.redisUrl, { connectTimeout: 1000, maxRetriesPerRequest: 1, enableOfflineQueue: false });
    redis.on('error', () => {
      /* reconnects by itself; skipOnError lets requests through meanwhile */
    });
    scope.addHook('onClose', async () => {
      await redis!.quit().catch(() => redis!.disconnect());
    });
    // Commands fail at once while disconnected (no offline queue: a Redis outage must not stall
    // requests), so wait for the first connection here, a bounded time.
    await new Promise<void>((resolve) => {
      const t = setTimeout(resolve, 2000);
      redis!.once('ready', () => {
        clearTimeout(t);
        resolve();
      });
    });
  }
  await scope.register(rateLimit, {
    global: true,
    max: config.rateLimitPerMinute,
    timeWindow: 60_000,
    hook: 'onRequest',
    keyGenerator: (req) => `key:${req.apiKeyId}`,
    ...(redis
      ? { redis, nameSpace: `fa:${config.queuePrefix ? `${config.queuePrefix}:` : ''}ratelimit:`, skipOnError: true }
      : {}),
    enableDraftSpec: true,
    onExceeded: () => limited.inc(),
    errorResponseBuilder: (_req, ctx) =>
      new AppError(
        'rate_limited',
        `More than ${ctx.max} requests in a minute with this API key; retry in ${ctx.after}`,
      ),
  });
}
