import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseDurations, settingsOf } from '../../../src/platform/config.js';
import { packageRoot } from '../../../src/platform/paths.js';

describe('configuration', () => {
  it('has working defaults', () => {
    const c = loadConfig({});
    expect(c).toMatchObject({
      port: 3000,
      host: '127.0.0.1',
      role: 'all',
      logLevel: 'info',
      maxFieldAreaHa: 10_000,
      devBootstrap: true,
    });
    expect(c.publicBaseUrl).toBe('http://127.0.0.1:3000');
    expect(c.webhooks.retryDelaysMs).toEqual([60_000, 300_000, 1_800_000, 7_200_000, 86_400_000]);
    expect(loadConfig({ DATABASE_URL: 'postgres://x@h/db' }).devBootstrap).toBe(false);
    expect(c.reports).toEqual({ urlTtlMs: 7 * 86_400_000, stallMs: 120_000, maxAttempts: 3, concurrency: 2 });
    expect(loadConfig({ REPORT_URL_TTL: '90s' }).reports.urlTtlMs).toBe(90_000);
    expect(c.webhooks).toMatchObject({ concurrency: 128, batchSize: 50 });
    expect(loadConfig({ WEBHOOK_CONCURRENCY: '16', WEBHOOK_BATCH_SIZE: '1' }).webhooks).toMatchObject({
      concurrency: 16,
      batchSize: 1,
    });
  });

  it.each([
    ['PORT', 'abc'],
    ['PORT', '70000'],
    ['ROLE', 'janitor'],
    ['LOG_LEVEL', 'loud'],
    ['DATABASE_URL', 'mysql://x@h/db'],
    ['DATABASE_URL', 'not a url'],
    ['REDIS_URL', 'http://localhost'],
    ['PUBLIC_BASE_URL', 'ftp://x'],
    ['SIGNING_KEY', 'short'],
    ['MAX_FIELD_AREA_HA', '-1'],
    ['COMPUTE_THREADS', '0'],
    ['WEBHOOK_RETRY_DELAYS', '1m,soon'],
    ['WEBHOOK_ALLOW_PRIVATE_NETWORKS', 'maybe'],
    ['WEBHOOK_CONCURRENCY', '0'],
    ['WEBHOOK_BATCH_SIZE', '5000'],
    ['BODY_LIMIT_BYTES', '12kb'],
    ['REPORT_URL_TTL', 'a week'],
    ['REPORT_URL_TTL', '1d,2d'],
    ['REPORT_URL_TTL', '500ms'],
    ['REPORT_MAX_ATTEMPTS', '0'],
    ['METRICS_PORT', 'nine'],
    ['RATE_LIMIT_PER_MINUTE', '-5'],
    ['SHED_EVENT_LOOP_DELAY_MS', '1s'],
    ['SHED_POOL_QUEUE', 'many'],
    ['SHED_RETRY_AFTER_S', '0'],
    ['IMAGERY_TIMEOUT_MS', '10'],
    ['IMAGERY_MAX_BLOCKS', '0'],
    ['IMAGERY_MAX_BLOCK_BYTES', '2GB'],
    ['IMAGERY_MAX_DECODED_BYTES', '1000'],
    ['IMAGERY_MAX_PIXELS', '-1'],
  ])('%s=%s is refused with a one-line message naming it', (name, value) => {
    try {
      loadConfig({ [name]: value });
      throw new Error('accepted');
    } catch (e) {
      expect(e).toBeInstanceOf(ConfigError);
      expect((e as ConfigError).variable).toBe(name);
      expect((e as Error).message).toContain(name);
      expect((e as Error).message).not.toContain('\n');
    }
  });

  it('operations settings: worker metrics port, rate limit, shedding thresholds, imagery timeout', () => {
    const c = loadConfig({ COMPUTE_THREADS: '4' });
    expect(c.metricsPort).toBeUndefined();
    expect(loadConfig({ ROLE: 'worker' }).metricsPort).toBe(3000);
    expect(loadConfig({ ROLE: 'worker', PORT: '0' }).metricsPort).toBe(0);
    expect(loadConfig({ ROLE: 'worker', METRICS_PORT: '9100' }).metricsPort).toBe(9100);
    expect(c.rateLimitPerMinute).toBe(0);
    expect(loadConfig({ RATE_LIMIT_PER_MINUTE: '600' }).rateLimitPerMinute).toBe(600);
    expect(c.shed).toEqual({ maxEventLoopDelayMs: 0, maxHeapUsedBytes: 0, maxPoolQueue: 200, retryAfterSeconds: 5 });
    expect(c.imageryTimeoutMs).toBe(30_000);
    expect(c.imageryLimits).toEqual({
      maxPixels: 2 ** 32,
      maxBlocks: 2 ** 20,
      maxBlockBytes: 2 ** 28,
      maxDecodedBytes: 2 ** 31,
    });
    expect(
      loadConfig({ IMAGERY_MAX_BLOCKS: '5000', IMAGERY_MAX_DECODED_BYTES: '16777216' }).imageryLimits,
    ).toMatchObject({ maxBlocks: 5000, maxDecodedBytes: 16_777_216 });
    expect(loadConfig({ RATE_LIMIT_PER_MINUTE: '0', SHED_POOL_QUEUE: '0', IMAGERY_TIMEOUT_MS: '2500' })).toMatchObject({
      rateLimitPerMinute: 0,
      shed: { maxPoolQueue: 0 },
      imageryTimeoutMs: 2500,
    });
  });

  it('parses delay lists', () => {
    expect(parseDurations('X', '250ms, 10s,1.5m,2h,1d')).toEqual([250, 10_000, 90_000, 7_200_000, 86_400_000]);
  });
});

describe("the configuration tables (docs/configuration.md, and the README's common rows)", () => {
  /** Variables read outside the schema: by the compute threads or by Node itself. */
  const readElsewhere = ['KERNEL_JIT', 'WINDOW_CACHE_MB', 'FRAME_CACHE_MB', 'GEOJSON_CACHE_MB', 'NODE_EXTRA_CA_CERTS'];
  const tableOf = (file: string): Map<string, string> => {
    const rows = new Map<string, string>();
    for (const line of readFileSync(path.join(packageRoot, file), 'utf8').split('\n')) {
      const m = /^\| `([A-Z0-9_]+)` \| ([^|]*) \|/.exec(line);
      if (m) rows.set(m[1]!, m[2]!.replaceAll('`', '').trim());
    }
    return rows;
  };
  const rows = tableOf('docs/configuration.md');
  const readme = tableOf('README.md');
  const settings = settingsOf().filter((s) => s.setting.env !== undefined);

  it('lists every setting of the schema, and nothing else the schema does not read but those read elsewhere', () => {
    expect(settings.length).toBeGreaterThan(40);
    expect(settings.map((s) => s.setting.env).filter((name) => !rows.has(name!))).toEqual([]);
    const known = new Set([...settings.map((s) => s.setting.env), ...readElsewhere]);
    expect([...rows.keys()].filter((name) => !known.has(name))).toEqual([]);
  });

  it("the README's rows are rows of the full table, word for word", () => {
    expect(readme.size).toBeGreaterThan(8);
    for (const [name, cell] of readme) expect(rows.get(name), name).toBe(cell);
  });

  it('gives the default the schema declares', () => {
    for (const { setting } of settings) {
      const d = setting.defaultText ?? (Array.isArray(setting.default) ? undefined : setting.default);
      if (d === undefined) continue;
      const cell = rows.get(setting.env!)!;
      expect(
        cell === String(d) || cell.startsWith(`${String(d)} `),
        `${setting.env}: README says "${cell}", the schema ${String(d)}`,
      ).toBe(true);
    }
  });

  it('names variables read outside the schema only where src/ reads them', () => {
    const src: string[] = [];
    const walk = (dir: string) => {
      for (const e of readdirSync(dir, { withFileTypes: true })) {
        if (e.isDirectory()) walk(path.join(dir, e.name));
        else if (e.name.endsWith('.ts')) src.push(readFileSync(path.join(dir, e.name), 'utf8'));
      }
    };
    walk(path.join(packageRoot, 'src'));
    for (const name of readElsewhere) {
      expect(rows.has(name), name).toBe(true);
      expect(
        src.some((text) => new RegExp(`env\\.${name}\\b`).test(text)),
        name,
      ).toBe(true);
    }
  });
});
