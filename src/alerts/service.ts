/**
 * Alert rules on a field: `{alert_type: crop_health | water_stress, index, operator: below | above,
 * threshold}`, evaluated on the field's mean for each new capture. An alert is triggered only when
 * the value crosses the threshold (from not breached to breached); it re-arms when a later capture
 * is back on the good side. A capture with less than 70 % of the field usable is not judged
 * (clouds would decide instead of the crop): the rule keeps its state.
 */
import { findIndex, indexProgram } from '../compute/catalog.js';
import type { ComputePool } from '../compute/pool.js';
import { emit } from '../events/index.js';
import type { Boundary } from '../fields/index.js';
import type { CaptureSource } from '../imagery/index.js';
import type { Database } from '../platform/database.js';
import { AppError, notFound } from '../platform/errors.js';
import { newId } from '../platform/ids.js';

export const MIN_VALID_FRACTION = 0.7;
/**
 * Rules a field may have: each is judged on every new capture, and a field's rules are listed in one
 * answer (GET /v1/fields/{id}/alerts), so both stay bounded.
 */
export const MAX_RULES_PER_FIELD = 50;

export interface AlertRuleInput {
  alert_type: 'crop_health' | 'water_stress';
  index: string;
  operator: 'below' | 'above';
  threshold: number;
}

export interface AlertRule extends AlertRuleInput {
  id: string;
  field_id: string;
  state: 'ok' | 'breached';
  last_value: number | null;
  last_evaluated_at: string | null;
  created_at: string;
}

interface RuleRow {
  id: string;
  field_id: string;
  alert_type: AlertRuleInput['alert_type'];
  index_name: string;
  operator: AlertRuleInput['operator'];
  threshold: number;
  breached: boolean;
  last_value: number | null;
  last_evaluated_at: Date | null;
  created_at: Date;
}

const toRule = (r: RuleRow): AlertRule => ({
  id: r.id,
  field_id: r.field_id,
  alert_type: r.alert_type,
  index: r.index_name,
  operator: r.operator,
  threshold: r.threshold,
  state: r.breached ? 'breached' : 'ok',
  last_value: r.last_value,
  last_evaluated_at: r.last_evaluated_at?.toISOString() ?? null,
  created_at: r.created_at.toISOString(),
});

const COLS =
  'id, field_id, alert_type, index_name, operator, threshold, breached, last_value, last_evaluated_at, created_at';

export async function createAlertRule(
  db: Database,
  accountId: string,
  fieldId: string,
  input: AlertRuleInput,
): Promise<AlertRule> {
  const entry = findIndex(input.index);
  const row = await db.transaction(async (tx) => {
    // The field's row locked: concurrent creations count one after the other, so the limit is exact.
    const f = await tx.query('SELECT 1 FROM fields WHERE id = $1 AND account_id = $2 FOR UPDATE', [fieldId, accountId]);
    if (!f.length) throw notFound('Field', fieldId);
    if (!entry) {
      throw new AppError('validation_failed', `unknown index "${input.index}"; see GET /v1/indices/catalog`, {
        errors: [{ path: '/body/index', code: 'unknown_index', message: 'is not in the catalogue' }],
      });
    }
    const [{ n }] = (await tx.query<{ n: number }>('SELECT count(*)::int AS n FROM alert_rules WHERE field_id = $1', [
      fieldId,
    ])) as [{ n: number }];
    if (n >= MAX_RULES_PER_FIELD)
      throw new AppError(
        'alert_limit_reached',
        `A field may have at most ${MAX_RULES_PER_FIELD} alert rules; delete one first`,
      );
    const [inserted] = await tx.query<RuleRow>(
      `INSERT INTO alert_rules (id, account_id, field_id, alert_type, index_name, operator, threshold) VALUES ($1, $2, $3, $4, $5, $6, $7) RETURNING ${COLS}`,
      [newId('alr'), accountId, fieldId, input.alert_type, entry.name, input.operator, input.threshold],
    );
    return inserted!;
  });
  return toRule(row);
}

export async function listAlertRules(db: Database, accountId: string, fieldId: string): Promise<AlertRule[]> {
  const f = await db.query('SELECT 1 FROM fields WHERE id = $1 AND account_id = $2', [fieldId, accountId]);
  if (!f.length) throw notFound('Field', fieldId);
  return (
    await db.query<RuleRow>(
      `SELECT ${COLS} FROM alert_rules WHERE field_id = $1 AND account_id = $2 ORDER BY created_at, id`,
      [fieldId, accountId],
    )
  ).map(toRule);
}

export async function deleteAlertRule(db: Database, accountId: string, fieldId: string, id: string): Promise<void> {
  const rows = await db.query(
    'DELETE FROM alert_rules WHERE id = $1 AND field_id = $2 AND account_id = $3 RETURNING id',
    [id, fieldId, accountId],
  );
  if (!rows.length) throw notFound('Alert', id);
}

export interface AlertEvent {
  id: string;
  alert_id: string;
  field_id: string;
  alert_type: string;
  index: string;
  value: number;
  threshold: number;
  imagery_id: string | null;
  triggered_at: string;
}

export async function alertHistory(
  db: Database,
  accountId: string,
  q: { field_id?: string; page: number; per_page: number },
): Promise<{ data: AlertEvent[]; total: number }> {
  const params = [accountId, q.field_id ?? null];
  const where = 'account_id = $1 AND ($2::text IS NULL OR field_id = $2)';
  const [{ n }] = (await db.query<{ n: number }>(
    `SELECT count(*)::int AS n FROM alert_history WHERE ${where}`,
    params,
  )) as [{ n: number }];
  const rows = await db.query<{
    id: string;
    alert_id: string;
    field_id: string;
    alert_type: string;
    index_name: string;
    value: number;
    threshold: number;
    imagery_id: string | null;
    triggered_at: Date;
  }>(
    `SELECT id, alert_id, field_id, alert_type, index_name, value, threshold, imagery_id, triggered_at FROM alert_history WHERE ${where}
      ORDER BY triggered_at DESC, id LIMIT $3 OFFSET $4`,
    [...params, q.per_page, (q.page - 1) * q.per_page],
  );
  return {
    data: rows.map((r) => ({
      id: r.id,
      alert_id: r.alert_id,
      field_id: r.field_id,
      alert_type: r.alert_type,
      index: r.index_name,
      value: r.value,
      threshold: r.threshold,
      imagery_id: r.imagery_id,
      triggered_at: r.triggered_at.toISOString(),
    })),
    total: n,
  };
}

/** Evaluates the field's rules on a new capture; returns how many alerts were triggered. */
/** Which of these fields of the account have alert rules (the others need no evaluation). */
export async function fieldsWithRules(db: Database, accountId: string, fieldIds: string[]): Promise<Set<string>> {
  const rows = await db.query<{ field_id: string }>(
    'SELECT DISTINCT field_id FROM alert_rules WHERE account_id = $1 AND field_id = ANY($2::text[])',
    [accountId, fieldIds],
  );
  return new Set(rows.map((r) => r.field_id));
}

export async function evaluateAlerts(
  deps: { db: Database; compute: ComputePool; roots: string[] },
  accountId: string,
  fieldId: string,
  imageryId: string,
  capture: CaptureSource,
): Promise<number> {
  const rules = await deps.db.query<RuleRow & { boundary: Boundary }>(
    `SELECT r.id, r.field_id, r.alert_type, r.index_name, r.operator, r.threshold, r.breached, r.last_value, r.last_evaluated_at, r.created_at, f.boundary
       FROM alert_rules r JOIN fields f ON f.id = r.field_id WHERE r.field_id = $1 AND r.account_id = $2`,
    [fieldId, accountId],
  );
  let triggered = 0;
  const means = new Map<string, number | null>();
  for (const rule of rules) {
    const program = indexProgram(rule.index_name);
    if (!program.bands.every((b) => b in capture.bands)) continue;
    if (!means.has(rule.index_name)) {
      const r = await deps.compute.runFieldIndex({ capture, boundary: rule.boundary, program, roots: deps.roots });
      means.set(
        rule.index_name,
        r.fieldPixels && r.stats.count / r.fieldPixels >= MIN_VALID_FRACTION ? r.stats.mean : null,
      );
    }
    const value = means.get(rule.index_name)!;
    if (value === null) continue;
    const breached = rule.operator === 'below' ? value < rule.threshold : value > rule.threshold;
    await deps.db.transaction(async (tx) => {
      // The guard on `breached` makes a concurrent evaluation of the same crossing emit once.
      const changed = await tx.query(
        'UPDATE alert_rules SET breached = $2, last_value = $3, last_evaluated_at = now() WHERE id = $1 AND breached = $4 RETURNING id',
        [rule.id, breached, value, rule.breached],
      );
      if (!changed.length || !breached || rule.breached) return;
      const id = newId('evt');
      const [h] = await tx.query<{ triggered_at: Date }>(
        `INSERT INTO alert_history (id, account_id, alert_id, field_id, alert_type, index_name, value, threshold, imagery_id)
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9) RETURNING triggered_at`,
        [id, accountId, rule.id, fieldId, rule.alert_type, rule.index_name, value, rule.threshold, imageryId],
      );
      await emit(tx, accountId, 'alert.triggered', {
        field_id: fieldId,
        alert_id: rule.id,
        alert_type: rule.alert_type,
        index: rule.index_name,
        value,
        threshold: rule.threshold,
        triggered_at: h!.triggered_at.toISOString(),
      });
      triggered++;
    });
  }
  return triggered;
}
