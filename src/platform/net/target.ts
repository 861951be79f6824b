/**
 * The checking half of an outbound URL, as registration applies it (a webhook's URL, a STAC API
 * subscription's root): the URL parses, uses an allowed scheme and carries no credentials, and its
 * host resolves to addresses that are all public (address.ts) unless private networks are allowed.
 * The caller connects to one of the returned addresses (connect.ts), never looks the name up again.
 */
import { BlockedAddressError, resolvePublic, systemLookup, type HostLookup, type ResolvedAddress } from './address.js';

export type OutboundErrorKind = 'invalid_url' | 'dns' | 'blocked_address' | 'connect' | 'tls' | 'timeout' | 'network';

export class OutboundError extends Error {
  constructor(
    readonly kind: OutboundErrorKind,
    message: string,
  ) {
    super(message);
    this.name = 'OutboundError';
  }
}

export interface ResolvedTarget {
  url: URL;
  addresses: ResolvedAddress[];
}

/** The URL schemes a target may use, `https:` unless said otherwise. */
export type Schemes = readonly ('https:' | 'http:')[];

const HTTPS_ONLY: Schemes = ['https:'];

/** Parses the URL and checks its scheme and that it has no user or password; throws OutboundError. */
export function checkTargetUrl(rawUrl: string, schemes: Schemes = HTTPS_ONLY): URL {
  let url: URL;
  try {
    url = new URL(rawUrl);
  } catch {
    throw new OutboundError('invalid_url', 'is not a valid URL');
  }
  if (!(schemes as readonly string[]).includes(url.protocol))
    throw new OutboundError('invalid_url', `must use ${schemes.map((s) => `${s}//`).join(' or ')}`);
  if (url.username || url.password) throw new OutboundError('invalid_url', 'must not contain credentials');
  return url;
}

/**
 * Validates the URL (checkTargetUrl) and resolves it, every address checked (see address.ts);
 * throws OutboundError. `lookup` replaces the system resolver (tests).
 */
export async function resolveTarget(
  rawUrl: string,
  allowPrivate: boolean,
  lookup: HostLookup = systemLookup,
  schemes: Schemes = HTTPS_ONLY,
): Promise<ResolvedTarget> {
  const url = checkTargetUrl(rawUrl, schemes);
  try {
    return { url, addresses: await resolvePublic(url.hostname, allowPrivate, lookup) };
  } catch (err) {
    if (err instanceof BlockedAddressError) throw new OutboundError('blocked_address', err.message);
    const e = err as NodeJS.ErrnoException;
    throw new OutboundError('dns', `could not resolve ${url.hostname}: ${e.code ?? e.message}`);
  }
}
