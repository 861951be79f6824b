/**
 * Bearer-key authentication for every /v1 route; the account is then on `request.account`. A
 * plugin that is not encapsulated: the hook applies to the scope it is registered in (/v1), not
 * to the pre-signed downloads beside it.
 */
import type { FastifyBaseLogger, FastifyInstance } from 'fastify';
import fp from 'fastify-plugin';
import { AppError } from '../platform/errors.js';
import { AUTH_PLUGIN, SERVICES_PLUGIN } from '../platform/http/context.js';
import { authenticate, type Account } from './api-keys.js';

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

export const requireApiKey = fp(
  async (scope: FastifyInstance) => {
    const db = scope.db;
    const cacheMs = scope.config.authCacheMs;
    const root = scope.log;
    scope.decorateRequest('account', null as unknown as Account);
    scope.decorateRequest('apiKeyId', '');
    scope.addHook('onRequest', async (request) => {
      const result = await authenticate(db, request.headers.authorization, cacheMs);
      if (!result.ok) {
        throw new AppError('unauthorized', REASONS[result.reason], {
          headers: { 'WWW-Authenticate': 'Bearer realm="field-analysis"' },
        });
      }
      request.account = result.account;
      request.apiKeyId = result.keyId;
      // The request's own logger (Fastify makes one per request) gets the account added to its
      // bindings in place: a second child logger per request cost more than the rest of this hook.
      const log = request.log as FastifyBaseLogger & { setBindings?: (b: object) => void };
      if (log !== root && typeof log.setBindings === 'function') log.setBindings({ account_id: result.account.id });
      else request.log = log.child({ account_id: result.account.id });
    });
  },
  { name: AUTH_PLUGIN, fastify: '5.x', dependencies: [SERVICES_PLUGIN] },
);
