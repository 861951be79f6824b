/**
 * Operations, as operators run the service: compiled processes by ROLE.
 * - ROLE=all on the embedded default: after real traffic (an index call, an imagery registration,
 *   a webhook delivery, a report) /metrics holds every family with sensible values.
 * - One ROLE=api and two ROLE=worker processes on PostgreSQL and Redis: the api serves the API and
 *   /metrics, each worker serves /metrics on its METRICS_PORT and no API; many report and delivery
 *   jobs are each run exactly once across the two workers; every metric the Grafana dashboard
 *   queries exists in a real scrape.
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { parse as parseYaml } from 'yaml';
import { packageRoot } from '../../src/platform/paths.js';
import { TEST_DATABASE_URL, TEST_REDIS_URL, uniqueName } from '../helpers/backends.js';
import {
  demoField,
  devKey,
  dropRedisPrefix,
  freePort,
  metricSum,
  privateDatabase,
  scrape,
  scrapeNames,
  startService,
  stopService,
  waitReady,
  waitUntil,
  type MetricSample,
  type Service,
} from '../helpers/processes.js';
import { makePki, startReceiver, type Receiver, type TestPki } from '../helpers/tls.js';

interface Traffic {
  base: string;
  key: string;
  fieldId: string;
  dataDir: string;
  rx: Receiver;
}

const json = async (res: Response) => ({ status: res.status, body: (await res.json()) as any });

async function call(t: Traffic, method: string, url: string, body?: unknown) {
  return json(
    await fetch(`${t.base}${url}`, {
      method,
      headers: { authorization: `Bearer ${t.key}`, ...(body ? { 'content-type': 'application/json' } : {}) },
      body: body ? JSON.stringify(body) : undefined,
    }),
  );
}

/** One of each: index call, imagery registration, webhook (test + field.updated), report. */
async function realTraffic(t: Traffic): Promise<void> {
  const seen = t.rx.received.length;
  const idx = await call(
    t,
    'GET',
    `/v1/fields/${t.fieldId}/indices?index=NDVI&date=2025-07-01&zonal_stats=true&geojson=false`,
  );
  expect(idx.status).toBe(200);
  const demo = path.join(t.dataDir, 'imagery', 'demo');
  const bands = Object.fromEntries(
    ['B02', 'B03', 'B04', 'B08'].map((b) => [b, path.join(demo, `2025-07-06_${b}.tif`)]),
  );
  const img = await call(t, 'POST', '/v1/imagery', {
    source: 'drone',
    capture_date: '2025-07-02',
    bands,
    scale: 0.0001,
    offset: -0.1,
  });
  expect(img.status, JSON.stringify(img.body)).toBe(201);
  const wh = await call(t, 'POST', '/v1/webhooks', { url: t.rx.url, events: ['field.updated', 'report.ready'] });
  expect(wh.status, JSON.stringify(wh.body)).toBe(201);
  const patched = await call(t, 'PATCH', `/v1/fields/${t.fieldId}`, { crop_type: 'wheat' });
  expect(patched.status).toBe(200);
  const rpt = await call(t, 'POST', `/v1/fields/${t.fieldId}/reports`, {
    type: 'scouting',
    format: 'json',
    options: { date: '2025-07-06' },
  });
  expect(rpt.status, JSON.stringify(rpt.body)).toBe(202);
  await waitUntil(
    'the report',
    async () => (await call(t, 'GET', `/v1/reports/${rpt.body.id}`)).body.status === 'ready',
    60_000,
  );
  for (const event of ['field.updated', 'report.ready']) {
    await waitUntil(
      `${event} at the receiver`,
      () => t.rx.received.slice(seen).some((r) => r.headers['x-service-event'] === event),
      30_000,
    );
  }
}

const has = (s: MetricSample[], name: string) => s.some((x) => x.name === name);

/** The families of issue 8 with values that real traffic must have moved. */
function expectApiFamilies(s: MetricSample[]) {
  expect(
    metricSum(s, 'http_request_duration_seconds_count', { route: '/v1/fields/:id/indices', status_code: '200' }),
  ).toBeGreaterThanOrEqual(1);
  expect(
    metricSum(s, 'http_request_duration_seconds_count', { route: '/v1/imagery', method: 'POST', status_code: '201' }),
  ).toBe(1);
  // The index call, the registration's inspection and coverage ran in the pool.
  expect(metricSum(s, 'compute_task_duration_seconds_count')).toBeGreaterThanOrEqual(2);
  expect(metricSum(s, 'compute_pool_threads')).toBe(1);
  const util = metricSum(s, 'compute_pool_utilization_ratio');
  expect(util).toBeGreaterThan(0);
  expect(util).toBeLessThanOrEqual(1);
  expect(has(s, 'compute_pool_queue_size')).toBe(true);
  // Bytes read and decode time come from the compute threads (the demo's files are local).
  expect(metricSum(s, 'imagery_read_bytes_total', { source: 'local' })).toBeGreaterThan(10_000);
  expect(metricSum(s, 'imagery_decode_duration_seconds_count', { compression: 'deflate' })).toBeGreaterThanOrEqual(1);
  expect(metricSum(s, 'process_resident_memory_bytes')).toBeGreaterThan(10_000_000);
  expect(has(s, 'nodejs_eventloop_lag_p99_seconds')).toBe(true);
  // Labels are bounded: route patterns, never ids.
  expect(s.some((x) => Object.values(x.labels).some((v) => /(fld|rpt|wh|img|dlv|evt)_[A-Za-z0-9]{8}/.test(v)))).toBe(
    false,
  );
}

function expectWorkerFamilies(s: MetricSample[]) {
  expect(
    metricSum(s, 'jobs_duration_seconds_count', { queue: 'reports', outcome: 'completed' }),
  ).toBeGreaterThanOrEqual(1);
  expect(has(s, 'jobs_queue_depth')).toBe(true);
  expect(metricSum(s, 'jobs_queue_depth', { queue: 'reports', state: 'completed' })).toBeGreaterThanOrEqual(1);
  expect(metricSum(s, 'webhook_deliveries_total', { outcome: 'succeeded' })).toBeGreaterThanOrEqual(1);
  expect(metricSum(s, 'webhook_delivery_duration_seconds_count', { result: 'ok' })).toBeGreaterThanOrEqual(1);
  const lag = metricSum(s, 'webhook_delivery_lag_seconds_sum') / metricSum(s, 'webhook_delivery_lag_seconds_count');
  expect(lag).toBeGreaterThan(0);
  expect(lag).toBeLessThan(60);
  // The direct path's gauge: present on a delivering process, never negative, settled when idle.
  expect(has(s, 'webhook_direct_deliveries')).toBe(true);
  for (const state of ['waiting', 'in_flight'])
    expect(metricSum(s, 'webhook_direct_deliveries', { state })).toBeGreaterThanOrEqual(0);
  expect(
    metricSum(s, 'reports_generated_total', { type: 'scouting', format: 'json', outcome: 'ready' }),
  ).toBeGreaterThanOrEqual(1);
  expect(
    metricSum(s, 'report_generation_duration_seconds_count', { type: 'scouting', format: 'json' }),
  ).toBeGreaterThanOrEqual(1);
  expect(metricSum(s, 'compute_task_duration_seconds_count', { kind: 'field-index' })).toBeGreaterThanOrEqual(1);
}

describe('roles', () => {
  it('ROLE=api or worker on the embedded database stops at start with one line (PGlite serves one process)', async () => {
    for (const role of ['api', 'worker']) {
      const s = startService({ ROLE: role, DATA_DIR: path.join(os.tmpdir(), uniqueName('fa-never')) });
      expect(await s.exited).toBe(78);
      expect(s.output().trim()).toBe(
        `invalid configuration: ROLE ${role} needs DATABASE_URL (the embedded database serves one process; use ROLE=all)`,
      );
    }
  });
});

let pki: TestPki;
let rx: Receiver;
beforeAll(async () => {
  pki = makePki();
  rx = await startReceiver(pki);
});
afterAll(async () => {
  await rx?.close();
});

describe('metrics of a ROLE=all process on the embedded default', () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fa-ops-'));
  let svc: Service | undefined;
  afterAll(async () => {
    if (svc) await stopService(svc);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('after an index call, an imagery registration, a webhook delivery and a report, /metrics has every family', async () => {
    const port = await freePort();
    const caFile = path.join(dataDir, 'ca.pem');
    (await import('node:fs')).writeFileSync(caFile, pki.ca);
    svc = startService({
      DATA_DIR: dataDir,
      PORT: String(port),
      NODE_EXTRA_CA_CERTS: caFile,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
    });
    const base = `http://127.0.0.1:${port}`;
    await waitReady(svc, `${base}/readyz`);
    const t: Traffic = { base, key: devKey(svc)!, fieldId: (await demoField(svc))!, dataDir, rx };
    expect(t.key && t.fieldId, svc.output()).toBeTruthy();
    await realTraffic(t);
    let s: MetricSample[] = [];
    // Imagery figures travel from the compute threads asynchronously: the next scrape has them.
    await waitUntil(
      'imagery metrics',
      async () => {
        s = await scrape(`${base}/metrics`);
        return (
          metricSum(s, 'imagery_decode_duration_seconds_count') > 0 &&
          metricSum(s, 'webhook_delivery_lag_seconds_count') > 0
        );
      },
      10_000,
    );
    expectApiFamilies(s);
    expectWorkerFamilies(s);
    expect(await stopService(svc)).toBe(0);
    svc = undefined;
  }, 180_000);
});

describe.skipIf(!TEST_DATABASE_URL || !TEST_REDIS_URL)('one api and two workers on PostgreSQL and Redis', () => {
  const dataDir = mkdtempSync(path.join(os.tmpdir(), 'fa-ops-'));
  const prefix = uniqueName('ops');
  let db: Awaited<ReturnType<typeof privateDatabase>>;
  const services: Service[] = [];
  afterAll(async () => {
    for (const s of services) await stopService(s);
    await db?.drop();
    await dropRedisPrefix(TEST_REDIS_URL!, prefix);
    rmSync(dataDir, { recursive: true, force: true });
  });

  it('each process serves its metrics, workers no API; jobs run once across workers; the dashboard queries only real metrics', async () => {
    db = await privateDatabase(TEST_DATABASE_URL!);
    const [port, m1, m2] = [await freePort(), await freePort(), await freePort()];
    const caFile = path.join(dataDir, 'ca.pem');
    (await import('node:fs')).writeFileSync(caFile, pki.ca);
    const common = {
      DATA_DIR: dataDir,
      DATABASE_URL: db.url,
      REDIS_URL: TEST_REDIS_URL!,
      QUEUE_PREFIX: prefix,
      NODE_EXTRA_CA_CERTS: caFile,
      WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
      SIGNING_KEY: 'ops-test-signing-key-0123456789abcdef',
      PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
    };
    // The api creates the account, key and demo (workers never bootstrap) before the workers start.
    const api = startService({ ...common, ROLE: 'api', PORT: String(port), DEV_BOOTSTRAP: 'true' });
    services.push(api);
    const base = `http://127.0.0.1:${port}`;
    await waitReady(api, `${base}/readyz`);
    const w1 = startService({ ...common, ROLE: 'worker', METRICS_PORT: String(m1), PORT: String(port) });
    const w2 = startService({ ...common, ROLE: 'worker', METRICS_PORT: String(m2), PORT: String(port) });
    services.push(w1, w2);
    await waitReady(w1, `http://127.0.0.1:${m1}/readyz`);
    await waitReady(w2, `http://127.0.0.1:${m2}/readyz`);
    // A worker serves operations routes only.
    expect((await fetch(`http://127.0.0.1:${m1}/v1/fields`)).status).toBe(404);
    expect((await fetch(`http://127.0.0.1:${m1}/healthz`)).status).toBe(200);

    const t: Traffic = { base, key: devKey(api)!, fieldId: (await demoField(api))!, dataDir, rx };
    expect(t.key && t.fieldId, api.output()).toBeTruthy();
    await realTraffic(t);

    // Many jobs: 12 reports and 40 field PATCHes (40 field.updated deliveries plus report.ready ones).
    const before = rx.received.length;
    const reports = await Promise.all(
      Array.from({ length: 12 }, (_, i) =>
        call(t, 'POST', `/v1/fields/${t.fieldId}/reports`, {
          type: i % 2 ? 'scouting' : 'seasonal',
          format: i % 3 ? 'json' : 'csv',
        }),
      ),
    );
    for (const r of reports) expect(r.status, JSON.stringify(r.body)).toBe(202);
    for (let i = 0; i < 40; i++)
      expect((await call(t, 'PATCH', `/v1/fields/${t.fieldId}`, { name: `renamed ${i}` })).status).toBe(200);
    await waitUntil(
      'every report ready',
      async () => {
        const states = await Promise.all(
          reports.map(async (r) => (await call(t, 'GET', `/v1/reports/${r.body.id}`)).body.status),
        );
        return states.every((x) => x === 'ready');
      },
      120_000,
      500,
    );
    await waitUntil('every delivery', () => rx.received.slice(before).length >= 40 + 12, 60_000);
    await new Promise((r) => setTimeout(r, 1500)); // a duplicate would arrive now
    const ids = rx.received.slice(before).map((r) => String(r.headers['x-service-delivery']));
    expect(new Set(ids).size).toBe(ids.length);
    expect(ids.length).toBe(52);
    // Each report was taken by one worker once (a second run would count an attempt).
    const sql = postgres(db.url, { max: 1 });
    try {
      const rows = await sql<{ attempts: number }[]>`SELECT attempts FROM reports`;
      expect(rows.length).toBe(13);
      expect(rows.every((r) => r.attempts === 1)).toBe(true);
    } finally {
      await sql.end();
    }

    const apiMetrics = await scrape(`${base}/metrics`);
    let s1: MetricSample[] = [];
    let s2: MetricSample[] = [];
    await waitUntil(
      'worker metrics',
      async () => {
        [s1, s2] = [await scrape(`http://127.0.0.1:${m1}/metrics`), await scrape(`http://127.0.0.1:${m2}/metrics`)];
        return (
          metricSum([...s1, ...s2], 'jobs_duration_seconds_count', { queue: 'reports', outcome: 'completed' }) >= 13
        );
      },
      10_000,
    );
    expectApiFamilies(apiMetrics);
    // The api ran no job; the workers ran every one exactly once between them.
    expect(metricSum(apiMetrics, 'jobs_duration_seconds_count')).toBe(0);
    const workers = [...s1, ...s2];
    expect(metricSum(workers, 'jobs_duration_seconds_count', { queue: 'reports' })).toBe(13);
    // Both workers took reports (each runs two at a time), so "once" above was contended.
    expect(metricSum(s1, 'jobs_duration_seconds_count', { queue: 'reports' })).toBeGreaterThan(0);
    expect(metricSum(s2, 'jobs_duration_seconds_count', { queue: 'reports' })).toBeGreaterThan(0);
    expect(metricSum(workers, 'webhook_deliveries_total', { outcome: 'succeeded' })).toBeGreaterThanOrEqual(52);
    expectWorkerFamilies(workers);
    expect(metricSum(s1, 'process_resident_memory_bytes')).toBeGreaterThan(0);
    expect(metricSum(s2, 'process_resident_memory_bytes')).toBeGreaterThan(0);

    // Every metric the dashboard queries is served by the api or a worker.
    const dashboard = JSON.parse(
      readFileSync(path.join(packageRoot, 'docker/grafana/dashboards/field-analysis.json'), 'utf8'),
    );
    // The SLO panels read the recording rules of docker/prometheus/ (their own expressions are checked
    // against a real Prometheus in prometheus-queries.test.ts): those series are Prometheus's, not ours.
    const names = new Set([
      ...(await scrapeNames(`${base}/metrics`)),
      ...(await scrapeNames(`http://127.0.0.1:${m1}/metrics`)),
      ...recordedNames(),
    ]);
    const queried = dashboardMetrics(dashboard);
    expect(queried.length).toBeGreaterThan(10);
    expect(queried.filter((m) => !names.has(m))).toEqual([]);

    for (const s of services.splice(0)) expect(await stopService(s)).toBe(0);
  }, 300_000);
});

/** Metric names in the PromQL of every panel target (functions, label lists, ranges and strings left out). */
function dashboardMetrics(dashboard: { panels: Array<{ targets?: Array<{ expr: string }> }> }): string[] {
  const fns = new Set([
    'sum',
    'rate',
    'irate',
    'increase',
    'histogram_quantile',
    'max',
    'min',
    'avg',
    'by',
    'clamp_min',
    'count',
    'le',
    'job',
    'instance',
    'on',
    'without',
    'topk',
    'avg_over_time',
    'max_over_time',
  ]);
  const out = new Set<string>();
  for (const p of dashboard.panels) {
    for (const t of p.targets ?? []) {
      const bare = t.expr
        .replace(/\{[^}]*\}/g, '')
        .replace(/\[[^\]]*\]/g, '')
        .replace(/\b(by|without|on|ignoring)\s*\([^)]*\)/g, '')
        .replace(/"[^"]*"/g, '');
      for (const m of bare.matchAll(/\b([a-z_:][a-z0-9_:]*)\b/g)) {
        if (!fns.has(m[1]!) && !/^\d/.test(m[1]!)) out.add(m[1]!);
      }
    }
  }
  return [...out];
}

/** Names of the series the recording rules in docker/prometheus/ write. */
function recordedNames(): string[] {
  const file = parseYaml(readFileSync(path.join(packageRoot, 'docker/prometheus/slo.yml'), 'utf8')) as {
    groups: Array<{ rules: Array<{ record?: string }> }>;
  };
  const names = file.groups.flatMap((g) => g.rules.flatMap((r) => (r.record ? [r.record] : [])));
  expect(names.length).toBeGreaterThan(0);
  return names;
}
