/** The public /v1 API with the key pasted in (sessionStorage only, sent as a header, never in a URL). */

const KEY = 'fa-dashboard-key';

export function storedKey(): string | null {
  return sessionStorage.getItem(KEY);
}
export function storeKey(key: string | null): void {
  if (key) sessionStorage.setItem(KEY, key);
  else sessionStorage.removeItem(KEY);
}

/** An RFC 9457 problem the API answered (or one made up for a network failure). */
export class Problem extends Error {
  constructor(
    readonly title: string,
    readonly detail: string,
    readonly status: number,
    readonly body: Record<string, unknown> = {},
  ) {
    super(`${title}: ${detail}`);
  }
  get code(): string | undefined {
    return typeof this.body.code === 'string' ? this.body.code : undefined;
  }
}

/** Requests in flight, on <html data-pending> (the browser tests wait for 0 before a screenshot). */
let pending = 0;
function track<T>(p: Promise<T>): Promise<T> {
  document.documentElement.dataset.pending = String(++pending);
  return p.finally(() => {
    document.documentElement.dataset.pending = String(--pending);
  });
}

export interface Page<T> {
  data: T[];
  page: number;
  per_page: number;
  total: number;
  total_pages: number;
}

export function api<T>(path: string, init: { method?: string; body?: unknown } = {}): Promise<T> {
  return track(request<T>(path, init));
}

async function request<T>(path: string, init: { method?: string; body?: unknown }): Promise<T> {
  const key = storedKey();
  const headers: Record<string, string> = { accept: 'application/json' };
  if (key) headers.authorization = `Bearer ${key}`;
  if (init.body !== undefined) headers['content-type'] = 'application/json';
  let res: Response;
  try {
    res = await fetch(`/v1${path}`, {
      method: init.method ?? 'GET',
      headers,
      body: init.body === undefined ? undefined : JSON.stringify(init.body),
    });
  } catch (err) {
    throw new Problem('The service does not answer', String((err as Error).message ?? err), 0);
  }
  if (res.status === 204) return undefined as T;
  const text = await res.text();
  let body: unknown = null;
  try {
    body = text ? JSON.parse(text) : null;
  } catch {
    /* not JSON */
  }
  if (!res.ok) {
    const p = (body ?? {}) as Record<string, unknown>;
    throw new Problem(
      typeof p.title === 'string' ? p.title : `HTTP ${res.status}`,
      typeof p.detail === 'string' ? p.detail : text.slice(0, 300) || res.statusText,
      res.status,
      p,
    );
  }
  return body as T;
}

/** A PNG (or other binary) from the API with the key, as an object URL; null when the answer has no content. */
export function apiBlobUrl(url: string): Promise<string | null> {
  return track(blobUrl(url));
}

async function blobUrl(url: string): Promise<string | null> {
  const key = storedKey();
  const res = await fetch(url, { headers: key ? { authorization: `Bearer ${key}` } : {} });
  if (res.status === 204) return null;
  if (!res.ok) {
    const p = (await res.json().catch(() => ({}))) as Record<string, unknown>;
    throw new Problem(String(p.title ?? `HTTP ${res.status}`), String(p.detail ?? res.statusText), res.status, p);
  }
  return URL.createObjectURL(await res.blob());
}

export function query(params: Record<string, string | number | boolean | undefined | null>): string {
  const q = new URLSearchParams();
  for (const [k, v] of Object.entries(params)) if (v !== undefined && v !== null && v !== '') q.set(k, String(v));
  const s = q.toString();
  return s ? `?${s}` : '';
}
