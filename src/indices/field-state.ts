/**
 * What the index endpoints need about a field: its boundary (and hash) and the captures over it
 * (date, field pixels, valid pixels, bands, file references). Kept in process per database handle
 * and checked on every request with one cheap query: a stamp over the boundary and every
 * imagery_fields row of the field. A new capture, a boundary PATCH, a deleted capture or field, or
 * a rewritten coverage row changes the stamp (or removes the field), and the state is reloaded in
 * one query; so another replica's writes are seen by the very next request here, with no
 * notification to miss. On the embedded database (one process, see Database.writeCount) not even
 * the stamp is read again while no statement that may write has been issued since it was.
 */
import type { Boundary } from '../fields/index.js';
import type { CaptureSource } from '../imagery/index.js';
import type { Database } from '../platform/database.js';
import { notFound } from '../platform/errors.js';
import { cacheFor, hash } from './cache.js';
import type { FieldState } from './types.js';

export type { FieldState } from './types.js';

// md5 of the boundary text and of the coverage rows in a fixed order: content, not timestamps,
// so that any change to what selection or statistics read changes it.
const STAMP = `md5(f.boundary::text) || ':' || coalesce((
    SELECT md5(string_agg(x.imagery_id || ':' || x.field_pixels || ':' || x.valid_pixels
                          || coalesce(':' || x.field_weight || ':' || x.valid_weight, ''), ',' ORDER BY x.imagery_id))
      FROM imagery_fields x WHERE x.field_id = f.id), '-')`;

interface LoadRow {
  stamp: string;
  boundary: Boundary;
  captures: Array<{
    id: string;
    capture_date: string;
    field_pixels: number;
    valid_pixels: number;
    field_weight: number | null;
    valid_weight: number | null;
    bands: CaptureSource['bands'];
    mask: CaptureSource['mask'] | null;
    scale: number;
    offset: number;
  }>;
}

async function load(db: Database, accountId: string, fieldId: string): Promise<FieldState> {
  const [row] = await db.query<LoadRow>(
    `SELECT ${STAMP} AS stamp, f.boundary, coalesce((
        SELECT json_agg(json_build_object('id', i.id, 'capture_date', i.capture_date::text, 'field_pixels', x.field_pixels,
                        'valid_pixels', x.valid_pixels, 'field_weight', x.field_weight, 'valid_weight', x.valid_weight, 'bands', i.bands, 'mask', i.mask, 'scale', i.scale, 'offset', i."offset"))
          FROM imagery_fields x JOIN imagery i ON i.id = x.imagery_id
         WHERE x.field_id = f.id AND i.account_id = f.account_id), '[]'::json) AS captures
       FROM fields f WHERE f.id = $1 AND f.account_id = $2`,
    [fieldId, accountId],
  );
  if (!row) throw notFound('Field', fieldId);
  const sources = new Map<string, CaptureSource>();
  const candidates = row.captures.map((c) => {
    sources.set(c.id, { bands: c.bands, ...(c.mask ? { mask: c.mask } : {}), scale: c.scale, offset: c.offset });
    return {
      id: c.id,
      capture_date: c.capture_date,
      field_pixels: c.field_pixels,
      valid_pixels: c.valid_pixels,
      ...(c.field_weight !== null ? { field_weight: c.field_weight, valid_weight: c.valid_weight } : {}),
      bands: Object.keys(c.bands),
    };
  });
  const byDate = candidates.map((c) => ({ c, t: Date.parse(`${c.capture_date}T00:00:00Z`) })).sort((a, b) => a.t - b.t);
  return { stamp: row.stamp, boundary: row.boundary, boundaryHash: hash(row.boundary), candidates, byDate, sources };
}

/** The field's current state (404 when the account has no such field). */
export async function fieldState(db: Database, accountId: string, fieldId: string): Promise<FieldState> {
  const cache = cacheFor(db).fields;
  const key = `${accountId}/${fieldId}`;
  // Read before any query of ours is issued: a write issued later bumps it past this value.
  const writes = db.writeCount?.();
  const known = cache.get(key);
  if (known) {
    if (writes !== undefined && known.writes === writes) return known;
    const [row] = await db.query<{ stamp: string }>(
      `SELECT ${STAMP} AS stamp FROM fields f WHERE f.id = $1 AND f.account_id = $2`,
      [fieldId, accountId],
      // The statement of every index request and image on PostgreSQL: parsed and planned once.
      { prepare: true },
    );
    if (!row) throw notFound('Field', fieldId);
    if (row.stamp === known.stamp) {
      known.writes = writes;
      return known;
    }
  }
  const state = await load(db, accountId, fieldId);
  state.writes = writes;
  cache.set(key, state);
  return state;
}
