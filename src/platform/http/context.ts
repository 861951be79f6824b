/**
 * The HTTP app type, the platform services decorated onto it, and the one shape of a route plugin.
 * The services plugin (src/services.ts) decorates the instance once; each feature declares the
 * decorations it owns (e.g. `webhooks` in src/webhooks/routes.ts) and its routes read them from
 * `app`, never from arguments.
 */
import fp from 'fastify-plugin';
import type {
  FastifyInstance,
  FastifyBaseLogger,
  FastifyPluginAsync,
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
} from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from '../config.js';
import type { Database } from '../database.js';

/** What /healthz, /readyz and every route may use from the platform. */
export interface PlatformServices {
  config: Config;
  db: Database;
  /** Readiness probes of optional services (queue, compute pool), added as they are wired in. */
  readiness: Record<string, () => Promise<void>>;
}

declare module 'fastify' {
  // Decorated by the services plugin (src/services.ts).
  interface FastifyInstance extends PlatformServices {}
}

export type Api = FastifyInstance<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  FastifyBaseLogger,
  TypeBoxTypeProvider
>;

export type RoutePlugin = FastifyPluginAsync<Record<never, never>, RawServerDefault, TypeBoxTypeProvider>;

/** The plugin that decorates the services; every route plugin depends on it. */
export const SERVICES_PLUGIN = 'services';
/** The API-key hook on /v1 (src/accounts/auth-hook.ts). */
export const AUTH_PLUGIN = 'auth';

/**
 * A feature's routes as one named plugin (fastify-plugin) that declares what it needs: the services
 * and, unless `public`, the API-key hook. Encapsulated, so the prefix it is registered with applies
 * and its hooks stay inside.
 */
export function routePlugin(
  name: string,
  fn: (app: Api) => Promise<void>,
  opts: { public?: boolean } = {},
): RoutePlugin {
  return fp(fn as RoutePlugin, {
    name,
    fastify: '5.x',
    encapsulate: true,
    dependencies: opts.public ? [SERVICES_PLUGIN] : [SERVICES_PLUGIN, AUTH_PLUGIN],
  });
}
