/**
 * Delivery signatures and secrets at rest.
 *
 * Two signatures ride on every delivery:
 * - the spec's `X-Service-Signature`: lowercase hex HMAC-SHA256 of the raw body, keyed with the
 *   secret string as given (its UTF-8 bytes);
 * - Standard Webhooks (`webhook-id`, `webhook-timestamp`, `webhook-signature: v1,<base64>`), the HMAC
 *   of `${id}.${timestamp}.${body}` so that receivers can refuse replays with the standard
 *   libraries. Those libraries expect secrets of the form `whsec_<base64 key>`: for such a secret
 *   the key is the decoded bytes; for any other secret, its UTF-8 bytes.
 * Secrets the service generates are `whsec_` + 32 random bytes, so both forms work everywhere.
 */
import { createCipheriv, createDecipheriv, createHash, createHmac, randomBytes, timingSafeEqual } from 'node:crypto';

export function generateSecret(): string {
  return `whsec_${randomBytes(32).toString('base64')}`;
}

export function serviceSignature(secret: string, rawBody: Buffer | string): string {
  return createHmac('sha256', secret).update(rawBody).digest('hex');
}

function standardKey(secret: string): Buffer {
  return secret.startsWith('whsec_') ? Buffer.from(secret.slice(6), 'base64') : Buffer.from(secret, 'utf8');
}

export function standardSignature(secret: string, id: string, timestamp: number, rawBody: Buffer | string): string {
  const mac = createHmac('sha256', standardKey(secret)).update(`${id}.${timestamp}.`).update(rawBody).digest('base64');
  return `v1,${mac}`;
}

export interface SignedHeaders {
  'content-type': 'application/json';
  'x-service-event': string;
  'x-service-signature': string;
  'x-service-timestamp': string;
  'x-service-delivery': string;
  'webhook-id': string;
  'webhook-timestamp': string;
  'webhook-signature': string;
}

/** `rawBody`: the bytes sent, or a string sent as its UTF-8 bytes (the same bytes are signed). */
export function signDelivery(opts: {
  secret: string;
  event: string;
  deliveryId: string;
  rawBody: Buffer | string;
  now?: Date;
}): SignedHeaders {
  const ts = Math.floor((opts.now ?? new Date()).getTime() / 1000);
  return {
    'content-type': 'application/json',
    'x-service-event': opts.event,
    'x-service-signature': serviceSignature(opts.secret, opts.rawBody),
    'x-service-timestamp': String(ts),
    'x-service-delivery': opts.deliveryId,
    'webhook-id': opts.deliveryId,
    'webhook-timestamp': String(ts),
    'webhook-signature': standardSignature(opts.secret, opts.deliveryId, ts, opts.rawBody),
  };
}

/** What a receiver does: recompute over the raw bytes, compare in constant time. */
export function verifyServiceSignature(secret: string, rawBody: Buffer | string, header: string | undefined): boolean {
  if (!header || !/^[0-9a-f]{64}$/.test(header)) return false;
  return timingSafeEqual(Buffer.from(serviceSignature(secret, rawBody), 'hex'), Buffer.from(header, 'hex'));
}

function sealingKey(material: string): Buffer {
  return createHash('sha256').update('field-analysis/webhook-secrets/v1\0').update(material).digest();
}

/**
 * AES-256-GCM with a key derived from the current secrets key (SECRETS_KEY, DATA_DIR/secrets.key,
 * or SIGNING_KEY as a last resort); format `v1.<iv>.<tag>.<ciphertext>`, unchanged, so processes
 * that share the key material read each other's values. `open` also tries the earlier keys
 * (SECRETS_KEY_PREVIOUS, and SIGNING_KEY, under which secrets were sealed before the key moved out
 * of the database); GCM's tag tells which key fits. `isCurrent` says whether a value needs re-sealing.
 */
export class SecretBox {
  private readonly key: Buffer;
  private readonly earlier: Buffer[];
  constructor(current: string, previous: readonly string[] = []) {
    this.key = sealingKey(current);
    this.earlier = previous.filter((p) => p !== current).map(sealingKey);
  }
  seal(plain: string): string {
    const iv = randomBytes(12);
    const c = createCipheriv('aes-256-gcm', this.key, iv);
    const ct = Buffer.concat([c.update(plain, 'utf8'), c.final()]);
    return ['v1', iv.toString('base64url'), c.getAuthTag().toString('base64url'), ct.toString('base64url')].join('.');
  }
  open(sealed: string): string {
    for (const key of [this.key, ...this.earlier]) {
      const plain = openWith(key, sealed);
      if (plain !== undefined) return plain;
    }
    throw new Error('the secret was sealed with a key that is neither the current secrets key nor a previous one');
  }
  isCurrent(sealed: string): boolean {
    return openWith(this.key, sealed) !== undefined;
  }
}

function openWith(key: Buffer, sealed: string): string | undefined {
  const [v, iv, tag, ct] = sealed.split('.');
  if (v !== 'v1' || !iv || !tag || ct === undefined) throw new Error('unknown secret format');
  const d = createDecipheriv('aes-256-gcm', key, Buffer.from(iv, 'base64url'));
  d.setAuthTag(Buffer.from(tag, 'base64url'));
  try {
    return Buffer.concat([d.update(Buffer.from(ct, 'base64url')), d.final()]).toString('utf8');
  } catch {
    return undefined; // the tag does not verify: another key
  }
}
