/**
 * Fields: create, read, list, update (emitting field.updated in the same transaction), delete.
 * Every query is scoped to the caller's account: another account's field is simply not found.
 */
import { isCalendarDate } from '../platform/dates.js';
import type { Database, Sql } from '../platform/database.js';
import { notifyCommitted, notifySql, receivedSql } from '../events/index.js';
import { AppError, notFound, type FieldIssue } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { validateBoundary } from './boundary.js';
import type { Field, FieldCreate, FieldPatch } from './schemas.js';

interface FieldRow {
  id: string;
  name: string;
  boundary: Record<string, unknown>;
  bbox: number[];
  area_ha: number;
  crop_type: string | null;
  planting_date: string | null;
  harvest_date: string | null;
  created_at: Date;
  updated_at: Date;
}

const COLUMNS = `id, name, boundary, bbox, area_ha, crop_type, planting_date::text AS planting_date,
  harvest_date::text AS harvest_date, created_at, updated_at`;

function toField(r: FieldRow): Field {
  return {
    id: r.id,
    name: r.name,
    boundary: r.boundary,
    area_ha: Math.round(r.area_ha * 10_000) / 10_000,
    bbox: r.bbox,
    crop_type: r.crop_type,
    planting_date: r.planting_date,
    harvest_date: r.harvest_date,
    created_at: r.created_at.toISOString(),
    updated_at: r.updated_at.toISOString(),
  };
}

function checkDates(planting: string | null | undefined, harvest: string | null | undefined): void {
  const issues: FieldIssue[] = [];
  if (planting && !isCalendarDate(planting))
    issues.push({ path: '/body/planting_date', code: 'invalid_date', message: `${planting} is not a calendar date` });
  if (harvest && !isCalendarDate(harvest))
    issues.push({ path: '/body/harvest_date', code: 'invalid_date', message: `${harvest} is not a calendar date` });
  if (!issues.length && planting && harvest && harvest < planting) {
    issues.push({ path: '/body/harvest_date', code: 'before_planting', message: 'must not be before planting_date' });
  }
  if (issues.length)
    throw new AppError('validation_failed', issues.map((i) => `${i.path} ${i.message}`).join('; '), { errors: issues });
}

/** Throws BoundaryError, which the error handler's domain table answers as invalid_boundary. */
function checkBoundary(input: unknown, maxAreaHa: number) {
  return validateBoundary(input, { maxAreaHa, basePath: '/body/boundary' });
}

export interface FieldsOptions {
  maxAreaHa: number;
}

export async function createField(
  db: Database,
  accountId: string,
  input: FieldCreate,
  opts: FieldsOptions,
): Promise<Field> {
  checkDates(input.planting_date, input.harvest_date);
  const b = checkBoundary(input.boundary, opts.maxAreaHa);
  const rows = await db.query<FieldRow>(
    `INSERT INTO fields (id, account_id, name, boundary, bbox, area_ha, crop_type, planting_date, harvest_date)
     VALUES ($1, $2, $3, $4::jsonb, $5, $6, $7, $8, $9) RETURNING ${COLUMNS}`,
    [
      newId('fld'),
      accountId,
      input.name,
      JSON.stringify(b.geometry),
      b.bbox,
      b.areaHa,
      input.crop_type ?? null,
      input.planting_date ?? null,
      input.harvest_date ?? null,
    ],
  );
  return toField(rows[0]!);
}

export async function getField(db: Sql, accountId: string, id: string): Promise<Field> {
  const rows = await db.query<FieldRow>(`SELECT ${COLUMNS} FROM fields WHERE id = $1 AND account_id = $2`, [
    id,
    accountId,
  ]);
  if (!rows[0]) throw notFound('Field', id);
  return toField(rows[0]);
}

export async function listFields(
  db: Database,
  accountId: string,
  q: { page: number; per_page: number; crop_type?: string },
): Promise<{ data: Field[]; total: number }> {
  const params = [accountId, q.crop_type ?? null];
  const where = 'account_id = $1 AND ($2::text IS NULL OR crop_type = $2)';
  const [count] = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM fields WHERE ${where}`, params);
  const rows = await db.query<FieldRow>(
    `SELECT ${COLUMNS} FROM fields WHERE ${where} ORDER BY created_at, id LIMIT $3 OFFSET $4`,
    [...params, q.per_page, (q.page - 1) * q.per_page],
  );
  return { data: rows.map(toField), total: count!.n };
}

/**
 * The whole PATCH in one statement, which commits on its own: lock the row (FOR UPDATE; a
 * concurrent PATCH waits, then this one reads what it wrote), merge the patch into it, list the
 * attributes that actually change (name, boundary, crop_type, planting_date, harvest_date), refuse a harvest before planting, update
 * only when something changed, and write field.updated to the outbox (already dispatched when no
 * webhook receives it, as `emit` does) with its notification. The row is locked for the
 * statement's run inside the server only, not across round trips to this process: PATCHes to one
 * field queue for microseconds instead of for a client transaction's five round trips.
 * $1 id, $2 account, $3/$4 name given/value, $5/$6 crop_type, $7/$8 planting_date,
 * $9/$10 harvest_date, $11 boundary (jsonb or null), $12 bbox, $13 area_ha, $14 the event id.
 */
const PATCH_SQL = `
WITH o AS (
  SELECT ${COLUMNS} FROM fields WHERE id = $1 AND account_id = $2 FOR UPDATE
), c AS (
  SELECT o.id,
         CASE WHEN $3::bool THEN $4::text ELSE o.name END AS name,
         CASE WHEN $5::bool THEN $6::text ELSE o.crop_type END AS crop_type,
         CASE WHEN $7::bool THEN $8::date ELSE o.planting_date::date END AS planting_date,
         CASE WHEN $9::bool THEN $10::date ELSE o.harvest_date::date END AS harvest_date,
         array_remove(ARRAY[
           CASE WHEN $3::bool AND $4::text IS DISTINCT FROM o.name THEN 'name' END,
           CASE WHEN $11::jsonb IS NOT NULL AND $11::jsonb IS DISTINCT FROM o.boundary THEN 'boundary' END,
           CASE WHEN $5::bool AND $6::text IS DISTINCT FROM o.crop_type THEN 'crop_type' END,
           CASE WHEN $7::bool AND $8::date IS DISTINCT FROM o.planting_date::date THEN 'planting_date' END,
           CASE WHEN $9::bool AND $10::date IS DISTINCT FROM o.harvest_date::date THEN 'harvest_date' END
         ], NULL) AS changed
    FROM o
), v AS (
  SELECT c.*, COALESCE(c.harvest_date < c.planting_date, false) AS bad FROM c
), u AS (
  UPDATE fields f SET name = v.name, crop_type = v.crop_type, planting_date = v.planting_date,
         harvest_date = v.harvest_date, boundary = COALESCE($11::jsonb, f.boundary), bbox = COALESCE($12, f.bbox),
         area_ha = COALESCE($13, f.area_ha), updated_at = now()
    FROM v WHERE f.id = v.id AND cardinality(v.changed) > 0 AND NOT v.bad
  RETURNING f.id, f.name, f.boundary, f.bbox, f.area_ha, f.crop_type, f.planting_date::text AS planting_date,
            f.harvest_date::text AS harvest_date, f.created_at, f.updated_at, v.changed
), h AS (${receivedSql('$2', "'field.updated'")}
), e AS (
  INSERT INTO outbox (id, account_id, type, data, dispatched_at)
  SELECT $14, $2, 'field.updated',
         jsonb_build_object('field_id', u.id, 'changed_fields', to_jsonb(u.changed),
                            'updated_at', to_char(u.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')),
         CASE WHEN h.live THEN NULL ELSE now() END
    FROM u, h
  RETURNING 1
)
SELECT (SELECT to_jsonb(u) FROM u) AS updated, (SELECT to_jsonb(o) FROM o) AS current,
       (SELECT v.changed FROM v) AS changed, (SELECT v.bad FROM v) AS bad,
       (SELECT h.live FROM h) AND EXISTS (SELECT 1 FROM u) AS live,
       ${notifySql('(SELECT h.live FROM h) AND EXISTS (SELECT 1 FROM u)')} AS notified`;

/** A row of fields as to_jsonb gives it (timestamps as text). */
type JsonFieldRow = Omit<FieldRow, 'created_at' | 'updated_at'> & { created_at: string; updated_at: string };
const fromJson = (r: JsonFieldRow): FieldRow => ({
  ...r,
  created_at: new Date(r.created_at),
  updated_at: new Date(r.updated_at),
});

/**
 * Applies the patch and, when anything actually changed, emits field.updated with the names of
 * the changed attributes, in the same statement (PATCH_SQL): a failed update leaves no event
 * behind. Returns the field and those names (empty when nothing changed).
 */
export async function updateFieldChanges(
  db: Database,
  accountId: string,
  id: string,
  patch: FieldPatch,
  opts: FieldsOptions,
): Promise<{ field: Field; changed: string[] }> {
  // The patch's own values are checked first (the statement casts the dates); a refused one
  // still answers 404 for a field that does not exist, as before.
  let boundary: ReturnType<typeof checkBoundary> | null;
  try {
    checkDates(patch.planting_date, patch.harvest_date);
    boundary = patch.boundary !== undefined ? checkBoundary(patch.boundary, opts.maxAreaHa) : null;
  } catch (err) {
    await getField(db, accountId, id);
    throw err;
  }
  const given = (v: unknown) => v !== undefined;
  const [r] = await db.query<{
    updated: JsonFieldRow | null;
    current: JsonFieldRow | null;
    changed: string[] | null;
    bad: boolean | null;
    live: boolean | null;
  }>(
    PATCH_SQL,
    [
      id,
      accountId,
      given(patch.name),
      patch.name ?? null,
      given(patch.crop_type),
      patch.crop_type ?? null,
      given(patch.planting_date),
      patch.planting_date ?? null,
      given(patch.harvest_date),
      patch.harvest_date ?? null,
      boundary ? JSON.stringify(boundary.geometry) : null,
      boundary ? boundary.bbox : null,
      boundary ? boundary.areaHa : null,
      newId('evt'),
    ],
    { prepare: true },
  );
  if (!r?.current) throw notFound('Field', id);
  const current = fromJson(r.current);
  if (r.bad) {
    // Throws the same problem as a check of the merged dates always did.
    checkDates(
      patch.planting_date !== undefined ? patch.planting_date : current.planting_date,
      patch.harvest_date !== undefined ? patch.harvest_date : current.harvest_date,
    );
  }
  if (!r.updated) return { field: toField(current), changed: [] };
  if (r.live) notifyCommitted();
  return { field: toField(fromJson(r.updated)), changed: [...(r.changed ?? [])] };
}

export async function deleteField(db: Database, accountId: string, id: string): Promise<void> {
  const rows = await db.query<{ id: string }>('DELETE FROM fields WHERE id = $1 AND account_id = $2 RETURNING id', [
    id,
    accountId,
  ]);
  if (!rows[0]) throw notFound('Field', id);
}
