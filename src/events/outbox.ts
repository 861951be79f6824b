/**
 * The events outbox. `emit` writes an event in the caller's transaction, so an event exists
 * exactly when the state change that caused it was committed. Delivery (fan-out to webhooks) reads
 * the outbox later; nothing here talks to the network.
 */
import type { Sql } from '../platform/database.js';
import { newId } from '../platform/ids.js';

export const EVENT_TYPES = [
  'imagery.available',
  'alert.triggered',
  'report.ready',
  'batch.completed',
  'field.updated',
  'season.started',
  'season.ended',
  'webhook.test',
] as const;
export type EventType = (typeof EVENT_TYPES)[number];

export interface OutboxEvent<D = Record<string, unknown>> {
  id: string;
  account_id: string;
  type: EventType;
  timestamp: string;
  data: D;
}

type Listener = () => void;
const listeners = new Set<Listener>();

/** Called after a transaction that emitted events commits (in this process). */
export function onOutboxCommit(l: Listener): () => void {
  listeners.add(l);
  return () => listeners.delete(l);
}

function notify(): void {
  for (const l of listeners) l();
}

/**
 * The PostgreSQL NOTIFY channel of a schema's outbox: every emit notifies it on commit, so that a
 * dispatcher in another process wakes at once instead of at its next poll. Channel names are
 * identifiers (at most 63 bytes).
 */
export function outboxChannel(schema: string): string {
  return `fa_outbox.${schema}`.slice(0, 63);
}

export async function emit<D extends Record<string, unknown>>(
  tx: Sql,
  accountId: string,
  type: EventType,
  data: D,
): Promise<OutboxEvent<D>> {
  const id = newId('evt');
  // One statement: the insert and its notification (delivered at commit, once per transaction).
  const rows = await tx.query<{ created_at: Date }>(
    `WITH e AS (INSERT INTO outbox (id, account_id, type, data) VALUES ($1, $2, $3, $4::jsonb) RETURNING created_at)
     SELECT e.created_at FROM e, (SELECT pg_notify(left('fa_outbox.' || current_schema(), 63), '')) AS n`,
    [id, accountId, type, JSON.stringify(data)],
    { prepare: true },
  );
  tx.afterCommit?.(notify);
  return { id, account_id: accountId, type, timestamp: rows[0]!.created_at.toISOString(), data };
}

/**
 * Many events of one type in one statement (in the order given, so `seq` follows it), with one
 * notification: what `emit` does for each, for a caller that announces one change to many
 * fields (a capture's imagery.available). Returns the number written.
 */
export async function emitMany<D extends Record<string, unknown>>(
  tx: Sql,
  accountId: string,
  type: EventType,
  data: D[],
): Promise<number> {
  if (!data.length) return 0;
  const rows = await tx.query<{ n: number }>(
    `WITH e AS (INSERT INTO outbox (id, account_id, type, data)
                SELECT u.id, $2, $3, u.data::jsonb FROM unnest($1::text[], $4::text[]) WITH ORDINALITY AS u(id, data, k)
                 ORDER BY u.k RETURNING 1)
     SELECT count(*)::int AS n FROM e, (SELECT pg_notify(left('fa_outbox.' || current_schema(), 63), '')) AS n`,
    [data.map(() => newId('evt')), accountId, type, data.map((d) => JSON.stringify(d))],
  );
  tx.afterCommit?.(notify);
  return rows[0]!.n;
}

export async function listOutbox(db: Sql, accountId: string, type?: EventType): Promise<OutboxEvent[]> {
  const rows = await db.query<{
    id: string;
    account_id: string;
    type: EventType;
    created_at: Date;
    data: Record<string, unknown>;
  }>(
    `SELECT id, account_id, type, created_at, data FROM outbox
      WHERE account_id = $1 AND ($2::text IS NULL OR type = $2) ORDER BY seq`,
    [accountId, type ?? null],
  );
  return rows.map((r) => ({
    id: r.id,
    account_id: r.account_id,
    type: r.type,
    timestamp: r.created_at.toISOString(),
    data: r.data,
  }));
}
