/**
 * imagery_decode_errors_total: a band window whose blocks cannot be decoded counts one error, by
 * compression, on the raw-window path; a file that decodes counts none.
 */
import { describe, expect, it } from 'vitest';
import { firstImage, openRaster } from '../../../src/imagery/raster.js';
import { memorySource } from '../../../src/imagery/raster-source.js';
import { readWindowRaw } from '../../../src/imagery/raw-window.js';
import { writeGeoTiff } from '../../../src/imagery/tiff-writer.js';
import { registry } from '../../../src/platform/metrics.js';
import { metricSum, parseMetrics } from '../../helpers/processes.js';

const errors = async (compression: string) =>
  metricSum(parseMetrics(await registry.metrics()), 'imagery_decode_errors_total', { compression });

function tiff(): Buffer {
  const data = new Uint16Array(64 * 64).map((_, i) => (i * 37) % 5000);
  return writeGeoTiff({
    width: 64,
    height: 64,
    data,
    epsg: 32632,
    originX: 500000,
    originY: 5600000,
    resolution: 10,
    tileSize: 64,
    compression: 'deflate',
  });
}

describe('imagery_decode_errors_total', () => {
  it('counts a corrupt deflate block once, and nothing for a good file', async () => {
    // every compression is exported from the start (the registry is the process's: other test
    // files may have counted errors already)
    expect(await registry.metrics()).toMatch(/\nimagery_decode_errors_total\{compression="lzw"\} \d+\n/);
    const lzw = await errors('lzw');
    const before = await errors('deflate');
    const good = tiff();
    const ok = await readWindowRaw(await firstImage(await openRaster(memorySource(good))), [0, 0, 64, 64], 0);
    expect(ok).not.toBeNull();
    expect(await errors('deflate')).toBe(before);

    const image = await firstImage(await openRaster(memorySource(good)));
    const blocks = image.structure.blocks!;
    expect(blocks.offsets.length).toBe(1);
    const bad = Buffer.from(good);
    const at = blocks.offsets[0]!;
    bad.fill(0xff, at, at + Math.min(16, blocks.counts[0]!)); // no longer a zlib stream
    const corrupt = await firstImage(await openRaster(memorySource(bad)));
    await expect(readWindowRaw(corrupt, [0, 0, 64, 64], 0)).rejects.toThrow();
    expect(await errors('deflate')).toBe(before + 1);
    expect(await errors('lzw')).toBe(lzw);
  });
});
