/**
 * PromQL read by the Prometheus project's own parser (@prometheus-io/lezer-promql, the grammar of
 * Prometheus's query editor): the metric names an expression selects, and whether it parses.
 * Also the expressions of the repository's rule files and Grafana dashboard.
 */
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { parser } from '@prometheus-io/lezer-promql';
import { parse } from 'yaml';
import { packageRoot } from '../../src/platform/paths.js';

/** Metric names of every vector selector (`name{…}`, `name[5m]`) in `expr`; throws on a syntax error. */
export function selectedMetrics(expr: string): string[] {
  const tree = parser.parse(expr);
  const names = new Set<string>();
  const errors: number[] = [];
  tree.iterate({
    enter(node) {
      if (node.type.isError) errors.push(node.from);
      if (node.name === 'Identifier' && node.node.parent?.name === 'VectorSelector')
        names.add(expr.slice(node.from, node.to));
    },
  });
  if (errors.length) throw new Error(`PromQL syntax error at ${errors[0]} in: ${expr}`);
  return [...names];
}

export interface RuleExpr {
  file: string;
  /** The alert or recorded series name. */
  name: string;
  kind: 'alert' | 'record';
  expr: string;
  for?: string;
  labels?: Record<string, string>;
  annotations?: Record<string, string>;
}

export const rulesDir = path.join(packageRoot, 'docker/prometheus');

/** Every rule of docker/prometheus/*.yml. */
export function ruleExprs(): RuleExpr[] {
  const out: RuleExpr[] = [];
  for (const file of readdirSync(rulesDir).filter((f) => f.endsWith('.yml'))) {
    const doc = parse(readFileSync(path.join(rulesDir, file), 'utf8')) as {
      groups: Array<{ rules: Array<Record<string, any>> }>;
    };
    for (const g of doc.groups)
      for (const r of g.rules)
        out.push({
          file,
          name: r.alert ?? r.record,
          kind: r.alert ? 'alert' : 'record',
          expr: String(r.expr).trim(),
          for: r.for,
          labels: r.labels,
          annotations: r.annotations,
        });
  }
  return out;
}

/**
 * The PromQL of every panel target of the Grafana dashboard, with Grafana's interval variables
 * replaced by a range Prometheus accepts.
 */
export function dashboardExprs(): Array<{ panel: string; expr: string }> {
  const dashboard = JSON.parse(
    readFileSync(path.join(packageRoot, 'docker/grafana/dashboards/field-analysis.json'), 'utf8'),
  ) as { panels: Array<{ title: string; targets?: Array<{ expr: string }> }> };
  return dashboard.panels.flatMap((p) =>
    (p.targets ?? []).map((t) => ({
      panel: p.title,
      expr: t.expr.replace(/\$__rate_interval|\$__interval|\$__range/g, '1m'),
    })),
  );
}
