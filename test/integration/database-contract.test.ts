import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createHash } from 'node:crypto';
import { imageBlob, loadMigrations, migrate, openDatabase, type Database } from '../../src/platform/database.js';
import { dbBackends, disposeDatabase, freshDatabase, uniqueName } from '../helpers/backends.js';

describe.each(dbBackends)('database contract on $name', (backend) => {
  let db: Database;
  beforeAll(async () => {
    db = await freshDatabase(backend);
  });
  afterAll(async () => disposeDatabase(db));

  it('applies every migration once and records it', async () => {
    const rows = await db.query<{ version: number }>('SELECT version FROM schema_migrations ORDER BY version');
    expect(rows.map((r) => r.version)).toEqual(loadMigrations().map((m) => m.version));
    expect(await migrate(db)).toEqual([]);
  });

  it('commits a transaction that resolves and rolls back one that throws', async () => {
    await db.query(`INSERT INTO accounts (id, name) VALUES ('acc_a', 'a')`);
    await expect(
      db.transaction(async (tx) => {
        await tx.query(`INSERT INTO accounts (id, name) VALUES ('acc_b', 'b')`);
        throw new Error('boom');
      }),
    ).rejects.toThrow('boom');
    await db.transaction(async (tx) => {
      await tx.query(`INSERT INTO accounts (id, name) VALUES ($1, $2)`, ['acc_c', 'c']);
    });
    const names = (await db.query<{ name: string }>('SELECT name FROM accounts ORDER BY name')).map((r) => r.name);
    expect(names).toEqual(['a', 'c']);
  });

  it('round-trips jsonb, timestamps, dates and double precision arrays', async () => {
    await db.query(`INSERT INTO accounts (id, name) VALUES ('acc_j', 'j')`);
    await db.query(
      `INSERT INTO fields (id, account_id, name, boundary, bbox, area_ha, planting_date)
       VALUES ('fld_1', 'acc_j', 'f', $1::jsonb, $2, 1.5, '2025-04-01')`,
      [
        JSON.stringify({
          type: 'Polygon',
          coordinates: [
            [
              [0, 0],
              [1, 0],
              [1, 1],
              [0, 0],
            ],
          ],
        }),
        [0, 0, 1, 1],
      ],
    );
    const [row] = await db.query<{
      boundary: { type: string };
      bbox: number[];
      area_ha: number;
      created_at: Date;
      d: string;
    }>(`SELECT boundary, bbox, area_ha, created_at, planting_date::text AS d FROM fields WHERE id = 'fld_1'`);
    expect(row!.boundary.type).toBe('Polygon');
    expect(row!.bbox).toEqual([0, 0, 1, 1]);
    expect(row!.area_ha).toBe(1.5);
    expect(row!.created_at).toBeInstanceOf(Date);
    expect(row!.d).toBe('2025-04-01');
  });
});

describe.each(dbBackends.filter((b) => b.name === 'postgres'))('concurrent migrations on $name', (backend) => {
  it('two processes migrating one schema at once both succeed and apply each migration once', async () => {
    const schema = uniqueName('mig');
    const a = await openDatabase({ url: backend.url, schema, maxConnections: 2 });
    const b = await openDatabase({ url: backend.url, schema, maxConnections: 2 });
    try {
      const [ra, rb] = await Promise.all([migrate(a), migrate(b)]);
      const all = loadMigrations().map((m) => m.version);
      expect([...ra, ...rb].sort((x, y) => x - y)).toEqual(all);
      const rows = await a.query<{ n: number }>('SELECT count(*)::int AS n FROM schema_migrations');
      expect(rows[0]!.n).toBe(all.length);
    } finally {
      await b.close();
      await disposeDatabase(a);
    }
  });
});

describe('concurrent migrations on pglite', () => {
  it('migrating the same embedded database twice at once applies each migration once', async () => {
    const db = await openDatabase({ schema: uniqueName('mig') });
    try {
      const [ra, rb] = await Promise.all([migrate(db), migrate(db)]);
      expect([...ra, ...rb].sort((x, y) => x - y)).toEqual(loadMigrations().map((m) => m.version));
    } finally {
      await db.close();
    }
  });
});

describe('embedded databases started from one image (as the suites start theirs)', () => {
  it('each is its own, the settings given hold, and a start leaves the image as it was', async () => {
    const first = await freshDatabase({ name: 'pglite' });
    const image = await imageBlob(await first.dumpImage!());
    await first.close();
    const digest = async () =>
      createHash('sha256')
        .update(new Uint8Array(await image.arrayBuffer()))
        .digest('hex');
    const before = await digest();
    const open = () =>
      openDatabase({ schema: 't_image', pgliteImage: image, pgliteSettings: { shared_buffers: '16MB' } });
    const [a, b] = [await open(), await open()];
    try {
      await a.query('CREATE TABLE only_in_a (x int)');
      await a.query('INSERT INTO only_in_a VALUES (1)');
      expect(await a.query('SELECT count(*)::int AS n FROM only_in_a')).toEqual([{ n: 1 }]);
      expect(await b.query("SELECT to_regclass('only_in_a') AS t")).toEqual([{ t: null }]);
      expect(await a.query("SELECT current_setting('shared_buffers') AS s")).toEqual([{ s: '16MB' }]);
      // migrated, and in the suites' schema
      expect(await migrate(b)).toEqual([]);
      expect(await b.query('SELECT current_schema() AS s')).toEqual([{ s: 't_image' }]);
    } finally {
      await a.close();
      await b.close();
    }
    expect(await digest()).toBe(before);
  });
});
