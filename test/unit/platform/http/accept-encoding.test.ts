/** Accept-Encoding negotiation (gzip bodies of the index endpoints). */
import { describe, expect, it } from 'vitest';
import { acceptsEncoding } from '../../../../src/platform/http/accept-encoding.js';

describe('acceptsEncoding', () => {
  it.each([
    ['gzip', true],
    ['gzip, deflate, br', true],
    ['br;q=1.0, gzip;q=0.8, *;q=0.1', true],
    ['GZIP', true],
    ['*', true],
    ['gzip;q=0', false],
    ['gzip; q=0.000', false],
    ['br, *;q=0', false],
    ['identity', false],
    ['', false],
    [undefined, false],
    ['x-gzipped', false],
  ] as const)('%s → %s', (header, ok) => {
    expect(acceptsEncoding(header, 'gzip')).toBe(ok);
  });
});
