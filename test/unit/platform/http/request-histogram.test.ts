/**
 * http_request_duration_seconds keeps its series outside prom-client's label hash (issue #25: the
 * warm read path's per-request cost). The reference is prom-client's own Histogram fed the same
 * observations: the text exposition and the JSON must be the same, byte for byte.
 */
import { Histogram, Registry } from 'prom-client';
import { describe, expect, it } from 'vitest';
import { RequestHistogram, routeClass } from '../../../../src/platform/http/metrics.js';

const config = (registry: Registry) => ({
  name: 'http_request_duration_seconds',
  help: 'HTTP request duration',
  labelNames: ['method', 'route', 'status_code', 'route_class'] as const,
  buckets: [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5],
  registers: [registry],
});

function pair() {
  const ours = new Registry();
  const theirs = new Registry();
  const fast = new RequestHistogram(config(ours));
  const reference = new Histogram(config(theirs));
  const observe = (method: string, route: string, status: number, seconds: number) => {
    fast.observeRequest(method, route, status, seconds);
    reference.observe({ method, route, status_code: String(status), route_class: routeClass(method, route) }, seconds);
  };
  return { ours, theirs, fast, reference, observe };
}

describe('RequestHistogram', () => {
  it('prints what prom-client prints for the same observations', async () => {
    const { ours, theirs, observe } = pair();
    expect(await ours.metrics()).toBe(await theirs.metrics());
    // Interleaved series (the order of first observation is the order printed), values below the
    // first bucket, on a bound, between bounds, on the last bound and above it, a pseudo-random run.
    const routes: Array<[string, string, number]> = [
      ['GET', '/v1/fields/:id/indices', 200],
      ['GET', '/v1/fields/:id', 200],
      ['POST', '/v1/imagery/upload', 201],
      ['GET', '/v1/fields/:id/indices', 404],
      ['GET', 'unmatched', 404],
      ['PATCH', '/v1/fields/:id', 200],
      ['GET', '/metrics', 200],
    ];
    for (const v of [0.0001, 0.001, 0.0011, 0.0025, 0.3, 5, 7.5, 0])
      for (const [m, r, s] of routes) observe(m, r, s, v);
    let x = 12345;
    for (let i = 0; i < 5000; i++) {
      x = (x * 1103515245 + 12345) % 2 ** 31;
      const [m, r, s] = routes[x % routes.length]!;
      observe(m, r, s, (x / 2 ** 31) ** 4 * 8);
    }
    const text = await ours.metrics();
    expect(text).toBe(await theirs.metrics());
    expect(text).toMatch(
      /^http_request_duration_seconds_count\{method="GET",route="\/v1\/fields\/:id\/indices",status_code="200",route_class="heavy_read"\} \d+$/m,
    );
  });

  it('gives the same JSON, and reset empties it as prom-client does', async () => {
    const { ours, theirs, observe } = pair();
    for (const v of [0.002, 0.02, 2]) observe('GET', '/v1/fields', 200, v);
    expect(await ours.getMetricsAsJSON()).toEqual(await theirs.getMetricsAsJSON());
    ours.resetMetrics();
    theirs.resetMetrics();
    expect(await ours.metrics()).toBe(await theirs.metrics());
    observe('DELETE', '/v1/fields/:id', 204, 0.004);
    expect(await ours.metrics()).toBe(await theirs.metrics());
  });

  it('refuses a value that is not a number, as prom-client does', () => {
    const { fast, reference } = pair();
    expect(() => fast.observeRequest('GET', '/v1/fields', 200, Number.NaN)).toThrow(TypeError);
    expect(() => reference.observe({ method: 'GET' }, Number.NaN)).toThrow(TypeError);
  });
});
