import { randomBytes } from 'node:crypto';

export type IdPrefix =
  | 'acc'
  | 'key'
  | 'fld'
  | 'img'
  | 'rpt'
  | 'wh'
  | 'evt'
  | 'dlv'
  | 'alr'
  | 'cix'
  | 'job'
  | 'isub'
  | 'upl'
  | 'bat';

/** `<prefix>_<22 URL-safe random characters>` (128 bits). */
export function newId(prefix: IdPrefix): string {
  return `${prefix}_${randomBytes(16).toString('base64url')}`;
}
