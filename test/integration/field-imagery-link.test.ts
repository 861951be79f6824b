/**
 * A field registered after its captures, or whose boundary changes, is linked to the account's
 * captures that cover it, with the same coverage rows registration computes for a field that
 * existed first: its imagery list and its index calls see them at once. A boundary moved away
 * unlinks them; no imagery.available is emitted for captures that are not new; another account's
 * captures are never linked.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { listOutbox } from '../../src/events/outbox.js';
import { datesEvery, sceneField, writeSyntheticSeason, type SyntheticCapture } from '../../src/imagery/synthetic.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { dbBackends } from '../helpers/backends.js';
import { registerCaptures } from '../helpers/captures.js';

type Polygon = ReturnType<typeof sceneField>;
const shifted = (p: Polygon, dLon: number): Polygon => ({
  type: 'Polygon',
  coordinates: p.coordinates.map((r) => r.map(([x, y]) => [x + dLon, y] as [number, number])),
});

for (const backend of dbBackends) {
  describe(`fields linked to existing captures on ${backend.name}`, () => {
    const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 100, seed: 11 };
    let scratch: string;
    let t: TestApp;
    let caps: SyntheticCapture[];
    let before: string;
    const imagery: string[] = [];

    const createField = async (name: string, boundary: Polygon, key?: string) => {
      const r = await t.app.inject({
        method: 'POST',
        url: '/v1/fields',
        headers: t.auth(key),
        payload: { name, boundary },
      });
      expect(r.statusCode, r.body).toBe(201);
      return r.json().id as string;
    };
    const rowsOf = async (field: string) =>
      t.db.query<{ imagery_id: string; field_pixels: number; valid_pixels: number; cloud_cover: number }>(
        'SELECT imagery_id, field_pixels, valid_pixels, cloud_cover FROM imagery_fields WHERE field_id = $1 ORDER BY imagery_id',
        [field],
      );
    const listOf = async (field: string, key?: string) => {
      const r = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${field}/imagery?per_page=100`,
        headers: t.auth(key),
      });
      expect(r.statusCode, r.body).toBe(200);
      return r.json() as { total: number; data: Array<{ id: string; cloud_cover: number }> };
    };
    const stats = async (field: string, date: string) => {
      const r = await t.app.inject({
        method: 'GET',
        url: `/v1/fields/${field}/indices?index=NDVI&date=${date}&zonal_stats=true&geojson=false`,
        headers: t.auth(),
      });
      return r;
    };

    beforeAll(async () => {
      scratch = mkdtempSync(path.join(os.tmpdir(), 'field-link-'));
      caps = writeSyntheticSeason(scratch, spec, datesEvery('2025-06-02', '2025-06-30', 7), '2025-04-01', '2025-09-30');
      t = await buildTestApp(backend, { env: { IMAGERY_ROOTS: scratch } });
      // A field that exists when the captures are registered: the reference coverage rows.
      before = await createField('registered first', sceneField(spec, 0.5));
      imagery.push(...(await registerCaptures(t, caps)));
    });
    afterAll(async () => {
      await t?.close();
      rmSync(scratch, { recursive: true, force: true });
    });

    it('a field registered after the captures gets the same coverage rows, imagery list and statistics as one registered before', async () => {
      const eventsBefore = (await listOutbox(t.db, t.accountId, 'imagery.available')).length;
      const after = await createField('registered later', sceneField(spec, 0.5));
      const ref = await rowsOf(before);
      expect(ref).toHaveLength(caps.length);
      expect(await rowsOf(after)).toEqual(ref);
      const [la, lb] = [await listOf(after), await listOf(before)];
      expect(la.total).toBe(caps.length);
      expect(la.data.map((d) => [d.id, d.cloud_cover])).toEqual(lb.data.map((d) => [d.id, d.cloud_cover]));
      for (const c of [caps[0]!, caps.at(-1)!]) {
        const [a, b] = [await stats(after, c.date), await stats(before, c.date)];
        expect(a.statusCode, a.body).toBe(200);
        expect(a.json().statistics).toEqual(b.json().statistics);
        expect(a.json().imagery_id).toBe(b.json().imagery_id);
      }
      // the captures are not new: no imagery.available for the late field
      expect((await listOutbox(t.db, t.accountId, 'imagery.available')).length).toBe(eventsBefore);
    });

    it('a boundary PATCH recomputes the coverage; moving the field off the scene unlinks every capture, moving it back relinks them', async () => {
      const f = await createField('moving', sceneField(spec, 0.3));
      const small = await rowsOf(f);
      expect(small).toHaveLength(caps.length);
      const patch = (boundary: Polygon) =>
        t.app.inject({ method: 'PATCH', url: `/v1/fields/${f}`, headers: t.auth(), payload: { boundary } });
      // the same boundary as `before`: the same rows as registration gave it
      expect((await patch(sceneField(spec, 0.5))).statusCode).toBe(200);
      expect(await rowsOf(f)).toEqual(await rowsOf(before));
      expect((await rowsOf(f))[0]!.field_pixels).toBeGreaterThan(small[0]!.field_pixels);
      // half a degree east: off the scene
      const off = await patch(shifted(sceneField(spec, 0.5), 0.5));
      expect(off.statusCode, off.body).toBe(200);
      expect(await rowsOf(f)).toEqual([]);
      expect((await listOf(f)).total).toBe(0);
      const none = await stats(f, caps[0]!.date);
      expect(none.statusCode).toBeGreaterThanOrEqual(400);
      expect(none.statusCode).toBeLessThan(500);
      expect((await patch(sceneField(spec, 0.5))).statusCode).toBe(200);
      expect(await rowsOf(f)).toEqual(await rowsOf(before));
      expect((await stats(f, caps[0]!.date)).statusCode).toBe(200);
    });

    it('a PATCH that leaves the boundary alone keeps the rows; a field off every capture has none', async () => {
      const f = await createField('renamed', sceneField(spec, 0.5));
      expect(
        (
          await t.app.inject({
            method: 'PATCH',
            url: `/v1/fields/${f}`,
            headers: t.auth(),
            payload: { name: 'renamed again', crop_type: 'wheat' },
          })
        ).statusCode,
      ).toBe(200);
      expect(await rowsOf(f)).toEqual(await rowsOf(before));
      const far = await createField('far away', shifted(sceneField(spec, 0.5), 2));
      expect((await listOf(far)).total).toBe(0);
    });

    it("another account's field over the same ground is not linked to these captures", async () => {
      const other = await t.otherAccount();
      const f = await createField('other account', sceneField(spec, 0.5), other.key);
      expect(await rowsOf(f)).toEqual([]);
      expect((await listOf(f, other.key)).total).toBe(0);
    });
  });
}
