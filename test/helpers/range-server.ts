/**
 * A static file server on loopback that answers Range requests as COG hosts (S3, Azure Blob) do:
 * `206` with `Content-Range` for `bytes=a-b`, `bytes=a-` and `bytes=-n`, `416` past the end, `200`
 * with the whole file without a Range header, `HEAD` with the length. Directories are mounted under
 * a name (`/rkh/B04.tif` → `<dir>/B04.tif`); nothing outside a mounted directory is served. Counts
 * requests and bytes served per file, so that a test or the bench can say how much of each COG a
 * registration read. Bodies are served from memory (each file read once while its size and mtime
 * stay the same): a remote host's disk is not the reader's cost, and bench/subscriptions runs
 * this server in the service's process, where streaming every range from disk through libuv's
 * thread pool cost as much CPU as the service's own compute threads.
 */
import { readFileSync, statSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import path from 'node:path';

export interface FileCounter {
  requests: number;
  bytes: number;
}

export interface RangeServer {
  /** http://127.0.0.1:<port> */
  readonly url: string;
  /** Serves the files of `dir` under `/<name>/`; answers the base URL of the mount (no trailing slash). */
  mount(name: string, dir: string): string;
  /** The URL of a file in a mounted directory. */
  href(name: string, file: string): string;
  /** Requests and bytes served per absolute file path (bodies only; HEAD and 4xx count a request, no bytes). */
  readonly files: Map<string, FileCounter>;
  /** The same per mount name (one directory mounted under several names is counted per name). */
  readonly mounts: Map<string, FileCounter>;
  /** Total bytes of bodies served (optionally only files whose path starts with `prefix`). */
  bytesServed(prefix?: string): number;
  /** Every Range header received, in order. */
  readonly ranges: string[];
  resetCounters(): void;
  close(): Promise<void>;
}

export async function startRangeServer(): Promise<RangeServer> {
  const mounts = new Map<string, string>();
  const files = new Map<string, FileCounter>();
  const byMount = new Map<string, FileCounter>();
  const ranges: string[] = [];
  const sockets = new Set<Socket>();
  const bodies = new Map<string, { stamp: string; bytes: Buffer }>();
  const bodyOf = (file: string, stamp: string): Buffer => {
    const hit = bodies.get(file);
    if (hit?.stamp === stamp) return hit.bytes;
    const bytes = readFileSync(file);
    bodies.set(file, { stamp, bytes });
    return bytes;
  };
  const add = (map: Map<string, FileCounter>, key: string, bytes: number) => {
    const c = map.get(key) ?? { requests: 0, bytes: 0 };
    c.requests++;
    c.bytes += bytes;
    map.set(key, c);
  };
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://x');
    const [, name, ...rest] = url.pathname.split('/').map(decodeURIComponent);
    const dir = name !== undefined ? mounts.get(name) : undefined;
    const rel = rest.join('/');
    const file = dir ? path.resolve(dir, rel) : undefined;
    const count = (f: string, bytes: number) => {
      add(files, f, bytes);
      add(byMount, name!, bytes);
    };
    if (!dir || !file || !rel || !file.startsWith(dir + path.sep) || (req.method !== 'GET' && req.method !== 'HEAD')) {
      res.writeHead(req.method === 'GET' || req.method === 'HEAD' ? 404 : 405).end();
      return;
    }
    let size: number;
    let stamp: string;
    try {
      const st = statSync(file);
      if (!st.isFile()) throw new Error('not a file');
      size = st.size;
      stamp = `${st.size}:${st.mtimeMs}`;
    } catch {
      count(file, 0);
      res.writeHead(404).end();
      return;
    }
    const common = { 'accept-ranges': 'bytes', 'content-type': 'image/tiff', etag: `"${size}"` };
    const range = req.headers.range;
    if (range) ranges.push(range);
    if (req.method === 'HEAD') {
      count(file, 0);
      res.writeHead(200, { ...common, 'content-length': size }).end();
      return;
    }
    let start = 0;
    let end = size - 1;
    let partial = false;
    const m = range ? /^bytes=(\d*)-(\d*)$/.exec(range.trim()) : null;
    if (m && (m[1] || m[2])) {
      partial = true;
      if (m[1]) {
        start = Number(m[1]);
        end = m[2] ? Math.min(Number(m[2]), size - 1) : size - 1;
      } else {
        start = Math.max(0, size - Number(m[2]));
      }
      if (start >= size || start > end) {
        count(file, 0);
        res.writeHead(416, { 'content-range': `bytes */${size}` }).end();
        return;
      }
    }
    const length = end - start + 1;
    count(file, length);
    res.writeHead(partial ? 206 : 200, {
      ...common,
      'content-length': length,
      ...(partial ? { 'content-range': `bytes ${start}-${end}/${size}` } : {}),
    });
    let body: Buffer;
    try {
      body = bodyOf(file, stamp);
    } catch {
      res.destroy();
      return;
    }
    res.end(body.subarray(start, end + 1));
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  return {
    url,
    mount(name, dir) {
      if (name.includes('/')) throw new Error(`mount name "${name}" must not contain /`);
      mounts.set(name, path.resolve(dir));
      return `${url}/${encodeURIComponent(name)}`;
    },
    href: (name, file) => `${url}/${encodeURIComponent(name)}/${file.split('/').map(encodeURIComponent).join('/')}`,
    files,
    mounts: byMount,
    bytesServed: (prefix) => {
      let n = 0;
      for (const [f, c] of files) if (!prefix || f.startsWith(prefix)) n += c.bytes;
      return n;
    },
    ranges,
    resetCounters() {
      files.clear();
      byMount.clear();
      ranges.length = 0;
    },
    close: () =>
      new Promise<void>((r) => {
        for (const s of sockets) s.destroy();
        server.close(() => r());
      }),
  };
}
