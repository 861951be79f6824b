/** What route plugins receive: the configuration and the shared services, built once in main/app. */
import type { FastifyInstance, FastifyBaseLogger, RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression } from 'fastify';
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox';
import type { Config } from '../config.js';
import type { Database } from '../database.js';
import type { WebhookDeps } from '../../webhooks/service.js';
import type { ComputePool } from '../../compute/pool.js';
import type { ReportDeps } from '../../reports/service.js';

export interface Services {
  config: Config;
  db: Database;
  /** Readiness probes of optional services (queue, compute pool), added as they are wired in. */
  readiness: Record<string, () => Promise<void>>;
  webhooks: WebhookDeps;
  compute: ComputePool;
  /** Threads of their own, at a low priority, for heavy requests (HEAVY_*); absent in ROLE=worker. */
  heavyCompute?: ComputePool;
  reports: ReportDeps;
}

export type Api = FastifyInstance<RawServerDefault, RawRequestDefaultExpression, RawReplyDefaultExpression, FastifyBaseLogger, TypeBoxTypeProvider>;
