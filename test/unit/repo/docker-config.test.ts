/**
 * The deployment files, checked without Docker: the compose file runs PostgreSQL, Redis,
 * Prometheus, Grafana, two api and two worker containers with the right ROLE; Prometheus scrapes
 * every api and worker at the port it serves /metrics on; Grafana is provisioned with the
 * Prometheus datasource and the dashboard, whose panels are valid and query real metrics (that
 * the metrics exist in a scrape of running processes is checked in test/e2e/operations-metrics).
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { packageRoot } from '../../../src/platform/paths.js';

const file = (p: string) => readFileSync(path.join(packageRoot, 'docker', p), 'utf8');
const compose = parse(file('compose.yaml'), { merge: true }) as { services: Record<string, any> };
const prom = parse(file('prometheus.yml')) as {
  scrape_configs: Array<{ job_name: string; metrics_path: string; static_configs: Array<{ targets: string[] }> }>;
};
const dashboard = JSON.parse(file('grafana/dashboards/field-analysis.json'));

describe('docker deployment files', () => {
  it('compose runs postgres, redis, prometheus, grafana, two api and two worker containers on shared services', () => {
    const s = compose.services;
    expect(Object.keys(s).sort()).toEqual([
      'api1',
      'api2',
      'grafana',
      'postgres',
      'prometheus',
      'redis',
      'worker1',
      'worker2',
    ]);
    const roles = Object.entries(s)
      .filter(([, v]) => v.environment?.ROLE)
      .map(([k, v]) => [k, v.environment.ROLE]);
    expect(roles.sort()).toEqual([
      ['api1', 'api'],
      ['api2', 'api'],
      ['worker1', 'worker'],
      ['worker2', 'worker'],
    ]);
    for (const name of ['api1', 'api2', 'worker1', 'worker2']) {
      const env = s[name].environment;
      expect(env.DATABASE_URL).toMatch(/^postgres:\/\/.*@postgres:5432\//);
      expect(env.REDIS_URL).toBe('redis://redis:6379');
      // Docker waits longer than the service's own grace period before SIGKILL.
      expect(parseInt(s[name].stop_grace_period, 10) * 1000).toBeGreaterThan(10_000);
      expect(s[name].depends_on).toMatchObject({
        postgres: { condition: 'service_healthy' },
        redis: { condition: 'service_healthy' },
      });
    }
    expect(s.worker1.environment.METRICS_PORT).toBe('9464');
    expect(s.grafana.volumes.join(' ')).toContain('./grafana/dashboards:/var/lib/grafana/dashboards');
  });

  it('prometheus scrapes every api on its HTTP port and every worker on METRICS_PORT', () => {
    const targets = prom.scrape_configs.flatMap((c) =>
      c.static_configs.flatMap((t) => t.targets.map((x) => [c.metrics_path, x])),
    );
    expect(targets.sort()).toEqual([
      ['/metrics', 'api1:3000'],
      ['/metrics', 'api2:3000'],
      ['/metrics', 'worker1:9464'],
      ['/metrics', 'worker2:9464'],
    ]);
  });

  it('grafana is provisioned with the datasource the dashboard uses', () => {
    const ds = parse(file('grafana/provisioning/datasources/prometheus.yml')) as {
      datasources: Array<{ uid: string; url: string; type: string }>;
    };
    expect(ds.datasources[0]).toMatchObject({ uid: 'prometheus', type: 'prometheus', url: 'http://prometheus:9090' });
    const dash = parse(file('grafana/provisioning/dashboards/dashboards.yml')) as {
      providers: Array<{ options: { path: string } }>;
    };
    expect(dash.providers[0]!.options.path).toBe('/var/lib/grafana/dashboards');
  });

  it('the dashboard has the panels an operator needs, each with a query on the provisioned datasource', () => {
    const panels = (
      dashboard.panels as Array<{
        type: string;
        title: string;
        id: number;
        targets?: Array<{ expr: string; datasource: { uid: string } }>;
      }>
    ).filter((p) => p.type !== 'row');
    const titles = panels.map((p) => p.title.toLowerCase()).join(' | ');
    for (const need of [
      'latency p50',
      'latency p99',
      'error rate',
      'event loop',
      'pool utilisation',
      'cpu',
      'memory',
      'queue backlog',
      'deliveries by outcome',
      'delivery lag',
      'report generation',
    ]) {
      expect(titles).toContain(need);
    }
    const ids = dashboard.panels.map((p: { id: number }) => p.id);
    expect(new Set(ids).size).toBe(ids.length);
    for (const p of panels) {
      expect(p.targets?.length, p.title).toBeGreaterThan(0);
      for (const t of p.targets!) {
        expect(t.datasource.uid).toBe('prometheus');
        // Balanced brackets: a typo in PromQL shows up here rather than as an empty panel.
        for (const [o, c] of [
          ['(', ')'],
          ['{', '}'],
          ['[', ']'],
        ])
          expect(t.expr.split(o!).length, t.expr).toBe(t.expr.split(c!).length);
      }
    }
  });
});
