/**
 * Pre-signed download links: HMAC-SHA256 with the service's signing key over `<report id>.<expires>`
 * (Unix seconds). Anyone holding the link may download until it expires; changing the id, the
 * expiry or the signature breaks it.
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

export function signDownload(key: string, reportId: string, expires: number): string {
  return createHmac('sha256', key).update(`${reportId}.${expires}`).digest('base64url');
}

export function downloadUrl(baseUrl: string, key: string, reportId: string, expiresAt: Date): string {
  const expires = Math.floor(expiresAt.getTime() / 1000);
  return `${baseUrl}/v1/reports/${encodeURIComponent(reportId)}/download?expires=${expires}&signature=${signDownload(key, reportId, expires)}`;
}

export type LinkCheck = 'ok' | 'tampered' | 'expired';

/** The signature is checked before the expiry, so a forged "later expiry" reads as tampered. */
export function checkDownload(
  key: string,
  reportId: string,
  expires: number,
  signature: string,
  now = Date.now(),
): LinkCheck {
  const want = Buffer.from(signDownload(key, reportId, expires));
  const got = Buffer.from(signature);
  if (want.length !== got.length || !timingSafeEqual(want, got)) return 'tampered';
  return expires * 1000 <= now ? 'expired' : 'ok';
}
