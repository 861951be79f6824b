/**
 * SSRF-safe outbound HTTPS POST for webhook deliveries: resolve the host, refuse if any address is
 * not public unicast (loopback, private, link-local, unique-local, multicast, metadata, ...), then
 * connect to the address that was checked (no second lookup an attacker could rebind). Redirects
 * are not followed; the response body is read to at most 64 KiB and discarded; the whole exchange
 * (connect to last byte) must finish within the timeout.
 */
import https from 'node:https';
import { caId, pinnedAgent, trustedCas } from '../platform/net/connect.js';
import {
  checkTargetUrl as checkUrl,
  OutboundError,
  resolveTarget,
  type OutboundErrorKind,
  type ResolvedTarget,
} from '../platform/net/target.js';

export { OutboundError, resolveTarget, trustedCas, type OutboundErrorKind, type ResolvedTarget };

/** Connections per endpoint (origin and checked address). */
export const CONNECTIONS_PER_ENDPOINT = 16;

export interface PostResult {
  ok: boolean;
  status?: number;
  error?: { kind: OutboundErrorKind; message: string };
  latencyMs: number;
  /** The address actually connected to. */
  address?: string;
}

export interface OutboundOptions {
  timeoutMs?: number;
  allowPrivateNetworks?: boolean;
  maxResponseBytes?: number;
  /** Trusted CAs; default: Node's bundled roots + the system store + NODE_EXTRA_CA_CERTS. */
  ca?: string[];
  /** Reuse a checked resolution of the host for RESOLVE_TTL_MS (deliveries; not registration). */
  cacheResolution?: boolean;
}

/**
 * Checked resolutions, kept for a short time: deliveries to one endpoint do not look its name up
 * and check its addresses again on every attempt. Safe because the connection always goes to the
 * address that was checked (a name that changes to a private address meanwhile is not followed),
 * and only successful checks are kept. Keyed by the URL's host and whether private networks are
 * allowed.
 */
const resolved = new Map<string, { at: number; addresses: Array<{ address: string; family: number }> }>();
export const RESOLVE_TTL_MS = 30_000;

/** Forgets every cached resolution (tests). */
export function clearResolveCache(): void {
  resolved.clear();
  targets.clear();
}

/**
 * resolveTarget with the cache above. Registration and URL changes use resolveTarget itself, so
 * that a new URL is always looked up afresh.
 */
export async function resolveTargetCached(
  rawUrl: string,
  allowPrivate: boolean,
  now = Date.now(),
): Promise<ResolvedTarget & { at: number }> {
  const url = checkUrl(rawUrl);
  const key = `${allowPrivate ? 1 : 0}|${url.hostname}`;
  const hit = resolved.get(key);
  if (hit && now - hit.at < RESOLVE_TTL_MS) return { url, addresses: hit.addresses, at: hit.at };
  const target = await resolveTarget(rawUrl, allowPrivate);
  if (resolved.size >= 10_000) resolved.clear();
  resolved.set(key, { at: now, addresses: target.addresses });
  return { ...target, at: now };
}

function classify(err: NodeJS.ErrnoException): { kind: OutboundErrorKind; message: string } {
  const code = err.code ?? '';
  if (
    code.startsWith('ERR_TLS') ||
    code.includes('CERT') ||
    code === 'EPROTO' ||
    /certificate|SSL|TLS/i.test(err.message)
  ) {
    return { kind: 'tls', message: `TLS handshake failed: ${code || err.message}` };
  }
  if (['ECONNREFUSED', 'EHOSTUNREACH', 'ENETUNREACH', 'ECONNRESET'].includes(code))
    return { kind: 'connect', message: `connection failed: ${code}` };
  return { kind: 'network', message: err.message };
}

/**
 * What a delivery to one URL needs on every request, computed once per checked resolution: the
 * URL's checks, the chosen (checked) address, its agent and the request options. Dropped with the
 * resolution it was built from (`at` is the resolution's time, so RESOLVE_TTL_MS counts from the
 * DNS answer, not from this cache's fill), so a changed DNS answer is checked again as before.
 */
interface Target {
  /** When the addresses were resolved. */
  at: number;
  address: string;
  agent: https.Agent;
  options: https.RequestOptions;
}
/** Keyed by CA set (its identity), private-network switch and URL. */
const targets = new Map<string, Target>();

async function targetFor(rawUrl: string, allowPrivate: boolean, ca: string[], cache: boolean): Promise<Target> {
  const now = Date.now();
  const key = `${caId(ca)}|${allowPrivate ? 1 : 0}|${rawUrl}`;
  if (cache) {
    const hit = targets.get(key);
    if (hit && now - hit.at < RESOLVE_TTL_MS) return hit;
  }
  const target = cache
    ? await resolveTargetCached(rawUrl, allowPrivate, now)
    : { ...(await resolveTarget(rawUrl, allowPrivate)), at: now };
  const chosen = target.addresses[0]!;
  const agent = pinnedAgent(target.url, chosen, ca, CONNECTIONS_PER_ENDPOINT);
  const t: Target = {
    at: target.at,
    address: chosen.address,
    agent,
    options: {
      method: 'POST',
      protocol: 'https:',
      hostname: target.url.hostname.replace(/^\[|\]$/g, ''),
      port: target.url.port || 443,
      path: target.url.pathname + target.url.search,
      agent,
    },
  };
  if (cache) {
    if (targets.size >= 10_000) targets.clear();
    targets.set(key, t);
  }
  return t;
}

/**
 * `body`: the exact bytes, or a string sent as its UTF-8 bytes. A string goes out in the same
 * write (one TLS record) as the request head; a Buffer makes Node write the two separately.
 */
export async function postJson(
  rawUrl: string,
  body: Buffer | string,
  headers: Record<string, string>,
  opts: OutboundOptions = {},
): Promise<PostResult> {
  const timeoutMs = opts.timeoutMs ?? 5000;
  const maxBytes = opts.maxResponseBytes ?? 65_536;
  const started = performance.now();
  let target: Target;
  try {
    target = await targetFor(
      rawUrl,
      opts.allowPrivateNetworks ?? false,
      opts.ca ?? trustedCas(),
      opts.cacheResolution ?? false,
    );
  } catch (err) {
    const e = err as OutboundError;
    return {
      ok: false,
      error: { kind: e.kind ?? 'network', message: e.message },
      latencyMs: performance.now() - started,
    };
  }
  const address = target.address;
  return new Promise<PostResult>((resolve) => {
    let settled = false;
    let timer: NodeJS.Timeout | undefined;
    let req: ReturnType<typeof https.request>;
    const finish = (r: Omit<PostResult, 'latencyMs' | 'address'>) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve({ ...r, latencyMs: performance.now() - started, address });
    };
    // A kept-alive connection the receiver closed just as it was reused fails with a reset before
    // any answer (the receiver closed it idle, without reading the request): sent once more on a
    // new connection, within the same timeout, instead of failing the attempt and waiting for the
    // first retry (a minute). Only then: a reset on a new connection, or after an answer began,
    // is the attempt's outcome.
    const send = (again: boolean) => {
      let answered = false;
      req = https.request(
        {
          ...target.options,
          headers: {
            ...headers,
            'content-length': String(typeof body === 'string' ? Buffer.byteLength(body, 'utf8') : body.length),
            'user-agent': USER_AGENT,
          },
        },
        (res) => {
          answered = true;
          let read = 0;
          res.on('data', (chunk: Buffer) => {
            read += chunk.length;
            if (read > maxBytes) res.destroy(); // enough: the body is discarded anyway
          });
          const done = () => {
            const status = res.statusCode ?? 0;
            finish({ ok: status >= 200 && status < 300, status });
          };
          res.on('end', done);
          res.on('close', done);
          res.on('error', done);
        },
      );
      const sent = req;
      sent.on('error', (err) => {
        const code = (err as NodeJS.ErrnoException).code;
        if (again && !answered && !settled && sent.reusedSocket && (code === 'ECONNRESET' || code === 'EPIPE')) {
          send(false);
          return;
        }
        finish({ ok: false, error: classify(err as NodeJS.ErrnoException) });
      });
      if (typeof body === 'string') sent.end(body, 'utf8');
      else sent.end(body);
    };
    timer = setTimeout(() => {
      finish({ ok: false, error: { kind: 'timeout', message: `no complete response within ${timeoutMs} ms` } });
      req.destroy();
    }, timeoutMs);
    send(true);
  });
}

const USER_AGENT = 'field-analysis-webhooks/1';
