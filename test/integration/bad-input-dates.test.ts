/**
 * Dates at every place one enters: a day of the year 0000 passed the calendar check (JavaScript's
 * proleptic calendar has that year) and reached PostgreSQL, whose `date` has not: a 500 on the
 * field routes and the capture list, a batch job accepted and failed after five attempts with the
 * database's message, a subscription stored. Each is now 400 `invalid_date` naming the place, on
 * both database backends, and nothing is stored. The first and last days the API takes still work.
 *
 * A seasonal or health-summary report reads its period as a daily series of at most 3,660 days; a
 * longer period given in the options was accepted (202) and failed in the worker. It is now a 400
 * at request time.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { SyntheticCapture } from '../../src/imagery/synthetic.js';
import { square, type TestApp } from '../helpers/app.js';
import { dbBackends } from '../helpers/backends.js';
import { type EdgeScene, edgeScene } from '../helpers/edge-scene.js';

const Y0 = '0000-06-01';

interface Ctx {
  fieldId: string;
  cap: SyntheticCapture;
}
interface DateCase {
  name: string;
  method: 'GET' | 'POST' | 'PATCH';
  url: (c: Ctx) => string;
  payload?: (c: Ctx) => object;
  /** JSON Pointer the answer must name. */
  path: string;
}

const cases: DateCase[] = [
  {
    name: 'planting_date of a new field',
    method: 'POST',
    url: () => '/v1/fields',
    payload: () => ({ name: 'y0', boundary: square(5, 51), planting_date: Y0 }),
    path: '/body/planting_date',
  },
  {
    name: 'harvest_date of a new field',
    method: 'POST',
    url: () => '/v1/fields',
    payload: () => ({ name: 'y0', boundary: square(5, 51), harvest_date: Y0 }),
    path: '/body/harvest_date',
  },
  {
    name: 'harvest_date in a PATCH',
    method: 'PATCH',
    url: (c) => `/v1/fields/${c.fieldId}`,
    payload: () => ({ harvest_date: Y0 }),
    path: '/body/harvest_date',
  },
  {
    name: "start_date of a field's captures",
    method: 'GET',
    url: (c) => `/v1/fields/${c.fieldId}/imagery?start_date=${Y0}`,
    path: '/query/start_date',
  },
  {
    name: "end_date of a field's captures",
    method: 'GET',
    url: (c) => `/v1/fields/${c.fieldId}/imagery?end_date=${Y0}`,
    path: '/query/end_date',
  },
  {
    name: 'the date of an index',
    method: 'GET',
    url: (c) => `/v1/fields/${c.fieldId}/indices?index=NDVI&date=${Y0}&geojson=false`,
    path: '/query/date',
  },
  {
    name: 'the date of a raster',
    method: 'GET',
    url: (c) => `/v1/fields/${c.fieldId}/indices/raster?index=NDVI&date=${Y0}`,
    path: '/query/date',
  },
  {
    name: 'start_date of a time series',
    method: 'GET',
    url: (c) => `/v1/fields/${c.fieldId}/indices/timeseries?index=NDVI&start_date=${Y0}&end_date=0000-07-01`,
    path: '/query/start_date',
  },
  {
    name: 'start_date of a batch job',
    method: 'POST',
    url: () => '/v1/batch/statistics',
    payload: () => ({ fields: 'all', indices: ['NDVI'], start_date: Y0, end_date: '0000-07-01' }),
    path: '/body/start_date',
  },
  {
    name: 'capture_date of a capture',
    method: 'POST',
    url: () => '/v1/imagery',
    payload: (c) => ({
      source: 'sentinel-2-l2a',
      capture_date: Y0,
      bands: { B04: c.cap.files.B04, B08: c.cap.files.B08 },
    }),
    path: '/body/capture_date',
  },
  {
    name: 'the date of a report',
    method: 'POST',
    url: (c) => `/v1/fields/${c.fieldId}/reports`,
    payload: () => ({ type: 'scouting', format: 'json', options: { date: Y0 } }),
    path: '/body/options/date',
  },
  {
    name: 'start_date of a subscription',
    method: 'POST',
    url: () => '/v1/imagery/subscriptions',
    payload: () => ({ stac_api_url: 'http://127.0.0.1:9/stac', start_date: Y0 }),
    path: '/body/start_date',
  },
];

describe.each(dbBackends)('dates of the year 0000 are refused on $name', (backend) => {
  let scene: EdgeScene;
  let t: TestApp;
  const ctx = {} as Ctx;
  const count = (table: string) => scene.count(table);
  const send = (c: Pick<DateCase, 'method' | 'url' | 'payload'>) =>
    t.app.inject({
      method: c.method,
      url: c.url(ctx),
      headers: t.auth(),
      ...(c.payload ? { payload: c.payload(ctx) } : {}),
    });

  beforeAll(async () => {
    scene = await edgeScene(backend, {
      prefix: 'dates-',
      seed: 11,
      env: { SUBSCRIPTIONS_ALLOW_PRIVATE_NETWORKS: 'true' },
    });
    ({ t, fieldId: ctx.fieldId, cap: ctx.cap } = scene);
  });
  afterAll(() => scene?.close());

  it.each(cases)('$name → 400 invalid_date naming $path', async (c) => {
    const res = await send(c);
    expect(res.statusCode, res.body).toBe(400);
    expect(res.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(res.json().code).toBe('validation_failed');
    expect(res.json().errors).toContainEqual(expect.objectContaining({ path: c.path, code: 'invalid_date' }));
  });

  it('nothing was stored by any of them', async () => {
    expect(await count('fields')).toBe(1);
    expect(await count('imagery')).toBe(0);
    expect(await count('batch_jobs')).toBe(0);
    expect(await count('reports')).toBe(0);
    expect(await count('imagery_subscriptions')).toBe(0);
    const field = await t.app.inject({ method: 'GET', url: `/v1/fields/${ctx.fieldId}`, headers: t.auth() });
    expect(field.json().harvest_date).toBeNull();
  });

  it('the first and the last day the API takes are dates like any other', async () => {
    const created = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: t.auth(),
      payload: { name: 'edges', boundary: square(5, 51), planting_date: '0001-01-01', harvest_date: '9999-12-31' },
    });
    expect(created.statusCode, created.body).toBe(201);
    expect(created.json()).toMatchObject({ planting_date: '0001-01-01', harvest_date: '9999-12-31' });
    const list = await t.app.inject({
      method: 'GET',
      url: `/v1/fields/${ctx.fieldId}/imagery?start_date=0001-01-01&end_date=9999-12-31`,
      headers: t.auth(),
    });
    expect(list.statusCode, list.body).toBe(200);
    await t.app.inject({ method: 'DELETE', url: `/v1/fields/${created.json().id}`, headers: t.auth() });
  });

  it('a report period over 3,660 days → 400 range_too_long at request time; 3,660 days are accepted', async () => {
    const report = (start_date: string, end_date: string) =>
      send({
        method: 'POST',
        url: (c) => `/v1/fields/${c.fieldId}/reports`,
        payload: () => ({ type: 'seasonal', format: 'json', options: { start_date, end_date } }),
      });
    const long = await report('2015-01-01', '2025-01-08');
    expect(long.statusCode, long.body).toBe(400);
    expect(long.json().errors).toContainEqual({
      path: '/body/options/end_date',
      code: 'range_too_long',
      message: 'the period has 3661 days; at most 3660',
    });
    const weekly = await send({
      method: 'POST',
      url: (c) => `/v1/fields/${c.fieldId}/reports`,
      payload: () => ({
        type: 'health_summary',
        format: 'json',
        options: { start_date: '0001-01-01', end_date: '2025-06-30' },
      }),
    });
    expect(weekly.statusCode, weekly.body).toBe(400);
    expect(weekly.json().errors).toContainEqual(
      expect.objectContaining({ path: '/body/options/end_date', code: 'range_too_long' }),
    );
    expect(await count('reports')).toBe(0);
    const longest = await report('2015-01-01', '2025-01-07');
    expect(longest.statusCode, longest.body).toBe(202);
  });
});
