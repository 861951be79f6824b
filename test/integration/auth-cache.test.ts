/**
 * The in-process cache of resolved API keys (AUTH_CACHE_MS, issue 25): a key revoked through this
 * process is refused at once even while cached; one revoked elsewhere (the CLI or another replica:
 * here a plain UPDATE, which this process does not see) is refused once the cache time has passed,
 * and at once with AUTH_CACHE_MS=0.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { authenticate, createApiKey, revokeApiKey } from '../../src/accounts/api-keys.js';
import { loadConfig } from '../../src/platform/config.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { dbBackends } from '../helpers/backends.js';

const BOUND_MS = 300;

/** Revoked behind this process's back, as `npm run keys -- revoke` in another process does. */
const revokeElsewhere = (t: TestApp, id: string) =>
  t.db.query('UPDATE api_keys SET revoked_at = now() WHERE id = $1', [id]);

describe.each(dbBackends)('API key cache on $name', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, { env: { AUTH_CACHE_MS: String(BOUND_MS) } });
  });
  afterAll(async () => t?.close());

  const status = async (app: TestApp, key: string) =>
    (await app.app.inject({ method: 'GET', url: '/v1/fields', headers: app.auth(key) })).statusCode;

  it('refuses a key revoked through this process at once, though it was cached', async () => {
    const { key, id } = await createApiKey(t.db, t.accountId);
    expect(await status(t, key)).toBe(200); // resolved and cached
    expect(await status(t, key)).toBe(200);
    expect(await revokeApiKey(t.db, id)).toBe(true);
    expect(await status(t, key)).toBe(401);
  });

  it('refuses a key revoked elsewhere within AUTH_CACHE_MS', async () => {
    const { key, id } = await createApiKey(t.db, t.accountId);
    expect(await status(t, key)).toBe(200);
    const revokedAt = Date.now();
    await revokeElsewhere(t, id);
    // Until the bound passes the cached key may still be served; from then on never.
    await new Promise((r) => setTimeout(r, BOUND_MS + 20 - (Date.now() - revokedAt)));
    expect(await status(t, key)).toBe(401);
    expect(await status(t, key)).toBe(401);
  });

  it('with AUTH_CACHE_MS=0 asks the database on every request', async () => {
    const { key, id } = await createApiKey(t.db, t.accountId);
    const header = `Bearer ${key}`;
    expect((await authenticate(t.db, header, 0)).ok).toBe(true);
    await revokeElsewhere(t, id);
    expect(await authenticate(t.db, header, 0)).toEqual({ ok: false, reason: 'unknown' });
  });

  it('AUTH_CACHE_MS is checked at start-up', () => {
    expect(() => loadConfig({ AUTH_CACHE_MS: '-1' })).toThrow(/AUTH_CACHE_MS/);
    expect(loadConfig({}).authCacheMs).toBe(5000);
  });
});
