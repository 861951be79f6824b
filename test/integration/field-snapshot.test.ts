/**
 * The account's fields as a subscription poll loads them once for all its Items
 * (FieldSnapshot in src/imagery/service.ts): the candidates of a capture's box are those whose
 * box meets it, in creation order; registrations at once share one load; a field created, redrawn
 * or deleted is seen by the next call, as a SELECT per registration saw it. On both backends.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FieldSnapshot } from '../../src/imagery/service.js';
import type { Database } from '../../src/platform/database.js';
import { dbBackends } from '../helpers/backends.js';
import { buildTestApp, square, type TestApp } from '../helpers/app.js';

describe.each(dbBackends)('field snapshot on $name', (backend) => {
  let t: TestApp;
  /** The database, counting the loads of the fields (the statement selecting their boundaries). */
  let db: Database;
  let loads = 0;
  const ids: string[] = [];
  const create = async (name: string, lon: number, lat: number) => {
    const res = await t.app.inject({
      method: 'POST',
      url: '/v1/fields',
      headers: t.auth(),
      payload: { name, boundary: square(lon, lat, 0.01) },
    });
    expect(res.statusCode, res.body).toBe(201);
    return res.json().id as string;
  };

  beforeAll(async () => {
    t = await buildTestApp(backend);
    db = Object.create(t.db) as Database;
    db.query = ((text: string, params?: unknown[], opts?: object) => {
      if (/SELECT id, boundary, bbox FROM fields/.test(text)) loads++;
      return t.db.query(text, params as never, opts as never);
    }) as Database['query'];
    ids.push(await create('a', 5.0, 45.0), await create('b', 5.02, 45.0), await create('far', 10.0, 50.0));
  });
  afterAll(async () => {
    await t?.close();
  });

  const box = [4.9, 44.9, 5.2, 45.1];

  it('the fields meeting a box, in creation order; registrations at once share one load', async () => {
    const snap = new FieldSnapshot(db, t.accountId);
    const all = await Promise.all(Array.from({ length: 5 }, () => snap.candidates(box)));
    for (const c of all) expect(c.map((f) => f.id)).toEqual([ids[0], ids[1]]);
    expect(all[0]![0]!.boundary).toMatchObject({ type: 'Polygon' });
    expect(loads).toBe(1);
    expect((await snap.candidates([9.9, 49.9, 10.1, 50.1])).map((f) => f.id)).toEqual([ids[2]]);
    expect(loads).toBe(1);
  });

  it('a field created, redrawn or deleted is seen by the next call', async () => {
    const snap = new FieldSnapshot(db, t.accountId);
    await snap.candidates(box);
    const before = loads;
    const late = await create('late', 5.04, 45.0);
    expect((await snap.candidates(box)).map((f) => f.id)).toEqual([ids[0], ids[1], late]);
    expect(loads).toBe(before + 1);
    // redrawn far away: no longer a candidate of the box
    const moved = await t.app.inject({
      method: 'PATCH',
      url: `/v1/fields/${ids[1]}`,
      headers: t.auth(),
      payload: { boundary: square(10.02, 50.0, 0.01) },
    });
    expect(moved.statusCode, moved.body).toBe(200);
    expect((await snap.candidates(box)).map((f) => f.id)).toEqual([ids[0], late]);
    const del = await t.app.inject({ method: 'DELETE', url: `/v1/fields/${late}`, headers: t.auth() });
    expect(del.statusCode).toBe(204);
    expect((await snap.candidates(box)).map((f) => f.id)).toEqual([ids[0]]);
    expect(loads).toBe(before + 3);
    // nothing changed: no load
    await snap.candidates(box);
    expect(loads).toBe(before + 3);
  });
});
