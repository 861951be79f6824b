/**
 * Builds the whole service (database, queues, webhook delivery, HTTP app) the way main.ts does,
 * on the given backends, with an account and a key ready. Every suite gets its own schema and
 * queue prefix.
 */
import { buildApp } from '../../src/app.js';
import { createApiKey, findOrCreateAccount } from '../../src/accounts/api-keys.js';
import { loadConfig, type Config } from '../../src/platform/config.js';
import type { Database } from '../../src/platform/database.js';
import type { Api } from '../../src/platform/http/context.js';
import { openRuntime, type Runtime, type RuntimeOverrides } from '../../src/runtime.js';
import {
  TEST_DATABASE_URL,
  TEST_REDIS_URL,
  disposeDatabase,
  freshDatabase,
  uniqueName,
  type DbBackend,
} from './backends.js';

export interface TestApp {
  app: Api;
  db: Database;
  runtime: Runtime;
  config: Config;
  key: string;
  accountId: string;
  /** Creates another account with its own key (for cross-account checks). */
  otherAccount(name?: string): Promise<{ key: string; accountId: string }>;
  auth(key?: string): Record<string, string>;
  /** Creates a field of the test account (POST /v1/fields) and gives its id; throws with the answer unless 201. */
  createField(name: string, boundary: unknown): Promise<string>;
  /** Wakes the outbox dispatcher (events written directly in tests). */
  wake(): void;
  close(): Promise<void>;
}

export interface QueueBackend {
  name: string;
  db: DbBackend;
  redisUrl?: string;
}

/** Embedded queue on PGlite always; the database queue on PostgreSQL and BullMQ on Redis when configured. */
export const queueBackends: QueueBackend[] = [
  { name: 'embedded queue on pglite', db: { name: 'pglite' } },
  ...(TEST_DATABASE_URL
    ? [{ name: 'database queue on postgres', db: { name: 'postgres' as const, url: TEST_DATABASE_URL } }]
    : []),
  ...(TEST_REDIS_URL
    ? [
        {
          name: 'bullmq on redis',
          db: TEST_DATABASE_URL ? { name: 'postgres' as const, url: TEST_DATABASE_URL } : { name: 'pglite' as const },
          redisUrl: TEST_REDIS_URL,
        },
      ]
    : []),
];

export interface TestAppOptions {
  env?: Record<string, string>;
  ca?: string[];
  redisUrl?: string;
  /** Queue prefix (default: a unique one), for suites that start another process on the same queues. */
  queuePrefix?: string;
  /** More runtime overrides (the subscription poller's hooks). */
  runtime?: Partial<RuntimeOverrides>;
}

export async function buildTestApp(backend: DbBackend, opts: TestAppOptions = {}): Promise<TestApp> {
  const db = await freshDatabase(backend);
  const config = loadConfig({
    PUBLIC_BASE_URL: 'http://localhost:3000',
    SIGNING_KEY: 'test-signing-key-0123456789abcdef0123',
    COMPUTE_THREADS: '1',
    // Suites fire requests faster than any client should: limits and shedding are tested on their own.
    RATE_LIMIT_PER_MINUTE: '0',
    SHED_EVENT_LOOP_DELAY_MS: '0',
    SHED_POOL_QUEUE: '0',
    ...(opts.redisUrl ? { REDIS_URL: opts.redisUrl } : {}),
    ...opts.env,
  });
  const runtime = await openRuntime(config, {
    db,
    queuePrefix: opts.queuePrefix ?? uniqueName('q'),
    webhookCa: opts.ca,
    pollMs: 50,
    log: () => {},
    // The subscription poller runs only when a suite calls runtime.subscriptions.tick(): no poll
    // changes a subscription under an assertion of another suite.
    subscriptionTickMs: 0,
    ...opts.runtime,
  });
  const app = await buildApp(runtime);
  await app.ready();
  const account = await findOrCreateAccount(db, 'test', config);
  const { key } = await createApiKey(db, account.id);
  let n = 0;
  return {
    app,
    db,
    runtime,
    config,
    key,
    accountId: account.id,
    async otherAccount(name = `other${++n}`) {
      const acc = await findOrCreateAccount(db, name, config);
      return { key: (await createApiKey(db, acc.id)).key, accountId: acc.id };
    },
    auth: (k = key) => ({ authorization: `Bearer ${k}` }),
    async createField(name, boundary) {
      const res = await app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: { authorization: `Bearer ${key}` },
        payload: { name, boundary },
      });
      if (res.statusCode !== 201) throw new Error(`POST /v1/fields answered ${res.statusCode}: ${res.body}`);
      return res.json().id as string;
    },
    wake: () => runtime.dispatcher.wake(),
    async close() {
      await app.close();
      await runtime.close();
      await disposeDatabase(db);
    },
  };
}

/** The full service on a queue backend (for suites about queues, webhooks and reports). */
export function buildServiceApp(backend: QueueBackend, opts: TestAppOptions = {}): Promise<TestApp> {
  return buildTestApp(backend.db, { ...opts, redisUrl: backend.redisUrl });
}

export const square = (lon: number, lat: number, d = 0.005) => ({
  type: 'Polygon',
  coordinates: [
    [
      [lon, lat],
      [lon + d, lat],
      [lon + d, lat + d],
      [lon, lat + d],
      [lon, lat],
    ],
  ],
});
