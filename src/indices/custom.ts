/** Stored custom index results: POST computes and keeps one; GET reads them back. */
import { AppError, notFound } from '../platform/errors.js';
import { newId } from '../platform/ids.js';
import { evaluateFieldIndex, withGeoJson, type IndexDeps, type ZonalStats } from './service.js';
import type { RawStatsOptions } from './stats-options.js';

/** The statistics options (stats-options.ts) as on GET indices, in the JSON body. */
export interface CustomCreate extends RawStatsOptions {
  name: string;
  formula: string;
  date: string;
  imagery_id?: string;
}

interface Row {
  id: string;
  name: string;
  formula: string;
  field_id: string;
  date: string;
  imagery_id: string;
  zonal_stats: ZonalStats;
  geojson: string;
  created_at: Date;
}

const head = (r: Omit<Row, 'geojson'>) => ({
  id: r.id,
  name: r.name,
  formula: r.formula,
  field_id: r.field_id,
  date: r.date,
  imagery_id: r.imagery_id,
  zonal_stats: r.zonal_stats,
  created_at: r.created_at.toISOString(),
});

export async function createCustomIndex(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  input: CustomCreate,
): Promise<string> {
  if (!input.name.trim())
    throw new AppError('validation_failed', 'name must not be blank', {
      errors: [{ path: '/body/name', code: 'blank', message: 'must not be blank' }],
    });
  const { body, geojson } = await evaluateFieldIndex(
    deps,
    accountId,
    fieldId,
    {
      index: 'custom',
      formula: input.formula,
      date: input.date,
      imagery_id: input.imagery_id,
      zonal_stats: true,
      percentiles: input.percentiles,
      histogram: input.histogram,
      weighting: input.weighting,
      scl_exclude: input.scl_exclude,
      cloud_dilation_m: input.cloud_dilation_m,
    },
    '/body/date',
    '/body/formula',
    (k) => `/body/${k}`,
  );
  const id = newId('cix');
  const [row] = await deps.db.query<Row>(
    `INSERT INTO custom_indices (id, account_id, field_id, name, formula, date, imagery_id, zonal_stats, geojson)
     VALUES ($1, $2, $3, $4, $5, $6, $7, $8::jsonb, $9)
     RETURNING id, name, formula, field_id, date::text AS date, imagery_id, zonal_stats, geojson, created_at`,
    [
      id,
      accountId,
      fieldId,
      input.name,
      input.formula,
      body.date,
      body.imagery_id,
      JSON.stringify(body.zonal_stats),
      geojson,
    ],
  );
  return withGeoJson(head(row!), row!.geojson);
}

export async function getCustomIndex(deps: IndexDeps, accountId: string, fieldId: string, id: string): Promise<string> {
  const [row] = await deps.db.query<Row>(
    `SELECT id, name, formula, field_id, date::text AS date, imagery_id, zonal_stats, geojson, created_at
       FROM custom_indices WHERE id = $1 AND field_id = $2 AND account_id = $3`,
    [id, fieldId, accountId],
  );
  if (!row) throw notFound('Custom index', id);
  return withGeoJson(head(row), row.geojson);
}

export async function listCustomIndices(
  deps: IndexDeps,
  accountId: string,
  fieldId: string,
  q: { page: number; per_page: number },
) {
  const f = await deps.db.query('SELECT 1 FROM fields WHERE id = $1 AND account_id = $2', [fieldId, accountId]);
  if (!f.length) throw notFound('Field', fieldId);
  const [{ n }] = (await deps.db.query<{ n: number }>(
    'SELECT count(*)::int AS n FROM custom_indices WHERE field_id = $1 AND account_id = $2',
    [fieldId, accountId],
  )) as [{ n: number }];
  const rows = await deps.db.query<Omit<Row, 'geojson'>>(
    `SELECT id, name, formula, field_id, date::text AS date, imagery_id, zonal_stats, created_at
       FROM custom_indices WHERE field_id = $1 AND account_id = $2 ORDER BY created_at, id LIMIT $3 OFFSET $4`,
    [fieldId, accountId, q.per_page, (q.page - 1) * q.per_page],
  );
  return { data: rows.map(head), total: n };
}
