/**
 * Bearer-key authentication for every /v1 route; the account is then on `request.account`. A
 * plugin that is not encapsulated: the hook applies to the scope it is registered in (/v1), not
 * to the pre-signed downloads beside it.
 */
import type { FastifyBaseLogger, FastifyInstance, FastifyRequest } from 'fastify';
import fp from 'fastify-plugin';
import { AppError } from '../platform/errors.js';
import { AUTH_PLUGIN, SERVICES_PLUGIN } from '../platform/http/context.js';
import { authenticateCached, lookupKey, type Account, type AuthResult } from './api-keys.js';

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
    const accept = (request: FastifyRequest, result: AuthResult): AppError | undefined => {
      if (!result.ok) {
        return new AppError('unauthorized', REASONS[result.reason], {
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
      return undefined;
    };
    // A callback hook: a key resolved moments ago is accepted synchronously, without a promise;
    // only a key to look up in the database waits. A refusal is answered after the HTTP parser has
    // finished the chunk it is reading (as an async hook's would be), so that a request that is
    // also malformed further on (a bad chunk size) is refused as malformed, not as unauthorized.
    scope.addHook('onRequest', (request, _reply, done) => {
      const known = authenticateCached(db, request.headers.authorization);
      if (typeof known !== 'string') {
        const refused = accept(request, known);
        if (!refused) return done();
        return queueMicrotask(() => done(refused));
      }
      lookupKey(db, known, cacheMs).then(
        (result) => done(accept(request, result)),
        (err: Error) => done(err),
      );
    });
  },
  { name: AUTH_PLUGIN, fastify: '5.x', dependencies: [SERVICES_PLUGIN] },
);
