/**
 * The route class label of http_request_duration_seconds (the SLO classes of
 * docker/prometheus/slo.yml): by method and route pattern, and on the histogram of a real Fastify
 * app as GET /metrics serves it.
 */
import Fastify from 'fastify';
import { describe, expect, it } from 'vitest';
import { registerMetrics, routeClass } from '../../../../src/platform/http/metrics.js';
import type { Api } from '../../../../src/platform/http/context.js';
import { parseMetrics } from '../../../helpers/processes.js';

describe('routeClass', () => {
  it('classes /v1 requests as read, heavy_read, write or transfer, everything else as other', () => {
    const cases: Array<[string, string, string]> = [
      ['GET', '/v1/fields', 'read'],
      ['GET', '/v1/fields/:id', 'read'],
      ['HEAD', '/v1/reports/:id', 'read'],
      ['GET', '/v1/fields/:id/indices/custom/:custom_id', 'read'],
      ['GET', '/v1/fields/:id/indices', 'heavy_read'],
      ['GET', '/v1/fields/:id/indices/timeseries', 'heavy_read'],
      ['POST', '/v1/fields', 'write'],
      ['PATCH', '/v1/fields/:id', 'write'],
      ['DELETE', '/v1/webhooks/:id', 'write'],
      ['PUT', '/v1/fields/:id', 'write'],
      ['POST', '/v1/indices/validate', 'write'],
      ['POST', '/v1/imagery/upload', 'transfer'],
      ['GET', '/v1/reports/:id/download', 'transfer'],
      ['GET', '/healthz', 'other'],
      ['GET', '/metrics', 'other'],
      ['POST', '/demo/stac/search', 'other'],
      ['GET', 'unmatched', 'other'],
      ['GET', '/v1', 'other'],
    ];
    expect(cases.map(([m, r]) => [m, r, routeClass(m, r)])).toEqual(cases);
  });

  it('labels each observation of the request histogram with its class', async () => {
    const app = Fastify() as unknown as Api;
    registerMetrics(app);
    app.get('/v1/fields/:id/indices', async () => ({ ok: true }));
    app.get('/v1/fields', async () => ({ ok: true }));
    app.patch('/v1/fields/:id', async (_req, reply) => reply.code(500).send({ ok: false }));
    await app.ready();
    const before = parseMetrics((await app.inject({ method: 'GET', url: '/metrics' })).body);
    await app.inject({ method: 'GET', url: '/v1/fields/fld_1/indices?index=NDVI' });
    await app.inject({ method: 'GET', url: '/v1/fields' });
    await app.inject({ method: 'GET', url: '/v1/fields' });
    await app.inject({ method: 'PATCH', url: '/v1/fields/fld_2', payload: {} });
    await app.inject({ method: 'GET', url: '/nowhere' });
    const after = parseMetrics((await app.inject({ method: 'GET', url: '/metrics' })).body);
    await app.close();
    // The registry is the process's: count what this test added.
    const count = (s: typeof after, labels: Record<string, string>) =>
      s
        .filter(
          (x) =>
            x.name === 'http_request_duration_seconds_count' &&
            Object.entries(labels).every(([k, v]) => x.labels[k] === v),
        )
        .reduce((a, x) => a + x.value, 0);
    const added = (labels: Record<string, string>) => count(after, labels) - count(before, labels);
    expect(added({ route: '/v1/fields/:id/indices', route_class: 'heavy_read', status_code: '200' })).toBe(1);
    expect(added({ route: '/v1/fields', route_class: 'read', method: 'GET' })).toBe(2);
    expect(added({ route: '/v1/fields/:id', route_class: 'write', status_code: '500' })).toBe(1);
    expect(added({ route: 'unmatched', route_class: 'other', status_code: '404' })).toBe(1);
    // Every series of the family carries a class.
    expect(after.filter((x) => x.name.startsWith('http_request_duration_seconds') && !x.labels.route_class)).toEqual(
      [],
    );
  });
});
