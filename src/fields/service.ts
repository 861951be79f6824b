/**
 * Fields: create, read, list, update (emitting field.updated in the same transaction), delete.
 * Every query is scoped to the caller's account: another account's field is simply not found.
 */
import { isCalendarDate } from '../platform/dates.js';
import type { Database, Sql } from '../platform/database.js';
import { emit } from '../events/index.js';
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

const PATCHABLE = ['name', 'boundary', 'crop_type', 'planting_date', 'harvest_date'] as const;

/**
 * Applies the patch and, when anything actually changed, emits field.updated with the names of
 * the changed attributes, in the same transaction: a failed update leaves no event behind.
 * Returns the field and those names (empty when nothing changed).
 */
export async function updateFieldChanges(
  db: Database,
  accountId: string,
  id: string,
  patch: FieldPatch,
  opts: FieldsOptions,
): Promise<{ field: Field; changed: string[] }> {
  return db.transaction(async (tx) => {
    const rows = await tx.query<FieldRow>(
      `SELECT ${COLUMNS} FROM fields WHERE id = $1 AND account_id = $2 FOR UPDATE`,
      [id, accountId],
    );
    const current = rows[0];
    if (!current) throw notFound('Field', id);
    const next = {
      name: patch.name ?? current.name,
      crop_type: patch.crop_type !== undefined ? patch.crop_type : current.crop_type,
      planting_date: patch.planting_date !== undefined ? patch.planting_date : current.planting_date,
      harvest_date: patch.harvest_date !== undefined ? patch.harvest_date : current.harvest_date,
    };
    checkDates(next.planting_date, next.harvest_date);
    const boundary = patch.boundary !== undefined ? checkBoundary(patch.boundary, opts.maxAreaHa) : null;
    const changed = PATCHABLE.filter((k) => {
      if (k === 'boundary')
        return boundary !== null && JSON.stringify(boundary.geometry) !== JSON.stringify(current.boundary);
      return patch[k] !== undefined && next[k] !== current[k];
    });
    if (!changed.length) return { field: toField(current), changed: [] };
    const updated = await tx.query<FieldRow>(
      `UPDATE fields SET name = $3, crop_type = $4, planting_date = $5, harvest_date = $6,
              boundary = COALESCE($7::jsonb, boundary), bbox = COALESCE($8, bbox), area_ha = COALESCE($9, area_ha),
              updated_at = now()
        WHERE id = $1 AND account_id = $2 RETURNING ${COLUMNS}`,
      [
        id,
        accountId,
        next.name,
        next.crop_type,
        next.planting_date,
        next.harvest_date,
        boundary ? JSON.stringify(boundary.geometry) : null,
        boundary ? boundary.bbox : null,
        boundary ? boundary.areaHa : null,
      ],
    );
    const field = toField(updated[0]!);
    await emit(tx, accountId, 'field.updated', {
      field_id: id,
      changed_fields: [...changed],
      updated_at: field.updated_at,
    });
    return { field, changed: [...changed] };
  });
}

export async function deleteField(db: Database, accountId: string, id: string): Promise<void> {
  const rows = await db.query<{ id: string }>('DELETE FROM fields WHERE id = $1 AND account_id = $2 RETURNING id', [
    id,
    accountId,
  ]);
  if (!rows[0]) throw notFound('Field', id);
}
