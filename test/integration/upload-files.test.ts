/**
 * Uploaded files in the database (platform/file-store.ts) and the local read cache
 * (platform/file-cache.ts), on PGlite and PostgreSQL: a multi-chunk round trip with its SHA-256,
 * streaming writes (chunks reach the database while the body still arrives), limits, a truncated,
 * shortened, altered or missing file → StoredFileError naming it, the cache's atomic copies and
 * least-recently-used eviction (files in use stay), the compute pool's prepare hook, and the sweep
 * of files no capture names.
 */
import { createHash, randomBytes } from 'node:crypto';
import { existsSync, mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest';
import { findOrCreateAccount } from '../../src/accounts/api-keys.js';
import { sweepUploadFiles, uploadPreparer } from '../../src/imagery/upload-files.js';
import { captureUploadIds, uploadRef } from '../../src/imagery/upload-ref.js';
import type { Database } from '../../src/platform/database.js';
import { LocalFileCache } from '../../src/platform/file-cache.js';
import {
  DatabaseFileStore,
  FileTooLargeError,
  StoredFileError,
  type FileStore,
} from '../../src/platform/file-store.js';
import { dbBackends, disposeDatabase, freshDatabase } from '../helpers/backends.js';

const CHUNK = 64 * 1024;

/** `bytes` as a stream of pieces of uneven sizes (as a socket delivers them). */
async function* pieces(bytes: Uint8Array, onPiece?: (sent: number) => Promise<void>): AsyncGenerator<Uint8Array> {
  const sizes = [1, 7_000, 65_535, 65_537, 200_000, 3];
  let at = 0;
  for (let i = 0; at < bytes.length; i++) {
    const n = Math.min(sizes[i % sizes.length]!, bytes.length - at);
    yield bytes.subarray(at, at + n);
    at += n;
    await onPiece?.(at);
  }
}

async function readAll(chunks: AsyncIterable<Uint8Array>): Promise<Buffer> {
  const out: Uint8Array[] = [];
  for await (const c of chunks) out.push(c);
  return Buffer.concat(out);
}

const sha = (b: Uint8Array) => createHash('sha256').update(b).digest('hex');

describe.each(dbBackends)('uploaded files in the database on $name', (backend) => {
  let db: Database;
  let store: DatabaseFileStore;
  let accountId: string;
  let scratch: string;
  const rows = async (table: 'upload_files' | 'upload_chunks') =>
    (await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${table}`))[0]!.n;

  beforeAll(async () => {
    db = await freshDatabase(backend);
    store = new DatabaseFileStore(db, CHUNK);
    accountId = (await findOrCreateAccount(db, 'uploads')).id;
    scratch = mkdtempSync(path.join(os.tmpdir(), 'upload-files-'));
  });
  afterAll(async () => {
    await disposeDatabase(db);
    rmSync(scratch, { recursive: true, force: true });
  });

  it('a multi-chunk file round-trips byte for byte with its size and SHA-256, chunks written as the body arrives', async () => {
    const bytes = randomBytes(5 * CHUNK + 12_345);
    // Streaming: by the time the body has sent k+1 chunks' worth, k chunks are in the database.
    const seen: string[] = [];
    const f = await store.put(
      accountId,
      pieces(bytes, async (sent) => {
        if (sent < 2 * CHUNK) return;
        const [{ n }] = (await db.query<{ n: number }>('SELECT count(*)::int AS n FROM upload_chunks')) as [
          { n: number },
        ];
        if (n < Math.floor(sent / CHUNK) - 1) seen.push(`${sent} bytes sent, ${n} chunks stored`);
      }),
    );
    expect(seen).toEqual([]);
    expect(f).toEqual({
      id: expect.stringMatching(/^upl_[A-Za-z0-9_-]{22}$/),
      accountId,
      size: bytes.length,
      sha256: sha(bytes),
    });
    const chunks = await db.query<{ n: number; len: number }>(
      'SELECT n, length(data) AS len FROM upload_chunks WHERE file_id = $1 ORDER BY n',
      [f.id],
    );
    expect(chunks).toEqual([0, 1, 2, 3, 4, 5].map((n) => ({ n, len: n < 5 ? CHUNK : 12_345 })));
    expect(await store.stat(f.id)).toEqual(f);
    const { file, chunks: data } = await store.open(f.id);
    expect(file).toEqual(f);
    expect((await readAll(data)).equals(bytes)).toBe(true);
    // An empty file and one of exactly one chunk.
    for (const b of [Buffer.alloc(0), randomBytes(CHUNK)]) {
      const g = await store.put(accountId, pieces(b));
      expect((await readAll((await store.open(g.id)).chunks)).equals(b)).toBe(true);
      expect(g.sha256).toBe(sha(b));
    }
  });

  it('a body past maxBytes, or one that fails, leaves nothing behind', async () => {
    const files = await rows('upload_files');
    const chunks = await rows('upload_chunks');
    await expect(store.put(accountId, pieces(randomBytes(3 * CHUNK)), { maxBytes: 2 * CHUNK })).rejects.toThrow(
      FileTooLargeError,
    );
    async function* broken() {
      yield randomBytes(2 * CHUNK);
      throw new Error('the client went away');
    }
    await expect(store.put(accountId, broken())).rejects.toThrow(/went away/);
    expect([await rows('upload_files'), await rows('upload_chunks')]).toEqual([files, chunks]);
  });

  it('a missing, truncated, shortened or altered file fails with StoredFileError naming it, never wrong bytes to the end', async () => {
    const put = () => store.put(accountId, pieces(randomBytes(3 * CHUNK + 10)));
    const failure = async (id: string) => {
      try {
        await readAll((await store.open(id)).chunks);
        return 'read whole';
      } catch (err) {
        return err instanceof StoredFileError ? `${err.kind}: ${err.message}` : `other: ${(err as Error).message}`;
      }
    };
    expect(await failure('upl_AAAAAAAAAAAAAAAAAAAAAA')).toBe(
      'missing: stored file upl_AAAAAAAAAAAAAAAAAAAAAA does not exist',
    );
    const missingChunk = await put();
    await db.query('DELETE FROM upload_chunks WHERE file_id = $1 AND n = 3', [missingChunk.id]);
    expect(await failure(missingChunk.id)).toBe(
      `corrupt: stored file ${missingChunk.id} is truncated: chunk 3 of 4 is missing`,
    );
    const short = await put();
    await db.query('UPDATE upload_chunks SET data = substring(data from 1 for 100) WHERE file_id = $1 AND n = 1', [
      short.id,
    ]);
    expect(await failure(short.id)).toBe(
      `corrupt: stored file ${short.id} is truncated: chunk 1 of 4 has 100 bytes, not ${CHUNK}`,
    );
    const altered = await put();
    await db.query(
      "UPDATE upload_chunks SET data = overlay(data placing '\\x00ff'::bytea from 5) WHERE file_id = $1 AND n = 2",
      [altered.id],
    );
    expect(await failure(altered.id)).toBe(
      `corrupt: stored file ${altered.id} does not match its SHA-256 ${altered.sha256}`,
    );
    // A file still being written (no size yet) is not readable either.
    await db.query('INSERT INTO upload_files (id, account_id, chunk_size) VALUES ($1, $2, $3)', [
      'upl_BBBBBBBBBBBBBBBBBBBBBB',
      accountId,
      CHUNK,
    ]);
    expect(await failure('upl_BBBBBBBBBBBBBBBBBBBBBB')).toMatch(/^missing: /);
    expect(await store.delete([missingChunk.id, short.id, altered.id, 'upl_BBBBBBBBBBBBBBBBBBBBBB'])).toBe(4);
  });

  it('the cache copies atomically: no partial file under the final name, nothing left when the copy fails', async () => {
    const dir = path.join(scratch, 'atomic');
    const f = await store.put(accountId, pieces(randomBytes(4 * CHUNK)));
    const final = path.join(dir, `${f.id}.tif`);
    // A store whose chunks are checked mid-copy: the final name does not exist yet, a .tmp does.
    const during: string[] = [];
    const watching: Pick<FileStore, 'open'> = {
      async open(id) {
        const { file, chunks } = await store.open(id);
        return {
          file,
          chunks: (async function* () {
            let n = 0;
            for await (const c of chunks) {
              if (n++ === 2)
                during.push(
                  `final: ${existsSync(final)}, tmp: ${readdirSync(dir).filter((x) => x.endsWith('.tmp')).length}`,
                );
              yield c;
            }
          })(),
        };
      },
    };
    const cache = new LocalFileCache({ dir, maxBytes: 1 << 30, store: watching, suffix: '.tif' });
    const got = await cache.acquire(f.id);
    expect(got.path).toBe(final);
    expect(during).toEqual(['final: false, tmp: 1']);
    expect(sha(readFileSync(final))).toBe(f.sha256);
    got.release();
    // A truncated file in the database: the acquire fails naming it, and neither name is left.
    const broken = await store.put(accountId, pieces(randomBytes(3 * CHUNK)));
    await db.query('DELETE FROM upload_chunks WHERE file_id = $1 AND n = 2', [broken.id]);
    await expect(cache.acquire(broken.id)).rejects.toThrow(`stored file ${broken.id} is truncated`);
    expect(readdirSync(dir).sort()).toEqual([`${f.id}.tif`]);
    // A second cache over the same directory (a restart) finds the file and removes stale .tmp files.
    writeFileSync(path.join(dir, `${broken.id}.0123.tmp`), 'partial');
    const again = new LocalFileCache({ dir, maxBytes: 1 << 30, store, suffix: '.tif' });
    const hit = await again.acquire(f.id);
    hit.release();
    expect(again.size).toBe(4 * CHUNK);
    expect(readdirSync(dir).sort()).toEqual([`${f.id}.tif`]);
  });

  it('the cache stays within its bound by evicting the least recently used, never a file in use', async () => {
    const dir = path.join(scratch, 'lru');
    mkdirSync(dir);
    const [a, b, c] = [
      await store.put(accountId, pieces(randomBytes(CHUNK))),
      await store.put(accountId, pieces(randomBytes(CHUNK))),
      await store.put(accountId, pieces(randomBytes(CHUNK))),
    ];
    const cache = new LocalFileCache({ dir, maxBytes: 2 * CHUNK + 100, store, suffix: '.tif' });
    const use = async (id: string) => (await cache.acquire(id)).release();
    const files = () =>
      readdirSync(dir)
        .filter((x) => !x.endsWith('.tmp'))
        .sort();
    await use(a!.id);
    await use(b!.id);
    await use(a!.id); // a is now more recent than b
    await use(c!.id);
    expect(cache.ids()).toEqual([a!.id, c!.id]);
    await vi.waitFor(() => expect(files()).toEqual([`${a!.id}.tif`, `${c!.id}.tif`].sort()));
    expect(cache.size).toBe(2 * CHUNK);
    // Held files stay however far over the bound; released, the least recently used goes first.
    const held = [await cache.acquire(a!.id), await cache.acquire(c!.id), await cache.acquire(b!.id)];
    expect(cache.size).toBe(3 * CHUNK);
    expect(files()).toHaveLength(3);
    held[0]!.release();
    await vi.waitFor(() => expect(existsSync(path.join(dir, `${a!.id}.tif`))).toBe(false));
    expect(cache.ids()).toEqual([c!.id, b!.id]);
    held[1]!.release();
    held[2]!.release();
    expect(cache.size).toBe(2 * CHUNK);
    // A file removed behind the cache's back is copied again.
    rmSync(path.join(dir, `${c!.id}.tif`));
    const back = await cache.acquire(c!.id);
    expect(sha(readFileSync(back.path))).toBe(c!.sha256);
    back.release();
  });

  it('a put through the cache writes the copy as the file arrives: the first read needs no copy from the store', async () => {
    const dir = path.join(scratch, 'write-through');
    let opened = 0;
    const counting: Pick<FileStore, 'open'> = {
      open: (id) => {
        opened++;
        return store.open(id);
      },
    };
    const cache = new LocalFileCache({ dir, maxBytes: 1 << 30, store: counting, suffix: '.tif' });
    const through = cache.writeThrough(store);
    const bytes = randomBytes(3 * CHUNK + 5);
    const f = await through.put(accountId, pieces(bytes));
    expect(await store.stat(f.id)).toEqual(f);
    expect(readdirSync(dir)).toEqual([`${f.id}.tif`]);
    const got = await cache.acquire(f.id);
    expect(readFileSync(got.path).equals(bytes)).toBe(true);
    got.release();
    expect(opened).toBe(0);
    // A refused put leaves no copy (and nothing in the store).
    const before = await rows('upload_files');
    await expect(through.put(accountId, pieces(randomBytes(2 * CHUNK)), { maxBytes: CHUNK })).rejects.toThrow(
      FileTooLargeError,
    );
    expect(readdirSync(dir)).toEqual([`${f.id}.tif`]);
    expect(await rows('upload_files')).toBe(before);
  });

  it("the pool's prepare hook caches every upload a capture names and holds it until the task is done", async () => {
    const dir = path.join(scratch, 'prepare');
    const cache = new LocalFileCache({ dir, maxBytes: 0, store, suffix: '.tif' });
    const prepare = uploadPreparer(cache);
    const red = await store.put(accountId, pieces(randomBytes(CHUNK + 1)));
    const scl = await store.put(accountId, pieces(randomBytes(10)));
    const capture = {
      bands: { B04: { href: uploadRef(red.id) }, B08: { href: '/local/B08.tif' } },
      mask: { href: uploadRef(scl.id), kind: 'scl' },
      scale: 1,
      offset: 0,
    };
    expect(captureUploadIds(capture)).toEqual([red.id, scl.id]);
    const release = await prepare(capture);
    // Bound 0: both stay while the task runs, and go when it is done.
    expect(readdirSync(dir).sort()).toEqual([`${red.id}.tif`, `${scl.id}.tif`].sort());
    release();
    await vi.waitFor(() => expect(readdirSync(dir)).toEqual([]));
    // A capture naming a missing upload fails the task with the store's error; nothing is held.
    await expect(
      prepare({ ...capture, mask: { href: uploadRef('upl_CCCCCCCCCCCCCCCCCCCCCC'), kind: 'scl' } }),
    ).rejects.toThrow('stored file upl_CCCCCCCCCCCCCCCCCCCCCC does not exist');
    await vi.waitFor(() => expect(readdirSync(dir)).toEqual([]));
    // Captures without uploads need nothing.
    (await prepare({ bands: { B04: { href: 'https://example.com/B04.tif' } } }))();
  });

  it('the sweep deletes files older than the grace period that no capture of their account names', async () => {
    await db.query('DELETE FROM upload_files');
    const [named, maskOnly, orphan, young] = [
      await store.put(accountId, pieces(randomBytes(100))),
      await store.put(accountId, pieces(randomBytes(100))),
      await store.put(accountId, pieces(randomBytes(100))),
      await store.put(accountId, pieces(randomBytes(100))),
    ];
    // Another account's capture naming the orphan does not keep it.
    const other = (await findOrCreateAccount(db, 'someone else')).id;
    const capture = (acc: string, bands: object, mask: object | null) =>
      db.query(
        `INSERT INTO imagery (id, account_id, source, capture_date, bands, mask, scale, "offset", epsg, resolution, footprint, bbox)
         VALUES ($1, $2, 'drone', '2025-06-01', $3::jsonb, $4::jsonb, 1, 0, 32631, 10, '{}'::jsonb, '{0,0,1,1}')`,
        [`img_${randomBytes(8).toString('hex')}`, acc, JSON.stringify(bands), mask ? JSON.stringify(mask) : null],
      );
    await capture(accountId, { B04: { href: uploadRef(named!.id) }, B08: { href: '/x.tif' } }, null);
    await capture(accountId, { B04: { href: '/y.tif' } }, { href: uploadRef(maskOnly!.id), kind: 'scl' });
    await capture(other, { B04: { href: uploadRef(orphan!.id) } }, null);
    await db.query(`UPDATE upload_files SET created_at = now() - interval '2 hours' WHERE id <> $1`, [young!.id]);
    expect(await sweepUploadFiles(db, store, 3_600_000)).toBe(1);
    const left = (await db.query<{ id: string }>('SELECT id FROM upload_files')).map((r) => r.id).sort();
    expect(left).toEqual([named!.id, maskOnly!.id, young!.id].sort());
    expect(await db.query('SELECT 1 FROM upload_chunks WHERE file_id = $1', [orphan!.id])).toEqual([]);
  });
});
