/**
 * A STAC API Item Search client (https://github.com/radiantearth/stac-api-spec, item-search):
 * - the landing page and its conformance classes, kept per API root for CAPABILITIES_TTL_MS: where
 *   /search is, whether it takes POST, and which cloud filter it understands (Query extension
 *   `query`, else CQL2 JSON `filter`, else none: the caller filters) and whether it sorts;
 * - POST /search with a JSON body (GET with query parameters when the landing page offers no POST
 *   link, or when POST answers 405: remembered for the root);
 * - `next` links followed up to a page bound: GET to the link's href, or POST with its `body`,
 *   merged into the previous body when `merge` is true (headers likewise);
 * - errors typed for the poller: StacRateLimitedError (429, with the Retry-After delay),
 *   StacRetryableError (5xx, timeouts, connection failures), StacApiError (anything else: a 4xx,
 *   an answer that is not JSON or not an ItemCollection, a refused address);
 * - the SSRF rules of the webhooks: the host's addresses are checked and the connection goes to
 *   the checked address (platform/net/connect.ts), unless private networks are allowed; redirects
 *   are not followed; a response body larger than maxResponseBytes is refused.
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import ipaddr from 'ipaddr.js';
import { BlockedAddressError, isPublicAddress, systemLookup, type HostLookup } from '../platform/net/address.js';
import { checkedLookup } from '../platform/net/connect.js';

export class StacApiError extends Error {
  constructor(
    message: string,
    /** The HTTP status of the answer, when there was one. */
    readonly status?: number,
  ) {
    super(message);
    this.name = 'StacApiError';
  }
}

/** Worth trying again later: 5xx, timeouts, connection failures. */
export class StacRetryableError extends StacApiError {
  constructor(message: string, status?: number) {
    super(message, status);
    this.name = 'StacRetryableError';
  }
}

/** 429: not before `retryAfterMs` (from Retry-After; null when the answer gave none). */
export class StacRateLimitedError extends StacRetryableError {
  constructor(
    message: string,
    readonly retryAfterMs: number | null,
  ) {
    super(message, 429);
    this.name = 'StacRateLimitedError';
  }
}

export interface StacClientOptions {
  allowPrivateNetworks: boolean;
  /** Every request, headers and body. */
  timeoutMs?: number;
  maxResponseBytes?: number;
  /** Replaces the system resolver (tests). */
  lookup?: HostLookup;
}

/** What the landing page and conformance classes say the API can do. */
export interface StacCapabilities {
  searchUrl: string;
  post: boolean;
  cloudFilter: 'query' | 'cql2-json' | 'cql2-text' | null;
  sort: boolean;
}

export interface Link {
  rel?: string;
  href?: string;
  method?: string;
  body?: Record<string, unknown>;
  headers?: Record<string, string>;
  merge?: boolean;
}

export interface SearchParams {
  collections: string[];
  intersects: { type: 'MultiPolygon'; coordinates: number[][][][] };
  /** RFC 3339 interval, `..` for an open end. */
  datetime: string;
  limit: number;
  maxCloudCover: number | null;
}

export interface SearchPage {
  items: Array<Record<string, unknown>>;
  /** The page's number in this search, from 1. */
  page: number;
  /** The server filtered by cloud cover (else the caller must). */
  cloudFiltered: boolean;
  /** The search asked for ascending datetime order. */
  sorted: boolean;
}

const CAPABILITIES_TTL_MS = 10 * 60_000;
const JSON_TYPES = 'application/geo+json, application/json;q=0.9';
const USER_AGENT = 'field-analysis-subscriptions/1';

export class StacClient {
  private readonly capabilities = new Map<string, { at: number; caps: Promise<StacCapabilities> }>();
  private readonly timeoutMs: number;
  private readonly maxBytes: number;
  /** Requests made, by method (the bench reads it). */
  readonly requests = { GET: 0, POST: 0 };

  constructor(private readonly opts: StacClientOptions) {
    this.timeoutMs = opts.timeoutMs ?? 30_000;
    this.maxBytes = opts.maxResponseBytes ?? 32 * 1_048_576;
  }

  /** The API's capabilities, from its landing page (and /conformance when the page lists none). */
  capabilitiesOf(root: string, trusted = false, now = Date.now()): Promise<StacCapabilities> {
    const base = root.replace(/\/+$/, '');
    const key = `${trusted ? 1 : 0}|${base}`;
    const hit = this.capabilities.get(key);
    if (hit && now - hit.at < CAPABILITIES_TTL_MS) return hit.caps;
    const caps = this.discover(base, trusted);
    this.capabilities.set(key, { at: now, caps });
    caps.catch(() => this.capabilities.delete(key)); // a failure is not kept
    return caps;
  }

  private async discover(root: string, trusted: boolean): Promise<StacCapabilities> {
    const landing = asObject(await this.request('GET', `${root}/`, undefined, {}, trusted), 'the landing page');
    const links = Array.isArray(landing.links) ? (landing.links as Link[]) : [];
    let conformance = Array.isArray(landing.conformsTo) ? (landing.conformsTo as unknown[]).map(String) : [];
    if (!conformance.length) {
      const href = links.find((l) => l.rel === 'conformance')?.href ?? `${root}/conformance`;
      const c = asObject(
        await this.request('GET', resolve(href, root), undefined, {}, trusted),
        'the conformance page',
      );
      conformance = Array.isArray(c.conformsTo) ? (c.conformsTo as unknown[]).map(String) : [];
    }
    const search = links.filter((l) => l.rel === 'search' && typeof l.href === 'string');
    const conforms = (re: RegExp) => conformance.some((c) => re.test(c));
    const cql2 = conforms(/item-search#filter$/) || conforms(/ogcapi-features-3\/1\.0\/conf\/filter$/);
    return {
      searchUrl: resolve(search[0]?.href ?? `${root}/search`, root),
      // The spec: a link without `method` is GET; a server taking POST lists a POST link too.
      post: search.length === 0 || search.some((l) => (l.method ?? 'GET').toUpperCase() === 'POST'),
      cloudFilter: conforms(/item-search#query$/)
        ? 'query'
        : cql2 && conforms(/cql2\/1\.0\/conf\/cql2-json$/)
          ? 'cql2-json'
          : cql2 && conforms(/cql2\/1\.0\/conf\/cql2-text$/)
            ? 'cql2-text'
            : null,
      sort: conforms(/item-search#sort$/),
    };
  }

  /**
   * The pages of one search, at most `maxPages`; `state.truncated` tells afterwards whether a
   * `next` link was left unfollowed. `trusted`: an operator-set API (the default subscription),
   * which may be on a private network whatever allowPrivateNetworks says.
   */
  async *search(
    root: string,
    params: SearchParams,
    maxPages: number,
    state: { truncated?: boolean } = {},
    trusted = false,
  ): AsyncGenerator<SearchPage> {
    const caps = await this.capabilitiesOf(root, trusted);
    const body: Record<string, unknown> = {
      collections: params.collections,
      intersects: params.intersects,
      datetime: params.datetime,
      limit: params.limit,
    };
    const cloudFiltered = params.maxCloudCover !== null && caps.cloudFilter !== null;
    if (params.maxCloudCover !== null) {
      if (caps.cloudFilter === 'query') body.query = { 'eo:cloud_cover': { lte: params.maxCloudCover } };
      else if (caps.cloudFilter === 'cql2-json') {
        body['filter-lang'] = 'cql2-json';
        body.filter = { op: '<=', args: [{ property: 'eo:cloud_cover' }, params.maxCloudCover] };
      } else if (caps.cloudFilter === 'cql2-text') {
        body['filter-lang'] = 'cql2-text';
        body.filter = `eo:cloud_cover <= ${params.maxCloudCover}`;
      }
    }
    if (caps.sort) body.sortby = [{ field: 'properties.datetime', direction: 'asc' }];
    let next: { method: 'GET' | 'POST'; url: string; body?: Record<string, unknown>; headers: Record<string, string> } =
      caps.post
        ? { method: 'POST', url: caps.searchUrl, body, headers: {} }
        : { method: 'GET', url: withQuery(caps.searchUrl, body), headers: {} };
    const seen = new Set<string>();
    state.truncated = false;
    for (let page = 1; ; page++) {
      let answer: unknown;
      try {
        answer = await this.request(next.method, next.url, next.body, next.headers, trusted);
      } catch (err) {
        // POST not allowed after all: GET from now on for this root.
        if (page === 1 && next.method === 'POST' && err instanceof StacApiError && err.status === 405) {
          caps.post = false;
          next = { method: 'GET', url: withQuery(caps.searchUrl, body), headers: {} };
          answer = await this.request('GET', next.url, undefined, {}, trusted);
        } else throw err;
      }
      const fc = asObject(answer, 'the search answer');
      if (!Array.isArray(fc.features))
        throw new StacApiError(`${next.url}: the search answer is not an ItemCollection`);
      yield {
        items: (fc.features as unknown[]).filter(
          (f): f is Record<string, unknown> => typeof f === 'object' && f !== null,
        ),
        page,
        cloudFiltered,
        sorted: caps.sort,
      };
      const link = (Array.isArray(fc.links) ? (fc.links as Link[]) : []).find(
        (l) => l?.rel === 'next' && typeof l.href === 'string',
      );
      if (!link) return;
      if (page >= maxPages) {
        state.truncated = true;
        return;
      }
      const method = (link.method ?? 'GET').toUpperCase() === 'POST' ? 'POST' : 'GET';
      const url = resolve(link.href!, next.url);
      const headers = link.merge ? { ...next.headers, ...(link.headers ?? {}) } : { ...(link.headers ?? {}) };
      const nextBody =
        method === 'POST'
          ? link.merge
            ? { ...(next.body ?? body), ...(link.body ?? {}) }
            : (link.body ?? next.body ?? body)
          : undefined;
      next = { method, url, body: nextBody, headers };
      // A server that links a page to itself would be followed up to maxPages for nothing.
      const key = `${method} ${url} ${JSON.stringify(nextBody ?? null)}`;
      if (seen.has(key)) return;
      seen.add(key);
    }
  }

  /** One request; the parsed JSON answer of a 2xx, else a typed error. */
  async request(
    method: 'GET' | 'POST',
    rawUrl: string,
    body?: Record<string, unknown>,
    extraHeaders: Record<string, string> = {},
    trusted = false,
  ): Promise<unknown> {
    const allowPrivate = trusted || this.opts.allowPrivateNetworks;
    const url = checkUrl(rawUrl, allowPrivate);
    this.requests[method]++;
    const payload = body ? JSON.stringify(body) : undefined;
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const mod = url.protocol === 'https:' ? https : http;
    let res: IncomingMessage;
    let data: Buffer;
    try {
      res = await new Promise<IncomingMessage>((resolveRes, reject) => {
        const req = mod.request(
          url,
          {
            method,
            signal: deadline,
            headers: {
              ...extraHeaders,
              accept: JSON_TYPES,
              'user-agent': USER_AGENT,
              ...(payload ? { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload) } : {}),
            },
            ...(allowPrivate ? {} : { lookup: checkedLookup(this.opts.lookup ?? systemLookup, blocked) }),
          },
          resolveRes,
        );
        req.on('error', reject);
        req.end(payload);
      });
      const chunks: Buffer[] = [];
      let size = 0;
      for await (const c of res) {
        size += (c as Buffer).length;
        if (size > this.maxBytes) {
          res.destroy();
          throw new StacApiError(`${url.host}: the answer is larger than ${this.maxBytes} bytes`);
        }
        chunks.push(c as Buffer);
      }
      data = Buffer.concat(chunks);
    } catch (err) {
      if (err instanceof StacApiError) throw err;
      if (deadline.aborted) throw new StacRetryableError(`${url.host}: no complete answer within ${this.timeoutMs} ms`);
      if (err instanceof BlockedAddressError) throw new StacApiError(err.message);
      const e = err as NodeJS.ErrnoException;
      throw new StacRetryableError(`${url.host}: ${e.code ?? e.message}`);
    }
    const status = res.statusCode ?? 0;
    if (status === 429) {
      throw new StacRateLimitedError(
        `${url.host}: HTTP 429 (rate limited)`,
        retryAfterMs(res.headers['retry-after'] as string | undefined),
      );
    }
    if (status >= 500) throw new StacRetryableError(`${url.host}: HTTP ${status} on ${method} ${url.pathname}`, status);
    if (status < 200 || status >= 300) {
      throw new StacApiError(`${url.host}: HTTP ${status} on ${method} ${url.pathname}${detail(data)}`, status);
    }
    try {
      return JSON.parse(data.toString('utf8'));
    } catch {
      throw new StacApiError(`${url.host}: the answer to ${method} ${url.pathname} is not JSON`);
    }
  }
}

const blocked = (host: string, address: string) =>
  new BlockedAddressError(host, address, ' (SUBSCRIPTIONS_ALLOW_PRIVATE_NETWORKS)');

function checkUrl(raw: string, allowPrivate: boolean): URL {
  let url: URL;
  try {
    url = new URL(raw);
  } catch {
    throw new StacApiError(`${raw} is not a valid URL`);
  }
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new StacApiError(`${url.protocol} URLs are not searched; use http(s)`);
  if (url.username || url.password) throw new StacApiError('a STAC API URL must not contain credentials');
  const host = url.hostname.replace(/^\[|\]$/g, '');
  // Address literals skip the lookup: checked here.
  if (!allowPrivate && ipaddr.isValid(host) && !isPublicAddress(host))
    throw new StacApiError(blocked(host, host).message);
  return url;
}

/** Retry-After in seconds or as an HTTP date; null when absent or unreadable. */
export function retryAfterMs(value: string | undefined, now = Date.now()): number | null {
  if (!value) return null;
  if (/^\d+$/.test(value.trim())) return Number(value.trim()) * 1000;
  const at = Date.parse(value);
  return Number.isFinite(at) ? Math.max(0, at - now) : null;
}

function asObject(v: unknown, what: string): Record<string, unknown> {
  if (typeof v !== 'object' || v === null || Array.isArray(v)) throw new StacApiError(`${what} is not a JSON object`);
  return v as Record<string, unknown>;
}

function resolve(href: string, base: string): string {
  try {
    return new URL(href, base.endsWith('/') ? base : `${base}/`).toString();
  } catch {
    throw new StacApiError(`${href} is not a valid link`);
  }
}

/** The search as GET query parameters: arrays comma-separated, objects as JSON. */
function withQuery(searchUrl: string, body: Record<string, unknown>): string {
  const url = new URL(searchUrl);
  for (const [k, v] of Object.entries(body)) {
    if (k === 'sortby' && Array.isArray(v)) {
      url.searchParams.set(
        k,
        (v as Array<{ field: string; direction: string }>)
          .map((s) => `${s.direction === 'desc' ? '-' : '+'}${s.field}`)
          .join(','),
      );
    } else if (Array.isArray(v) && v.every((x) => typeof x === 'string')) url.searchParams.set(k, v.join(','));
    else if (typeof v === 'object' && v !== null) url.searchParams.set(k, JSON.stringify(v));
    else url.searchParams.set(k, String(v));
  }
  return url.toString();
}

/** The start of a problem answer, for the error message. */
function detail(data: Buffer): string {
  const text = data.subarray(0, 200).toString('utf8').replace(/\s+/g, ' ').trim();
  return text ? `: ${text}` : '';
}
