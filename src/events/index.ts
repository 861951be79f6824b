/** The events feature's public entry: what other features use (the outbox). */
export {
  EVENT_TYPES,
  emit,
  emitMany,
  onOutboxCommit,
  outboxChannel,
  type EventType,
  type OutboxEvent,
} from './outbox.js';
