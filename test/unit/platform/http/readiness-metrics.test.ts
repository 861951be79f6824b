/**
 * readiness_check_up and dependency_up: the probes of /readyz run at scrape time, so that
 * Prometheus sees what /readyz would answer. The probes here are the platform's own interface
 * (PlatformServices.readiness); a probe that hangs counts as failing after its 2 s.
 */
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import type { Config } from '../../../../src/platform/config.js';
import type { Database } from '../../../../src/platform/database.js';
import type { Api, PlatformServices } from '../../../../src/platform/http/context.js';
import { healthRoutes } from '../../../../src/platform/http/health.js';
import { registerMetrics } from '../../../../src/platform/http/metrics.js';
import { metricSum, parseMetrics } from '../../../helpers/processes.js';

function services(opts: { dbOk: boolean; queue: 'ok' | 'fails' | 'hangs'; urls: boolean }): PlatformServices {
  return {
    config: (opts.urls ? { databaseUrl: 'postgres://db/x', redisUrl: 'redis://r:6379' } : {}) as Config,
    db: {
      query: async () => {
        if (!opts.dbOk) throw new Error('connect ECONNREFUSED');
        return [{ '?column?': 1 }];
      },
    } as unknown as Database,
    readiness: {
      queue: () =>
        opts.queue === 'ok'
          ? Promise.resolve()
          : opts.queue === 'fails'
            ? Promise.reject(new Error('Connection is closed'))
            : new Promise<void>(() => {}),
      compute: async () => {},
    },
  };
}

async function scrapeAndReady(s: PlatformServices) {
  const app = Fastify() as unknown as Api;
  healthRoutes(app, s);
  registerMetrics(app);
  await app.ready();
  try {
    const samples = parseMetrics((await app.inject({ method: 'GET', url: '/metrics' })).body);
    const ready = await app.inject({ method: 'GET', url: '/readyz' });
    return { samples, ready: { status: ready.statusCode, checks: ready.json().checks as Record<string, string> } };
  } finally {
    await app.close();
  }
}

describe('readiness gauges', () => {
  it('all probes answer: every check 1, postgresql and redis 1, /readyz 200', async () => {
    const { samples, ready } = await scrapeAndReady(services({ dbOk: true, queue: 'ok', urls: true }));
    for (const check of ['database', 'queue', 'compute'])
      expect(metricSum(samples, 'readiness_check_up', { check }), check).toBe(1);
    expect(metricSum(samples, 'dependency_up', { dependency: 'postgresql' })).toBe(1);
    expect(metricSum(samples, 'dependency_up', { dependency: 'redis' })).toBe(1);
    expect(ready.status).toBe(200);
  });

  it('Redis refusing: queue 0 and redis 0, the rest 1, as /readyz says', async () => {
    const { samples, ready } = await scrapeAndReady(services({ dbOk: true, queue: 'fails', urls: true }));
    expect(metricSum(samples, 'readiness_check_up', { check: 'queue' })).toBe(0);
    expect(metricSum(samples, 'readiness_check_up', { check: 'database' })).toBe(1);
    expect(metricSum(samples, 'dependency_up', { dependency: 'redis' })).toBe(0);
    expect(metricSum(samples, 'dependency_up', { dependency: 'postgresql' })).toBe(1);
    expect(ready.status).toBe(503);
    expect(ready.checks.queue).toMatch(/^failing: Connection is closed/);
  });

  it('the database refusing: database 0 and postgresql 0', async () => {
    const { samples } = await scrapeAndReady(services({ dbOk: false, queue: 'ok', urls: true }));
    expect(metricSum(samples, 'readiness_check_up', { check: 'database' })).toBe(0);
    expect(metricSum(samples, 'dependency_up', { dependency: 'postgresql' })).toBe(0);
    expect(metricSum(samples, 'dependency_up', { dependency: 'redis' })).toBe(1);
  });

  it('a probe that hangs is failing after 2 s, and the scrape still answers', async () => {
    const t0 = Date.now();
    const { samples } = await scrapeAndReady(services({ dbOk: true, queue: 'hangs', urls: true }));
    expect(metricSum(samples, 'readiness_check_up', { check: 'queue' })).toBe(0);
    expect(Date.now() - t0).toBeLessThan(10_000);
  }, 15_000);

  it('without DATABASE_URL and REDIS_URL (embedded database): no dependency_up series', async () => {
    const { samples } = await scrapeAndReady(services({ dbOk: true, queue: 'ok', urls: false }));
    expect(samples.filter((s) => s.name === 'dependency_up')).toEqual([]);
    expect(metricSum(samples, 'readiness_check_up', { check: 'database' })).toBe(1);
  });
});
