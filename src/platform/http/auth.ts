/** Bearer-key authentication for every /v1 route; the account is then on `request.account`. */
import type { FastifyInstance } from 'fastify';
import { authenticate, type Account } from '../../accounts/api-keys.js';
import type { Database } from '../database.js';
import { AppError } from '../errors.js';

declare module 'fastify' {
  interface FastifyRequest {
    account: Account;
    apiKeyId: string;
  }
}

const REASONS = {
  missing: 'Send the header Authorization: Bearer <API key>',
  malformed: 'The Authorization header must be "Bearer <API key>" with a key of the form fak_…',
  // Also a revoked key: the answer must not tell whether a key ever existed.
  unknown: 'The API key is not valid',
} as const;

/** Registers the hook on the given (prefixed) scope only. */
export function requireApiKey(scope: FastifyInstance, db: Database): void {
  scope.decorateRequest('account', null as unknown as Account);
  scope.decorateRequest('apiKeyId', '');
  scope.addHook('onRequest', async (request) => {
    const result = await authenticate(db, request.headers.authorization);
    if (!result.ok) {
      throw new AppError('unauthorized', REASONS[result.reason], { headers: { 'WWW-Authenticate': 'Bearer realm="field-analysis"' } });
    }
    request.account = result.account;
    request.apiKeyId = result.keyId;
    request.log = request.log.child({ account_id: result.account.id });
  });
}
