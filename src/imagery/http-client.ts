/**
 * The HTTP client of COG reads (http-source.ts): range requests through node:http/https with
 * - a deadline on every request (IMAGERY_TIMEOUT_MS, headers and body: a server that stalls
 *   mid-body fails the read instead of holding a compute thread);
 * - the SSRF defence the webhooks have: the host's addresses are checked and the connection goes
 *   to the address that was checked (loopback, private, link-local, metadata … refused unless
 *   IMAGERY_ALLOW_PRIVATE_NETWORKS); redirects are not followed (a 3xx fails the read), since a
 *   redirect could lead anywhere;
 * - a count of the bytes received (imagery_read_bytes_total{source="http"}).
 */
import http, { type IncomingMessage } from 'node:http';
import https from 'node:https';
import ipaddr from 'ipaddr.js';
import { BaseClient, BaseResponse } from 'geotiff';
import { imageryAllowPrivateNetworks, imageryTimeoutMs } from '../platform/config.js';
import { BlockedAddressError, isPublicAddress, systemLookup, type HostLookup } from '../platform/net/address.js';
import { checkedLookup } from '../platform/net/connect.js';
import { signerFromConfig, type HrefSigner } from './href-signing.js';
import { recordRead } from './metrics.js';

const blocked = (host: string, address: string) =>
  new BlockedAddressError(host, address, ' (IMAGERY_ALLOW_PRIVATE_NETWORKS)');

/** Throws when the URL's host is an address literal that is not public (literals skip the lookup). */
export function checkImageryUrl(url: URL, allowPrivate: boolean): void {
  if (url.protocol !== 'http:' && url.protocol !== 'https:')
    throw new Error(`${url.protocol} URLs are not read; use http(s)`);
  const host = url.hostname.replace(/^\[|\]$/g, '');
  if (!allowPrivate && ipaddr.isValid(host) && !isPublicAddress(host)) throw blocked(host, host);
}

/** Bodies up to this declared length (a batch of blocks is ~2 MiB) are read into one buffer allocated up front. */
const MAX_PREALLOCATED = 16 * 1_048_576;

class NodeResponse extends BaseResponse {
  constructor(
    private readonly res: IncomingMessage,
    private readonly body: ArrayBuffer,
  ) {
    super();
  }

  override get status(): number {
    return this.res.statusCode ?? 0;
  }

  override getHeader(name: string): string | undefined {
    const v = this.res.headers[name.toLowerCase()];
    return Array.isArray(v) ? v.join(', ') : v;
  }

  override async getData(): Promise<ArrayBuffer> {
    recordRead('http', this.body.byteLength);
    return this.body;
  }
}

export class TimedFetchClient extends BaseClient {
  constructor(
    url: string,
    private readonly timeoutMs = imageryTimeoutMs(),
    private readonly allowPrivate = imageryAllowPrivateNetworks(),
    /** Replaces the system resolver (tests). */
    private readonly lookup: HostLookup = systemLookup,
    /** Signs the URL before each request (href-signing.ts; IMAGERY_HREF_SIGNER). */
    private readonly signer: HrefSigner = signerFromConfig(timeoutMs),
  ) {
    super(url);
  }

  override async request(
    options: { headers?: Record<string, string>; signal?: AbortSignal } = {},
  ): Promise<BaseResponse> {
    const deadline = AbortSignal.timeout(this.timeoutMs);
    const signal = options.signal ? AbortSignal.any([options.signal, deadline]) : deadline;
    const url = await this.signer.sign(new URL(this.url), signal);
    checkImageryUrl(url, this.allowPrivate);
    const mod = url.protocol === 'https:' ? https : http;
    try {
      const res = await new Promise<IncomingMessage>((resolve, reject) => {
        const req = mod.request(
          url,
          {
            headers: options.headers,
            signal,
            ...(this.allowPrivate ? {} : { lookup: checkedLookup(this.lookup, blocked) }),
          },
          resolve,
        );
        req.on('error', reject);
        req.end();
      });
      // The whole body is read under the same deadline, copied once into a buffer of its own
      // (its declared length when there is one, else the chunks joined).
      const declared = Number(res.headers['content-length']);
      if (Number.isSafeInteger(declared) && declared >= 0 && declared <= MAX_PREALLOCATED) {
        const body = new Uint8Array(declared);
        let at = 0;
        const rest: Buffer[] = [];
        for await (const c of res as AsyncIterable<Buffer>) {
          if (!rest.length && at + c.length <= declared) {
            body.set(c, at);
            at += c.length;
          } else rest.push(c);
        }
        if (!rest.length) return new NodeResponse(res, at === declared ? body.buffer : body.buffer.slice(0, at));
        const b = Buffer.concat([body.subarray(0, at), ...rest]);
        return new NodeResponse(res, b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer);
      }
      const chunks: Buffer[] = [];
      for await (const c of res) chunks.push(c as Buffer);
      const b = Buffer.concat(chunks);
      return new NodeResponse(res, b.buffer.slice(b.byteOffset, b.byteOffset + b.byteLength) as ArrayBuffer);
    } catch (err) {
      if (deadline.aborted)
        throw new Error(`fetch failed: no answer from ${url.host} within ${this.timeoutMs} ms (IMAGERY_TIMEOUT_MS)`);
      throw err;
    }
  }
}
