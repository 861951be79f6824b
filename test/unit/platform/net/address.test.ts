/**
 * The outbound address check: only globally routable unicast passes, and every IPv6 form that
 * carries an IPv4 address is judged by that IPv4 address, whether the address comes as a literal
 * or as a resolver's answer for a name.
 */
import { describe, expect, it } from 'vitest';
import {
  BlockedAddressError,
  embeddedIPv4,
  isPublicAddress,
  resolvePublic,
  type HostLookup,
} from '../../../../src/platform/net/address.js';
import ipaddr from 'ipaddr.js';
import { EMBEDDED_PRIVATE, answering, teredo } from '../../../helpers/addresses.js';

describe('isPublicAddress', () => {
  it.each([
    // IPv4 special-purpose blocks
    ['0.0.0.0', 'unspecified'],
    ['0.1.2.3', '0/8'],
    ['10.1.2.3', 'private'],
    ['100.64.0.1', 'CGNAT'],
    ['100.127.255.255', 'CGNAT end'],
    ['127.0.0.1', 'loopback'],
    ['127.255.0.1', 'loopback'],
    ['169.254.169.254', 'link-local (metadata)'],
    ['172.16.0.1', 'private'],
    ['172.31.255.255', 'private'],
    ['192.0.0.8', 'IETF protocol assignments'],
    ['192.0.2.1', 'TEST-NET-1'],
    ['192.88.99.1', '6to4 relay anycast'],
    ['192.168.1.1', 'private'],
    ['198.18.0.1', 'benchmarking'],
    ['198.19.255.255', 'benchmarking'],
    ['198.51.100.7', 'TEST-NET-2'],
    ['203.0.113.9', 'TEST-NET-3'],
    ['224.0.0.1', 'multicast'],
    ['239.255.255.250', 'multicast'],
    ['240.0.0.1', 'reserved 240/4'],
    ['255.255.255.255', 'broadcast'],
    // IPv6 special-purpose blocks
    ['::', 'unspecified'],
    ['::1', 'loopback'],
    ['fe80::1', 'link-local'],
    ['fc00::1', 'ULA'],
    ['fd12:3456::1', 'ULA'],
    ['fec0::1', 'site-local'],
    ['ff02::1', 'multicast'],
    ['100::1', 'discard'],
    ['2001:db8::1', 'documentation'],
    ['3fff::1', 'documentation (RFC 9637)'],
    ['2001:2::1', 'benchmarking'],
    ['2001:10::1', 'ORCHID'],
    ['2001:20::1', 'ORCHIDv2'],
    ['2001:1::1', 'IETF protocol assignments'],
    ['5f00::1', 'segment routing'],
    ['4000::1', 'outside 2000::/3'],
    ['fe80::1%eth0', 'zoned link-local'],
    ['not-an-ip', 'a name'],
    ['', 'empty'],
    ['127.1', 'shorthand IPv4 (no resolver answers so)'],
  ])('%s (%s) is refused', (addr) => expect(isPublicAddress(addr)).toBe(false));

  it.each(EMBEDDED_PRIVATE)('%s %s is refused', (_form, addr) => expect(isPublicAddress(addr)).toBe(false));

  it.each([
    ['8.8.8.8'],
    ['1.1.1.1'],
    ['100.63.255.255'],
    ['100.128.0.1'],
    ['172.32.0.1'],
    ['198.20.0.1'],
    ['223.255.255.254'],
    ['2606:4700:4700::1111'],
    ['2a00:1450:4001:80b::200e'],
    // IPv4-carrying forms with a public IPv4 address pass like the address itself
    ['::8.8.8.8'],
    ['::ffff:8.8.8.8'],
    ['::ffff:0:8.8.8.8'],
    ['64:ff9b::8.8.8.8'],
    ['2002:808:808::1'],
    [teredo('65.54.227.120', '8.8.4.4')],
  ])('%s is public', (addr) => expect(isPublicAddress(addr)).toBe(true));

  it('finds the IPv4 addresses each form carries', () => {
    const of = (a: string) => embeddedIPv4(ipaddr.IPv6.parse(a)).map(String);
    expect(of('::127.0.0.1')).toEqual(['127.0.0.1']);
    expect(of('::ffff:0:10.1.2.3')).toEqual(['10.1.2.3']);
    expect(of('64:ff9b::c0a8:101')).toEqual(['192.168.1.1']);
    expect(of('2002:c0a8:101:5::9')).toEqual(['192.168.1.1']);
    // RFC 4380's example: server 65.54.227.120, client 192.0.2.45
    expect(of('2001:0:4136:e378:8000:63bf:3fff:fdd2')).toEqual(['65.54.227.120', '192.0.2.45']);
    expect(of('2606:4700:4700::1111')).toEqual([]);
  });
});

describe('resolvePublic', () => {
  it.each(EMBEDDED_PRIVATE)('refuses a name answered with %s (%s)', async (_form, addr) => {
    await expect(resolvePublic('cog.example', false, answering(addr))).rejects.toBeInstanceOf(BlockedAddressError);
  });

  it('refuses a name when any one of its answers is not public, and literals without a lookup', async () => {
    await expect(resolvePublic('mixed.example', false, answering('8.8.8.8', '::127.0.0.1'))).rejects.toMatchObject({
      code: 'EADDRBLOCKED',
      address: '::127.0.0.1',
    });
    const never: HostLookup = async () => {
      throw new Error('looked up');
    };
    await expect(resolvePublic('[::7f00:1]', false, never)).rejects.toThrow(
      /::7f00:1 resolves to ::7f00:1, which is not a public address/,
    );
    await expect(resolvePublic('8.8.8.8', false, never)).resolves.toEqual([{ address: '8.8.8.8', family: 4 }]);
  });

  it('lets everything through when private networks are allowed (the operator opt-in)', async () => {
    for (const [, addr] of EMBEDDED_PRIVATE)
      await expect(resolvePublic('x.example', true, answering(addr))).resolves.toHaveLength(1);
  });

  it('an empty answer is ENOTFOUND', async () => {
    await expect(resolvePublic('x.example', false, answering())).rejects.toMatchObject({ code: 'ENOTFOUND' });
  });
});
