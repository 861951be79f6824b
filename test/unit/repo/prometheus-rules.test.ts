/**
 * The alerting and recording rules of docker/prometheus/, checked by Prometheus's own promtool:
 * `check rules` on each file, `check config` on docker/prometheus.yml (which loads them), and
 * `test rules` over test/unit/repo/prometheus/*.test.yml, where every alert has a case that must
 * fire and one that must stay silent (checked here, from the files). Every alert carries a
 * severity, a summary and a runbook_url to an existing section of docs/runbook.md that says what
 * it means, the first three things to check and how to recover. The expressions' metric names
 * are checked against a real scrape of the service by test/e2e/prometheus-queries.test.ts.
 */
import { spawnSync } from 'node:child_process';
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { parse } from 'yaml';
import { packageRoot } from '../../../src/platform/paths.js';
import { ruleExprs, rulesDir, selectedMetrics } from '../../helpers/promql.js';
import { hasPromtool } from '../../helpers/tools.js';

const testsDir = path.join(packageRoot, 'test/unit/repo/prometheus');
const testFiles = readdirSync(testsDir).filter((f) => f.endsWith('.test.yml'));
const ruleFiles = readdirSync(rulesDir).filter((f) => f.endsWith('.yml'));
const alerts = ruleExprs().filter((r) => r.kind === 'alert');

function promtool(...args: string[]) {
  const r = spawnSync('promtool', args, { cwd: packageRoot, encoding: 'utf8', timeout: 300_000 });
  return { status: r.status, out: `${r.stdout}${r.stderr}` };
}

describe.skipIf(!hasPromtool())('promtool', () => {
  it('check rules: every rules file is valid', () => {
    for (const f of ruleFiles) {
      const r = promtool('check', 'rules', path.join(rulesDir, f));
      expect(r.status, r.out).toBe(0);
      expect(r.out).toMatch(/SUCCESS: \d+ rules found/);
    }
  });

  it('check config: docker/prometheus.yml is valid and loads every rules file', () => {
    const r = promtool('check', 'config', 'docker/prometheus.yml');
    expect(r.status, r.out).toBe(0);
    expect(r.out).toContain(`SUCCESS: ${ruleFiles.length} rule files found`);
    for (const f of ruleFiles) expect(r.out).toContain(`Checking docker/prometheus/${f}`);
  });

  it('test rules: every case of every unit file passes', () => {
    const r = promtool('test', 'rules', ...testFiles.map((f) => path.join(testsDir, f)));
    expect(r.status, r.out).toBe(0);
    expect(r.out.match(/SUCCESS/g)?.length).toBe(testFiles.length);
  }, 300_000);

  it('test rules fails on a case whose alert does not fire (the runner is not a no-op)', () => {
    // The ProcessDown firing case, with the target back up: promtool must report it.
    const firing = parse(readFileSync(path.join(testsDir, 'alerts.test.yml'), 'utf8')) as any;
    const down = firing.tests.find((t: any) => t.name === 'process down');
    down.input_series[0].values = '1x15';
    const dir = mkdtempSync(path.join(os.tmpdir(), 'fa-promtool-'));
    const rule_files = firing.rule_files.map((f: string) => path.resolve(testsDir, f));
    writeFileSync(path.join(dir, 'negative.test.yml'), JSON.stringify({ ...firing, rule_files, tests: [down] }));
    try {
      const r = promtool('test', 'rules', path.join(dir, 'negative.test.yml'));
      expect(r.status).not.toBe(0);
      expect(r.out).toContain('alertname: ProcessDown');
    } finally {
      rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('rules and their tests, read from the files', () => {
  const cases = testFiles.flatMap((f) => {
    const doc = parse(readFileSync(path.join(testsDir, f), 'utf8')) as {
      rule_files: string[];
      tests: Array<{ alert_rule_test?: Array<{ alertname: string; exp_alerts?: unknown[] }> }>;
    };
    for (const rf of doc.rule_files) expect(ruleFiles).toContain(path.basename(rf));
    return doc.tests.flatMap((t) => t.alert_rule_test ?? []);
  });

  it('every alert has a firing case and a silent case in the promtool unit files', () => {
    expect(alerts.length).toBeGreaterThanOrEqual(20);
    const missing = alerts.flatMap((a) => {
      const mine = cases.filter((c) => c.alertname === a.name);
      return [
        ...(mine.some((c) => (c.exp_alerts ?? []).length > 0) ? [] : [`${a.name}: no firing case`]),
        ...(mine.some((c) => (c.exp_alerts ?? []).length === 0) ? [] : [`${a.name}: no silent case`]),
      ];
    });
    expect(missing).toEqual([]);
    // No case names an alert that does not exist.
    expect(cases.filter((c) => !alerts.some((a) => a.name === c.alertname)).map((c) => c.alertname)).toEqual([]);
  });

  it('every alert has a severity, a summary and a runbook section with meaning, three checks and recovery', () => {
    const runbook = readFileSync(path.join(packageRoot, 'docs/runbook.md'), 'utf8');
    const sections = new Map<string, string>();
    for (const part of runbook.split(/^### /m).slice(1)) {
      const title = part.slice(0, part.indexOf('\n')).trim();
      sections.set(
        title
          .toLowerCase()
          .replace(/[^a-z0-9 -]/g, '')
          .replace(/ /g, '-'),
        part,
      );
    }
    const names = new Set(alerts.map((a) => a.name));
    expect(names.size).toBe(alerts.length); // unique names
    for (const a of alerts) {
      expect(['critical', 'warning', 'info'], a.name).toContain(a.labels?.severity);
      expect(a.annotations?.summary, a.name).toMatch(/look at|look for/);
      const url = a.annotations?.runbook_url ?? '';
      expect(url, a.name).toBe(`docs/runbook.md#${a.name.toLowerCase()}`);
      const section = sections.get(a.name.toLowerCase());
      expect(section, `docs/runbook.md has no section "### ${a.name}"`).toBeDefined();
      expect(section, a.name).toMatch(/\*\*Meaning\.\*\*/);
      expect(section, a.name).toMatch(/\*\*Threshold\.\*\*/);
      expect(section, a.name).toMatch(/\*\*First checks\.\*\*\n1\. .+\n2\. .+\n3\. .+/);
      expect(section, a.name).toMatch(/\*\*Recovery\.\*\*/);
    }
  });

  it('every rule expression parses, and docker/prometheus.yml loads the files the compose file mounts', () => {
    for (const r of ruleExprs()) expect(selectedMetrics(r.expr).length, r.name).toBeGreaterThan(0);
    const prom = parse(readFileSync(path.join(packageRoot, 'docker/prometheus.yml'), 'utf8')) as {
      rule_files: string[];
    };
    expect(prom.rule_files).toEqual(['prometheus/*.yml']);
    const compose = readFileSync(path.join(packageRoot, 'docker/compose.yaml'), 'utf8');
    expect(compose).toContain('./prometheus:/etc/prometheus/prometheus:ro');
    expect(compose).toContain('./prometheus.yml:/etc/prometheus/prometheus.yml:ro');
  });
});
