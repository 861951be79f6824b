/**
 * Signing of remote imagery URLs at read time: some catalogues publish asset hrefs that can only be
 * read with a short-lived token (Microsoft Planetary Computer: Azure Blob Storage with a SAS token
 * that expires within the hour). A token taken at registration would be stale by the time a field's
 * index is computed weeks later, so the href is stored unsigned and signed at each read, in the
 * thread that reads (http-client.ts), with tokens cached until shortly before they expire.
 *
 * The hook: an HrefSigner says which URLs it signs and returns the URL to request. Built in:
 * - `none` (the default): URLs are read as stored;
 * - `planetary-computer`: for hosts ending in IMAGERY_HREF_SIGNER_HOSTS (`.blob.core.windows.net`),
 *   `GET {IMAGERY_HREF_SIGNER_URL}/{storage account}/{container}` answers
 *   `{"token": "st=…&sig=…", "msft:expiry": "2026-…Z"}` and the token becomes the URL's query.
 * Another provider is one more implementation of the interface, chosen in `signerFromConfig`
 * (docs/operations.md, "Imagery subscriptions").
 */
import { imageryHrefSigner } from '../platform/config.js';

export interface HrefSigner {
  /** The URL to request for `url` (the same URL when it is not one this signer signs). */
  sign(url: URL, signal?: AbortSignal): Promise<URL>;
}

export const noSigning: HrefSigner = { sign: async (url) => url };

/** A token is used until this long before it expires, then fetched again. */
const REFRESH_BEFORE_MS = 5 * 60_000;
/** A token that says nothing of its expiry is kept this long. */
const DEFAULT_LIFETIME_MS = 30 * 60_000;

export class SasTokenSigner implements HrefSigner {
  private readonly tokens = new Map<string, Promise<{ token: string; until: number }>>();

  constructor(
    private readonly endpoint: string,
    private readonly hosts: string[],
    private readonly timeoutMs: number,
    private readonly now: () => number = Date.now,
  ) {}

  async sign(url: URL, signal?: AbortSignal): Promise<URL> {
    const host = url.hostname.toLowerCase();
    if (!this.hosts.some((h) => host === h.replace(/^\./, '') || host.endsWith(h.startsWith('.') ? h : `.${h}`)))
      return url;
    const account = host.split('.')[0]!;
    const container = url.pathname.split('/')[1] ?? '';
    if (!container) return url;
    const key = `${account}/${container}`;
    let entry = this.tokens.get(key);
    const held = entry && (await entry.catch(() => undefined));
    if (!held || held.until - REFRESH_BEFORE_MS <= this.now()) {
      entry = this.fetchToken(account, container, signal);
      this.tokens.set(key, entry);
      // A failed fetch is not kept: the next read asks again.
      entry.catch(() => this.tokens.get(key) === entry && this.tokens.delete(key));
    }
    const { token } = await entry!;
    const signed = new URL(url);
    signed.search = token.replace(/^\?/, '');
    return signed;
  }

  private async fetchToken(
    account: string,
    container: string,
    signal?: AbortSignal,
  ): Promise<{ token: string; until: number }> {
    const at = `${this.endpoint.replace(/\/$/, '')}/${encodeURIComponent(account)}/${encodeURIComponent(container)}`;
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const res = await fetch(at, { signal: signal ? AbortSignal.any([signal, deadline]) : deadline }).catch((err) => {
      throw new Error(`href signing: no token from ${at}: ${(err as Error).message}`);
    });
    if (!res.ok) throw new Error(`href signing: the token endpoint ${at} answered HTTP ${res.status}`);
    const body = (await res.json().catch(() => null)) as { token?: unknown; 'msft:expiry'?: unknown } | null;
    if (typeof body?.token !== 'string' || !body.token)
      throw new Error(`href signing: the token endpoint ${at} answered no "token"`);
    const expiry = typeof body['msft:expiry'] === 'string' ? Date.parse(body['msft:expiry']) : NaN;
    return { token: body.token, until: Number.isFinite(expiry) ? expiry : this.now() + DEFAULT_LIFETIME_MS };
  }
}

let configured: HrefSigner | undefined;

/** The signer IMAGERY_HREF_SIGNER names (read once per thread, from the environment). */
export function signerFromConfig(timeoutMs: number): HrefSigner {
  if (configured) return configured;
  const c = imageryHrefSigner();
  configured = c.kind === 'planetary-computer' ? new SasTokenSigner(c.url, c.hosts, timeoutMs) : noSigning;
  return configured;
}
