/**
 * Configuration from environment variables, validated once at start-up. A bad value stops the
 * process with one line naming the variable (ConfigError). Every variable is documented in the
 * README's "Configuration" table; keep the two in step.
 */
import os from 'node:os';
import path from 'node:path';

export type Role = 'api' | 'worker' | 'all';
export type LogLevel = 'fatal' | 'error' | 'warn' | 'info' | 'debug' | 'trace' | 'silent';

export interface Config {
  port: number;
  host: string;
  dataDir: string;
  databaseUrl?: string;
  redisUrl?: string;
  role: Role;
  logLevel: LogLevel;
  publicBaseUrl: string;
  /** HMAC key for pre-signed download links; generated and kept in DATA_DIR when not set. */
  signingKey?: string;
  /**
   * Key that encrypts webhook secrets at rest. Not set: DATA_DIR/secrets.key (created, mode 0600,
   * with the embedded database; read if present with DATABASE_URL), else SIGNING_KEY with a warning.
   */
  secretsKey?: string;
  /** Earlier secrets keys (SECRETS_KEY_PREVIOUS, comma-separated): secrets sealed under them are re-sealed at start. */
  secretsKeyPrevious: string[];
  bodyLimitBytes: number;
  maxFieldAreaHa: number;
  computeThreads: number;
  /** Compute tasks handed to a pool thread at once. */
  computeTasksPerThread: number;
  /**
   * Port of a second listener serving only /metrics, /healthz and /readyz. A ROLE=worker process
   * serves nothing else, so it listens there always (default: PORT); api/all processes only when set.
   */
  metricsPort?: number;
  /** Requests per minute per API key on /v1 (0, the default: no limit); counted in Redis when REDIS_URL is set. */
  rateLimitPerMinute: number;
  /** Load shedding: /v1 requests get 503 + Retry-After while any threshold is exceeded (0: not checked). */
  shed: {
    maxEventLoopDelayMs: number;
    maxHeapUsedBytes: number;
    /** Compute tasks waiting for a thread. */
    maxPoolQueue: number;
    retryAfterSeconds: number;
  };
  /**
   * Heavy requests (per-pixel GeoJSON not cached): prepared at once, each in a compute thread of
   * their own (background priority unless turned off), and waiting beyond that (more: 503).
   */
  heavy: {
    concurrency: number;
    queue: number;
    background: boolean;
  };
  /** Every HTTP(S) range read of remote imagery must finish within this (IMAGERY_TIMEOUT_MS). */
  imageryTimeoutMs: number;
  /** Remote imagery may be read from loopback/private addresses (IMAGERY_ALLOW_PRIVATE_NETWORKS). */
  imageryAllowPrivateNetworks: boolean;
  /** What one GeoTIFF may declare and one request may decode (IMAGERY_MAX_*). */
  imageryLimits: ImageryLimits;
  /** Create a development account (and print its key) on the first start of an empty database. */
  devBootstrap: boolean;
  /** With the development account, also create a demo field and a season of synthetic captures. */
  demo: boolean;
  shutdownGraceMs: number;
  /** Directories local imagery paths must lie in (always including imageryUploadDir). */
  imageryRoots: string[];
  /** Where POST /v1/imagery/upload stores files: DATA_DIR/imagery/uploads. */
  imageryUploadDir: string;
  /** Largest file accepted by POST /v1/imagery/upload (UPLOAD_MAX_BYTES; larger: 413). */
  uploadMaxBytes: number;
  webhooks: {
    /** Delays before the 1st..5th retry (WEBHOOK_RETRY_DELAYS, default 1m,5m,30m,2h,24h). */
    retryDelaysMs: number[];
    timeoutMs: number;
    allowPrivateNetworks: boolean;
    maxPerAccount: number;
    /** Pending deliveries overdue by more than this are queued again (their job was lost). */
    sweepGraceMs: number;
    /** HTTP requests in flight per worker process (WEBHOOK_CONCURRENCY). */
    concurrency: number;
    /** First attempts fanned out into one queue job (WEBHOOK_BATCH_SIZE). */
    batchSize: number;
    /**
     * A worker's dispatcher hands first attempts to the same process's sending slots instead of
     * queueing them (WEBHOOK_DIRECT, default true; false: every first attempt through the queue).
     */
    direct: boolean;
  };
  /** How long a claimed job stays owned without a heartbeat before another worker may take it. */
  queueLeaseMs: number;
  /** Namespace of the queues (Redis key prefix `fa:<prefix>`), so that deployments can share a Redis. */
  queuePrefix?: string;
  reports: {
    /** Lifetime of a signed download link (REPORT_URL_TTL, default 7d). */
    urlTtlMs: number;
    /** A pending/processing report without a heartbeat for this long and no live job is taken again or failed. */
    stallMs: number;
    /** Times a worker may take a report before it is failed (a worker that dies counts). */
    maxAttempts: number;
    /** Reports generated at once per worker process. */
    concurrency: number;
  };
}

export class ConfigError extends Error {
  constructor(readonly variable: string, message: string) {
    super(`invalid configuration: ${variable} ${message}`);
    this.name = 'ConfigError';
  }
}

type Env = Record<string, string | undefined>;

function str(env: Env, name: string): string | undefined {
  const v = env[name];
  return v === undefined || v.trim() === '' ? undefined : v.trim();
}

function int(env: Env, name: string, def: number, min: number, max: number): number {
  const v = str(env, name);
  if (v === undefined) return def;
  if (!/^\d+$/.test(v)) throw new ConfigError(name, `must be a whole number, got "${v}"`);
  const n = Number(v);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function num(env: Env, name: string, def: number, min: number, max: number): number {
  const v = str(env, name);
  if (v === undefined) return def;
  const n = Number(v);
  if (!Number.isFinite(n)) throw new ConfigError(name, `must be a number, got "${v}"`);
  if (n < min || n > max) throw new ConfigError(name, `must be between ${min} and ${max}, got ${n}`);
  return n;
}

function bool(env: Env, name: string, def: boolean): boolean {
  const v = str(env, name)?.toLowerCase();
  if (v === undefined) return def;
  if (['1', 'true', 'yes', 'on'].includes(v)) return true;
  if (['0', 'false', 'no', 'off'].includes(v)) return false;
  throw new ConfigError(name, `must be true or false, got "${v}"`);
}

function oneOf<T extends string>(env: Env, name: string, allowed: readonly T[], def: T): T {
  const v = str(env, name);
  if (v === undefined) return def;
  if (!(allowed as readonly string[]).includes(v)) throw new ConfigError(name, `must be one of ${allowed.join(', ')}, got "${v}"`);
  return v as T;
}

function url(env: Env, name: string, protocols: string[]): string | undefined {
  const v = str(env, name);
  if (v === undefined) return undefined;
  let u: URL;
  try {
    u = new URL(v);
  } catch {
    throw new ConfigError(name, 'is not a valid URL');
  }
  if (!protocols.includes(u.protocol)) throw new ConfigError(name, `must use ${protocols.join(' or ')}, got "${u.protocol}"`);
  return v;
}

const UNIT_MS: Record<string, number> = { ms: 1, s: 1000, m: 60_000, h: 3_600_000, d: 86_400_000 };

/** `1m,5m,30m,2h,24h` → milliseconds; also accepts `250ms`, `10s`, `1d`. */
export function parseDurations(name: string, text: string): number[] {
  const parts = text.split(',').map((p) => p.trim()).filter(Boolean);
  if (!parts.length) throw new ConfigError(name, 'must list at least one delay, e.g. 1m,5m,30m,2h,24h');
  return parts.map((p) => {
    const m = /^(\d+(?:\.\d+)?)(ms|s|m|h|d)$/.exec(p);
    if (!m) throw new ConfigError(name, `has "${p}": write delays like 250ms, 10s, 1m, 2h or 1d`);
    return Math.round(Number(m[1]) * UNIT_MS[m[2]!]!);
  });
}

function duration(env: Env, name: string, def: string): number {
  const list = parseDurations(name, str(env, name) ?? def);
  if (list.length !== 1 || list[0]! < 1000) throw new ConfigError(name, 'must be one duration of at least 1s, e.g. 7d, 12h or 90s');
  return list[0]!;
}

/** IMAGERY_TIMEOUT_MS, also read by the compute threads (they inherit the environment, not the Config). */
export function imageryTimeoutMs(env: Env = process.env): number {
  return int(env, 'IMAGERY_TIMEOUT_MS', 30_000, 100, 600_000);
}

/**
 * IMAGERY_ALLOW_PRIVATE_NETWORKS: remote imagery URLs may point at loopback/private addresses
 * (development, tests). Read by the compute threads, like IMAGERY_TIMEOUT_MS.
 */
export function imageryAllowPrivateNetworks(env: Env = process.env): boolean {
  return bool(env, 'IMAGERY_ALLOW_PRIVATE_NETWORKS', false);
}

export interface ImageryLimits {
  /** Width × height of an image (IMAGERY_MAX_PIXELS). */
  maxPixels: number;
  /** Strips or tiles of an image (IMAGERY_MAX_BLOCKS). */
  maxBlocks: number;
  /** Decoded size of one strip or tile (IMAGERY_MAX_BLOCK_BYTES). */
  maxBlockBytes: number;
  /** Bytes decoded by one compute task: a registration's file checks, one field window (IMAGERY_MAX_DECODED_BYTES). */
  maxDecodedBytes: number;
}

/**
 * The decompression-bomb limits, also read by the compute threads (they inherit the environment,
 * not the Config). Defaults take a 10980² Sentinel-2 band even as one uncompressed strip.
 */
export function imageryLimits(env: Env = process.env): ImageryLimits {
  return {
    maxPixels: int(env, 'IMAGERY_MAX_PIXELS', 2 ** 32, 1, 2 ** 48),
    maxBlocks: int(env, 'IMAGERY_MAX_BLOCKS', 2 ** 20, 1, 2 ** 26),
    maxBlockBytes: int(env, 'IMAGERY_MAX_BLOCK_BYTES', 256 * 1_048_576, 65_536, 1024 * 1_048_576),
    maxDecodedBytes: int(env, 'IMAGERY_MAX_DECODED_BYTES', 2048 * 1_048_576, 1_048_576, 2 ** 40),
  };
}

export function loadConfig(env: Env = process.env): Config {
  const port = int(env, 'PORT', 3000, 0, 65535);
  const host = str(env, 'HOST') ?? '127.0.0.1';
  const publicBaseUrl = (url(env, 'PUBLIC_BASE_URL', ['http:', 'https:']) ?? `http://${host === '0.0.0.0' ? '127.0.0.1' : host}:${port}`).replace(/\/+$/, '');
  const signingKey = str(env, 'SIGNING_KEY');
  if (signingKey !== undefined && signingKey.length < 32) throw new ConfigError('SIGNING_KEY', 'must be at least 32 characters');
  const secretsKey = str(env, 'SECRETS_KEY');
  if (secretsKey !== undefined && secretsKey.length < 32) throw new ConfigError('SECRETS_KEY', 'must be at least 32 characters');
  const secretsKeyPrevious = (str(env, 'SECRETS_KEY_PREVIOUS') ?? '').split(',').map((k) => k.trim()).filter(Boolean);
  if (secretsKeyPrevious.some((k) => k.length < 32)) throw new ConfigError('SECRETS_KEY_PREVIOUS', 'must list keys of at least 32 characters each, separated by commas');
  const databaseUrl = url(env, 'DATABASE_URL', ['postgres:', 'postgresql:']);
  const role = oneOf(env, 'ROLE', ['api', 'worker', 'all'] as const, 'all');
  // A worker serves its operations routes on PORT unless METRICS_PORT says otherwise.
  const metricsPort = str(env, 'METRICS_PORT') === undefined ? (role === 'worker' ? port : undefined) : int(env, 'METRICS_PORT', 0, 0, 65535);
  const computeThreads = int(env, 'COMPUTE_THREADS', Math.max(1, os.availableParallelism()), 1, 256);
  return {
    port,
    host,
    dataDir: path.resolve(str(env, 'DATA_DIR') ?? './data'),
    databaseUrl,
    redisUrl: url(env, 'REDIS_URL', ['redis:', 'rediss:']),
    role,
    logLevel: oneOf(env, 'LOG_LEVEL', ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'] as const, 'info'),
    publicBaseUrl,
    signingKey,
    secretsKey,
    secretsKeyPrevious,
    bodyLimitBytes: int(env, 'BODY_LIMIT_BYTES', 1_048_576, 1024, 512 * 1_048_576),
    maxFieldAreaHa: num(env, 'MAX_FIELD_AREA_HA', 10_000, 0.01, 1_000_000),
    computeThreads,
    computeTasksPerThread: int(env, 'COMPUTE_TASKS_PER_THREAD', 2, 1, 16),
    metricsPort,
    rateLimitPerMinute: int(env, 'RATE_LIMIT_PER_MINUTE', 0, 0, 1_000_000),
    shed: {
      maxEventLoopDelayMs: int(env, 'SHED_EVENT_LOOP_DELAY_MS', 0, 0, 60_000),
      maxHeapUsedBytes: int(env, 'SHED_HEAP_USED_BYTES', 0, 0, Number.MAX_SAFE_INTEGER),
      maxPoolQueue: int(env, 'SHED_POOL_QUEUE', computeThreads * 50, 0, 1_000_000),
      retryAfterSeconds: int(env, 'SHED_RETRY_AFTER_S', 5, 1, 3600),
    },
    heavy: {
      concurrency: int(env, 'HEAVY_CONCURRENCY', Math.max(1, Math.floor(computeThreads / 2)), 1, 1024),
      queue: int(env, 'HEAVY_QUEUE', 32, 0, 100_000),
      background: bool(env, 'HEAVY_BACKGROUND', true),
    },
    imageryTimeoutMs: imageryTimeoutMs(env),
    imageryAllowPrivateNetworks: imageryAllowPrivateNetworks(env),
    imageryLimits: imageryLimits(env),
    devBootstrap: bool(env, 'DEV_BOOTSTRAP', databaseUrl === undefined),
    demo: bool(env, 'DEMO', true),
    shutdownGraceMs: int(env, 'SHUTDOWN_GRACE_MS', 10_000, 0, 600_000),
    ...(() => {
      const upload = path.join(path.resolve(str(env, 'DATA_DIR') ?? './data'), 'imagery', 'uploads');
      const roots = (str(env, 'IMAGERY_ROOTS') ?? path.join(path.resolve(str(env, 'DATA_DIR') ?? './data'), 'imagery'))
        .split(',')
        .map((p) => p.trim())
        .filter(Boolean)
        .map((p) => path.resolve(p));
      // Uploaded files are read like any local file: their directory is always allowed.
      const covered = roots.some((r) => upload === r || upload.startsWith(r + path.sep));
      return { imageryRoots: covered ? roots : [...roots, upload], imageryUploadDir: upload };
    })(),
    uploadMaxBytes: int(env, 'UPLOAD_MAX_BYTES', 1024 * 1_048_576, 1024, 64 * 1024 * 1_048_576),
    webhooks: {
      retryDelaysMs: parseDurations('WEBHOOK_RETRY_DELAYS', str(env, 'WEBHOOK_RETRY_DELAYS') ?? '1m,5m,30m,2h,24h'),
      timeoutMs: int(env, 'WEBHOOK_TIMEOUT_MS', 5000, 100, 60_000),
      allowPrivateNetworks: bool(env, 'WEBHOOK_ALLOW_PRIVATE_NETWORKS', false),
      maxPerAccount: int(env, 'WEBHOOK_MAX_PER_ACCOUNT', 50, 1, 10_000),
      sweepGraceMs: int(env, 'WEBHOOK_SWEEP_GRACE_MS', 30_000, 1000, 3_600_000),
      concurrency: int(env, 'WEBHOOK_CONCURRENCY', 128, 1, 4096),
      batchSize: int(env, 'WEBHOOK_BATCH_SIZE', 50, 1, 1000),
      direct: bool(env, 'WEBHOOK_DIRECT', true),
    },
    queueLeaseMs: int(env, 'QUEUE_LEASE_MS', 30_000, 1000, 3_600_000),
    reports: {
      urlTtlMs: duration(env, 'REPORT_URL_TTL', '7d'),
      stallMs: int(env, 'REPORT_STALL_MS', 120_000, 1000, 86_400_000),
      maxAttempts: int(env, 'REPORT_MAX_ATTEMPTS', 3, 1, 20),
      concurrency: int(env, 'REPORT_CONCURRENCY', 2, 1, 64),
    },
    queuePrefix: (() => {
      const v = str(env, 'QUEUE_PREFIX');
      if (v !== undefined && !/^[A-Za-z0-9_-]{1,64}$/.test(v)) throw new ConfigError('QUEUE_PREFIX', 'must be 1–64 letters, digits, _ or -');
      return v;
    })(),
  };
}
