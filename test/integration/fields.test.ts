import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { emit, listOutbox } from '../../src/events/outbox.js';
import { dbBackends } from '../helpers/backends.js';
import { buildTestApp, square, type TestApp } from '../helpers/app.js';

describe.each(dbBackends)('fields on $name', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t.close());

  const create = (payload: unknown, key?: string) =>
    t.app.inject({ method: 'POST', url: '/v1/fields', headers: t.auth(key), payload: payload as object });

  it('creates a field with a geodesic area, timestamps and a Location header', async () => {
    const res = await create({
      name: 'North paddock',
      boundary: square(5.0, 51.0, 0.01),
      crop_type: 'wheat',
      planting_date: '2025-03-20',
    });
    expect(res.statusCode).toBe(201);
    const f = res.json();
    expect(f.id).toMatch(/^fld_[A-Za-z0-9_-]{22}$/);
    expect(res.headers.location).toBe(`http://localhost:3000/v1/fields/${f.id}`);
    // 0.01° × 0.01° at 51°N: ≈ 1113 m × 700 m ≈ 77.9 ha (planar cos-latitude estimate within 1 %).
    const approx = (111_320 * 0.01 * 111_320 * 0.01 * Math.cos((51.005 * Math.PI) / 180)) / 10_000;
    expect(Math.abs(f.area_ha - approx) / approx).toBeLessThan(0.01);
    expect(f).toMatchObject({
      name: 'North paddock',
      crop_type: 'wheat',
      planting_date: '2025-03-20',
      harvest_date: null,
    });
    expect(f.bbox).toEqual([5.0, 51.0, 5.01, 51.01]);
    expect(new Date(f.created_at).toISOString()).toBe(f.created_at);
    const got = await t.app.inject({ method: 'GET', url: `/v1/fields/${f.id}`, headers: t.auth() });
    expect(got.json()).toEqual(f);
  });

  it('rejects bad boundaries with 400 invalid_boundary and a pointer to the problem', async () => {
    const bad: Array<[string, unknown]> = [
      ['not an object', 'POLYGON((0 0, 1 0, 1 1, 0 0))'],
      ['a point', { type: 'Point', coordinates: [5, 51] }],
      [
        'unclosed ring',
        {
          type: 'Polygon',
          coordinates: [
            [
              [5, 51],
              [5.01, 51],
              [5.01, 51.01],
              [5, 51.01],
            ],
          ],
        },
      ],
      [
        'too few positions',
        {
          type: 'Polygon',
          coordinates: [
            [
              [5, 51],
              [5.01, 51],
              [5, 51],
            ],
          ],
        },
      ],
      [
        'longitude out of range',
        {
          type: 'Polygon',
          coordinates: [
            [
              [185, 51],
              [185.01, 51],
              [185.01, 51.01],
              [185, 51],
            ],
          ],
        },
      ],
      [
        'latitude out of range',
        {
          type: 'Polygon',
          coordinates: [
            [
              [5, 91],
              [5.01, 91],
              [5.01, 91.01],
              [5, 91],
            ],
          ],
        },
      ],
      [
        'self-intersecting bow-tie',
        {
          type: 'Polygon',
          coordinates: [
            [
              [5, 51],
              [5.01, 51.01],
              [5.01, 51],
              [5, 51.01],
              [5, 51],
            ],
          ],
        },
      ],
      [
        'strings for numbers',
        {
          type: 'Polygon',
          coordinates: [
            [
              ['5', '51'],
              ['5.01', '51'],
              ['5.01', '51.01'],
              ['5', '51'],
            ],
          ],
        },
      ],
      [
        'zero area',
        {
          type: 'Polygon',
          coordinates: [
            [
              [5, 51],
              [5.01, 51],
              [5.02, 51],
              [5, 51],
            ],
          ],
        },
      ],
      ['larger than the maximum area', square(5, 51, 2)],
      ['missing coordinates', { type: 'Polygon' }],
      [
        'hole outside its shell',
        { type: 'Polygon', coordinates: [square(5, 51, 0.01).coordinates[0], square(6, 51, 0.001).coordinates[0]] },
      ],
    ];
    for (const [why, boundary] of bad) {
      const res = await create({ name: why, boundary });
      expect(res.statusCode, why).toBe(400);
      expect(res.headers['content-type']).toMatch(/problem\+json/);
      const body = res.json();
      expect(['invalid_boundary', 'validation_failed'], why).toContain(body.code);
      expect(body.errors?.length, why).toBeGreaterThan(0);
      expect(body.errors[0].path, why).toMatch(/^\/body\/boundary/);
    }
    const list = await t.app.inject({ method: 'GET', url: '/v1/fields?per_page=100', headers: t.auth() });
    expect(list.json().data.map((f: { name: string }) => f.name)).not.toContain('zero area');
  });

  it('rejects impossible dates and a harvest before planting', async () => {
    for (const payload of [
      { planting_date: '2025-02-30' },
      { planting_date: '2025-06-01', harvest_date: '2025-05-01' },
      { harvest_date: '2025-13-01' },
    ]) {
      const res = await create({ name: 'dates', boundary: square(5, 51), ...payload });
      expect(res.statusCode).toBe(400);
      expect(res.json().code).toBe('validation_failed');
    }
  });

  it('paginates with the envelope and an RFC 8288 Link header', async () => {
    const own = await buildTestApp(backend);
    try {
      for (let i = 0; i < 5; i++) {
        const r = await own.app.inject({
          method: 'POST',
          url: '/v1/fields',
          headers: own.auth(),
          payload: { name: `f${i}`, boundary: square(5 + i * 0.1, 51) },
        });
        expect(r.statusCode).toBe(201);
      }
      const res = await own.app.inject({ method: 'GET', url: '/v1/fields?per_page=2&page=2', headers: own.auth() });
      expect(res.statusCode).toBe(200);
      const body = res.json();
      expect(body).toMatchObject({ page: 2, per_page: 2, total: 5, total_pages: 3 });
      expect(body.data.map((f: { name: string }) => f.name)).toEqual(['f2', 'f3']);
      const link = String(res.headers.link);
      expect(link).toContain('<http://localhost:3000/v1/fields?page=1&per_page=2>; rel="first"');
      expect(link).toContain('<http://localhost:3000/v1/fields?page=1&per_page=2>; rel="prev"');
      expect(link).toContain('<http://localhost:3000/v1/fields?page=3&per_page=2>; rel="next"');
      expect(link).toContain('<http://localhost:3000/v1/fields?page=3&per_page=2>; rel="last"');
      const first = (await own.app.inject({ method: 'GET', url: '/v1/fields', headers: own.auth() })).json();
      expect(first).toMatchObject({ page: 1, per_page: 20, total: 5, total_pages: 1 });
      const beyond = (
        await own.app.inject({ method: 'GET', url: '/v1/fields?page=9&per_page=2', headers: own.auth() })
      ).json();
      expect(beyond.data).toEqual([]);
    } finally {
      await own.close();
    }
  });

  it("another account's field answers 404 on every verb", async () => {
    const f = (await create({ name: 'mine', boundary: square(5, 51) })).json();
    const other = await t.otherAccount();
    for (const method of ['GET', 'PATCH', 'DELETE'] as const) {
      const res = await t.app.inject({
        method,
        url: `/v1/fields/${f.id}`,
        headers: t.auth(other.key),
        ...(method === 'PATCH' ? { payload: { name: 'x' } } : {}),
      });
      expect(res.statusCode, method).toBe(404);
      expect(res.json().code).toBe('not_found');
    }
    const list = (await t.app.inject({ method: 'GET', url: '/v1/fields', headers: t.auth(other.key) })).json();
    expect(list.total).toBe(0);
    expect((await t.app.inject({ method: 'GET', url: `/v1/fields/${f.id}`, headers: t.auth() })).statusCode).toBe(200);
  });

  it('PATCH updates, emits field.updated with changed_fields in the same transaction', async () => {
    const own = await buildTestApp(backend);
    try {
      const f = (
        await own.app.inject({
          method: 'POST',
          url: '/v1/fields',
          headers: own.auth(),
          payload: { name: 'A', boundary: square(5, 51) },
        })
      ).json();
      const res = await own.app.inject({
        method: 'PATCH',
        url: `/v1/fields/${f.id}`,
        headers: own.auth(),
        payload: { name: 'B', crop_type: 'maize', boundary: square(5, 51, 0.006) },
      });
      expect(res.statusCode).toBe(200);
      const g = res.json();
      expect(g).toMatchObject({ name: 'B', crop_type: 'maize' });
      expect(g.area_ha).toBeGreaterThan(f.area_ha);
      expect(g.updated_at > f.updated_at).toBe(true);
      let events = await listOutbox(own.db, own.accountId, 'field.updated');
      expect(events).toHaveLength(1);
      expect(events[0]!.id).toMatch(/^evt_/);
      expect(events[0]!.data).toEqual({
        field_id: f.id,
        changed_fields: ['name', 'boundary', 'crop_type'],
        updated_at: g.updated_at,
      });

      // No change → no event.
      const same = await own.app.inject({
        method: 'PATCH',
        url: `/v1/fields/${f.id}`,
        headers: own.auth(),
        payload: { name: 'B' },
      });
      expect(same.statusCode).toBe(200);
      expect(await listOutbox(own.db, own.accountId, 'field.updated')).toHaveLength(1);

      // A failed update (harvest before planting after merge) leaves neither change nor event.
      await own.app.inject({
        method: 'PATCH',
        url: `/v1/fields/${f.id}`,
        headers: own.auth(),
        payload: { planting_date: '2025-05-01' },
      });
      const bad = await own.app.inject({
        method: 'PATCH',
        url: `/v1/fields/${f.id}`,
        headers: own.auth(),
        payload: { name: 'C', harvest_date: '2025-04-01' },
      });
      expect(bad.statusCode).toBe(400);
      expect(
        (await own.app.inject({ method: 'GET', url: `/v1/fields/${f.id}`, headers: own.auth() })).json().name,
      ).toBe('B');
      events = await listOutbox(own.db, own.accountId, 'field.updated');
      expect(events).toHaveLength(2);
      expect(events[1]!.data.changed_fields).toEqual(['planting_date']);

      // A bad boundary in a PATCH is a 400 and changes nothing.
      const badB = await own.app.inject({
        method: 'PATCH',
        url: `/v1/fields/${f.id}`,
        headers: own.auth(),
        payload: { name: 'D', boundary: { type: 'Point', coordinates: [0, 0] } },
      });
      expect(badB.statusCode).toBe(400);
      expect(await listOutbox(own.db, own.accountId, 'field.updated')).toHaveLength(2);

      // Clearing with null counts as a change.
      const cleared = await own.app.inject({
        method: 'PATCH',
        url: `/v1/fields/${f.id}`,
        headers: own.auth(),
        payload: { crop_type: null },
      });
      expect(cleared.json().crop_type).toBeNull();
      expect((await listOutbox(own.db, own.accountId, 'field.updated')).at(-1)!.data.changed_fields).toEqual([
        'crop_type',
      ]);

      const empty = await own.app.inject({
        method: 'PATCH',
        url: `/v1/fields/${f.id}`,
        headers: own.auth(),
        payload: {},
      });
      expect(empty.statusCode).toBe(400);
    } finally {
      await own.close();
    }
  });

  it('concurrent PATCHes of one field: each change and its event exactly once, dates checked on the latest row', async () => {
    const f = (await create({ name: 'busy', boundary: square(6, 51) })).json();
    const before = (await listOutbox(t.db, t.accountId, 'field.updated')).filter((e) => e.data.field_id === f.id);
    expect(before).toHaveLength(0);
    const patch = (payload: object) =>
      t.app.inject({ method: 'PATCH', url: `/v1/fields/${f.id}`, headers: t.auth(), payload });
    // 24 PATCHes at once, each to a crop type of its own: 24 changes, 24 events, none lost.
    const crops = Array.from({ length: 24 }, (_, i) => `crop-${i}`);
    const answers = await Promise.all(crops.map((crop_type) => patch({ crop_type })));
    for (const a of answers) expect(a.statusCode).toBe(200);
    const events = (await listOutbox(t.db, t.accountId, 'field.updated')).filter((e) => e.data.field_id === f.id);
    expect(events).toHaveLength(24);
    for (const e of events) expect(e.data.changed_fields).toEqual(['crop_type']);
    // Every answer's updated_at is its event's, and the field holds the crop of the last event.
    expect(new Set(events.map((e) => e.data.updated_at))).toEqual(new Set(answers.map((a) => a.json().updated_at)));
    // updated_at is its transaction's start in milliseconds: two PATCHes that began in the same
    // millisecond share it, so the last event names one of the answers that carry its time
    const lastAt = events.at(-1)!.data.updated_at;
    const last = answers.map((a) => a.json()).filter((a) => a.updated_at === lastAt);
    const now = (await t.app.inject({ method: 'GET', url: `/v1/fields/${f.id}`, headers: t.auth() })).json();
    expect(now.updated_at).toBe(lastAt);
    expect(last.map((a) => a.crop_type)).toContain(now.crop_type);

    // A planting date and an earlier harvest date sent at once: whichever runs second sees the
    // other's date and is refused; never are both applied.
    for (let round = 0; round < 5; round++) {
      await patch({ planting_date: null, harvest_date: null });
      const [p, h] = await Promise.all([patch({ planting_date: '2025-05-01' }), patch({ harvest_date: '2025-04-01' })]);
      expect([p.statusCode, h.statusCode].sort()).toEqual([200, 400]);
      const g = (await t.app.inject({ method: 'GET', url: `/v1/fields/${f.id}`, headers: t.auth() })).json();
      expect(g.planting_date !== null && g.harvest_date !== null).toBe(false);
    }
  });

  it('a PATCH of a field that does not exist answers 404, also with invalid values', async () => {
    for (const payload of [
      { name: 'x' },
      { planting_date: '2025-02-30' },
      { boundary: { type: 'Point', coordinates: [0, 0] } },
    ]) {
      const res = await t.app.inject({ method: 'PATCH', url: '/v1/fields/fld_missing', headers: t.auth(), payload });
      expect(res.statusCode, JSON.stringify(payload)).toBe(404);
    }
  });

  it('an event emitted in a transaction that then fails is rolled back with it', async () => {
    const before = (await listOutbox(t.db, t.accountId)).length;
    await expect(
      t.db.transaction(async (tx) => {
        await emit(tx, t.accountId, 'field.updated', {
          field_id: 'fld_x',
          changed_fields: ['name'],
          updated_at: new Date().toISOString(),
        });
        await tx.query("UPDATE fields SET name = 'x' WHERE id = 'fld_x'");
        throw new Error('the caller failed after emitting');
      }),
    ).rejects.toThrow('failed after emitting');
    expect(await listOutbox(t.db, t.accountId)).toHaveLength(before);
  });

  it('DELETE answers 204, then the field is gone', async () => {
    const f = (await create({ name: 'temp', boundary: square(5, 51) })).json();
    const del = await t.app.inject({ method: 'DELETE', url: `/v1/fields/${f.id}`, headers: t.auth() });
    expect(del.statusCode).toBe(204);
    expect(del.body).toBe('');
    expect((await t.app.inject({ method: 'GET', url: `/v1/fields/${f.id}`, headers: t.auth() })).statusCode).toBe(404);
    expect((await t.app.inject({ method: 'DELETE', url: `/v1/fields/${f.id}`, headers: t.auth() })).statusCode).toBe(
      404,
    );
  });
});
