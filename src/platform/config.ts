/**
 * Configuration from environment variables, validated once at start-up. A bad value stops the
 * process with one line naming the variable (ConfigError).
 *
 * Every setting is declared once, in ConfigSchema: its environment variable (`env`), type, bounds,
 * default and description; the Config type is derived from it. The README's "Configuration" table
 * lists every variable of the schema with its default (test/unit/platform/config.test.ts checks it).
 */
import os from 'node:os';
import path from 'node:path';
import { Type, type Static, type TSchema } from 'typebox';

const MB = 1_048_576;

/*
 * Keywords the reader below understands, beside JSON Schema's own (type, minimum, maximum,
 * minLength, pattern, anyOf of consts, default):
 * - env: the variable; a setting without one is derived from others in loadConfig;
 * - protocols: a URL and the schemes it may use;
 * - format 'durations' (a list like `1m,5m`) or 'duration' (one, at least 1 s), in milliseconds;
 * - message: what a value that breaks minLength or pattern is told;
 * - defaultText: the default when it depends on other settings or the machine.
 * An array of strings is read from a comma-separated list.
 */
export const ConfigSchema = Type.Object({
  port: Type.Integer({ env: 'PORT', default: 3000, minimum: 0, maximum: 65535, description: 'HTTP port' }),
  host: Type.String({ env: 'HOST', default: '127.0.0.1', description: 'listen address' }),
  publicBaseUrl: Type.String({
    env: 'PUBLIC_BASE_URL',
    protocols: ['http:', 'https:'],
    defaultText: 'http://HOST:PORT',
    description: 'base of the links the service hands out',
  }),
  signingKey: Type.Optional(
    Type.String({
      env: 'SIGNING_KEY',
      minLength: 32,
      description: 'HMAC key for pre-signed download links; generated and kept in DATA_DIR when not set',
    }),
  ),
  secretsKey: Type.Optional(
    Type.String({
      env: 'SECRETS_KEY',
      minLength: 32,
      description:
        'key that encrypts webhook secrets at rest. Not set: DATA_DIR/secrets.key (created, mode 0600, with the embedded database; read if present with DATABASE_URL), else SIGNING_KEY with a warning',
    }),
  ),
  secretsKeyPrevious: Type.Array(Type.String({ minLength: 32 }), {
    env: 'SECRETS_KEY_PREVIOUS',
    default: [],
    message: 'must list keys of at least 32 characters each, separated by commas',
    description: 'earlier secrets keys: secrets sealed under them are re-sealed at start',
  }),
  databaseUrl: Type.Optional(
    Type.String({
      env: 'DATABASE_URL',
      protocols: ['postgres:', 'postgresql:'],
      description: 'PostgreSQL instead of the embedded PGlite',
    }),
  ),
  role: Type.Union([Type.Literal('api'), Type.Literal('worker'), Type.Literal('all')], {
    env: 'ROLE',
    default: 'all',
    description: 'what this process runs',
  }),
  metricsPort: Type.Optional(
    Type.Integer({
      env: 'METRICS_PORT',
      minimum: 0,
      maximum: 65535,
      defaultText: 'unset (PORT for ROLE=worker)',
      description:
        'port of a second listener serving only /metrics, /healthz and /readyz. A ROLE=worker process serves nothing else, so it listens there always; api/all processes only when set',
    }),
  ),
  computeThreads: Type.Integer({
    env: 'COMPUTE_THREADS',
    minimum: 1,
    maximum: 256,
    defaultText: 'number of cores',
    description: 'size of the compute worker pool',
  }),
  heapGrowingPercent: Type.Integer({
    env: 'HEAP_GROWING_PERCENT',
    default: 50,
    minimum: 0,
    maximum: 300,
    description:
      "V8's old generation may grow to (1 + this/100) × what the last full GC kept before the next one (every thread of the process); 0: V8's own factor (up to 4×)",
  }),
  dataDir: Type.String({
    env: 'DATA_DIR',
    default: './data',
    description: 'embedded database and local files (resolved to an absolute path)',
  }),
  redisUrl: Type.Optional(
    Type.String({
      env: 'REDIS_URL',
      protocols: ['redis:', 'rediss:'],
      description: 'queues on BullMQ/Redis instead of the database queue',
    }),
  ),
  logLevel: Type.Union(
    [
      Type.Literal('fatal'),
      Type.Literal('error'),
      Type.Literal('warn'),
      Type.Literal('info'),
      Type.Literal('debug'),
      Type.Literal('trace'),
      Type.Literal('silent'),
    ],
    { env: 'LOG_LEVEL', default: 'info', description: 'log level' },
  ),
  bodyLimitBytes: Type.Integer({
    env: 'BODY_LIMIT_BYTES',
    default: MB,
    minimum: 1024,
    maximum: 512 * MB,
    description: 'largest accepted request body',
  }),
  maxFieldAreaHa: Type.Number({
    env: 'MAX_FIELD_AREA_HA',
    default: 10_000,
    minimum: 0.01,
    maximum: 1_000_000,
    description: 'largest accepted field',
  }),
  computeTasksPerThread: Type.Integer({
    env: 'COMPUTE_TASKS_PER_THREAD',
    default: 2,
    minimum: 1,
    maximum: 16,
    description: 'compute tasks handed to a pool thread at once',
  }),
  authCacheMs: Type.Integer({
    env: 'AUTH_CACHE_MS',
    default: 5000,
    minimum: 0,
    maximum: 60_000,
    description:
      'how long a resolved API key is trusted without asking the database again (0: every request); a key revoked by the CLI or another replica is refused within this, one revoked through this process at once',
  }),
  rateLimitPerMinute: Type.Integer({
    env: 'RATE_LIMIT_PER_MINUTE',
    default: 0,
    minimum: 0,
    maximum: 1_000_000,
    description: 'requests per minute per API key on /v1 (0: no limit); counted in Redis when REDIS_URL is set',
  }),
  /** Load shedding: /v1 requests get 503 + Retry-After while any threshold is exceeded (0: not checked). */
  shed: Type.Object({
    maxEventLoopDelayMs: Type.Integer({
      env: 'SHED_EVENT_LOOP_DELAY_MS',
      default: 0,
      minimum: 0,
      maximum: 60_000,
      description: 'mean event-loop delay',
    }),
    maxHeapUsedBytes: Type.Integer({
      env: 'SHED_HEAP_USED_BYTES',
      default: 0,
      minimum: 0,
      maximum: Number.MAX_SAFE_INTEGER,
      description: 'V8 heap in use',
    }),
    maxPoolQueue: Type.Integer({
      env: 'SHED_POOL_QUEUE',
      minimum: 0,
      maximum: 1_000_000,
      defaultText: '50 × COMPUTE_THREADS',
      description: 'compute tasks waiting for a thread',
    }),
    retryAfterSeconds: Type.Integer({
      env: 'SHED_RETRY_AFTER_S',
      default: 5,
      minimum: 1,
      maximum: 3600,
      description: 'Retry-After of a shed request',
    }),
  }),
  /**
   * Heavy requests (per-pixel GeoJSON not cached): prepared at once, each in a compute thread of
   * their own (background priority unless turned off), and waiting beyond that (more: 503).
   */
  heavy: Type.Object({
    concurrency: Type.Integer({
      env: 'HEAVY_CONCURRENCY',
      minimum: 1,
      maximum: 1024,
      defaultText: 'COMPUTE_THREADS / 2 (at least 1)',
      description: 'heavy requests prepared at once',
    }),
    queue: Type.Integer({
      env: 'HEAVY_QUEUE',
      default: 32,
      minimum: 0,
      maximum: 100_000,
      description: 'heavy requests waiting beyond those',
    }),
    background: Type.Boolean({
      env: 'HEAVY_BACKGROUND',
      default: true,
      description: 'heavy threads at background priority',
    }),
  }),
  imageryTimeoutMs: Type.Integer({
    env: 'IMAGERY_TIMEOUT_MS',
    default: 30_000,
    minimum: 100,
    maximum: 600_000,
    description: 'every HTTP(S) range read of remote imagery must finish within this',
  }),
  imageryHrefSigner: Type.Union([Type.Literal('none'), Type.Literal('planetary-computer')], {
    env: 'IMAGERY_HREF_SIGNER',
    default: 'none',
    description: 'signs remote imagery URLs at each read (planetary-computer: a SAS token per Azure Blob container)',
  }),
  imageryHrefSignerUrl: Type.String({
    env: 'IMAGERY_HREF_SIGNER_URL',
    default: 'https://planetarycomputer.microsoft.com/api/sas/v1/token',
    protocols: ['http:', 'https:'],
    description: 'the token endpoint of the planetary-computer signer',
  }),
  imageryHrefSignerHosts: Type.String({
    env: 'IMAGERY_HREF_SIGNER_HOSTS',
    default: '.blob.core.windows.net',
    description: 'comma-separated host suffixes whose URLs the signer signs',
  }),
  imageryAllowPrivateNetworks: Type.Boolean({
    env: 'IMAGERY_ALLOW_PRIVATE_NETWORKS',
    default: false,
    description: 'remote imagery may be read from loopback/private addresses',
  }),
  /**
   * What one GeoTIFF may declare and one request may decode. Defaults take a 10980² Sentinel-2 band
   * even as one uncompressed strip.
   */
  imageryLimits: Type.Object({
    maxPixels: Type.Integer({
      env: 'IMAGERY_MAX_PIXELS',
      default: 2 ** 32,
      minimum: 1,
      maximum: 2 ** 48,
      description: 'width × height of an image',
    }),
    maxBlocks: Type.Integer({
      env: 'IMAGERY_MAX_BLOCKS',
      default: 2 ** 20,
      minimum: 1,
      maximum: 2 ** 26,
      description: 'strips or tiles of an image',
    }),
    maxBlockBytes: Type.Integer({
      env: 'IMAGERY_MAX_BLOCK_BYTES',
      default: 256 * MB,
      minimum: 65_536,
      maximum: 1024 * MB,
      description: 'decoded size of one strip or tile',
    }),
    maxDecodedBytes: Type.Integer({
      env: 'IMAGERY_MAX_DECODED_BYTES',
      default: 2048 * MB,
      minimum: MB,
      maximum: 2 ** 40,
      description: 'bytes decoded by one compute task: a registration’s file checks, one field window',
    }),
  }),
  devBootstrap: Type.Boolean({
    env: 'DEV_BOOTSTRAP',
    defaultText: 'true on the embedded database',
    description: 'create a development account (and print its key) on the first start of an empty database',
  }),
  demo: Type.Boolean({
    env: 'DEMO',
    default: true,
    description: 'with the development account, also create a demo field and a season of synthetic captures',
  }),
  shutdownGraceMs: Type.Integer({
    env: 'SHUTDOWN_GRACE_MS',
    default: 10_000,
    minimum: 0,
    maximum: 600_000,
    description: 'how long a graceful shutdown may take',
  }),
  imageryRoots: Type.Array(Type.String(), {
    env: 'IMAGERY_ROOTS',
    defaultText: 'DATA_DIR/imagery',
    description: 'directories local imagery paths must lie in (always including imageryUploadDir)',
  }),
  imageryUploadDir: Type.String({
    description:
      'DATA_DIR/imagery/uploads: where earlier versions stored uploaded files (uploads are in the database now)',
  }),
  uploadMaxBytes: Type.Integer({
    env: 'UPLOAD_MAX_BYTES',
    default: 1024 * MB,
    minimum: 1024,
    maximum: 64 * 1024 * MB,
    description: 'largest file accepted by POST /v1/imagery/upload (larger: 413)',
  }),
  uploadCacheMaxBytes: Type.Integer({
    env: 'UPLOAD_CACHE_MAX_BYTES',
    default: 4096 * MB,
    minimum: 0,
    maximum: 1024 * 1024 * MB,
    description:
      'bound of the local read cache of uploaded files (DATA_DIR/cache/uploads), least recently used evicted first; files in use stay',
  }),
  imageCacheMb: Type.Integer({
    env: 'IMAGE_CACHE_MB',
    default: 64,
    minimum: 0,
    maximum: 65_536,
    description:
      'encoded index images (map tiles, PNGs, COGs) kept per process by ETag, least recently used evicted first; 0: none',
  }),
  uploadCacheDir: Type.String({
    description: 'the local read cache of uploaded files: DATA_DIR/cache/uploads',
  }),
  webhooks: Type.Object({
    retryDelaysMs: Type.Array(Type.Integer(), {
      env: 'WEBHOOK_RETRY_DELAYS',
      format: 'durations',
      default: [60_000, 300_000, 1_800_000, 7_200_000, 86_400_000],
      defaultText: '1m,5m,30m,2h,24h',
      description: 'delays before the 1st..5th retry',
    }),
    timeoutMs: Type.Integer({
      env: 'WEBHOOK_TIMEOUT_MS',
      default: 5000,
      minimum: 100,
      maximum: 60_000,
      description: 'a delivery must be answered within this',
    }),
    allowPrivateNetworks: Type.Boolean({
      env: 'WEBHOOK_ALLOW_PRIVATE_NETWORKS',
      default: false,
      description: 'webhook URLs may point at loopback/private addresses',
    }),
    maxPerAccount: Type.Integer({
      env: 'WEBHOOK_MAX_PER_ACCOUNT',
      default: 50,
      minimum: 1,
      maximum: 10_000,
      description: 'webhooks an account may register',
    }),
    sweepGraceMs: Type.Integer({
      env: 'WEBHOOK_SWEEP_GRACE_MS',
      default: 30_000,
      minimum: 1000,
      maximum: 3_600_000,
      description: 'pending deliveries overdue by more than this are queued again (their job was lost)',
    }),
    concurrency: Type.Integer({
      env: 'WEBHOOK_CONCURRENCY',
      default: 128,
      minimum: 1,
      maximum: 4096,
      description: 'HTTP requests in flight per worker process',
    }),
    batchSize: Type.Integer({
      env: 'WEBHOOK_BATCH_SIZE',
      default: 50,
      minimum: 1,
      maximum: 1000,
      description: 'first attempts fanned out into one queue job',
    }),
    direct: Type.Boolean({
      env: 'WEBHOOK_DIRECT',
      default: true,
      description:
        "a worker's dispatcher hands first attempts to the same process's sending slots instead of queueing them (false: every first attempt through the queue)",
    }),
  }),
  /** STAC API subscriptions (docs/operations.md#imagery-subscriptions). */
  subscriptions: Type.Object({
    pollIntervalMs: Type.Integer({
      env: 'SUBSCRIPTION_POLL_INTERVAL',
      format: 'duration',
      default: 600_000,
      defaultText: '10m',
      description: 'an active subscription is searched again this long after its last poll',
    }),
    lookbackMs: Type.Integer({
      env: 'SUBSCRIPTION_LOOKBACK',
      format: 'duration',
      default: 3 * 86_400_000,
      defaultText: '3d',
      description: 'a poll searches from the newest Item stored minus this (catalogues publish Items late)',
    }),
    leaseMs: Type.Integer({
      env: 'SUBSCRIPTION_LEASE',
      format: 'duration',
      default: 60_000,
      defaultText: '60s',
      minimum: 1000,
      description:
        "a poll holds its subscription for this long, renewed while it runs; a killed worker's subscription is polled again once it runs out",
    }),
    maxPages: Type.Integer({
      env: 'SUBSCRIPTION_MAX_PAGES',
      default: 50,
      minimum: 1,
      maximum: 10_000,
      description: 'result pages (next links) followed per search request of one poll',
    }),
    allowPrivateNetworks: Type.Boolean({
      env: 'SUBSCRIPTIONS_ALLOW_PRIVATE_NETWORKS',
      default: false,
      description: 'subscription URLs created through the API may point at loopback/private addresses',
    }),
    concurrency: Type.Integer({
      env: 'SUBSCRIPTION_CONCURRENCY',
      default: 2,
      minimum: 1,
      maximum: 64,
      description: 'subscriptions polled at once per worker process',
    }),
    timeoutMs: Type.Integer({
      env: 'SUBSCRIPTION_TIMEOUT_MS',
      default: 30_000,
      minimum: 100,
      maximum: 600_000,
      description: 'every request to a STAC API must be answered (headers and body) within this',
    }),
    maxPerAccount: Type.Integer({
      env: 'SUBSCRIPTIONS_MAX_PER_ACCOUNT',
      default: 20,
      minimum: 1,
      maximum: 10_000,
      description: 'subscriptions an account may create (the default subscription not counted)',
    }),
    /** The operator's subscription that every account gets (unset URL: none). */
    default: Type.Object({
      url: Type.Optional(
        Type.String({
          env: 'DEFAULT_SUBSCRIPTION_URL',
          protocols: ['http:', 'https:'],
          description: 'STAC API root every account is subscribed to (private addresses allowed)',
        }),
      ),
      collection: Type.String({
        env: 'DEFAULT_SUBSCRIPTION_COLLECTION',
        default: 'sentinel-2-l2a',
        minLength: 1,
        description: 'collection of the default subscription',
      }),
      assets: Type.String({
        env: 'DEFAULT_SUBSCRIPTION_ASSETS',
        default: 'earth-search',
        minLength: 1,
        description: 'asset preset (earth-search, planetary-computer, cdse) or a JSON band → asset key map',
      }),
      startDate: Type.Optional(
        Type.String({
          env: 'DEFAULT_SUBSCRIPTION_START_DATE',
          pattern: '^\\d{4}-\\d{2}-\\d{2}$',
          message: 'must be a date YYYY-MM-DD',
          defaultText: '30 days before the subscription is created',
          description: 'date the default subscription searches back to',
        }),
      ),
      maxCloudCover: Type.Optional(
        Type.Number({
          env: 'DEFAULT_SUBSCRIPTION_MAX_CLOUD_COVER',
          minimum: 0,
          maximum: 100,
          description: 'scene cloud cover (percent) above which Items are skipped; unset: no filter',
        }),
      ),
    }),
  }),
  queueLeaseMs: Type.Integer({
    env: 'QUEUE_LEASE_MS',
    default: 30_000,
    minimum: 1000,
    maximum: 3_600_000,
    description: 'how long a claimed job stays owned without a heartbeat before another worker may take it',
  }),
  reports: Type.Object({
    urlTtlMs: Type.Integer({
      env: 'REPORT_URL_TTL',
      format: 'duration',
      default: 7 * 86_400_000,
      defaultText: '7d',
      description: 'lifetime of a signed download link',
    }),
    stallMs: Type.Integer({
      env: 'REPORT_STALL_MS',
      default: 120_000,
      minimum: 1000,
      maximum: 86_400_000,
      description:
        'a pending/processing report without a heartbeat for this long and no live job is taken again or failed',
    }),
    maxAttempts: Type.Integer({
      env: 'REPORT_MAX_ATTEMPTS',
      default: 3,
      minimum: 1,
      maximum: 20,
      description: 'times a worker may take a report before it is failed (a worker that dies counts)',
    }),
    concurrency: Type.Integer({
      env: 'REPORT_CONCURRENCY',
      default: 2,
      minimum: 1,
      maximum: 64,
      description: 'reports generated at once per worker process',
    }),
  }),
  batch: Type.Object({
    chunkFeatures: Type.Integer({
      env: 'BATCH_CHUNK_FEATURES',
      default: 1000,
      minimum: 1,
      maximum: 10_000,
      description:
        'features per chunk of a batch statistics job at most, fewer when their rows would pass 32 MiB (one queue job each; memory is bounded by a chunk)',
    }),
    maxFeatures: Type.Integer({
      env: 'BATCH_MAX_FEATURES',
      default: 100_000,
      minimum: 1,
      maximum: 1_000_000,
      description: 'most fields or polygons in one batch statistics job',
    }),
    maxJobBytes: Type.Integer({
      env: 'BATCH_MAX_JOB_BYTES',
      default: 16 * 1024 * MB,
      minimum: MB,
      maximum: 1024 * 1024 * MB,
      description:
        "most bytes a batch statistics job's rows may take by the estimate that sizes its chunks (features × indices × intervals): past it the job is refused",
    }),
    maxBodyBytes: Type.Integer({
      env: 'BATCH_MAX_BODY_BYTES',
      default: 64 * MB,
      minimum: 1024,
      maximum: 1024 * MB,
      description: 'largest accepted body of POST /v1/batch/statistics (a FeatureCollection)',
    }),
    concurrency: Type.Integer({
      env: 'BATCH_CONCURRENCY',
      default: 2,
      minimum: 1,
      maximum: 64,
      description: 'batch chunks computed at once per worker process (their reads share the compute threads)',
    }),
    partBytes: Type.Integer({
      env: 'BATCH_PART_BYTES',
      default: 256 * 1024,
      minimum: 1,
      maximum: 64 * MB,
      description:
        'bytes of rows per stored part of a batch statistics file (whole rows): the download holds one part at a time',
    }),
    stallMs: Type.Integer({
      env: 'BATCH_STALL_MS',
      default: 300_000,
      minimum: 1000,
      maximum: 86_400_000,
      description:
        'an unfinished batch job none of whose chunks started for this long gets its chunks that are on no queue enqueued again',
    }),
    maxAttempts: Type.Integer({
      env: 'BATCH_MAX_ATTEMPTS',
      default: 5,
      minimum: 1,
      maximum: 20,
      description: 'runs of a batch chunk before its job fails (a worker that dies counts)',
    }),
  }),
  queuePrefix: Type.Optional(
    Type.String({
      env: 'QUEUE_PREFIX',
      pattern: '^[A-Za-z0-9_-]{1,64}$',
      message: 'must be 1–64 letters, digits, _ or -',
      description: 'namespace of the queues (Redis key prefix `fa:<prefix>`), so that deployments can share a Redis',
    }),
  ),
});

export type Config = Static<typeof ConfigSchema>;
export type Role = Config['role'];
export type LogLevel = Config['logLevel'];
export type ImageryLimits = Config['imageryLimits'];

export class ConfigError extends Error {
  constructor(
    readonly variable: string,
    message: string,
  ) {
    super(`invalid configuration: ${variable} ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

/** A setting as the reader sees it: JSON Schema keywords and ours (see ConfigSchema). */
interface Setting {
  env?: string;
  defaultText?: string;
  type?: string;
  anyOf?: { const: string }[];
  items?: Setting;
  minimum?: number;
  maximum?: number;
  minLength?: number;
  pattern?: string;
  format?: string;
  protocols?: string[];
  message?: string;
  default?: unknown;
  properties?: Record<string, Setting>;
}

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function whole(name: string, v: string, s: Setting): number {
  if (!/^\d+$/.test(v)) throw new ConfigError(name, `must be a whole number, got "${v}"`);
  return within(name, Number(v), s);
}

function number(name: string, v: string, s: Setting): number {
  const n = Number(v);
  if (!Number.isFinite(n)) throw new ConfigError(name, `must be a number, got "${v}"`);
  return within(name, n, s);
}

function within(name: string, n: number, s: Setting): number {
  if (n < s.minimum! || n > s.maximum!)
    throw new ConfigError(name, `must be between ${s.minimum} and ${s.maximum}, got ${n}`);
  return n;
}

function bool(name: string, v: string): boolean {
  const w = v.toLowerCase();
  if (['1', 'true', 'yes', 'on'].includes(w)) return true;
  if (['0', 'false', 'no', 'off'].includes(w)) return false;
  throw new ConfigError(name, `must be true or false, got "${w}"`);
}

function url(name: string, v: string, protocols: string[]): string {
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  if (!protocols.includes(u.protocol))
    throw new ConfigError(name, `must use ${protocols.join(' or ')}, got "${u.protocol}"`);
  return v;
}

function text(name: string, v: string, s: Setting): string {
  if (s.protocols) return url(name, v, s.protocols);
  if (s.minLength !== undefined && v.length < s.minLength)
    throw new ConfigError(name, s.message ?? `must be at least ${s.minLength} characters`);
  if (s.pattern !== undefined && !new RegExp(s.pattern).test(v))
    throw new ConfigError(name, s.message ?? `must match ${s.pattern}`);
  return v;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `1m,5m,30m,2h,24h` → milliseconds; also accepts `250ms`, `10s`, `1d`. */
export function parseDurations(name: string, text: string): number[] {
  const parts = text
    .split(',')
    .map((p) => p.trim())
    .filter(Boolean);
  if (!parts.length) throw new ConfigError(name, 'must list at least one delay, e.g. 1m,5m,30m,2h,24h');
  return parts.map((p) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(p);
    if (!m) throw new ConfigError(name, `has "${p}": write delays like 250ms, 10s, 1m, 2h or 1d`);
    return Math.round(Number(m[1]) * UNIT_MS[m[2]!]!);
  });
}

function duration(name: string, v: string): number {
  const list = parseDurations(name, v);
  if (list.length !== 1 || list[0]! < 1000)
    throw new ConfigError(name, 'must be one duration of at least 1s, e.g. 7d, 12h or 90s');
  return list[0]!;
}

/** One variable's value by its setting; `fallback` when it is not set (unset or blank). */
function read(env: Env, s: Setting, fallback: unknown = s.default): unknown {
  const name = s.env!;
  const v = str(env, name);
  if (v === undefined) return Array.isArray(fallback) ? [...fallback] : fallback;
  if (s.format === 'durations') return parseDurations(name, v);
  if (s.format === 'duration') return duration(name, v);
  if (s.anyOf) {
    const allowed = s.anyOf.map((a) => a.const);
    if (!allowed.includes(v)) throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${v}"`);
    return v;
  }
  switch (s.type) {
    case 'integer':
      return whole(name, v, s);
    case 'number':
      return number(name, v, s);
    case 'boolean':
      return bool(name, v);
    case 'array': {
      const list = v
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean);
      for (const p of list) text(name, p, { ...s.items, message: s.message });
      return list;
    }
    default:
      return text(name, v, s);
  }
}

/** Every setting declared in a schema, with its variable, in declaration order. */
export function settingsOf(schema: TSchema = ConfigSchema): { path: string[]; setting: Setting }[] {
  const out: { path: string[]; setting: Setting }[] = [];
  const walk = (s: Setting, at: string[]) => {
    if (s.type === 'object' && s.properties && !s.env) {
      for (const [k, p] of Object.entries(s.properties)) walk(p, [...at, k]);
    } else out.push({ path: at, setting: s });
  };
  walk(schema as Setting, []);
  return out;
}

/** IMAGERY_TIMEOUT_MS, also read by the compute threads (they inherit the environment, not the Config). */
export function imageryTimeoutMs(env: Env = process.env): number {
  return read(env, ConfigSchema.properties.imageryTimeoutMs) as number;
}

/**
 * IMAGERY_ALLOW_PRIVATE_NETWORKS: remote imagery URLs may point at loopback/private addresses
 * (development, tests). Read by the compute threads, like IMAGERY_TIMEOUT_MS.
 */
export function imageryAllowPrivateNetworks(env: Env = process.env): boolean {
  return read(env, ConfigSchema.properties.imageryAllowPrivateNetworks) as boolean;
}

/** IMAGERY_HREF_SIGNER and its settings, also read by the compute threads, like IMAGERY_TIMEOUT_MS. */
export function imageryHrefSigner(env: Env = process.env): {
  kind: 'none' | 'planetary-computer';
  url: string;
  hosts: string[];
} {
  const p = ConfigSchema.properties;
  return {
    kind: read(env, p.imageryHrefSigner) as 'none' | 'planetary-computer',
    url: read(env, p.imageryHrefSignerUrl) as string,
    hosts: (read(env, p.imageryHrefSignerHosts) as string)
      .split(',')
      .map((h) => h.trim().toLowerCase())
      .filter(Boolean),
  };
}

/** The decompression-bomb limits, also read by the compute threads (they inherit the environment, not the Config). */
export function imageryLimits(env: Env = process.env): ImageryLimits {
  const limits = ConfigSchema.properties.imageryLimits.properties;
  return Object.fromEntries(Object.entries(limits).map(([k, s]) => [k, read(env, s as Setting)])) as ImageryLimits;
}

export function loadConfig(env: Env = process.env): Config {
  // biome-ignore lint/suspicious/noExplicitAny: filled setting by setting along the schema's paths; the return is the schema's type
  const c: Record<string, any> = {};
  // Defaults that depend on settings declared (so read) before them, or on the machine.
  const derived: Record<string, () => unknown> = {
    PUBLIC_BASE_URL: () => `http://${c.host === '0.0.0.0' ? '127.0.0.1' : c.host}:${c.port}`,
    // A worker serves its operations routes on PORT unless METRICS_PORT says otherwise.
    METRICS_PORT: () => (c.role === 'worker' ? c.port : undefined),
    COMPUTE_THREADS: () => Math.max(1, os.availableParallelism()),
    SHED_POOL_QUEUE: () => c.computeThreads * 50,
    HEAVY_CONCURRENCY: () => Math.max(1, Math.floor(c.computeThreads / 2)),
    DEV_BOOTSTRAP: () => c.databaseUrl === undefined,
    IMAGERY_ROOTS: () => [path.join(c.dataDir, 'imagery')],
  };
  for (const { path: at, setting } of settingsOf()) {
    if (!setting.env) continue;
    const fallback = derived[setting.env];
    const value = read(env, setting, fallback ? fallback() : setting.default);
    let o = c;
    for (const k of at.slice(0, -1)) o = o[k] ??= {};
    o[at.at(-1)!] = value;
    if (setting.env === 'DATA_DIR') c.dataDir = path.resolve(value as string);
  }
  c.publicBaseUrl = c.publicBaseUrl.replace(/\/+$/, '');
  // Uploaded files are read like any local file: their directory is always allowed.
  const upload = path.join(c.dataDir, 'imagery', 'uploads');
  const roots = (c.imageryRoots as string[]).map((p) => path.resolve(p));
  const covered = roots.some((r) => upload === r || upload.startsWith(r + path.sep));
  c.imageryRoots = covered ? roots : [...roots, upload];
  c.imageryUploadDir = upload;
  c.uploadCacheDir = path.join(c.dataDir, 'cache', 'uploads');
  return c as Config;
}
