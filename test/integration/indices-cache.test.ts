/**
 * The caches behind GET indices and GET timeseries never answer stale data: after a new capture,
 * a boundary PATCH, a deleted field or capture, or a rewritten coverage row, the very next request
 * answers what a fresh computation answers, on the replica that took the write and on another one
 * (a second app on its own database handle, so with its own caches: the embedded database shared
 * in process, the same handle without the write counter as a PostgreSQL replica would be, and a
 * second connection pool on PostgreSQL when configured). Also: gzip of GeoJSON bodies, and
 * statistics of indices over different bands kept apart.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { gunzipSync } from 'node:zlib';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildApp } from '../../src/app.js';
import { datesEvery, sceneField, writeSyntheticSeason, type SyntheticCapture } from '../../src/imagery/synthetic.js';
import { fieldCaptures } from '../../src/indices/service.js';
import { openDatabase, type Database } from '../../src/platform/database.js';
import type { Api } from '../../src/platform/http/context.js';
import { buildTestApp, type TestApp } from '../helpers/app.js';
import { dbBackends, type DbBackend } from '../helpers/backends.js';
import { registerCapture } from '../helpers/captures.js';

type Replica = 'shared embedded handle' | 'handle without write counter' | 'second PostgreSQL pool';

const replicasOf = (b: DbBackend): Replica[] =>
  b.name === 'pglite' ? ['shared embedded handle', 'handle without write counter'] : ['second PostgreSQL pool'];

async function replicaDb(t: TestApp, kind: Replica, url?: string): Promise<Database> {
  if (kind === 'second PostgreSQL pool') return openDatabase({ url, schema: t.db.schema, maxConnections: 3 });
  // Another object over the same database: its own caches (they are per handle).
  const { writeCount, ...rest } = t.db;
  return kind === 'shared embedded handle' ? { ...rest, writeCount } : rest;
}

for (const backend of dbBackends) {
  for (const replicaKind of replicasOf(backend)) {
    describe(`index caches on ${backend.name}, other replica: ${replicaKind}`, () => {
      const spec = { epsg: 32631, originX: 630_000, originY: 5_602_000, size: 120, seed: 7 };
      let scratch: string;
      let t: TestApp;
      let dbB: Database;
      let appB: Api;
      let caps: SyntheticCapture[];
      let field: string;
      let control: string;
      const imagery: Record<string, string> = {};
      const held = 4; // registered later, in the test of new captures

      const register = async (c: SyntheticCapture) => {
        imagery[c.date] = await registerCapture(t, c);
      };
      const get = (app: Api, url: string, headers: Record<string, string> = {}) =>
        app.inject({ method: 'GET', url, headers: { ...t.auth(), ...headers } });
      const json = async (app: Api, url: string) => {
        const r = await get(app, url);
        expect(r.statusCode, r.body).toBe(200);
        return r.json();
      };
      const both = () => [t.app, appB] as const;

      beforeAll(async () => {
        scratch = mkdtempSync(path.join(os.tmpdir(), 'index-cache-'));
        caps = writeSyntheticSeason(
          scratch,
          spec,
          datesEvery('2025-06-02', '2025-07-28', 7),
          '2025-04-01',
          '2025-09-30',
        );
        t = await buildTestApp(backend, { env: { IMAGERY_ROOTS: scratch } });
        const create = async (name: string, fraction: number) =>
          (
            await t.app.inject({
              method: 'POST',
              url: '/v1/fields',
              headers: t.auth(),
              payload: { name, boundary: sceneField(spec, fraction) },
            })
          ).json().id as string;
        field = await create('cached', 0.6);
        // The boundary `field` gets by PATCH later, on a field of its own: what a fresh computation answers.
        control = await create('control', 0.35);
        for (const [k, c] of caps.entries()) if (k !== held) await register(c);
        dbB = await replicaDb(t, replicaKind, backend.url);
        appB = await buildApp({ ...t.runtime, db: dbB });
        await appB.ready();
      });
      afterAll(async () => {
        await appB?.close();
        if (replicaKind === 'second PostgreSQL pool') await dbB?.close();
        await t?.close();
        rmSync(scratch, { recursive: true, force: true });
      });

      it('a new capture is chosen at once, here and on the other replica; the series shows it', async () => {
        const heldDate = caps[held]!.date;
        const one = `/v1/fields/${field}/indices?index=NDVI&date=${heldDate}&zonal_stats=true&geojson=false`;
        const series = `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=2025-06-02&end_date=2025-07-31&max_cloud_cover=100`;
        // Every capture but one entirely under cloud over the field (never used, selection.ts).
        const usable = (await fieldCaptures(t.db, t.accountId, field)).filter((c) => c.valid_pixels > 0).length;
        for (const app of both()) {
          for (let k = 0; k < 2; k++) {
            expect((await json(app, one)).imagery_id).not.toBe(undefined);
            expect((await json(app, series)).filter((e: { imagery_id: string | null }) => e.imagery_id)).toHaveLength(
              usable,
            );
          }
        }
        const before = await json(appB, one);
        expect(before.date).not.toBe(heldDate);
        await register(caps[held]!);
        for (const app of both()) {
          expect(await json(app, one)).toMatchObject({ imagery_id: imagery[heldDate], date: heldDate });
          const s = await json(app, series);
          expect(s.filter((e: { imagery_id: string | null }) => e.imagery_id)).toHaveLength(usable + 1);
          expect(s.find((e: { date: string }) => e.date === heldDate)).toMatchObject({ imagery_id: imagery[heldDate] });
        }
      });

      it('a boundary PATCH changes statistics, GeoJSON and series at once, to what a fresh computation gives', async () => {
        const d = caps[2]!.date;
        const pinned = (f: string, geo: boolean) =>
          `/v1/fields/${f}/indices?index=NDVI&date=${d}&imagery_id=${imagery[d]}&zonal_stats=true&geojson=${geo}`;
        const series = (f: string) =>
          `/v1/fields/${f}/indices/timeseries?index=NDVI&start_date=2025-06-02&end_date=2025-07-31&max_cloud_cover=100`;
        const warm: Record<string, { count: number; features: number; means: number[] }> = {};
        for (const [name, app] of Object.entries({ a: t.app, b: appB })) {
          await json(app, pinned(field, true));
          const body = await json(app, pinned(field, true));
          const s = await json(app, series(field));
          warm[name] = {
            count: body.zonal_stats.count,
            features: body.geojson.features.length,
            means: s.map((e: { mean: number }) => e.mean),
          };
        }
        expect(warm.b).toEqual(warm.a);
        const patch = await appB.inject({
          method: 'PATCH',
          url: `/v1/fields/${field}`,
          headers: t.auth(),
          payload: { boundary: sceneField(spec, 0.35) },
        });
        expect(patch.statusCode, patch.body).toBe(200);
        const fresh = await json(t.app, pinned(control, true));
        const freshSeries = await json(t.app, series(control));
        for (const app of both()) {
          const body = await json(app, pinned(field, true));
          expect(body.zonal_stats).toEqual(fresh.zonal_stats);
          expect(body.zonal_stats.count).toBeLessThan(warm.a!.count);
          expect(body.geojson).toEqual(fresh.geojson);
          expect((await json(app, pinned(field, false))).zonal_stats).toEqual(fresh.zonal_stats);
          const s = await json(app, series(field));
          expect(s.map((e: { mean: number }) => e.mean)).toEqual(freshSeries.map((e: { mean: number }) => e.mean));
        }
      });

      it('rewritten coverage rows and a deleted capture are seen at once', async () => {
        // The clearest capture not used by the other tests (some synthetic dates are all cloud).
        const d = caps.filter((_, k) => k > 4).sort((a, b) => a.cloudiness - b.cloudiness)[0]!.date;
        const one = `/v1/fields/${field}/indices?index=NDVI&date=${d}&geojson=false`;
        const series = `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=${d}&end_date=${d}&interval=daily&max_cloud_cover=99`;
        for (const app of both()) {
          expect((await json(app, one)).imagery_id).toBe(imagery[d]);
          expect((await json(app, series))[0]).toMatchObject({ imagery_id: imagery[d] });
        }
        // Another process rewrites the capture's coverage of the field: now all cloud.
        await dbB.query(
          'UPDATE imagery_fields SET valid_pixels = 0, cloud_cover = 100 WHERE imagery_id = $1 AND field_id = $2',
          [imagery[d], field],
        );
        for (const app of both())
          expect((await json(app, series))[0]).toMatchObject({ imagery_id: null, mean: null, cloud_cover: 100 });
        await dbB.query('DELETE FROM imagery WHERE id = $1', [imagery[d]]);
        for (const app of both()) {
          expect((await json(app, one)).imagery_id).not.toBe(imagery[d]);
          expect((await json(app, series))[0]).toMatchObject({ imagery_id: null, cloud_cover: null });
          const pinned = await get(app, `/v1/fields/${field}/indices?index=NDVI&date=${d}&imagery_id=${imagery[d]}`);
          expect(pinned.statusCode).toBe(404);
        }
      });

      it('GeoJSON bodies are gzipped when the client accepts it, and equal the plain body', async () => {
        const url = `/v1/fields/${control}/indices?index=NDVI&date=${caps[3]!.date}&zonal_stats=true`;
        const plain = await get(t.app, url);
        expect(plain.headers['content-encoding']).toBeUndefined();
        expect(plain.headers.vary).toMatch(/Accept-Encoding/i);
        for (const app of both()) {
          for (const ae of ['gzip', 'br, gzip;q=0.5', '*']) {
            const z = await get(app, url, { 'accept-encoding': ae });
            expect(z.statusCode).toBe(200);
            expect(z.headers['content-encoding'], ae).toBe('gzip');
            expect(Number(z.headers['content-length'])).toBeLessThan(plain.rawPayload.length / 4);
            expect(gunzipSync(z.rawPayload).equals(plain.rawPayload)).toBe(true);
          }
          for (const ae of ['gzip;q=0', 'br', 'identity'])
            expect((await get(app, url, { 'accept-encoding': ae })).headers['content-encoding'], ae).toBeUndefined();
        }
        const small = await get(t.app, `${url}&geojson=false`, { 'accept-encoding': 'gzip' });
        expect(small.headers['content-encoding']).toBeUndefined();
        expect(small.json().zonal_stats.count).toBe(plain.json().zonal_stats.count);
      });

      it('indices reading different bands do not share cached statistics; cached equal fresh', async () => {
        const d = caps[3]!.date;
        const q = (index: string) =>
          `/v1/fields/${control}/indices/timeseries?index=${index}&start_date=${d}&end_date=${d}&interval=daily&max_cloud_cover=100`;
        const ndvi = (await json(t.app, q('NDVI')))[0];
        const ndre = (await json(t.app, q('NDRE')))[0];
        expect(ndvi.mean).not.toBeCloseTo(ndre.mean, 3);
        // The same formulas through POST custom, which always computes afresh.
        for (const [formula, cached] of [
          ['(B08 - B04) / (B08 + B04)', ndvi],
          ['(B08 - B05) / (B08 + B05)', ndre],
        ] as const) {
          const r = await t.app.inject({
            method: 'POST',
            url: `/v1/fields/${control}/indices/custom`,
            headers: t.auth(),
            payload: { name: formula, formula, date: d },
          });
          expect(r.statusCode, r.body).toBe(201);
          const s = r.json().zonal_stats;
          for (const k of ['mean', 'min', 'max', 'std'] as const)
            expect(s[k], `${formula} ${k}`).toBeCloseTo(cached[k], 6);
        }
        const single = await json(
          appB,
          `/v1/fields/${control}/indices?index=NDRE&date=${d}&zonal_stats=true&geojson=false`,
        );
        expect(single.zonal_stats.mean).toBe(ndre.mean);
      });

      it('a deleted field answers 404 at once on both replicas', async () => {
        for (const app of both())
          expect(
            (await get(app, `/v1/fields/${field}/indices?index=NDVI&date=2025-06-02&zonal_stats=true`)).statusCode,
          ).toBe(200);
        expect(
          (await t.app.inject({ method: 'DELETE', url: `/v1/fields/${field}`, headers: t.auth() })).statusCode,
        ).toBe(204);
        for (const app of both()) {
          for (const url of [
            `/v1/fields/${field}/indices?index=NDVI&date=2025-06-02&zonal_stats=true`,
            `/v1/fields/${field}/indices?index=NDVI&date=2025-06-02&geojson=false`,
            `/v1/fields/${field}/indices/timeseries?index=NDVI&start_date=2025-06-02&end_date=2025-07-31`,
          ]) {
            const r = await get(app, url);
            expect(r.statusCode, url).toBe(404);
            expect(r.json().code).toBe('not_found');
          }
        }
      });
    });
  }
}
