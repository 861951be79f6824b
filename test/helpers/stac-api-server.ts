/**
 * A STAC API for the tests and the bench: src/imagery/stac-api.ts (STAC API v1.0.0 Core,
 * Collections and Item Search with the Query extension and optional CQL2 filter; see there) served
 * by node:http on loopback, on a random port unless one is given.
 *
 * Controls for tests: publish/remove Items, fail the next N requests with a status (500/503/…),
 * answer 429 with Retry-After, delay answers, go down (connections cut) and come back on the same
 * port, request counts by kind and a request log.
 */
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import {
  answerStacApi,
  kindOf,
  sortItems,
  type RequestKind,
  type StacApiOptions as ApiOptions,
  type StacItem,
} from '../../src/imagery/stac-api.js';

export { CONFORMANCE, type RequestKind, type StacItem } from '../../src/imagery/stac-api.js';

export interface LoggedRequest {
  kind: RequestKind;
  method: string;
  path: string;
  /** The query string as an object (last value of a repeated name). */
  query: Record<string, string>;
  /** The parsed JSON body of a POST, else undefined. */
  body: unknown;
  status: number;
  /** Number of Items answered (search and item listing). */
  returned?: number;
}

export interface StacApiOptions extends ApiOptions {
  /** Port to listen on (default: a free one). */
  port?: number;
}

export interface Fault {
  status: number;
  headers?: Record<string, string>;
  /** Only requests of these kinds take the fault (default: search requests only). */
  kinds?: RequestKind[];
}

export interface StacApiServer {
  /** The API root, http://127.0.0.1:<port> (no trailing slash). */
  readonly url: string;
  readonly port: number;
  /** Adds Items, replacing one with the same collection and id. */
  publish(...items: StacItem[]): void;
  /** Removes an Item; answers whether it was there. */
  remove(id: string, collection?: string): boolean;
  /** The Items served, in search order. */
  items(): StacItem[];
  /** The next `n` requests (search requests by default) answer `status`. */
  failNext(n: number, status?: number, fault?: Omit<Fault, 'status'>): void;
  /** The next `n` search requests answer 429 with `Retry-After: <seconds>`. */
  rateLimitNext(n: number, retryAfterSeconds: number): void;
  /** The next `n` requests (search by default) are answered after `ms`. */
  delayNext(n: number, ms: number, kinds?: RequestKind[]): void;
  /** Closes the listener and cuts open connections: requests are refused until up(). */
  down(): Promise<void>;
  /** Listens again on the same port. */
  up(): Promise<void>;
  /** Requests answered, by kind (faults included). */
  count(kind?: RequestKind | 'search'): number;
  readonly log: LoggedRequest[];
  resetLog(): void;
  close(): Promise<void>;
}

export async function startStacApiServer(options: StacApiOptions = {}): Promise<StacApiServer> {
  const apiOptions: StacApiOptions = {
    id: 'test-stac-api',
    title: 'Test STAC API',
    description: 'A STAC API on loopback serving fixture Items',
    ...options,
  };
  let items: StacItem[] = [];
  const faults: Array<Fault & { delayMs?: number }> = [];
  const log: LoggedRequest[] = [];
  const sockets = new Set<Socket>();
  let port = options.port ?? 0;
  let url = '';

  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const u = new URL(req.url ?? '/', 'http://x');
      const parts = u.pathname.split('/').filter(Boolean).map(decodeURIComponent);
      const method = req.method ?? 'GET';
      const kind = kindOf(method, parts);
      const raw = Buffer.concat(chunks).toString('utf8');
      let body: unknown;
      let bodyError = false;
      if (method === 'POST') {
        try {
          body = raw ? JSON.parse(raw) : undefined;
        } catch {
          bodyError = true;
        }
      }
      const entry: LoggedRequest = {
        kind,
        method,
        path: u.pathname,
        query: Object.fromEntries(u.searchParams),
        body,
        status: 0,
      };
      log.push(entry);
      const send = (status: number, json: unknown, headers: Record<string, string> = {}) => {
        entry.status = status;
        const text = JSON.stringify(json);
        res.writeHead(status, {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(text),
          ...headers,
        });
        res.end(text);
      };
      const fi = faults.findIndex((f) => (f.kinds ?? ['search-get', 'search-post']).includes(kind));
      if (fi >= 0) {
        const f = faults.splice(fi, 1)[0]!;
        if (f.delayMs !== undefined) await new Promise((r) => setTimeout(r, f.delayMs));
        else {
          send(
            f.status,
            { code: f.status === 429 ? 'TooManyRequests' : 'ServerError', description: 'injected fault' },
            f.headers,
          );
          return;
        }
      }
      if (bodyError) {
        send(400, { code: 'BadRequest', description: 'the body is not valid JSON' });
        return;
      }
      try {
        const a = answerStacApi(items, url, apiOptions, { method, parts, query: u.searchParams, body });
        entry.returned = a.returned;
        send(a.status, a.json, a.headers);
      } catch (err) {
        send(500, { code: 'ServerError', description: String(err) });
      }
    });
  });
  server.on('connection', (s) => {
    sockets.add(s);
    s.on('close', () => sockets.delete(s));
  });
  let listening = false;
  const listen = () =>
    new Promise<void>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, '127.0.0.1', () => {
        server.off('error', reject);
        listening = true;
        port = (server.address() as AddressInfo).port;
        url = `http://127.0.0.1:${port}`;
        resolve();
      });
    });
  const stop = () =>
    new Promise<void>((r) => {
      if (!listening) return r();
      listening = false;
      for (const s of sockets) s.destroy();
      server.close(() => r());
    });
  await listen();

  const key = (i: StacItem) => `${i.collection}\u0000${i.id}`;
  return {
    get url() {
      return url;
    },
    get port() {
      return port;
    },
    publish(...more) {
      const byKey = new Map(items.map((i) => [key(i), i]));
      for (const i of more) byKey.set(key(i), structuredClone(i));
      items = sortItems([...byKey.values()]);
    },
    remove(id, collection) {
      const n = items.length;
      items = items.filter((i) => !(i.id === id && (collection === undefined || i.collection === collection)));
      return items.length < n;
    },
    items: () => items.map((i) => structuredClone(i)),
    failNext(n, status = 503, fault = {}) {
      for (let k = 0; k < n; k++) faults.push({ status, ...fault });
    },
    rateLimitNext(n, retryAfterSeconds) {
      for (let k = 0; k < n; k++) faults.push({ status: 429, headers: { 'retry-after': String(retryAfterSeconds) } });
    },
    delayNext(n, ms, kinds) {
      for (let k = 0; k < n; k++) faults.push({ status: 0, delayMs: ms, ...(kinds ? { kinds } : {}) });
    },
    down: stop,
    up: () => (listening ? Promise.resolve() : listen()),
    count: (kind) =>
      log.filter((r) => kind === undefined || r.kind === kind || (kind === 'search' && r.kind.startsWith('search-')))
        .length,
    log,
    resetLog() {
      log.length = 0;
    },
    close: stop,
  };
}
