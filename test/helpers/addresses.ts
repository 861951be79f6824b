/**
 * Hostile outbound addresses for the SSRF tests: every IPv6 form that carries a non-public IPv4
 * address (loopback or the cloud metadata address), and a resolver that answers with given
 * addresses (no DNS server can be pointed at here: dns.lookup reads the system's configuration).
 */
import ipaddr from 'ipaddr.js';
import type { HostLookup } from '../../src/platform/net/address.js';

/** Teredo address with the given server and client IPv4 (the client stored inverted, RFC 4380). */
export function teredo(server: string, client: string): string {
  const s = ipaddr.IPv4.parse(server).octets;
  const c = ipaddr.IPv4.parse(client).octets.map((o) => ~o & 0xff);
  const h = (a: number, b: number) => ((a << 8) | b).toString(16);
  return `2001:0:${h(s[0]!, s[1]!)}:${h(s[2]!, s[3]!)}:8000:63bf:${h(c[0]!, c[1]!)}:${h(c[2]!, c[3]!)}`;
}

/** [form, address]: none of these may be connected to unless private networks are allowed. */
export const EMBEDDED_PRIVATE: Array<[string, string]> = [
  ['IPv4-compatible ::/96', '::127.0.0.1'],
  ['IPv4-compatible, hex', '::7f00:1'],
  ['IPv4-mapped ::ffff:0:0/96', '::ffff:127.0.0.1'],
  ['IPv4-translated ::ffff:0:0:0/96', '::ffff:0:127.0.0.1'],
  ['NAT64 64:ff9b::/96', '64:ff9b::127.0.0.1'],
  ['NAT64 to the metadata address', '64:ff9b::a9fe:a9fe'],
  ['6to4 2002::/16', '2002:7f00:1::1'],
  ['6to4 to the metadata address', '2002:a9fe:a9fe::'],
  ['Teredo, loopback client', teredo('65.54.227.120', '127.0.0.1')],
  ['Teredo, private server', teredo('10.0.0.1', '8.8.8.8')],
  ['local-use NAT64 64:ff9b:1::/48', '64:ff9b:1::808:808'],
];

/** A resolver that answers every name with these addresses. */
export const answering =
  (...addresses: string[]): HostLookup =>
  async () =>
    addresses.map((address) => ({ address, family: address.includes(':') ? 6 : 4 }));
