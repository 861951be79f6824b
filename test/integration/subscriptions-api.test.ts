import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { loadConfig } from '../../src/platform/config.js';
import { openRuntime } from '../../src/runtime.js';
import { ensureDefaultSubscriptions, utcDate } from '../../src/subscriptions/service.js';
import { dbBackends, uniqueName } from '../helpers/backends.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';

/** Public address literals: checked like any host, without a DNS lookup (no network here). */
const URL_A = 'https://1.1.1.1/v1';
const URL_B = 'http://8.8.8.8/stac';

const BASE = '/v1/imagery/subscriptions';

describe.each(dbBackends)('subscriptions API on $name', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, { env: { SUBSCRIPTIONS_MAX_PER_ACCOUNT: '3' } });
  });
  afterAll(async () => t.close());

  const create = (payload: unknown, key?: string) =>
    t.app.inject({ method: 'POST', url: BASE, headers: t.auth(key), payload: payload as object });
  const patch = (id: string, payload: unknown, key?: string) =>
    t.app.inject({ method: 'PATCH', url: `${BASE}/${id}`, headers: t.auth(key), payload: payload as object });
  const get = (id: string, key?: string) => t.app.inject({ method: 'GET', url: `${BASE}/${id}`, headers: t.auth(key) });
  const poll = (id: string, key?: string) =>
    t.app.inject({ method: 'POST', url: `${BASE}/${id}/poll`, headers: t.auth(key) });
  const del = (id: string, key?: string) =>
    t.app.inject({ method: 'DELETE', url: `${BASE}/${id}`, headers: t.auth(key) });

  it('creates with the defaults, answers 201 with Location, and reads back the same', async () => {
    const res = await create({ stac_api_url: URL_A });
    expect(res.statusCode).toBe(201);
    const s = res.json();
    expect(s.id).toMatch(/^isub_[A-Za-z0-9_-]{22}$/);
    expect(res.headers.location).toBe(`http://localhost:3000${BASE}/${s.id}`);
    expect(s).toEqual({
      id: s.id,
      stac_api_url: URL_A,
      collection: 'sentinel-2-l2a',
      assets: 'earth-search',
      max_cloud_cover: null,
      start_date: utcDate(30),
      status: 'active',
      scl_exclude: [0, 1, 3, 8, 9, 10, 11],
      cloud_dilation_m: 0,
      default: false,
      last_polled_at: null,
      last_error: null,
      items_registered: 0,
      poll_requested_at: null,
      created_at: expect.any(String),
      updated_at: s.created_at,
    });
    expect(new Date(s.created_at).toISOString()).toBe(s.created_at);
    expect((await get(s.id)).json()).toEqual(s);
    expect((await del(s.id)).statusCode).toBe(204);
  });

  it('takes every writable member, http:// too, and an explicit asset map', async () => {
    const body = {
      stac_api_url: URL_B,
      collection: 'sentinel-2-c1-l2a',
      assets: { B04: 'B04_10m', B08: 'B08_10m', SCL: 'SCL_20m' },
      max_cloud_cover: 42.5,
      start_date: '2024-02-29',
      status: 'paused',
      scl_exclude: [3, 8, 9, 10],
      cloud_dilation_m: 20,
    };
    const res = await create(body);
    expect(res.statusCode).toBe(201);
    expect(res.json()).toMatchObject(body);
    expect((await get(res.json().id)).json()).toMatchObject(body);
    expect(
      (await create({ stac_api_url: URL_A, assets: 'planetary-computer', start_date: utcDate(0) })).json(),
    ).toMatchObject({ assets: 'planetary-computer', start_date: utcDate(0) });
    // the mask is canonical: classes sorted once each; none excluded is []
    for (const s of (await t.app.inject({ method: 'GET', url: BASE, headers: t.auth() })).json().data)
      expect((await del(s.id)).statusCode).toBe(204);
    expect((await create({ stac_api_url: URL_A, scl_exclude: [9, 3, 9] })).json()).toMatchObject({
      scl_exclude: [3, 9],
      cloud_dilation_m: 0,
    });
    expect((await create({ stac_api_url: URL_A, scl_exclude: [] })).json().scl_exclude).toEqual([]);
    for (const s of (await t.app.inject({ method: 'GET', url: BASE, headers: t.auth() })).json().data)
      expect((await del(s.id)).statusCode).toBe(204);
  });

  it('lists page by page with a Link header, each account only its own', async () => {
    const other = await t.otherAccount();
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) ids.push((await create({ stac_api_url: URL_A }, other.key)).json().id);
    const p2 = await t.app.inject({ method: 'GET', url: `${BASE}?per_page=2&page=2`, headers: t.auth(other.key) });
    expect(p2.statusCode).toBe(200);
    expect(p2.json()).toMatchObject({ page: 2, per_page: 2, total: 3, total_pages: 2 });
    expect(p2.json().data.map((s: { id: string }) => s.id)).toEqual([ids[2]]);
    expect(p2.headers.link).toContain(`<http://localhost:3000${BASE}?page=1&per_page=2>; rel="prev"`);
    const p1 = await t.app.inject({ method: 'GET', url: `${BASE}?per_page=2`, headers: t.auth(other.key) });
    expect(p1.json().data.map((s: { id: string }) => s.id)).toEqual(ids.slice(0, 2));
    expect(p1.headers.link).toContain('rel="next"');
    const mine = await t.app.inject({ method: 'GET', url: BASE, headers: t.auth() });
    expect(mine.json().data.map((s: { id: string }) => s.id)).not.toContain(ids[0]);
    const tooMany = await t.app.inject({ method: 'GET', url: `${BASE}?per_page=101`, headers: t.auth() });
    expect(tooMany.statusCode).toBe(400);

    // Another account's subscription is as missing as one that never existed.
    for (const res of [
      await get(ids[0]!),
      await patch(ids[0]!, { status: 'paused' }),
      await poll(ids[0]!),
      await del(ids[0]!),
      await get('isub_doesnotexist'),
    ]) {
      expect(res.statusCode).toBe(404);
      expect(res.headers['content-type']).toMatch(/application\/problem\+json/);
      expect(res.json().code).toBe('not_found');
    }
    expect((await get(ids[0]!, other.key)).json().status).toBe('active');
  });

  it('answers 400 with the member and a reason for every bad input', async () => {
    const cases: Array<[string, unknown, string, string, RegExp?]> = [
      ['no url', {}, '/body/stac_api_url', 'required'],
      ['not a URL', { stac_api_url: 'earth-search' }, '/body/stac_api_url', 'invalid_url', /not a valid URL/],
      ['ftp', { stac_api_url: 'ftp://1.1.1.1/' }, '/body/stac_api_url', 'invalid_url', /http:\/\/ or https:\/\//],
      ['credentials', { stac_api_url: 'https://u:p@1.1.1.1/' }, '/body/stac_api_url', 'invalid_url', /credentials/],
      ['loopback', { stac_api_url: 'http://127.0.0.1:8080/' }, '/body/stac_api_url', 'blocked_address'],
      ['private', { stac_api_url: 'https://10.1.2.3/' }, '/body/stac_api_url', 'blocked_address'],
      ['metadata', { stac_api_url: 'http://169.254.169.254/' }, '/body/stac_api_url', 'blocked_address'],
      ['IPv6 loopback', { stac_api_url: 'http://[::1]/' }, '/body/stac_api_url', 'blocked_address'],
      ['mapped IPv4', { stac_api_url: 'http://[::ffff:192.168.0.1]/' }, '/body/stac_api_url', 'blocked_address'],
      ['no such host', { stac_api_url: 'https://stac.invalid/' }, '/body/stac_api_url', 'unresolvable_host'],
      [
        'unknown preset',
        { stac_api_url: URL_A, assets: 'sentinel-hub' },
        '/body/assets',
        'unknown_preset',
        /use one of earth-search, planetary-computer, cdse/,
      ],
      ['unknown band', { stac_api_url: URL_A, assets: { B4: 'red', B08: 'nir' } }, '/body/assets/B4', 'unknown_band'],
      ['empty asset key', { stac_api_url: URL_A, assets: { B04: '' } }, '/body/assets/B04', 'empty_asset_key'],
      ['SCL alone', { stac_api_url: URL_A, assets: { SCL: 'scl' } }, '/body/assets', 'no_band'],
      ['assets a number', { stac_api_url: URL_A, assets: 4 }, '/body/assets', 'type'],
      ['asset key a number', { stac_api_url: URL_A, assets: { B04: 4 } }, '/body/assets', 'type'],
      ['no such day', { stac_api_url: URL_A, start_date: '2025-02-29' }, '/body/start_date', 'invalid_date'],
      ['future', { stac_api_url: URL_A, start_date: utcDate(-2) }, '/body/start_date', 'invalid_date', /future/],
      ['date format', { stac_api_url: URL_A, start_date: '2025-3-1' }, '/body/start_date', 'pattern'],
      ['cloud > 100', { stac_api_url: URL_A, max_cloud_cover: 100.5 }, '/body/max_cloud_cover', 'maximum'],
      ['cloud < 0', { stac_api_url: URL_A, max_cloud_cover: -1 }, '/body/max_cloud_cover', 'minimum'],
      ['cloud text', { stac_api_url: URL_A, max_cloud_cover: '50' }, '/body/max_cloud_cover', 'type'],
      ['status', { stac_api_url: URL_A, status: 'stopped' }, '/body/status', 'enum', /active, paused/],
      ['collection', { stac_api_url: URL_A, collection: 'a b' }, '/body/collection', 'pattern'],
      ['SCL class 12', { stac_api_url: URL_A, scl_exclude: [3, 12] }, '/body/scl_exclude', 'unknown_scl_class'],
      ['SCL class -1', { stac_api_url: URL_A, scl_exclude: [-1] }, '/body/scl_exclude', 'unknown_scl_class'],
      // the item, not "/body/scl_exclude must be null" (the nullable member's other branch)
      [
        'SCL class 2.5',
        { stac_api_url: URL_A, scl_exclude: [2.5] },
        '/body/scl_exclude/0',
        'type',
        /^must be integer$/,
      ],
      ['SCL classes text', { stac_api_url: URL_A, scl_exclude: '3,8' }, '/body/scl_exclude', 'type'],
      [
        'negative dilation',
        { stac_api_url: URL_A, cloud_dilation_m: -5 },
        '/body/cloud_dilation_m',
        'negative_dilation',
      ],
      [
        'dilation 5 km',
        { stac_api_url: URL_A, cloud_dilation_m: 5000 },
        '/body/cloud_dilation_m',
        'dilation_too_large',
      ],
      ['unknown member', { stac_api_url: URL_A, cursor: '2025-01-01' }, '/body/cursor', 'additionalProperties'],
      [
        'read-only member',
        { stac_api_url: URL_A, items_registered: 5 },
        '/body/items_registered',
        'additionalProperties',
      ],
    ];
    for (const [what, body, path, code, message] of cases) {
      const res = await create(body);
      expect(res.statusCode, what).toBe(400);
      expect(res.headers['content-type'], what).toMatch(/application\/problem\+json/);
      const p = res.json();
      expect(p.code, what).toBe('validation_failed');
      const issue = p.errors.find((e: { path: string }) => e.path === path);
      expect(issue, `${what}: ${JSON.stringify(p.errors)}`).toBeDefined();
      expect(issue.code, what).toBe(code);
      if (message) expect(issue.message, what).toMatch(message);
    }
    // Nothing was stored by any of them.
    expect((await t.app.inject({ method: 'GET', url: BASE, headers: t.auth() })).json().total).toBe(0);
  });

  it('PATCH changes any writable member, checks it like creation, and restarts the search', async () => {
    const s = (await create({ stac_api_url: URL_A, max_cloud_cover: 30 })).json();
    await t.db.query(
      `UPDATE imagery_subscriptions SET cursor = now(), failures = 2, last_error = 'HTTP 503' WHERE id = $1`,
      [s.id],
    );
    const paused = await patch(s.id, { status: 'paused' });
    expect(paused.statusCode).toBe(200);
    expect(paused.json()).toMatchObject({ status: 'paused', max_cloud_cover: 30, last_error: 'HTTP 503' });
    const [kept] = await t.db.query<{ cursor: Date | null }>('SELECT cursor FROM imagery_subscriptions WHERE id = $1', [
      s.id,
    ]);
    expect(kept!.cursor).not.toBeNull();

    const changed = await patch(s.id, { collection: 'landsat-c2-l2', max_cloud_cover: null, assets: 'cdse' });
    expect(changed.statusCode).toBe(200);
    expect(changed.json()).toMatchObject({
      collection: 'landsat-c2-l2',
      max_cloud_cover: null,
      assets: 'cdse',
      status: 'paused',
      last_error: null,
    });
    expect(changed.json().updated_at > s.updated_at).toBe(true);
    const [reset] = await t.db.query<{ cursor: Date | null; failures: number }>(
      'SELECT cursor, failures FROM imagery_subscriptions WHERE id = $1',
      [s.id],
    );
    expect(reset).toEqual({ cursor: null, failures: 0 });
    // the mask: for the captures registered from then on, the search is not restarted; null resets it
    await t.db.query('UPDATE imagery_subscriptions SET cursor = now() WHERE id = $1', [s.id]);
    const masked = await patch(s.id, { scl_exclude: [9, 8], cloud_dilation_m: 30 });
    expect(masked.json()).toMatchObject({ scl_exclude: [8, 9], cloud_dilation_m: 30, collection: 'landsat-c2-l2' });
    const [still] = await t.db.query<{ cursor: Date | null }>(
      'SELECT cursor FROM imagery_subscriptions WHERE id = $1',
      [s.id],
    );
    expect(still!.cursor).not.toBeNull();
    const unmasked = await patch(s.id, { scl_exclude: null, cloud_dilation_m: null });
    expect(unmasked.json()).toMatchObject({ scl_exclude: [0, 1, 3, 8, 9, 10, 11], cloud_dilation_m: 0 });
    const changedAgain = unmasked.json();

    for (const [body, path] of [
      [{}, '/body'],
      [{ stac_api_url: 'http://192.168.1.1/' }, '/body/stac_api_url'],
      [{ assets: 'nope' }, '/body/assets'],
      [{ start_date: '2025-04-31' }, '/body/start_date'],
      [{ status: 'deleted' }, '/body/status'],
      [{ default: true }, '/body/default'],
      [{ scl_exclude: [13] }, '/body/scl_exclude'],
      [{ cloud_dilation_m: -1 }, '/body/cloud_dilation_m'],
    ] as const) {
      const res = await patch(s.id, body);
      expect(res.statusCode, JSON.stringify(body)).toBe(400);
      expect(res.json().errors.map((e: { path: string }) => e.path)).toContain(path);
    }
    expect((await get(s.id)).json()).toEqual(changedAgain);
    expect((await del(s.id)).statusCode).toBe(204);
    expect((await get(s.id)).statusCode).toBe(404);
    expect((await del(s.id)).statusCode).toBe(404);
  });

  it('POST …/poll answers 202 with the request recorded; a paused subscription 409', async () => {
    const s = (await create({ stac_api_url: URL_A })).json();
    const res = await poll(s.id);
    expect(res.statusCode).toBe(202);
    expect(res.json().id).toBe(s.id);
    expect(new Date(res.json().poll_requested_at).toISOString()).toBe(res.json().poll_requested_at);
    // A second request before the poll ran keeps the first time.
    expect((await poll(s.id)).json().poll_requested_at).toBe(res.json().poll_requested_at);

    await patch(s.id, { status: 'paused' });
    const refused = await poll(s.id);
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ code: 'conflict', status: 409 });
    expect(refused.json().detail).toMatch(/paused/);
    await patch(s.id, { status: 'active' });
    expect((await poll(s.id)).statusCode).toBe(202);
    expect((await del(s.id)).statusCode).toBe(204);
  });

  it('refuses the subscription past SUBSCRIPTIONS_MAX_PER_ACCOUNT with 409, and takes one after a delete', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 3; i++) {
      const res = await create({ stac_api_url: URL_A });
      expect(res.statusCode).toBe(201);
      ids.push(res.json().id);
    }
    const refused = await create({ stac_api_url: URL_A });
    expect(refused.statusCode).toBe(409);
    expect(refused.json()).toMatchObject({ code: 'conflict' });
    expect(refused.json().detail).toMatch(/at most 3 subscriptions/);
    expect((await del(ids[0]!)).statusCode).toBe(204);
    expect((await create({ stac_api_url: URL_A })).statusCode).toBe(201);
    // Concurrent creations do not pass the limit together.
    const all = (await t.app.inject({ method: 'GET', url: BASE, headers: t.auth() })).json().data as { id: string }[];
    await del(all[0]!.id);
    const burst = await Promise.all([1, 2, 3].map(() => create({ stac_api_url: URL_A })));
    expect(burst.map((r) => r.statusCode).sort()).toEqual([201, 409, 409]);
    expect((await t.app.inject({ method: 'GET', url: BASE, headers: t.auth() })).json().total).toBe(3);
  });

  it('OpenAPI documents the paths and the resource', async () => {
    const doc = (await t.app.inject({ method: 'GET', url: '/openapi.json' })).json();
    expect(Object.keys(doc.paths)).toEqual(expect.arrayContaining([BASE, `${BASE}/{id}`, `${BASE}/{id}/poll`]));
    expect(Object.keys(doc.paths[BASE])).toEqual(expect.arrayContaining(['get', 'post']));
    expect(Object.keys(doc.paths[`${BASE}/{id}`])).toEqual(expect.arrayContaining(['get', 'patch', 'delete']));
    expect(Object.keys(doc.paths[`${BASE}/{id}/poll`].post.responses)).toEqual(
      expect.arrayContaining(['202', '400', '404', '409']),
    );
    const created = doc.paths[BASE].post.responses['201'].content['application/json'].schema;
    expect(Object.keys(created.properties)).toEqual(
      expect.arrayContaining(['stac_api_url', 'collection', 'assets', 'max_cloud_cover', 'start_date', 'status']),
    );
  });
});

describe.each(dbBackends)('the default subscription on $name', (backend) => {
  const DEFAULT_ENV = {
    // Operator-set: a private address is fine for it.
    DEFAULT_SUBSCRIPTION_URL: 'http://127.0.0.1:8080/stac',
    DEFAULT_SUBSCRIPTION_START_DATE: '2025-03-01',
    DEFAULT_SUBSCRIPTION_MAX_CLOUD_COVER: '40',
    SUBSCRIPTIONS_MAX_PER_ACCOUNT: '1',
  };
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend, { env: DEFAULT_ENV });
  });
  afterAll(async () => t.close());

  const list = async (key?: string) =>
    (await t.app.inject({ method: 'GET', url: BASE, headers: t.auth(key) })).json().data as Array<
      Record<string, unknown> & { id: string }
    >;

  /** What a start-up with `env` does to the subscriptions (without opening a whole runtime). */
  const startUp = (env: Record<string, string>) => ensureDefaultSubscriptions(t.db, loadConfig(env));

  /** Opens (and closes) another process on the same database with `env`: its start-up runs. */
  async function restartWith(env: Record<string, string>): Promise<void> {
    const rt = await openRuntime(loadConfig({ COMPUTE_THREADS: '1', SIGNING_KEY: 'k'.repeat(32), ...env }), {
      db: t.db,
      queuePrefix: uniqueName('q'),
      log: () => {},
    });
    await rt.close();
  }

  it('every new account gets it from the configuration, marked default', async () => {
    const expected = {
      stac_api_url: 'http://127.0.0.1:8080/stac',
      collection: 'sentinel-2-l2a',
      assets: 'earth-search',
      max_cloud_cover: 40,
      start_date: '2025-03-01',
      status: 'active',
      default: true,
    };
    expect(await list()).toEqual([expect.objectContaining(expected)]);
    const other = await t.otherAccount();
    expect(await list(other.key)).toEqual([expect.objectContaining(expected)]);
  });

  it('existing accounts get it at start-up, and it follows a changed configuration', async () => {
    await t.db.query(`INSERT INTO accounts (id, name) VALUES ('acc_existing', 'existing')`);
    await restartWith({ ...DEFAULT_ENV, DEFAULT_SUBSCRIPTION_ASSETS: '{"B04":"B04","B08":"B08","SCL":"SCL"}' });
    const rows = await t.db.query<{ account_id: string; assets: unknown; n: number }>(
      `SELECT account_id, assets, count(*) OVER (PARTITION BY account_id)::int AS n
         FROM imagery_subscriptions WHERE is_default ORDER BY account_id`,
    );
    expect(rows.map((r) => r.n)).toEqual(rows.map(() => 1));
    expect(rows.map((r) => r.account_id)).toContain('acc_existing');
    expect(rows.every((r) => JSON.stringify(r.assets) === '{"B04":"B04","B08":"B08","SCL":"SCL"}')).toBe(true);

    // The account paused it; a new collection restarts its search and keeps the pause.
    const [mine] = await list();
    await t.app.inject({
      method: 'PATCH',
      url: `${BASE}/${mine!.id}`,
      headers: t.auth(),
      payload: { status: 'paused' },
    });
    await t.db.query('UPDATE imagery_subscriptions SET cursor = now() WHERE id = $1', [mine!.id]);
    await startUp({ ...DEFAULT_ENV, DEFAULT_SUBSCRIPTION_COLLECTION: 'sentinel-2-c1-l2a' });
    const [after] = await t.db.query<{ id: string; collection: string; status: string; cursor: Date | null }>(
      'SELECT id, collection, status, cursor FROM imagery_subscriptions WHERE account_id = $1 AND is_default',
      [t.accountId],
    );
    expect(after).toEqual({ id: mine!.id, collection: 'sentinel-2-c1-l2a', status: 'paused', cursor: null });
    expect(await startUp({ ...DEFAULT_ENV, DEFAULT_SUBSCRIPTION_COLLECTION: 'sentinel-2-c1-l2a' })).toBe(0);
    expect((await list())[0]!.id).toBe(mine!.id);
  });

  it('the account may pause it but not change what it searches nor delete it; it is not counted in the limit', async () => {
    const [d] = await list();
    const changed = await t.app.inject({
      method: 'PATCH',
      url: `${BASE}/${d!.id}`,
      headers: t.auth(),
      payload: { stac_api_url: 'https://1.1.1.1/', status: 'active' },
    });
    expect(changed.statusCode).toBe(409);
    expect(changed.json().detail).toMatch(/only its status/);
    const masked = await t.app.inject({
      method: 'PATCH',
      url: `${BASE}/${d!.id}`,
      headers: t.auth(),
      payload: { scl_exclude: [9] },
    });
    expect(masked.statusCode).toBe(409);
    expect(masked.json().detail).toMatch(/not scl_exclude/);
    const resumed = await t.app.inject({
      method: 'PATCH',
      url: `${BASE}/${d!.id}`,
      headers: t.auth(),
      payload: { status: 'active' },
    });
    expect(resumed.json()).toMatchObject({ status: 'active', default: true });
    const deleted = await t.app.inject({ method: 'DELETE', url: `${BASE}/${d!.id}`, headers: t.auth() });
    expect(deleted.statusCode).toBe(409);
    expect(deleted.json().detail).toMatch(/pause it/);
    const own = await t.app.inject({
      method: 'POST',
      url: BASE,
      headers: t.auth(),
      payload: { stac_api_url: 'https://1.1.1.1/' },
    });
    expect(own.statusCode).toBe(201);
    expect(own.json().default).toBe(false);
  });

  it('a bad DEFAULT_SUBSCRIPTION_ASSETS stops the start naming the variable; no URL removes the defaults', async () => {
    await expect(startUp({ ...DEFAULT_ENV, DEFAULT_SUBSCRIPTION_ASSETS: 'sentinel-hub' })).rejects.toThrow(
      /DEFAULT_SUBSCRIPTION_ASSETS/,
    );
    await expect(startUp({ ...DEFAULT_ENV, DEFAULT_SUBSCRIPTION_START_DATE: utcDate(-1) })).rejects.toThrow(
      /DEFAULT_SUBSCRIPTION_START_DATE .*future/,
    );
    await startUp({});
    const rest = await list();
    expect(rest.map((s) => s.default)).toEqual([false]);
  });
});
