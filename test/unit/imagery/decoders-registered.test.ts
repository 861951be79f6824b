/**
 * The decoders the compute threads register with geotiff.js (src/imagery/decoders.ts), read through
 * geotiff.js's own readRasters (the path of files the raw-window reader does not take), against the
 * pixels written. Blocks under 4 KiB matter: zlib hands their bytes back inside Node's shared
 * Buffer pool, and a decoder that returned that pool instead of the block's own bytes gave every
 * pixel of an 80 × 48 uint8 DEFLATE tile wrong.
 */
import { describe, expect, it } from 'vitest';
import { registerFastDecoders } from '../../../src/imagery/decoders.js';
import { firstImage, openRaster } from '../../../src/imagery/raster.js';
import { memorySource } from '../../../src/imagery/raster-source.js';
import { writeGeoTiff, type TiffCompression } from '../../../src/imagery/tiff-writer.js';

registerFastDecoders();

/** Odd sizes: partial edge tiles on both axes. */
const GRID = { width: 203, height: 157, epsg: 32632, originX: 500000, originY: 5600000, resolution: 10 };

function samplesOf(n: number, bits: 8 | 16, seed: number): Uint8Array | Uint16Array {
  const out = bits === 8 ? new Uint8Array(n) : new Uint16Array(n);
  let s = seed;
  for (let i = 0; i < n; i++) {
    s = (s * 1103515245 + 12345) >>> 0;
    out[i] = (s >>> 8) % (bits === 8 ? 256 : 65536);
  }
  return out;
}

describe('registered decoders through readRasters', () => {
  const cases: Array<[TiffCompression, boolean, 8 | 16, number, number]> = [];
  for (const c of ['deflate', 'lzw'] as const)
    for (const predictor of [false, true])
      for (const bits of [8, 16] as const)
        for (const [tw, th] of [
          [80, 48], // 3,840 bytes a uint8 tile: inside the pool
          [16, 16],
          [256, 64], // 16 KiB and more: a buffer of its own
        ] as const)
          cases.push([c, predictor, bits, tw, th]);
  it.each(cases)(
    '%s, predictor %s, %i-bit, %ix%i tiles: the pixels written',
    async (compression, predictor, bits, tw, th) => {
      const data = samplesOf(GRID.width * GRID.height, bits, GRID.width + tw + bits);
      const buf = writeGeoTiff({ ...GRID, data, tileSize: tw, tileHeight: th, predictor, compression });
      const { image } = await firstImage(await openRaster(memorySource(buf)));
      const [got] = (await image.readRasters({ samples: [0], interleave: false })) as unknown as ArrayLike<number>[];
      let bad = -1;
      for (let i = 0; i < data.length && bad < 0; i++) if (got![i] !== data[i]) bad = i;
      expect(bad, bad >= 0 ? `pixel ${bad}: ${got![bad]} instead of ${data[bad]}` : '').toBe(-1);
    },
  );
});
