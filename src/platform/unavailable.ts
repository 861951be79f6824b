/**
 * Whether a failure is PostgreSQL or Redis being down or restarting (a 503 over HTTP, a retry in
 * the workers), not a bug. No HTTP here: the webhook worker asks it too.
 */
// postgres.js connection errors, the socket errors of a refused or dropped connection, and the
// SQLSTATEs of a server shutting down or starting up (57P01-57P03) or of a lost connection (08xxx).
const CONNECTION_CODES = new Set([
  'CONNECTION_CLOSED',
  'CONNECTION_DESTROYED',
  'CONNECT_TIMEOUT',
  'CONNECTION_ENDED',
  'ECONNREFUSED',
  'ECONNRESET',
  'EPIPE',
  'ETIMEDOUT',
  'EHOSTUNREACH',
]);

/** The request failed because PostgreSQL or Redis is down or restarting, not because of a bug: 503. */
export function backendUnavailable(err: unknown): boolean {
  const code = String((err as { code?: unknown })?.code ?? '');
  return CONNECTION_CODES.has(code) || /^57P0[123]$/.test(code) || /^08[0-9A-Z]{3}$/.test(code);
}
