/**
 * season.started / season.ended: once a day and at start-up, for every field whose planting or
 * harvest date is today or has passed without its event. The (field, kind, date) row is inserted
 * in the same transaction as the event, so several workers running this at once emit each event
 * exactly once; a changed date is a new event.
 */
import type { Database } from '../platform/database.js';
import { emit } from './outbox.js';

export async function emitDueSeasonEvents(
  db: Database,
  today = new Date().toISOString().slice(0, 10),
): Promise<number> {
  let emitted = 0;
  for (const [kind, column, type] of [
    ['started', 'planting_date', 'season.started'],
    ['ended', 'harvest_date', 'season.ended'],
  ] as const) {
    const due = await db.query<{ id: string; account_id: string; crop_type: string | null; d: string }>(
      `SELECT f.id, f.account_id, f.crop_type, f.${column}::text AS d FROM fields f
        WHERE f.${column} IS NOT NULL AND f.${column} <= $1::date
          AND NOT EXISTS (SELECT 1 FROM season_events s WHERE s.field_id = f.id AND s.kind = $2 AND s.date = f.${column})`,
      [today, kind],
    );
    for (const f of due) {
      const won = await db.transaction(async (tx) => {
        const rows = await tx.query(
          'INSERT INTO season_events (field_id, kind, date) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING RETURNING field_id',
          [f.id, kind, f.d],
        );
        if (!rows.length) return false; // another worker emitted it
        await emit(
          tx,
          f.account_id,
          type,
          kind === 'started'
            ? { field_id: f.id, crop_type: f.crop_type, planting_date: f.d }
            : { field_id: f.id, crop_type: f.crop_type, harvest_date: f.d },
        );
        return true;
      });
      if (won) emitted++;
    }
  }
  return emitted;
}

/** Runs at start and then every day shortly after midnight UTC. */
export function startSeasonScheduler(db: Database, onError: (err: unknown) => void): () => void {
  let timer: NodeJS.Timeout | null = null;
  let stopped = false;
  const run = async () => {
    try {
      await emitDueSeasonEvents(db);
    } catch (err) {
      onError(err);
    }
    if (stopped) return;
    const now = new Date();
    const next = Date.UTC(now.getUTCFullYear(), now.getUTCMonth(), now.getUTCDate() + 1, 0, 5);
    timer = setTimeout(() => void run(), next - now.getTime());
    timer.unref();
  };
  void run();
  return () => {
    stopped = true;
    if (timer) clearTimeout(timer);
  };
}
