/**
 * The services plugin: decorates the instance with what the routes use, once, from the runtime
 * (src/runtime.ts). Not encapsulated, so every plugin registered after it sees the decorations;
 * route plugins name it in their `dependencies`. Each decoration's type is declared beside its
 * owner (platform in platform/http/context.ts, features in their routes.ts, compute here).
 */
import fp from 'fastify-plugin';
import type { FastifyInstance } from 'fastify';
import type { ComputePool } from './compute/pool.js';
import { SERVICES_PLUGIN } from './platform/http/context.js';
import { HeavyWork } from './platform/http/protection.js';
import type { Runtime } from './runtime.js';

declare module 'fastify' {
  interface FastifyInstance {
    compute: ComputePool;
    /** The low-priority threads for heavy requests, or `compute` where there are none. */
    heavyCompute: ComputePool;
  }
}

export const servicesPlugin = fp(
  async (app: FastifyInstance, rt: Runtime) => {
    app.decorate('config', rt.config);
    app.decorate('db', rt.db);
    app.decorate('readiness', rt.readiness);
    app.decorate('compute', rt.compute);
    const heavyCompute = rt.heavyCompute ?? rt.compute;
    app.decorate('heavyCompute', heavyCompute);
    app.decorate('imagery', rt.imagery);
    app.decorate('webhooks', rt.webhooks);
    app.decorate('reports', rt.reports);
    app.decorate('batch', rt.batch);
    const heavy = {
      work: new HeavyWork({ ...rt.config.heavy, retryAfterSeconds: rt.config.shed.retryAfterSeconds }),
      compute: heavyCompute,
    };
    app.decorate('indices', { db: rt.db, compute: rt.compute, roots: rt.config.imageryRoots, heavy });
  },
  { name: SERVICES_PLUGIN, fastify: '5.x' },
);
