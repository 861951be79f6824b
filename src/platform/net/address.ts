/**
 * Which addresses outbound requests (webhook deliveries, remote imagery) may connect to: only
 * globally routable unicast. An allow-list, not a deny-list: IPv4 must be unicast for ipaddr.js
 * AND outside our own list of special-purpose blocks (IANA's registry, so that a range ipaddr.js
 * does not know is still refused); IPv6 must lie in 2000::/3 (the only block IANA allocates for
 * global unicast) and be unicast for ipaddr.js. Every IPv6 form that carries an IPv4 address is
 * judged by that IPv4 address, since that is where the packets end up:
 *   ::a.b.c.d (IPv4-compatible, ::/96), ::ffff:a.b.c.d (mapped), ::ffff:0:a.b.c.d (translated,
 *   RFC 6145), 64:ff9b::a.b.c.d (NAT64, RFC 6052), 2002:aabb:ccdd:: (6to4, RFC 3056) and
 *   2001:0:ssss:ssss:…:~cccc:~cccc (Teredo, RFC 4380: server and XOR-ed client, both checked).
 * 64:ff9b:1::/48 (RFC 8215, local-use NAT64) is not globally routable and its IPv4 position
 * depends on the operator's prefix length: refused.
 */
import { lookup as dnsLookup } from 'node:dns/promises';
import { isIP } from 'node:net';
import ipaddr from 'ipaddr.js';

export interface ResolvedAddress {
  address: string;
  family: number;
}

/** IPv4 blocks that are not globally routable unicast (IANA IPv4 Special-Purpose Address Registry, multicast, class E). */
const IPV4_SPECIAL = [
  '0.0.0.0/8',
  '10.0.0.0/8',
  '100.64.0.0/10',
  '127.0.0.0/8',
  '169.254.0.0/16',
  '172.16.0.0/12',
  '192.0.0.0/24',
  '192.0.2.0/24',
  '192.31.196.0/24',
  '192.52.193.0/24',
  '192.88.99.0/24',
  '192.168.0.0/16',
  '192.175.48.0/24',
  '198.18.0.0/15',
  '198.51.100.0/24',
  '203.0.113.0/24',
  '224.0.0.0/4',
  '240.0.0.0/4',
].map((c) => ipaddr.IPv4.parseCIDR(c));

const GLOBAL_UNICAST_V6 = ipaddr.IPv6.parseCIDR('2000::/3');
const LOCAL_NAT64 = ipaddr.IPv6.parseCIDR('64:ff9b:1::/48');

function publicV4(ip: ipaddr.IPv4): boolean {
  return ip.range() === 'unicast' && !IPV4_SPECIAL.some((cidr) => ip.match(cidr));
}

const v4 = (hi: number, lo: number) => new ipaddr.IPv4([hi >> 8, hi & 0xff, lo >> 8, lo & 0xff]);

/** The IPv4 addresses an IPv6 address carries (empty when it carries none). */
export function embeddedIPv4(ip: ipaddr.IPv6): ipaddr.IPv4[] {
  const p = ip.parts;
  const zeros = (from: number, to: number) => p.slice(from, to).every((x) => x === 0);
  // ::/96, ::ffff:0:0/96, ::ffff:0:0:0/96
  if (zeros(0, 5) && (p[5] === 0 || p[5] === 0xffff)) return [v4(p[6]!, p[7]!)];
  if (zeros(0, 4) && p[4] === 0xffff && p[5] === 0) return [v4(p[6]!, p[7]!)];
  // 64:ff9b::/96
  if (p[0] === 0x64 && p[1] === 0xff9b && zeros(2, 6)) return [v4(p[6]!, p[7]!)];
  // 2002::/16: bits 16–48
  if (p[0] === 0x2002) return [v4(p[1]!, p[2]!)];
  // 2001:0::/32: the Teredo server in bits 32–64, the client (inverted) in the last 32 bits
  if (p[0] === 0x2001 && p[1] === 0) return [v4(p[2]!, p[3]!), v4(~p[6]! & 0xffff, ~p[7]! & 0xffff)];
  return [];
}

/**
 * The address in the WHATWG URL parser's canonical form (the form URL hosts arrive in), or null
 * when it is not an IP address. ipaddr.js alone reads "::127.0.0.1" (how glibc prints ::7f00:1)
 * as ::ffff:127.0.0.1; canonical "::7f00:1" it reads right.
 */
function canonicalIp(address: string): string | null {
  if (!isIP(address)) return null;
  try {
    const host = new URL(`http://${address.includes(':') ? `[${address}]` : address}/`).hostname.replace(
      /^\[|\]$/g,
      '',
    );
    return isIP(host) ? host : null;
  } catch {
    return null; // a zone id (fe80::1%eth0) is no URL host, and never public anyway
  }
}

/** True only for globally routable unicast addresses (see the header); false for anything unparsable. */
export function isPublicAddress(address: string): boolean {
  const canonical = canonicalIp(address);
  if (canonical === null || !ipaddr.isValid(canonical)) return false;
  const ip = ipaddr.parse(canonical);
  if (ip.kind() === 'ipv4') return publicV4(ip as ipaddr.IPv4);
  const v6 = ip as ipaddr.IPv6;
  if (v6.match(LOCAL_NAT64)) return false;
  const carried = embeddedIPv4(v6);
  if (carried.length) return carried.every(publicV4);
  return v6.match(GLOBAL_UNICAST_V6) && v6.range() === 'unicast';
}

/** A host (name or address literal) with an address that is not public; `code` EADDRBLOCKED. */
export class BlockedAddressError extends Error {
  readonly code = 'EADDRBLOCKED';
  constructor(
    readonly host: string,
    readonly address: string,
    /** What an operator can do about it, appended to the message. */
    hint = '',
  ) {
    super(`${host} resolves to ${address}, which is not a public address${hint}`);
    this.name = 'BlockedAddressError';
  }
}

/** Every address of a host name, in the resolver's order (dns.lookup: /etc/hosts, then DNS). */
export type HostLookup = (host: string) => Promise<ResolvedAddress[]>;

export const systemLookup: HostLookup = (host) => dnsLookup(host, { all: true, verbatim: true });

/**
 * The addresses to connect to for `host` (a name, or an address literal with or without
 * brackets), every one of them checked unless private networks are allowed: one non-public answer
 * refuses the host (BlockedAddressError), so a name cannot mix a public and a private address.
 * Lookup failures are thrown as the resolver threw them; no answer is ENOTFOUND.
 */
export async function resolvePublic(
  host: string,
  allowPrivate: boolean,
  lookup: HostLookup = systemLookup,
): Promise<ResolvedAddress[]> {
  const bare = host.replace(/^\[|\]$/g, '');
  const addresses = ipaddr.isValid(bare) ? [{ address: bare, family: bare.includes(':') ? 6 : 4 }] : await lookup(bare);
  if (!addresses.length) throw Object.assign(new Error(`${bare} has no addresses`), { code: 'ENOTFOUND' });
  if (!allowPrivate) {
    const bad = addresses.find((a) => !isPublicAddress(a.address));
    if (bad) throw new BlockedAddressError(bare, bad.address);
  }
  return addresses;
}
