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

/**
 * The webhooks are the outbox's only receivers. An event that no active webhook of its account
 * subscribes to (by its type or `*`) when it is written is written already dispatched: the
 * dispatcher never reads it, it enters no index of pending events, and nothing is notified. So an
 * account without webhooks costs the dispatcher nothing, and a webhook receives the events written
 * while it is active and subscribed (one created, re-enabled or subscribed later does not receive
 * earlier events, as one disabled meanwhile does not). The check is in the writing statement, in
 * the caller's transaction; the dispatcher checks again when it fans an event out.
 */
/** `live`: whether an active webhook of `account` receives events of `type` (SQL expressions). */
export const receivedSql = (account: string, type: string) =>
  `SELECT EXISTS (SELECT 1 FROM webhooks w WHERE w.account_id = ${account} AND w.status = 'active' AND w.events && ARRAY[${type}::text, '*']) AS live`;
/** Notifies the schema's outbox channel (at commit) when `live` holds. */
export const notifySql = (live: string) =>
  `CASE WHEN ${live} THEN pg_notify(left('fa_outbox.' || current_schema(), 63), '')::text END`;
const RECEIVED = receivedSql('$2', '$3');
const NOTIFY = notifySql('h.live');

/**
 * For a statement that writes its own outbox row (an emit inside a single statement, which
 * commits on its own): tells this process's listeners once it has committed, as `emit` does
 * after its transaction.
 */
export function notifyCommitted(): void {
  setImmediate(notify);
}

export async function emit<D extends Record<string, unknown>>(
  tx: Sql,
  accountId: string,
  type: EventType,
  data: D,
): Promise<OutboxEvent<D>> {
  const id = newId('evt');
  // One statement: the insert and, if some webhook receives it, its notification (delivered at
  // commit, once per transaction).
  const rows = await tx.query<{ created_at: Date; live: boolean }>(
    `WITH h AS (${RECEIVED}),
          e AS (INSERT INTO outbox (id, account_id, type, data, dispatched_at)
                SELECT $1, $2, $3, $4::jsonb, CASE WHEN h.live THEN NULL ELSE now() END FROM h
                RETURNING created_at)
     SELECT e.created_at, h.live, ${NOTIFY} AS notified FROM e, h`,
    [id, accountId, type, JSON.stringify(data)],
    { prepare: true },
  );
  if (rows[0]!.live) tx.afterCommit?.(notify);
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
  const rows = await tx.query<{ n: number; live: boolean }>(
    `WITH h AS (${RECEIVED}),
          e AS (INSERT INTO outbox (id, account_id, type, data, dispatched_at)
                SELECT u.id, $2, $3, u.data::jsonb, CASE WHEN h.live THEN NULL ELSE now() END
                  FROM unnest($1::text[], $4::text[]) WITH ORDINALITY AS u(id, data, k), h
                 ORDER BY u.k RETURNING 1)
     SELECT (SELECT count(*)::int FROM e) AS n, h.live, ${NOTIFY} AS notified FROM h`,
    [data.map(() => newId('evt')), accountId, type, data.map((d) => JSON.stringify(d))],
    { prepare: true },
  );
  if (rows[0]!.live) tx.afterCommit?.(notify);
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
