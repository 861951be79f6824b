import { Gauge } from 'prom-client';
import { Type } from 'typebox';
import { isProblemCode, problemCatalog } from '../errors.js';
import { registry } from '../metrics.js';
import type { Api, PlatformServices } from './context.js';

/** The probes of /readyz: the database, then the optional services (queue, compute pool). */
const probesOf = (s: PlatformServices): Record<string, () => Promise<void>> => ({
  database: async () => void (await s.db.query('SELECT 1')),
  ...s.readiness,
});

/** Each probe's answer: `ok` or `failing: <why>` (2 s each, all at once). */
async function runProbes(s: PlatformServices): Promise<Record<string, string>> {
  const checks: Record<string, string> = {};
  await Promise.all(
    Object.entries(probesOf(s)).map(async ([name, probe]) => {
      try {
        await withTimeout(probe(), 2000);
        checks[name] = 'ok';
      } catch (err) {
        checks[name] = `failing: ${(err as Error).message}`;
      }
    }),
  );
  return checks;
}

/**
 * The same probes at scrape time, for alerting (Prometheus cannot call /readyz itself). One run
 * serves both gauges of a scrape. The services of the last app built in this process are probed
 * (an api process with METRICS_PORT builds two apps over the same services).
 */
let probed: PlatformServices | undefined;
let lastRun: { of: PlatformServices; at: number; checks: Promise<Record<string, string>> } | undefined;
function probeForScrape(): Promise<Record<string, string>> | undefined {
  if (!probed) return undefined;
  if (lastRun?.of !== probed || Date.now() - lastRun.at > 1000)
    lastRun = { of: probed, at: Date.now(), checks: runProbes(probed) };
  return lastRun.checks;
}

new Gauge({
  name: 'readiness_check_up',
  help: 'Whether each readiness probe of /readyz (database, queue, compute) answers at scrape time: 1 yes, 0 no',
  labelNames: ['check'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    const checks = await probeForScrape();
    for (const [check, v] of Object.entries(checks ?? {})) this.set({ check }, v === 'ok' ? 1 : 0);
  },
});

new Gauge({
  name: 'dependency_up',
  help: 'Whether an external server answers at scrape time (postgresql with DATABASE_URL, redis with REDIS_URL): 1 yes, 0 no',
  labelNames: ['dependency'] as const,
  registers: [registry],
  async collect() {
    this.reset();
    const checks = await probeForScrape();
    if (!checks || !probed) return;
    // With REDIS_URL the job queue is BullMQ, so the queue probe is a PING to Redis.
    if (probed.config.databaseUrl) this.set({ dependency: 'postgresql' }, checks.database === 'ok' ? 1 : 0);
    if (probed.config.redisUrl && 'queue' in checks) this.set({ dependency: 'redis' }, checks.queue === 'ok' ? 1 : 0);
  },
});

const Check = Type.Object({ status: Type.String(), checks: Type.Optional(Type.Record(Type.String(), Type.String())) });

export function healthRoutes(app: Api, s: PlatformServices): void {
  probed = s;
  app.addHook('onClose', async () => {
    if (probed === s) probed = undefined;
  });
  app.get(
    '/healthz',
    { schema: { tags: ['operations'], summary: 'Liveness', security: [], response: { 200: Check } } },
    async () => ({ status: 'ok' }),
  );

  app.get(
    '/readyz',
    {
      schema: {
        tags: ['operations'],
        summary: 'Readiness: database, queue and compute pool answer',
        security: [],
        response: { 200: Check, 503: Check },
      },
    },
    async (_req, reply) => {
      const checks = await runProbes(s);
      const ok = Object.values(checks).every((v) => v === 'ok');
      return reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'unavailable', checks });
    },
  );

  // `type` of every problem resolves here, so a client (or a person) can look a code up.
  app.get(
    '/problems/:code',
    {
      schema: { hide: true, params: Type.Object({ code: Type.String({ maxLength: 64 }) }) },
    },
    async (req, reply) => {
      const code = req.params.code;
      if (!isProblemCode(code)) return reply.callNotFound();
      return { code, status: problemCatalog[code].status, title: problemCatalog[code].title };
    },
  );
}

function withTimeout<T>(p: Promise<T>, ms: number): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`no answer in ${ms} ms`)), ms);
    p.then(
      (v) => {
        clearTimeout(t);
        resolve(v);
      },
      (e) => {
        clearTimeout(t);
        reject(e);
      },
    );
  });
}
