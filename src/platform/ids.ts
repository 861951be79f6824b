import { randomFillSync } from 'node:crypto';

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

/**
 * Random bytes drawn from the CSPRNG 256 ids at a time (as crypto.randomUUID caches its own): a
 * capture over 1,000 fields emits 1,000 events, whose ids were one randomBytes call each (2 % of
 * the main thread in the subscriptions bench's profile). Each id takes 16 bytes no other id takes.
 */
const POOL = Buffer.alloc(16 * 256);
let used = POOL.length;

/** `<prefix>_<22 URL-safe random characters>` (128 bits). */
export function newId(prefix: IdPrefix): string {
  if (used === POOL.length) {
    randomFillSync(POOL);
    used = 0;
  }
  used += 16;
  return `${prefix}_${POOL.toString('base64url', used - 16, used)}`;
}
