import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig } from '../../../src/platform/config.js';
import { bodyIssues, parseDefaultAssets, startDateIssue, utcDate } from '../../../src/subscriptions/service.js';

const now = new Date('2025-06-15T23:30:00Z');

describe('subscription start dates', () => {
  it('takes calendar days up to today (UTC)', () => {
    expect(startDateIssue('2025-06-15', now)).toBeNull();
    expect(startDateIssue('2020-02-29', now)).toBeNull();
  });

  it('refuses days that do not exist, other formats and the future', () => {
    expect(startDateIssue('2025-02-29', now)).toMatch(/not a calendar date/);
    expect(startDateIssue('2025-13-01', now)).toMatch(/not a calendar date/);
    expect(startDateIssue('2025-6-1', now)).toMatch(/not a calendar date/);
    expect(startDateIssue('2025-06-16', now)).toMatch(/in the future/);
  });

  it('defaults count back from the UTC day', () => {
    expect(utcDate(0, now)).toBe('2025-06-15');
    expect(utcDate(30, now)).toBe('2025-05-16');
  });
});

describe('subscription body issues', () => {
  it('points at the member that is wrong', () => {
    expect(bodyIssues({ assets: 'nope', start_date: '2025-02-30' }, now)).toEqual([
      expect.objectContaining({ path: '/body/assets', code: 'unknown_preset' }),
      expect.objectContaining({ path: '/body/start_date', code: 'invalid_date' }),
    ]);
    expect(bodyIssues({ assets: { B04: '', X1: 'x' } }, now).map((i) => i.path)).toEqual([
      '/body/assets/B04',
      '/body/assets/X1',
    ]);
    expect(bodyIssues({ status: 'paused', assets: 'cdse', start_date: '2025-01-01' }, now)).toEqual([]);
  });
});

describe('subscription configuration', () => {
  it('has the documented defaults', () => {
    const c = loadConfig({}).subscriptions;
    expect(c).toMatchObject({
      pollIntervalMs: 600_000,
      lookbackMs: 3 * 86_400_000,
      maxPages: 50,
      allowPrivateNetworks: false,
      maxPerAccount: 20,
      default: { collection: 'sentinel-2-l2a', assets: 'earth-search' },
    });
    expect(c.default.url).toBeUndefined();
    expect(c.default.maxCloudCover).toBeUndefined();
  });

  it('reads durations and the default subscription, and refuses bad values naming the variable', () => {
    const c = loadConfig({
      SUBSCRIPTION_POLL_INTERVAL: '30s',
      SUBSCRIPTION_LOOKBACK: '12h',
      DEFAULT_SUBSCRIPTION_URL: 'http://127.0.0.1:8080/stac',
      DEFAULT_SUBSCRIPTION_MAX_CLOUD_COVER: '40',
      DEFAULT_SUBSCRIPTION_START_DATE: '2025-03-01',
    }).subscriptions;
    expect(c.pollIntervalMs).toBe(30_000);
    expect(c.lookbackMs).toBe(43_200_000);
    expect(c.default).toMatchObject({ url: 'http://127.0.0.1:8080/stac', maxCloudCover: 40, startDate: '2025-03-01' });
    expect(() => loadConfig({ DEFAULT_SUBSCRIPTION_URL: 'ftp://x/' })).toThrow(/DEFAULT_SUBSCRIPTION_URL/);
    expect(() => loadConfig({ DEFAULT_SUBSCRIPTION_MAX_CLOUD_COVER: '101' })).toThrow(/between 0 and 100/);
    expect(() => loadConfig({ DEFAULT_SUBSCRIPTION_START_DATE: '1 March' })).toThrow(/YYYY-MM-DD/);
    expect(() => loadConfig({ SUBSCRIPTION_POLL_INTERVAL: '10' })).toThrow(/SUBSCRIPTION_POLL_INTERVAL/);
  });

  it('DEFAULT_SUBSCRIPTION_ASSETS: a preset or a JSON map, checked like a request', () => {
    expect(parseDefaultAssets('cdse')).toBe('cdse');
    expect(parseDefaultAssets('{"B04":"B04_10m","SCL":"SCL_20m"}')).toEqual({ B04: 'B04_10m', SCL: 'SCL_20m' });
    expect(() => parseDefaultAssets('sentinelhub')).toThrow(ConfigError);
    expect(() => parseDefaultAssets('{"B04":')).toThrow(/DEFAULT_SUBSCRIPTION_ASSETS is not valid JSON/);
    expect(() => parseDefaultAssets('{"SCL":"scl"}')).toThrow(/at least one band/);
    expect(() => parseDefaultAssets('["B04"]')).toThrow(/preset name or a JSON object/);
  });
});
