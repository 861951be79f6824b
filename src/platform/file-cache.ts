/**
 * A local read cache of stored files (file-store.ts): the compute threads read local files with
 * positional reads and have no database, so a process copies a stored file to
 * `<dir>/<id><suffix>` before a thread needs it, and the thread opens that path.
 *
 * - Atomic: a file is written to `<id>.<random>.tmp` in the same directory and renamed into place
 *   only once every chunk arrived and its SHA-256 matched (the store checks it), so a reader (this
 *   process's threads, another process sharing the directory) never sees a partial file. Leftover
 *   `.tmp` files of a process that died are removed when the cache first scans its directory.
 * - Bounded: the files' total size is kept under `maxBytes` by evicting the least recently used.
 *   A file in use (acquired and not yet released) is never evicted, so the total may exceed the
 *   bound while more than it is in use; it shrinks back as they are released. Files found in the
 *   directory at start count, oldest modification first.
 * - One copy per file at a time: concurrent acquires of the same id share one download.
 */
import { randomBytes } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, readdir, rename, rm, stat, utimes } from 'node:fs/promises';
import path from 'node:path';
import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import type { FileStore } from './file-store.js';

export interface FileCacheOptions {
  dir: string;
  maxBytes: number;
  store: Pick<FileStore, 'open'>;
  /** Appended to the id to name the cached file (".tif"). */
  suffix?: string;
}

export interface CachedFile {
  path: string;
  /** Lets the file be evicted again; call once when the reads are done. */
  release(): void;
}

const ID = /^[A-Za-z0-9_-]{1,64}$/;

export class LocalFileCache {
  readonly dir: string;
  private readonly maxBytes: number;
  private readonly store: Pick<FileStore, 'open'>;
  private readonly suffix: string;
  /** Cached files, least recently used first (Map order). */
  private readonly entries = new Map<string, { size: number; pins: number }>();
  private readonly loading = new Map<string, Promise<void>>();
  /** Evicted files being removed: a new copy of the same id waits for it before it is renamed into place. */
  private readonly removing = new Map<string, Promise<void>>();
  private total = 0;
  private scanned: Promise<void> | undefined;

  constructor(opts: FileCacheOptions) {
    this.dir = path.resolve(opts.dir);
    this.maxBytes = opts.maxBytes;
    this.store = opts.store;
    this.suffix = opts.suffix ?? '';
  }

  pathOf(id: string): string {
    if (!ID.test(id)) throw new Error(`${JSON.stringify(id)} cannot name a cached file`);
    return path.join(this.dir, id + this.suffix);
  }

  /** Bytes of the cached files now. */
  get size(): number {
    return this.total;
  }

  /** The ids cached now, least recently used first. */
  ids(): string[] {
    return [...this.entries.keys()];
  }

  /** The file's local path, copied from the store first when it is not cached; kept until released. */
  async acquire(id: string): Promise<CachedFile> {
    const file = this.pathOf(id);
    await this.scan();
    for (;;) {
      const e = this.entries.get(id);
      if (e) {
        e.pins++; // before any await: nothing evicts it while it is checked
        if (await exists(file)) {
          this.entries.delete(id);
          this.entries.set(id, e);
          utimes(file, new Date(), new Date()).catch(() => {}); // recency survives a restart
          this.evict();
          let released = false;
          return {
            path: file,
            release: () => {
              if (released) return;
              released = true;
              e.pins--;
              this.evict();
            },
          };
        }
        e.pins--;
        if (this.entries.get(id) === e) this.forget(id); // removed behind the cache's back: copy it again
      }
      let load = this.loading.get(id);
      if (!load) {
        load = this.load(id, file).finally(() => this.loading.delete(id));
        this.loading.set(id, load);
      }
      await load;
    }
  }

  /**
   * `store` whose puts also write the file into this cache as it streams in: the process that
   * receives an upload reads it next (to check it) and need not copy it back from the store. Best
   * effort: a failure to write the copy (a full disk) leaves the put as it is, and the file is
   * copied from the store when first read.
   */
  writeThrough(store: FileStore): FileStore {
    return {
      stat: (id) => store.stat(id),
      open: (id) => store.open(id),
      delete: (ids) => store.delete(ids),
      put: async (accountId, body, opts) => {
        await this.scan();
        const tmp = path.join(this.dir, `put.${randomBytes(6).toString('hex')}.tmp`);
        const out = createWriteStream(tmp);
        let failed = false;
        out.on('error', () => {
          failed = true;
        });
        async function* tee(): AsyncGenerator<Uint8Array> {
          for await (const piece of body) {
            if (!failed && !out.write(piece))
              await new Promise<void>((r) => {
                out.once('drain', r);
                out.once('error', () => r());
              });
            yield piece;
          }
        }
        try {
          const file = await store.put(accountId, tee(), opts);
          if (!failed) await new Promise<void>((r) => out.end(r));
          if (!failed && !this.entries.has(file.id)) {
            await rename(tmp, this.pathOf(file.id));
            this.entries.set(file.id, { size: file.size, pins: 0 });
            this.total += file.size;
            this.evict();
          }
          return file;
        } finally {
          out.destroy();
          await rm(tmp, { force: true });
        }
      },
    };
  }

  private async load(id: string, file: string): Promise<void> {
    const tmp = path.join(this.dir, `${id}.${randomBytes(6).toString('hex')}.tmp`);
    try {
      const { file: info, chunks } = await this.store.open(id);
      await pipeline(Readable.from(chunks), createWriteStream(tmp));
      await this.removing.get(id);
      await rename(tmp, file);
      this.entries.set(id, { size: info.size, pins: 0 });
      this.total += info.size;
    } catch (err) {
      await rm(tmp, { force: true });
      throw err;
    }
  }

  private forget(id: string): void {
    const e = this.entries.get(id);
    if (!e) return;
    this.entries.delete(id);
    this.total -= e.size;
  }

  /** Removes least recently used files not in use until the total is within the bound. */
  private evict(): void {
    for (const [id, e] of this.entries) {
      if (this.total <= this.maxBytes) return;
      if (e.pins > 0 || this.loading.has(id)) continue;
      this.forget(id);
      const gone = rm(path.join(this.dir, id + this.suffix), { force: true }).catch(() => {});
      this.removing.set(id, gone);
      gone.then(() => {
        if (this.removing.get(id) === gone) this.removing.delete(id);
      });
    }
  }

  private scan(): Promise<void> {
    this.scanned ??= (async () => {
      await mkdir(this.dir, { recursive: true });
      const found: Array<{ id: string; size: number; mtime: number }> = [];
      for (const name of await readdir(this.dir)) {
        const p = path.join(this.dir, name);
        if (name.endsWith('.tmp')) {
          await rm(p, { force: true });
          continue;
        }
        if (!name.endsWith(this.suffix)) continue;
        const id = name.slice(0, name.length - this.suffix.length);
        if (!ID.test(id)) continue;
        const s = await stat(p).catch(() => null);
        if (s?.isFile()) found.push({ id, size: s.size, mtime: s.mtimeMs });
      }
      found.sort((a, b) => a.mtime - b.mtime);
      for (const f of found) {
        this.entries.set(f.id, { size: f.size, pins: 0 });
        this.total += f.size;
      }
      this.evict();
    })();
    return this.scanned;
  }
}

const exists = (p: string) =>
  stat(p).then(
    () => true,
    () => false,
  );
