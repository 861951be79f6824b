/**
 * The alerting rules and the Grafana dashboard query what the service really exports. The service
 * runs as in the compose file (on PostgreSQL and Redis, ROLE=all here so that one process serves
 * the API and runs the jobs), and a real Prometheus, started by the test on loopback, scrapes it
 * every 3 s and evaluates docker/prometheus/*.yml every second.
 * - Healthy and idle (started, demo written, its subscription polled, no client request): no
 *   alert expression returns anything, and no alert is pending or firing.
 * - After a short mixed load (cheap and heavy reads, writes, a report and its download, a webhook
 *   delivery, 4xx answers): every metric name that any rule (alert or recording) or any dashboard
 *   panel selects has series in Prometheus, and every expression evaluates without error. Names
 *   are read with Prometheus's own PromQL grammar (test/helpers/promql.ts).
 */
import { type ChildProcess, spawn } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL, TEST_REDIS_URL, uniqueName } from '../helpers/backends.js';
import {
  demoField,
  devKey,
  dropRedisPrefix,
  freePort,
  privateDatabase,
  type Service,
  startService,
  stopService,
  waitReady,
  waitUntil,
} from '../helpers/processes.js';
import { dashboardExprs, ruleExprs, rulesDir, selectedMetrics } from '../helpers/promql.js';
import { makePki, type Receiver, startReceiver } from '../helpers/tls.js';
import { hasPrometheus } from '../helpers/tools.js';

interface PromResult {
  metric: Record<string, string>;
  value: [number, string];
}

/** A Prometheus of the test's own: loopback only, a temporary TSDB, the repository's rule files. */
async function startPrometheus(dir: string, target: string) {
  const port = await freePort();
  const rules = ruleExprs()
    .map((r) => path.join(rulesDir, r.file))
    .filter((f, i, a) => a.indexOf(f) === i);
  // The job name is the compose file's, which ProcessDown selects on.
  writeFileSync(
    path.join(dir, 'prometheus.yml'),
    JSON.stringify({
      global: { scrape_interval: '3s', scrape_timeout: '3s', evaluation_interval: '1s' },
      rule_files: rules,
      scrape_configs: [{ job_name: 'field-analysis-api', static_configs: [{ targets: [target] }] }],
    }),
  );
  const child: ChildProcess = spawn(
    'prometheus',
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'tsdb')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--log.level=warn',
    ],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let out = '';
  child.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  child.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<void>((r) => child.once('exit', () => r()));
  const base = `http://127.0.0.1:${port}`;
  const api = async <T>(p: string, params: Record<string, string>): Promise<T> => {
    const res = await fetch(`${base}${p}?${new URLSearchParams(params)}`);
    const body = (await res.json()) as { status: string; data: T; error?: string };
    if (body.status !== 'success') throw new Error(`${p} ${JSON.stringify(params)}: ${body.error}`);
    return body.data;
  };
  return {
    output: () => out,
    query: async (q: string) => (await api<{ result: PromResult[] }>('/api/v1/query', { query: q })).result,
    series: (name: string) => api<Array<Record<string, string>>>('/api/v1/series', { 'match[]': name }),
    async stop() {
      if (child.exitCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.skipIf(!TEST_DATABASE_URL || !TEST_REDIS_URL || !hasPrometheus())(
  'alerting rules and dashboard queries against a real Prometheus scraping the service',
  () => {
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fa-prom-'));
    const prefix = uniqueName('prom');
    let db: Awaited<ReturnType<typeof privateDatabase>> | undefined;
    let svc: Service | undefined;
    let prom: Awaited<ReturnType<typeof startPrometheus>> | undefined;
    let rx: Receiver | undefined;
    afterAll(async () => {
      await prom?.stop();
      if (svc) await stopService(svc);
      await rx?.close();
      await db?.drop();
      await dropRedisPrefix(TEST_REDIS_URL!, prefix);
      rmSync(dir, { recursive: true, force: true });
    });

    it('idle: no alert expression returns a result; after a mixed load every query names exported series', async () => {
      const pki = makePki();
      rx = await startReceiver(pki);
      db = await privateDatabase(TEST_DATABASE_URL!);
      const port = await freePort();
      const caFile = path.join(dir, 'ca.pem');
      writeFileSync(caFile, pki.ca);
      svc = startService({
        ROLE: 'all',
        PORT: String(port),
        DATA_DIR: path.join(dir, 'data'),
        DATABASE_URL: db.url,
        REDIS_URL: TEST_REDIS_URL!,
        QUEUE_PREFIX: prefix,
        DEV_BOOTSTRAP: 'true',
        NODE_EXTRA_CA_CERTS: caFile,
        WEBHOOK_ALLOW_PRIVATE_NETWORKS: 'true',
        SIGNING_KEY: 'prom-test-signing-key-0123456789abcdef',
        PUBLIC_BASE_URL: `http://127.0.0.1:${port}`,
        RATE_LIMIT_PER_MINUTE: '10000',
      });
      const base = `http://127.0.0.1:${port}`;
      await waitReady(svc, `${base}/readyz`);
      const key = devKey(svc);
      const fieldId = await demoField(svc);
      expect(key && fieldId, svc.output()).toBeTruthy();

      prom = await startPrometheus(dir, `127.0.0.1:${port}`);
      const p = prom;
      // Scraped, and the demo subscription polled once (its series exist): the service is settled.
      await waitUntil(
        `Prometheus scraping the service (${p.output().slice(-1000)})`,
        async () =>
          (await p.query('up{job="field-analysis-api"} == 1')).length === 1 &&
          (await p.query('subscription_polls_total')).length > 0,
        90_000,
        500,
      );
      // Two more scrapes, so that rate() over every window has two samples; then rules evaluate.
      await sleep(7_000);

      // Healthy and idle.
      const alerts = ruleExprs().filter((r) => r.kind === 'alert');
      const idle: string[] = [];
      for (const a of alerts) {
        const got = await p.query(a.expr);
        if (got.length) idle.push(`${a.name}: ${JSON.stringify(got)}`);
      }
      expect(idle).toEqual([]);
      expect(await p.query('ALERTS')).toEqual([]);
      // The idle checks above saw these series (not an empty Prometheus).
      for (const name of ['readiness_check_up', 'dependency_up', 'jobs_queue_depth', 'jobs_oldest_waiting_age_seconds'])
        expect((await p.series(name)).length, name).toBeGreaterThan(0);
      expect((await p.query('dependency_up')).map((r) => r.metric.dependency).sort()).toEqual(['postgresql', 'redis']);

      // A short mixed load.
      const call = (method: string, url: string, body?: unknown, auth = true) =>
        fetch(`${base}${url}`, {
          method,
          headers: {
            ...(auth ? { authorization: `Bearer ${key}` } : {}),
            ...(body ? { 'content-type': 'application/json' } : {}),
          },
          body: body ? JSON.stringify(body) : undefined,
        });
      const wh = await call('POST', '/v1/webhooks', { url: rx.url, events: ['field.updated', 'report.ready'] });
      expect(wh.status).toBe(201);
      for (let i = 0; i < 5; i++) expect((await call('GET', '/v1/fields')).status).toBe(200);
      for (let i = 0; i < 2; i++) {
        const idx = await call('GET', `/v1/fields/${fieldId}/indices?index=NDVI&date=2025-07-01&zonal_stats=true`);
        expect(idx.status).toBe(200);
      }
      for (let i = 0; i < 3; i++)
        expect((await call('PATCH', `/v1/fields/${fieldId}`, { name: `renamed ${i}` })).status).toBe(200);
      expect((await call('GET', '/v1/fields/fld_doesnotexist00')).status).toBe(404);
      expect((await call('GET', '/v1/fields', undefined, false)).status).toBe(401);
      const rpt = await call('POST', `/v1/fields/${fieldId}/reports`, {
        type: 'scouting',
        format: 'json',
        options: { date: '2025-07-06' },
      });
      expect(rpt.status).toBe(202);
      const reportId = ((await rpt.json()) as { id: string }).id;
      let download = '';
      await waitUntil(
        'the report',
        async () => {
          const r = (await (await call('GET', `/v1/reports/${reportId}`)).json()) as {
            status: string;
            download_url?: string;
          };
          download = r.download_url ?? '';
          return r.status === 'ready';
        },
        90_000,
        500,
      );
      expect((await fetch(download)).status).toBe(200);
      await waitUntil('the deliveries', () => rx!.received.length >= 4, 60_000);
      // Scraped twice more, and the recording rules evaluated over the load.
      await waitUntil(
        'the load in Prometheus',
        async () =>
          (await p.query('sum(webhook_delivery_lag_seconds_count) > 0')).length === 1 &&
          (await p.query('route_class:http_errors:ratio_rate5m')).length >= 4,
        60_000,
        1000,
      );
      await sleep(4_000);

      // The SLO ratios exist per class: the route_class label flows from the service to the rules.
      const classes = (await p.query('route_class:http_errors:ratio_rate5m')).map((r) => r.metric.route_class).sort();
      expect(classes).toEqual(['heavy_read', 'read', 'transfer', 'write']);
      const slow = (await p.query('route_class:http_slow:ratio_rate5m')).map((r) => r.metric.route_class).sort();
      expect(slow).toEqual(['heavy_read', 'read', 'write']);

      // Every metric name of every rule and panel has series; every expression evaluates.
      const exprs = [
        ...ruleExprs().map((r) => ({ where: `${r.file} ${r.kind} ${r.name}`, expr: r.expr })),
        ...dashboardExprs().map((d) => ({ where: `dashboard panel "${d.panel}"`, expr: d.expr })),
      ];
      const known = new Map<string, boolean>();
      const missing: string[] = [];
      const failing: string[] = [];
      for (const e of exprs) {
        for (const name of selectedMetrics(e.expr)) {
          if (!known.has(name)) known.set(name, (await p.series(name)).length > 0);
          if (!known.get(name)) missing.push(`${e.where}: ${name}`);
        }
        await p.query(e.expr).catch((err: Error) => failing.push(`${e.where}: ${err.message}`));
      }
      console.log(
        `[prometheus-queries] ${exprs.length} expressions (${ruleExprs().length} rules, ${dashboardExprs().length} panel queries), ${known.size} metric names, ${missing.length} missing, ${failing.length} failing`,
      );
      expect(exprs.length).toBeGreaterThan(60);
      expect(missing).toEqual([]);
      expect(failing).toEqual([]);
    }, 400_000);
  },
);
