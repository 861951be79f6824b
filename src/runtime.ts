/**
 * The composition root: opens the shared services of a process from configuration (database, queues, webhook delivery)
 * and closes them in reverse order. By ROLE: `api` serves HTTP only; `worker` consumes queues and
 * dispatches the outbox; `all` does both. main.ts and the tests compose the same way.
 */
import { existsSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import type { Config } from './platform/config.js';
import { migrate, openDatabase, type Database } from './platform/database.js';
import { lockDataDir } from './platform/embedded-lock.js';
import type { PlatformServices } from './platform/http/context.js';
import { observePool } from './platform/metrics.js';
import { createJobQueues, type JobQueues } from './platform/queue/job-queues.js';
import { resolveSigningKey } from './platform/settings.js';
import { ComputePool } from './compute/pool.js';
import { LocalFileCache } from './platform/file-cache.js';
import { DatabaseFileStore } from './platform/file-store.js';
import { evaluateAlerts, fieldsWithRules } from './alerts/service.js';
import { collectImageryMetrics } from './imagery/metrics.js';
import type { ImageryDeps } from './imagery/service.js';
import { startUploadSweeper, uploadPreparer } from './imagery/upload-files.js';
import { UPLOAD_CACHE_SUFFIX } from './imagery/upload-ref.js';
import { directSink, processDeliveryJob, type DeliveryJob } from './webhooks/delivery.js';
import { Dispatcher } from './webhooks/dispatcher.js';
import { observeFailingEndpoints } from './webhooks/metrics.js';
import { startSeasonScheduler } from './events/seasons.js';
import { WEBHOOK_QUEUE, type WebhookDeps } from './webhooks/service.js';
import { KEY_FILE_NAME, resealWebhookSecrets, resolveSecretKeys } from './webhooks/secret-keys.js';
import { SecretBox } from './webhooks/signing.js';
import { ensureDefaultSubscriptions } from './subscriptions/index.js';
import { demoStacUrl } from './imagery/demo-catalogue.js';
import { REPORT_QUEUE, type ReportDeps } from './reports/service.js';
import { BATCH_QUEUE, type BatchDeps } from './batch/service.js';
import { processBatchJob, startBatchSweeper, type BatchQueueJob } from './batch/worker.js';
import { StacClient } from './subscriptions/stac-client.js';
import { startSubscriptionScheduler, type SubscriptionScheduler } from './subscriptions/scheduler.js';
import type { PollDeps } from './subscriptions/poller.js';
import { processReportJob, startReportSweeper, type ReportJob } from './reports/worker.js';

export interface Runtime extends PlatformServices {
  signingKey: string;
  compute: ComputePool;
  /** Threads of their own, at a low priority, for heavy requests (HEAVY_*); absent in ROLE=worker. */
  heavyCompute?: ComputePool;
  queues: JobQueues;
  webhooks: WebhookDeps;
  reports: ReportDeps;
  batch: BatchDeps & { maxBodyBytes: number };
  /** Imagery registration, with the alert evaluation of covered fields wired in. */
  imagery: ImageryDeps;
  dispatcher: Dispatcher;
  /** The STAC API subscription poller (ROLE=worker and all). */
  subscriptions?: SubscriptionScheduler;
  /**
   * Stops the scheduler, dispatcher and sweeper, lets running jobs finish for up to `graceMs`
   * (then hands them back to the queue), and closes the queues, the compute pool and the database.
   */
  close(graceMs?: number): Promise<void>;
}

/** The dispatcher's fallback poll on the embedded database (250 ms on PostgreSQL). */
const EMBEDDED_DISPATCH_POLL_MS = 2_000;

export interface RuntimeOverrides {
  /** An already-open database (tests): not closed by the runtime. */
  db?: Database;
  /** Queue key prefix (tests give each suite its own). */
  queuePrefix?: string;
  /** Trusted CAs for webhook deliveries (tests). */
  webhookCa?: string[];
  /** Shorter polling for tests. */
  pollMs?: number;
  /** Background work's log (main.ts: platform/logging.ts backgroundLog on pino); default stderr. */
  log?: (msg: string, err?: unknown) => void;
  /** Called at each report generation stage (tests stop a worker there). */
  reportStage?: ReportDeps['onStage'];
  /** Called as a batch chunk starts and has computed (tests stop a worker there). */
  batchChunk?: BatchDeps['onChunk'];
  /** How often the subscription poller looks for due subscriptions (default 5 s; 0: only on tick(), tests). */
  subscriptionTickMs?: number;
  /** A subscription poll's lease (default 60 s; renewed while the poll runs). */
  subscriptionLeaseMs?: number;
  /** Called as each Item of a subscription poll has been handled (tests stop a poll there). */
  subscriptionOnItem?: PollDeps['onItem'];
  /** Called as each start-up step ends, with its duration (main prints them). */
  onStep?: (step: StartStep, ms: number, detail: string) => void;
}

export type StartStep = 'database' | 'migrations' | 'compute' | 'queues';

/** Uploaded files no capture names are deleted after an hour (an upload being registered is younger). */
const UPLOAD_SWEEP = { everyMs: 10 * 60_000, graceMs: 60 * 60_000 };

export async function openRuntime(config: Config, o: RuntimeOverrides = {}): Promise<Runtime> {
  const closers: Array<() => Promise<void> | void> = [];
  // One deadline for the whole close: the direct deliveries' drain and the queue's wait for its
  // running jobs share the grace period instead of each taking all of it.
  let closeDeadline = Date.now() + config.shutdownGraceMs;
  const graceLeft = () => Math.max(0, closeDeadline - Date.now());
  const log = o.log ?? ((msg, err) => console.error(msg, err ?? ''));
  let t0 = performance.now();
  const step = (name: StartStep, detail = '') => {
    o.onStep?.(name, performance.now() - t0, detail);
    t0 = performance.now();
  };
  try {
    // The compute threads start now and warm up (modules, WASM kernel) while the database opens.
    // Threads read uploaded files (upload://<id>) from the local read cache (imagery/upload-ref.ts).
    const threadData = { uploadCacheDir: config.uploadCacheDir };
    const compute = new ComputePool({
      size: config.computeThreads,
      tasksPerThread: config.computeTasksPerThread,
      threadData,
    });
    closers.push(() => compute.close());
    const warmStart = performance.now();
    const warm = compute.ping().then(() => performance.now() - warmStart);
    warm.catch(() => {}); // awaited below, after the database
    let db: Database;
    if (o.db) {
      db = o.db;
    } else if (config.databaseUrl) {
      db = await openDatabase({ url: config.databaseUrl });
      closers.push(() => db.close());
      step('database', 'PostgreSQL');
    } else {
      mkdirSync(config.dataDir, { recursive: true });
      closers.push(lockDataDir(config.dataDir));
      const dir = path.join(config.dataDir, 'pgdata');
      const created = !existsSync(path.join(dir, 'PG_VERSION'));
      db = await openDatabase({ dataDir: dir });
      closers.push(() => db.close());
      step('database', `embedded PGlite in ${dir}${created ? ', created: first start' : ''}`);
    }
    const applied = await migrate(db);
    step('migrations', `${applied.length} applied`);
    // Every account gets the operator's default subscription (and existing ones follow the configuration).
    await ensureDefaultSubscriptions(db, config);
    const signingKey = await resolveSigningKey(db, config.signingKey);
    // Webhook secrets are sealed with a key kept outside the database (secret-keys.ts).
    const secretKeys = resolveSecretKeys({
      configured: config.secretsKey,
      previous: config.secretsKeyPrevious,
      keyFile: o.db ? undefined : path.join(config.dataDir, KEY_FILE_NAME),
      createKeyFile: !o.db && !config.databaseUrl,
      signingKey,
      externalDatabase: db.kind === 'postgres',
      warn: (msg) => log(msg),
    });
    const box = new SecretBox(secretKeys.current, secretKeys.previous);
    const sealed = await resealWebhookSecrets(db, box);
    if (sealed.resealed) log(`webhook secrets: ${sealed.resealed} re-sealed under the ${secretKeys.source}`);
    if (sealed.unreadable)
      log(
        `WARNING: ${sealed.unreadable} webhook secrets open with none of the configured keys (SECRETS_KEY, SECRETS_KEY_PREVIOUS, the key file, SIGNING_KEY): their deliveries fail until the key that sealed them is given in SECRETS_KEY_PREVIOUS`,
      );

    closers.push(observePool(compute));
    closers.push(collectImageryMetrics());
    const warmMs = await warm;
    o.onStep?.('compute', warmMs, `${compute.size} thread${compute.size === 1 ? '' : 's'}`);
    t0 = performance.now();
    // Per-pixel GeoJSON runs here, in the background, so that it takes only cores nothing else wants.
    const heavyCompute =
      config.role === 'worker'
        ? undefined
        : new ComputePool({
            size: config.heavy.concurrency,
            tasksPerThread: 1,
            background: config.heavy.background,
            threadData,
          });
    if (heavyCompute) closers.push(() => heavyCompute.close());
    // Uploaded files live in the database; before a task reads a capture, each pool copies the
    // capture's uploads into this process's local read cache (every task of every feature: indices,
    // reports, alerts, registration, linking go through the pools).
    const uploads = new DatabaseFileStore(db);
    const uploadCache = new LocalFileCache({
      dir: config.uploadCacheDir,
      maxBytes: config.uploadCacheMaxBytes,
      store: uploads,
      suffix: UPLOAD_CACHE_SUFFIX,
    });
    for (const pool of [compute, heavyCompute]) pool?.setPrepare(uploadPreparer(uploadCache));

    const queues = await createJobQueues({
      db,
      redisUrl: config.redisUrl,
      prefix: o.queuePrefix ?? config.queuePrefix,
      pollMs: o.pollMs,
      leaseMs: config.queueLeaseMs,
      onFailure: (f) =>
        log(f.outcome === 'retried' ? 'queue job failed; it runs again' : 'queue job failed; no attempt left', f),
    });
    closers.push(() => queues.close(graceLeft()));
    step('queues', config.redisUrl ? 'BullMQ on Redis' : 'in the database');

    const webhooks: WebhookDeps = {
      db,
      queues,
      box,
      retryDelaysMs: config.webhooks.retryDelaysMs,
      timeoutMs: config.webhooks.timeoutMs,
      allowPrivateNetworks: config.webhooks.allowPrivateNetworks,
      maxPerAccount: config.webhooks.maxPerAccount,
      ca: o.webhookCa,
      concurrency: config.webhooks.concurrency,
    };
    // A process that delivers hands its dispatcher's first attempts to its own sending slots.
    const direct =
      config.role !== 'api' && config.webhooks.direct
        ? directSink(webhooks, (err) => log('webhook delivery not recorded', err))
        : undefined;
    const dispatcher = new Dispatcher(db, queues, {
      batchSize: config.webhooks.batchSize,
      direct,
      // The poll is a fallback for a wake-up missed: on the embedded database every event is written
      // by this process, whose commits wake the dispatcher at once, so it need not poll often.
      pollMs: o.pollMs ?? (db.kind === 'pglite' ? EMBEDDED_DISPATCH_POLL_MS : undefined),
      sweepMs: Math.min(30_000, config.webhooks.sweepGraceMs),
      sweepGraceMs: config.webhooks.sweepGraceMs,
      onError: (err) => log('outbox dispatch failed', err),
    });
    webhooks.wake = dispatcher.wake;

    const reports: ReportDeps = {
      db,
      queues,
      compute,
      roots: config.imageryRoots,
      signingKey,
      publicBaseUrl: config.publicBaseUrl,
      urlTtlMs: config.reports.urlTtlMs,
      stallMs: config.reports.stallMs,
      maxAttempts: config.reports.maxAttempts,
      onStage: o.reportStage,
    };

    const batch: BatchDeps & { maxBodyBytes: number } = {
      db,
      queues,
      compute,
      roots: config.imageryRoots,
      signingKey,
      publicBaseUrl: config.publicBaseUrl,
      urlTtlMs: config.reports.urlTtlMs,
      chunkFeatures: config.batch.chunkFeatures,
      maxFeatures: config.batch.maxFeatures,
      maxJobBytes: config.batch.maxJobBytes,
      maxAttempts: config.batch.maxAttempts,
      partBytes: config.batch.partBytes,
      maxBodyBytes: config.batch.maxBodyBytes,
      onChunk: o.batchChunk,
    };

    const imagery: ImageryDeps = {
      db,
      compute,
      roots: config.imageryRoots,
      uploadDir: config.imageryUploadDir,
      // The process that receives an upload reads it next: its files go into the cache as they arrive.
      uploads: uploadCache.writeThrough(uploads),
      evaluateAlerts: (accountId, fieldId, imageryId, capture) =>
        evaluateAlerts({ db, compute, roots: config.imageryRoots }, accountId, fieldId, imageryId, capture),
      alertFields: (accountId, fieldIds) => fieldsWithRules(db, accountId, fieldIds),
    };

    let subscriptions: SubscriptionScheduler | undefined;
    if (config.role !== 'api') {
      queues.process<ReportJob>(REPORT_QUEUE, (job, ctx) => processReportJob(reports, job, ctx), {
        concurrency: config.reports.concurrency,
      });
      closers.push(startReportSweeper(reports, (err) => log('report sweep failed', err)));
      queues.process<BatchQueueJob>(BATCH_QUEUE, (job, ctx) => processBatchJob(batch, job, ctx), {
        concurrency: config.batch.concurrency,
      });
      closers.push(
        startBatchSweeper({ ...batch, stallMs: config.batch.stallMs }, (err) => log('batch sweep failed', err)),
      );
      // Jobs in hand: a batch job holds up to WEBHOOK_BATCH_SIZE deliveries, a retry job one; the
      // HTTP requests themselves are limited by the delivery worker's WEBHOOK_CONCURRENCY slots.
      const jobConcurrency = Math.max(8, Math.ceil(config.webhooks.concurrency / 4));
      queues.process<DeliveryJob>(WEBHOOK_QUEUE, async (job) => void (await processDeliveryJob(webhooks, job)), {
        concurrency: jobConcurrency,
      });
      dispatcher.start();
      closers.push(observeFailingEndpoints(db));
      // Run in reverse: the dispatcher stops first, then the direct deliveries drain (those not
      // started go to the queue, which closes after them).
      if (direct) closers.push(() => direct.drain(graceLeft()));
      closers.push(() => dispatcher.stop());
      closers.push(startSeasonScheduler(db, (err) => log('season scheduler failed', err)));
      closers.push(
        startUploadSweeper(db, uploads, UPLOAD_SWEEP, (err) => log('sweep of unreferenced uploaded files failed', err)),
      );
      const polling = config.subscriptions;
      const warn = { warn: (obj: object, msg: string) => log(msg, obj) };
      subscriptions = startSubscriptionScheduler(
        {
          db,
          imagery: { ...imagery, log: warn },
          client: new StacClient({ allowPrivateNetworks: polling.allowPrivateNetworks, timeoutMs: polling.timeoutMs }),
          settings: {
            intervalMs: polling.pollIntervalMs,
            lookbackMs: polling.lookbackMs,
            maxPages: polling.maxPages,
            leaseMs: o.subscriptionLeaseMs ?? polling.leaseMs,
          },
          log: warn,
          // The demo catalogue is the API's own listener on loopback (created by the service, not a user).
          trustedUrls: config.demo ? new Set([demoStacUrl(config)]) : undefined,
          onItem: o.subscriptionOnItem,
        },
        {
          tickMs: o.subscriptionTickMs ?? 5000,
          concurrency: polling.concurrency,
          onError: (err) => log('subscription poll failed', err),
        },
      );
      const scheduler = subscriptions;
      closers.push(() => scheduler.stop());
    }

    return {
      config,
      db,
      signingKey,
      queues,
      webhooks,
      dispatcher,
      subscriptions,
      compute,
      heavyCompute,
      reports,
      batch,
      imagery,
      readiness: { queue: () => queues.ping(), compute: () => compute.ping() },
      async close(graceMs = config.shutdownGraceMs) {
        closeDeadline = Date.now() + graceMs;
        for (const c of closers.reverse()) await c();
      },
    };
  } catch (err) {
    for (const c of closers.reverse()) await Promise.resolve(c()).catch(() => {});
    throw err;
  }
}
