/** The events feature's public entry: what other features use (the outbox). */
export {
  EVENT_TYPES,
  emit,
  emitMany,
  notifyCommitted,
  notifySql,
  receivedSql,
  onOutboxCommit,
  outboxChannel,
  type EventType,
  type OutboxEvent,
} from './outbox.js';
