/**
 * Pre-signed download links (report files, batch results): HMAC-SHA256 with the service's signing
 * key over `<id>.<expires>` (Unix seconds). Anyone holding the link may download until it expires;
 * changing the id, the expiry or the signature breaks it. Ids carry their kind's prefix (`rpt_`,
 * `bat_`), so a link of one kind never opens another.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';
import { AppError } from './errors.js';

export function signDownload(key: string, id: string, expires: number): string {
  return createHmac('sha256', key).update(`${id}.${expires}`).digest('base64url');
}

/** `<baseUrl>/v1/<collection>/<id>/download?expires=…&signature=…`. */
export function signedDownloadUrl(
  baseUrl: string,
  key: string,
  collection: string,
  id: string,
  expiresAt: Date,
): string {
  const expires = Math.floor(expiresAt.getTime() / 1000);
  return `${baseUrl}/v1/${collection}/${encodeURIComponent(id)}/download?expires=${expires}&signature=${signDownload(key, id, expires)}`;
}

export type LinkCheck = 'ok' | 'tampered' | 'expired';

/** The signature is checked before the expiry, so a forged "later expiry" reads as tampered. */
export function checkDownload(
  key: string,
  id: string,
  expires: number,
  signature: string,
  now = Date.now(),
): LinkCheck {
  const want = Buffer.from(signDownload(key, id, expires));
  const got = Buffer.from(signature);
  if (want.length !== got.length || !timingSafeEqual(want, got)) return 'tampered';
  return expires * 1000 <= now ? 'expired' : 'ok';
}

/**
 * A download request's `expires` and `signature` as the query gives them: returns when the link is
 * good, else throws `invalid_signature` or `link_expired`, naming `fresh` (the request that signs a
 * new link, e.g. `GET /v1/reports/{id}`).
 */
export function assertDownloadLink(
  key: string,
  id: string,
  expires: string | undefined,
  signature: string | undefined,
  fresh: string,
): void {
  const check =
    expires !== undefined && /^\d{1,15}$/.test(expires) && signature
      ? checkDownload(key, id, Number(expires), signature)
      : 'tampered';
  if (check === 'tampered')
    throw new AppError(
      'invalid_signature',
      `The download link is not valid (its signature does not match); ask ${fresh} for a fresh one`,
    );
  if (check === 'expired')
    throw new AppError('link_expired', `The download link has expired; ${fresh} returns a freshly signed one`);
}

/** Links carry whole seconds; the stored expiry is cut to the same second so both agree. */
export function expiryFrom(now: number, ttlMs: number): Date {
  return new Date(Math.floor((now + ttlMs) / 1000) * 1000);
}
