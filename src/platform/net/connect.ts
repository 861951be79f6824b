/**
 * The connecting half of the SSRF defence (address.ts checks the addresses): DNS lookups for
 * net.connect that hand over only checked addresses, keep-alive agents pinned to one checked
 * address, and the trusted CA set. Webhook deliveries and remote imagery both connect through here.
 */
import { readFileSync } from 'node:fs';
import https from 'node:https';
import type { LookupFunction } from 'node:net';
import tls from 'node:tls';
import { BlockedAddressError, resolvePublic, type HostLookup, type ResolvedAddress } from './address.js';

/** A net.connect lookup that answers `address` whatever the name: no second lookup to rebind. */
export function pinnedLookup(address: { address: string; family: number }): LookupFunction {
  return (_host, options, cb) => {
    if ((options as { all?: boolean }).all)
      (cb as unknown as (e: null, a: Array<{ address: string; family: number }>) => void)(null, [address]);
    else cb(null, address.address, address.family);
  };
}

/**
 * A net.connect lookup that resolves with `lookup` and refuses names with any non-public
 * address; the connection then goes to what it returned (the checked address). `onBlocked`
 * words the refusal (which setting allows it).
 */
export function checkedLookup(
  lookup: HostLookup,
  onBlocked: (host: string, address: string) => Error = (host, address) => new BlockedAddressError(host, address),
): LookupFunction {
  return (hostname, options, callback) => {
    resolvePublic(hostname, false, lookup).then(
      (list) => {
        if (options.all) (callback as unknown as (e: null, a: ResolvedAddress[]) => void)(null, list);
        else callback(null, list[0]!.address, list[0]!.family);
      },
      (err: NodeJS.ErrnoException) =>
        callback(err instanceof BlockedAddressError ? onBlocked(err.host, err.address) : err, '', 0),
    );
  };
}

let defaultCa: string[] | undefined;
/** Node's bundle, the Debian/Ubuntu system store and NODE_EXTRA_CA_CERTS (passing `ca` replaces Node's default, so all three are listed). */
export function trustedCas(): string[] {
  if (defaultCa) return defaultCa;
  const cas = [...tls.rootCertificates];
  for (const file of ['/etc/ssl/certs/ca-certificates.crt', process.env.NODE_EXTRA_CA_CERTS]) {
    if (!file) continue;
    try {
      cas.push(readFileSync(file, 'utf8'));
    } catch {
      /* absent store: Node's bundle still applies */
    }
  }
  defaultCa = cas;
  return cas;
}

const contexts = new WeakMap<string[], tls.SecureContext>();
function contextFor(ca: string[]): tls.SecureContext {
  let c = contexts.get(ca);
  if (!c) {
    c = tls.createSecureContext({ ca });
    contexts.set(ca, c);
  }
  return c;
}

// Keep-alive agents per (origin, checked address, CA set): deliveries to one endpoint reuse their
// TLS connection instead of a handshake per event. The address is part of the key, so a
// connection is only ever reused for the address that passed the check.
const agents = new Map<string, https.Agent>();
const caIds = new WeakMap<string[], number>();
let nextCaId = 0;
/** A small number per CA set, by identity (cache keys). */
export function caId(ca: string[]): number {
  let id = caIds.get(ca);
  if (id === undefined) {
    id = ++nextCaId;
    caIds.set(ca, id);
  }
  return id;
}
/**
 * A keep-alive HTTPS agent that connects `url`'s origin to `address` only (a checked address),
 * verifying against `ca`, with at most `maxSockets` connections.
 */
export function pinnedAgent(
  url: URL,
  address: { address: string; family: number },
  ca: string[],
  maxSockets: number,
): https.Agent {
  // The CA set by identity: two sets of the same size (two runtimes in one process, the tests)
  // must not share connections verified against the other's roots.
  const key = `${url.origin}|${address.address}|${caId(ca)}`;
  let a = agents.get(key);
  if (!a) {
    // One secure context per CA set: passing `ca` alone makes Node parse every certificate of
    // the store again for each new TLS connection.
    // LIFO reuses the warmest connection and lets the others idle out.
    a = new https.Agent({
      keepAlive: true,
      maxSockets,
      scheduling: 'lifo',
      keepAliveMsecs: 10_000,
      lookup: pinnedLookup(address),
      secureContext: contextFor(ca),
    });
    if (agents.size > 1000) {
      for (const old of agents.values()) old.destroy();
      agents.clear();
    }
    agents.set(key, a);
  }
  return a;
}
