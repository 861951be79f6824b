/**
 * The PNG writer decoded by pngjs (an independent decoder; the integration tests decode the
 * service's PNGs with GDAL): every byte of the pixels, at sizes that are not multiples of anything.
 */
import { PNG } from 'pngjs';
import { describe, expect, it } from 'vitest';
import { encodePng } from '../../../src/imagery/png-writer.js';

describe('encodePng', () => {
  it.each([
    [1, 1],
    [3, 7],
    [256, 256],
    [101, 37],
  ])('%i × %i decodes to the same RGBA bytes', (w, h) => {
    const rgba = new Uint8Array(w * h * 4);
    for (let k = 0; k < rgba.length; k++) rgba[k] = (k * 2654435761) >>> 24;
    for (let k = 3; k < rgba.length; k += 28) rgba[k] = 0; // some transparent pixels
    const png = PNG.sync.read(encodePng(w, h, rgba));
    expect([png.width, png.height]).toEqual([w, h]);
    expect(Buffer.compare(png.data, Buffer.from(rgba))).toBe(0);
  });

  it('refuses pixels of the wrong size', () => {
    expect(() => encodePng(2, 2, new Uint8Array(15))).toThrow(/expected 16 bytes/);
  });
});
