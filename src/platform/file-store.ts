/**
 * Files every process of a deployment can read, whatever machine received them: uploaded GeoTIFFs.
 * `FileStore` is the seam (put / open / stat / delete); `DatabaseFileStore` keeps each file in the
 * database as rows of CHUNK_BYTES (tables upload_files and upload_chunks, migration 0014), as
 * report files are kept there. Object storage (S3 and the like) could implement the same interface.
 *
 * Both directions stream: `put` holds at most one chunk (plus the piece that overflows it) in
 * memory and writes each chunk as its own statement, outside any transaction, so that a slow client
 * never holds a transaction open (the embedded database runs one at a time). A file is readable
 * only once complete (size and SHA-256 recorded); a failed put deletes what it wrote, and a process
 * that dies mid-put leaves an incomplete row for the owner's sweep (imagery/upload-files.ts).
 * `open` verifies every chunk's number and length and the SHA-256 as it reads: a truncated or
 * altered file fails with StoredFileError, never yields wrong bytes silently to the end.
 */
import { createHash } from 'node:crypto';
import type { Database } from './database.js';
import { newId } from './ids.js';

export const CHUNK_BYTES = 1024 * 1024;

export interface StoredFile {
  id: string;
  accountId: string;
  size: number;
  sha256: string;
}

export interface FileStore {
  /**
   * Streams `body` into a new file of the account and returns it once complete. Rejects, with
   * nothing left behind, when `body` fails or grows past `maxBytes` (FileTooLargeError).
   */
  put(accountId: string, body: AsyncIterable<Uint8Array>, opts?: { maxBytes?: number }): Promise<StoredFile>;
  /** The complete file (null when there is none by that id). */
  stat(id: string): Promise<StoredFile | null>;
  /** The file and its bytes in order, checked as they are read (StoredFileError when missing, truncated or altered). */
  open(id: string): Promise<{ file: StoredFile; chunks: AsyncIterable<Uint8Array> }>;
  /** Deletes the files (complete or not); returns how many existed. */
  delete(ids: readonly string[]): Promise<number>;
}

export class FileTooLargeError extends Error {
  constructor(readonly maxBytes: number) {
    super(`the file is larger than ${maxBytes} bytes`);
    this.name = 'FileTooLargeError';
  }
}

/** A stored file that cannot be read back whole: `missing` (no such complete file) or `corrupt`. */
export class StoredFileError extends Error {
  constructor(
    readonly kind: 'missing' | 'corrupt',
    message: string,
  ) {
    super(message);
    this.name = 'StoredFileError';
  }
}

interface FileRow {
  id: string;
  account_id: string;
  size: number;
  sha256: string;
  chunk_size: number;
}

const toFile = (r: FileRow): StoredFile => ({ id: r.id, accountId: r.account_id, size: r.size, sha256: r.sha256 });

export class DatabaseFileStore implements FileStore {
  constructor(
    private readonly db: Database,
    private readonly chunkBytes = CHUNK_BYTES,
  ) {}

  async put(accountId: string, body: AsyncIterable<Uint8Array>, opts: { maxBytes?: number } = {}): Promise<StoredFile> {
    const id = newId('upl');
    const max = opts.maxBytes ?? Number.POSITIVE_INFINITY;
    await this.db.query('INSERT INTO upload_files (id, account_id, chunk_size) VALUES ($1, $2, $3)', [
      id,
      accountId,
      this.chunkBytes,
    ]);
    try {
      const hash = createHash('sha256');
      let size = 0;
      let n = 0;
      let pending: Buffer[] = [];
      let pendingBytes = 0;
      const write = async (data: Buffer) => {
        await this.db.query('INSERT INTO upload_chunks (file_id, n, data) VALUES ($1, $2, $3)', [id, n++, data]);
      };
      for await (const piece of body) {
        size += piece.length;
        if (size > max) throw new FileTooLargeError(max);
        hash.update(piece);
        pending.push(Buffer.from(piece.buffer, piece.byteOffset, piece.byteLength));
        pendingBytes += piece.length;
        while (pendingBytes >= this.chunkBytes) {
          const all = pending.length === 1 ? pending[0]! : Buffer.concat(pending, pendingBytes);
          // A copy: the stream may reuse the memory of the pieces it handed out.
          await write(Buffer.from(all.subarray(0, this.chunkBytes)));
          const rest = all.subarray(this.chunkBytes);
          pending = rest.length ? [Buffer.from(rest)] : [];
          pendingBytes = rest.length;
        }
      }
      if (pendingBytes) await write(Buffer.concat(pending, pendingBytes));
      const sha256 = hash.digest('hex');
      await this.db.query('UPDATE upload_files SET size = $2, sha256 = $3, completed_at = now() WHERE id = $1', [
        id,
        size,
        sha256,
      ]);
      return { id, accountId, size, sha256 };
    } catch (err) {
      await this.delete([id]).catch(() => {});
      throw err;
    }
  }

  private async row(id: string): Promise<FileRow | null> {
    const [r] = await this.db.query<FileRow>(
      `SELECT id, account_id, size::double precision AS size, sha256, chunk_size FROM upload_files
        WHERE id = $1 AND completed_at IS NOT NULL`,
      [id],
    );
    return r ?? null;
  }

  async stat(id: string): Promise<StoredFile | null> {
    const r = await this.row(id);
    return r && toFile(r);
  }

  async open(id: string): Promise<{ file: StoredFile; chunks: AsyncIterable<Uint8Array> }> {
    const r = await this.row(id);
    if (!r) throw new StoredFileError('missing', `stored file ${id} does not exist`);
    const db = this.db;
    const count = Math.ceil(r.size / r.chunk_size);
    async function* chunks(): AsyncGenerator<Uint8Array> {
      const hash = createHash('sha256');
      for (let n = 0; n < count; n++) {
        const [c] = await db.query<{ data: Uint8Array }>(
          'SELECT data FROM upload_chunks WHERE file_id = $1 AND n = $2',
          [id, n],
        );
        const expected = n < count - 1 ? r!.chunk_size : r!.size - n * r!.chunk_size;
        if (!c || c.data.length !== expected)
          throw new StoredFileError(
            'corrupt',
            `stored file ${id} is truncated: chunk ${n} of ${count} ${c ? `has ${c.data.length} bytes, not ${expected}` : 'is missing'}`,
          );
        hash.update(c.data);
        yield c.data;
      }
      if (hash.digest('hex') !== r!.sha256)
        throw new StoredFileError('corrupt', `stored file ${id} does not match its SHA-256 ${r!.sha256}`);
    }
    return { file: toFile(r), chunks: chunks() };
  }

  async delete(ids: readonly string[]): Promise<number> {
    if (!ids.length) return 0;
    const gone = await this.db.query('DELETE FROM upload_files WHERE id = ANY($1::text[]) RETURNING id', [ids]);
    return gone.length;
  }
}
