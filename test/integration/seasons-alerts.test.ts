import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { emitDueSeasonEvents } from '../../src/events/seasons.js';
import { datesEvery, sceneField, writeSyntheticSeason } from '../../src/imagery/synthetic.js';
import { dbBackends } from '../helpers/backends.js';
import { buildTestApp, square, type TestApp } from '../helpers/app.js';
import { registerCaptures } from '../helpers/captures.js';

describe.each(dbBackends)('season events on $name', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t.close());

  it('emit once per field and date, even when run concurrently; a changed date is a new event; future dates wait', async () => {
    const mk = (payload: object) =>
      t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'f', boundary: square(5, 51), ...payload },
      });
    const a = (await mk({ crop_type: 'wheat', planting_date: '2025-03-01', harvest_date: '2025-07-20' })).json();
    const b = (await mk({ crop_type: 'maize', planting_date: '2025-05-01', harvest_date: '2099-09-01' })).json();
    await mk({ planting_date: '2099-01-01' });
    const counts = await Promise.all([
      emitDueSeasonEvents(t.db, '2025-08-01'),
      emitDueSeasonEvents(t.db, '2025-08-01'),
      emitDueSeasonEvents(t.db, '2025-08-01'),
    ]);
    expect(counts.reduce((x, y) => x + y, 0)).toBe(3);
    expect(await emitDueSeasonEvents(t.db, '2025-08-01')).toBe(0);
    const started = await listOutbox(t.db, t.accountId, 'season.started');
    const ended = await listOutbox(t.db, t.accountId, 'season.ended');
    expect(started.map((e) => e.data).sort((x, y) => String(x.field_id).localeCompare(String(y.field_id)))).toEqual(
      [
        { field_id: a.id, crop_type: 'wheat', planting_date: '2025-03-01' },
        { field_id: b.id, crop_type: 'maize', planting_date: '2025-05-01' },
      ].sort((x, y) => x.field_id.localeCompare(y.field_id)),
    );
    expect(ended.map((e) => e.data)).toEqual([{ field_id: a.id, crop_type: 'wheat', harvest_date: '2025-07-20' }]);
    await t.app.inject({
      method: 'PATCH',
      url: `/v1/fields/${a.id}`,
      headers: t.auth(),
      payload: { planting_date: '2025-03-05' },
    });
    expect(await emitDueSeasonEvents(t.db, '2025-08-01')).toBe(1);
  });
});

describe('alert rules on a synthetic season', () => {
  let t: TestApp;
  let dir: string;
  beforeAll(async () => {
    dir = mkdtempSync(path.join(os.tmpdir(), 'alerts-'));
    t = await buildTestApp({ name: 'pglite' }, { env: { IMAGERY_ROOTS: dir } });
  });
  afterAll(async () => {
    await t.close();
    rmSync(dir, { recursive: true, force: true });
  });

  it('triggers only when the field mean crosses the threshold; history and CRUD', async () => {
    const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 80, seed: 3 };
    const field = (
      await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(),
        payload: { name: 'alerted', boundary: sceneField(spec) },
      })
    ).json();
    const rule = await t.app.inject({
      method: 'POST',
      url: `/v1/fields/${field.id}/alerts`,
      headers: t.auth(),
      payload: { alert_type: 'crop_health', index: 'NDVI', operator: 'below', threshold: 0.5 },
    });
    expect(rule.statusCode, rule.body).toBe(201);
    const r = rule.json();
    expect(r).toMatchObject({ id: expect.stringMatching(/^alr_/), state: 'ok', index: 'NDVI' });
    for (const bad of [
      { alert_type: 'frost', index: 'NDVI', operator: 'below', threshold: 0.5 },
      { alert_type: 'crop_health', index: 'XYZ', operator: 'below', threshold: 0.5 },
      { alert_type: 'crop_health', index: 'NDVI', operator: 'under', threshold: 0.5 },
      { alert_type: 'crop_health', index: 'NDVI', operator: 'below', threshold: 'low' },
    ]) {
      expect(
        (await t.app.inject({ method: 'POST', url: `/v1/fields/${field.id}/alerts`, headers: t.auth(), payload: bad }))
          .statusCode,
      ).toBe(400);
    }
    // Clear skies only (every third date of the generator is clear): the crossings decide alone.
    const dates = datesEvery('2025-03-20', '2025-10-20', 10);
    const caps = writeSyntheticSeason(dir, spec, dates, '2025-04-01', '2025-09-20').filter((c) => c.cloudiness === 0);
    await registerCaptures(t, caps);
    const events = await listOutbox(t.db, t.accountId, 'alert.triggered');
    // Bare soil at the start (below 0.5: triggered), green in summer (re-armed), senescence (triggered again).
    expect(events).toHaveLength(2);
    for (const e of events) {
      expect(Object.keys(e.data).sort()).toEqual(
        ['alert_id', 'alert_type', 'field_id', 'index', 'threshold', 'triggered_at', 'value'].sort(),
      );
      expect(e.data).toMatchObject({
        field_id: field.id,
        alert_id: r.id,
        alert_type: 'crop_health',
        index: 'NDVI',
        threshold: 0.5,
      });
      expect(e.data.value as number).toBeLessThan(0.5);
    }
    const history = (await t.app.inject({ method: 'GET', url: '/v1/alerts', headers: t.auth() })).json();
    expect(history.total).toBe(2);
    expect(history.data[0]).toMatchObject({ alert_id: r.id, field_id: field.id });
    const rules = (
      await t.app.inject({ method: 'GET', url: `/v1/fields/${field.id}/alerts`, headers: t.auth() })
    ).json();
    expect(rules.data[0].state).toBe('breached');
    expect(
      (await t.app.inject({ method: 'DELETE', url: `/v1/fields/${field.id}/alerts/${r.id}`, headers: t.auth() }))
        .statusCode,
    ).toBe(204);
    expect(
      (await t.app.inject({ method: 'DELETE', url: `/v1/fields/${field.id}/alerts/${r.id}`, headers: t.auth() }))
        .statusCode,
    ).toBe(404);
  });
});

describe.each(dbBackends)('alert rules are bounded per field on $name', (backend) => {
  let t: TestApp;
  beforeAll(async () => {
    t = await buildTestApp(backend);
  });
  afterAll(async () => t?.close());

  it('at most 50 a field, exactly, even when created at once: the rest 409 alert_limit_reached', async () => {
    // Unbounded before: the list (one answer, no pages) and the judging of every new capture grew with them.
    const create = (fieldId: string, threshold: number) =>
      t.app.inject({
        method: 'POST',
        url: `/v1/fields/${fieldId}/alerts`,
        headers: t.auth(),
        payload: { alert_type: 'crop_health', index: 'NDVI', operator: 'below', threshold },
      });
    const field = async (name: string) =>
      (
        await t.app.inject({
          method: 'POST',
          url: '/v1/fields',
          headers: t.auth(),
          payload: { name, boundary: square(5, 51) },
        })
      ).json().id as string;
    const [a, b] = [await field('a'), await field('b')];
    const answers = await Promise.all(Array.from({ length: 56 }, (_, i) => create(a, i / 100)));
    const statuses = answers.map((r) => r.statusCode);
    expect(statuses.filter((s) => s === 201)).toHaveLength(50);
    expect(statuses.filter((s) => s === 409)).toHaveLength(6);
    const refused = answers.find((r) => r.statusCode === 409)!;
    expect(refused.headers['content-type']).toMatch(/^application\/problem\+json/);
    expect(refused.json()).toMatchObject({ code: 'alert_limit_reached', detail: expect.stringMatching(/at most 50/) });
    const list = await t.app.inject({ method: 'GET', url: `/v1/fields/${a}/alerts`, headers: t.auth() });
    expect(list.json().data).toHaveLength(50);
    // another field has its own 50; a deleted rule makes room
    expect((await create(b, 0.3)).statusCode).toBe(201);
    const first = list.json().data[0].id;
    expect(
      (await t.app.inject({ method: 'DELETE', url: `/v1/fields/${a}/alerts/${first}`, headers: t.auth() })).statusCode,
    ).toBe(204);
    expect((await create(a, 0.9)).statusCode).toBe(201);
    expect((await create(a, 0.9)).statusCode).toBe(409);
  });
});
