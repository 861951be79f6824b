/**
 * Imagery subscriptions as operators run them: an api process and worker processes from
 * dist/src/main.js on one PostgreSQL database and Redis, polling the tests' STAC API
 * (test/helpers/stac-api-server.ts; one Item a page, each page answered after a delay so that a poll
 * takes seconds) serving passes of the real Earth Search Item of tile 29RKH, its COGs on the range
 * server. A worker is killed (SIGKILL) in the middle of its poll, after its first registration; two
 * more workers then start at once. Every Item must end up registered once, and imagery.available
 * must exist exactly once per field and capture: nothing lost, nothing duplicated.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import postgres from 'postgres';
import { afterAll, describe, expect, it } from 'vitest';
import { TEST_DATABASE_URL, TEST_REDIS_URL, uniqueName } from '../helpers/backends.js';
import {
  devKey,
  dropRedisPrefix,
  freePort,
  privateDatabase,
  type Service,
  startService,
  stopService,
  waitReady,
  waitUntil,
} from '../helpers/processes.js';
import { startRangeServer, type RangeServer } from '../helpers/range-server.js';
import { hasRealData, polygonOf, referenceResults } from '../helpers/real-data.js';
import { startStacApiServer, type StacApiServer } from '../helpers/stac-api-server.js';
import { realRkhItem } from '../helpers/stac-items.js';

const ITEMS = 8;

describe.skipIf(!TEST_DATABASE_URL || !TEST_REDIS_URL || !hasRealData)(
  'subscription polling across worker processes',
  () => {
    const scratch = mkdtempSync(path.join(os.tmpdir(), 'fa-sub-workers-'));
    const prefix = uniqueName('sub');
    let db: Awaited<ReturnType<typeof privateDatabase>> | undefined;
    let sql: postgres.Sql | undefined;
    let cogs: RangeServer | undefined;
    let stac: StacApiServer | undefined;
    const services: Service[] = [];
    afterAll(async () => {
      for (const s of services) await stopService(s, 'SIGKILL');
      await sql?.end();
      await db?.drop();
      await dropRedisPrefix(TEST_REDIS_URL!, prefix);
      await stac?.close();
      await cogs?.close();
      rmSync(scratch, { recursive: true, force: true });
    });

    it('a worker killed mid-poll: the next workers register the rest, each announced once per field', async () => {
      db = await privateDatabase(TEST_DATABASE_URL!);
      sql = postgres(db.url, { max: 2, onnotice: () => {} });
      cogs = await startRangeServer();
      stac = await startStacApiServer({ maxLimit: 1 });
      for (let i = 0; i < ITEMS; i++)
        stac.publish(
          realRkhItem(cogs, {
            id: `S2A_29RKH_202002${String(10 + i).padStart(2, '0')}_0_L2A`,
            datetime: `2020-02-${String(10 + i).padStart(2, '0')}T11:34:25Z`,
          }),
        );
      const [port, m1, m2, m3] = [await freePort(), await freePort(), await freePort(), await freePort()];
      const base = `http://127.0.0.1:${port}`;
      const common = {
        DATABASE_URL: db.url,
        REDIS_URL: TEST_REDIS_URL!,
        QUEUE_PREFIX: prefix,
        SIGNING_KEY: 'subscription-workers-signing-key-0123456789',
        PUBLIC_BASE_URL: base,
        DEMO: 'false',
        SUBSCRIPTIONS_ALLOW_PRIVATE_NETWORKS: 'true',
        IMAGERY_ALLOW_PRIVATE_NETWORKS: 'true',
        SUBSCRIPTION_LEASE: '3s',
      };
      const api = startService({
        ...common,
        ROLE: 'api',
        PORT: String(port),
        DATA_DIR: path.join(scratch, 'api'),
        DEV_BOOTSTRAP: 'true',
      });
      services.push(api);
      await waitReady(api, `${base}/readyz`);
      const key = devKey(api)!;
      expect(key, api.output()).toBeTruthy();
      const call = async (method: string, url: string, body?: unknown) => {
        const res = await fetch(base + url, {
          method,
          headers: { authorization: `Bearer ${key}`, 'content-type': 'application/json' },
          body: JSON.stringify(body),
        });
        return { status: res.status, body: (await res.json()) as any };
      };
      const rkh = referenceResults().find((r) => r.scene.startsWith('EH_29RKH'))!;
      for (const [name, boundary] of [
        ['Sahara reference', polygonOf(rkh)],
        [
          'Sahara square',
          {
            type: 'Polygon',
            coordinates: [
              [
                [-11.505, 24.795],
                [-11.495, 24.795],
                [-11.495, 24.805],
                [-11.505, 24.805],
                [-11.505, 24.795],
              ],
            ],
          },
        ],
      ] as const) {
        const f = await call('POST', '/v1/fields', { name, boundary });
        expect(f.status, JSON.stringify(f.body)).toBe(201);
      }
      const sub = await call('POST', '/v1/imagery/subscriptions', { stac_api_url: stac.url, start_date: '2020-02-01' });
      expect(sub.status, JSON.stringify(sub.body)).toBe(201);

      const registered = async () =>
        Number((await sql!`SELECT count(*)::int AS n FROM imagery WHERE stac_item_id IS NOT NULL`)[0]!.n);
      // Every page of results (one Item each) comes 1.5 s late: the poll lasts well over 10 s.
      stac.delayNext(1000, 1500);
      const first = startService({
        ...common,
        ROLE: 'worker',
        PORT: String(port),
        METRICS_PORT: String(m1),
        DATA_DIR: path.join(scratch, 'w1'),
      });
      services.push(first);
      await waitUntil('the first worker registers a capture', async () => (await registered()) >= 1, 90_000, 50);
      first.child.kill('SIGKILL');
      await first.exited;
      const atKill = await registered();
      expect(atKill, 'the first worker was killed in the middle of its poll').toBeLessThan(ITEMS);
      const [lease] = await sql`SELECT lease_owner, lease_until > now() AS held FROM imagery_subscriptions`;
      expect(lease!.lease_owner, 'the killed worker held the subscription').toBeTruthy();

      // Two workers at once: one takes the subscription when the dead worker's lease runs out.
      for (const [i, mp] of [
        [2, m2],
        [3, m3],
      ] as const) {
        const w = startService({
          ...common,
          ROLE: 'worker',
          PORT: String(port),
          METRICS_PORT: String(mp),
          DATA_DIR: path.join(scratch, `w${i}`),
        });
        services.push(w);
      }
      await waitUntil('every Item is registered', async () => (await registered()) === ITEMS, 180_000, 200);
      await waitUntil(
        'the poll that registered them has finished',
        async () => {
          const [s] = await sql!`SELECT items_registered, lease_until FROM imagery_subscriptions`;
          return s!.items_registered === ITEMS && (s!.lease_until === null || s!.lease_until < new Date());
        },
        60_000,
        200,
      );

      const links = await sql`SELECT imagery_id, field_id FROM imagery_fields`;
      const events = await sql`SELECT data FROM outbox WHERE type = 'imagery.available'`;
      const seen = new Map<string, number>();
      for (const e of events) {
        const k = `${e.data.imagery_id}/${e.data.field_id}`;
        seen.set(k, (seen.get(k) ?? 0) + 1);
      }
      expect(links.length, 'both fields are covered by every pass').toBe(ITEMS * 2);
      expect(
        [...seen.values()].filter((n) => n !== 1),
        'no capture announced twice for a field',
      ).toEqual([]);
      expect(
        links.filter((l) => !seen.has(`${l.imagery_id}/${l.field_id}`)),
        'no field and capture left unannounced',
      ).toEqual([]);
      expect(events.length).toBe(ITEMS * 2);
      const ids = await sql`SELECT stac_item_id, count(*)::int AS n FROM imagery GROUP BY stac_item_id`;
      expect(ids.length).toBe(ITEMS);
      expect(ids.every((r) => r.n === 1)).toBe(true);
      const final = await call('GET', `/v1/imagery/subscriptions/${sub.body.id}`);
      expect(final.body).toMatchObject({ items_registered: ITEMS, last_error: null, status: 'active' });
    }, 400_000);
  },
);
