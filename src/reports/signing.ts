/** Report download links: the platform's signed links (platform/signed-links.ts) under /v1/reports. */
import { signedDownloadUrl } from '../platform/signed-links.js';

export { checkDownload, signDownload, type LinkCheck } from '../platform/signed-links.js';

export function downloadUrl(baseUrl: string, key: string, reportId: string, expiresAt: Date): string {
  return signedDownloadUrl(baseUrl, key, 'reports', reportId, expiresAt);
}
