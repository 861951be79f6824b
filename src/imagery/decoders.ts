/**
 * Decoders registered with geotiff.js for the reads that still go through readRasters (files the
 * raw-window path does not handle, and any direct use of geotiff.js): DEFLATE (and Adobe
 * deflate) through Node's zlib instead of pako, about four times faster here (PERFORMANCE.md);
 * LZW in WebAssembly instead of geotiff.js's JavaScript decoder (~30× slower than GDAL); the
 * horizontal predictor undone in WebAssembly. Other predictors fall back to geotiff.js's own.
 */
import { addDecoder, BaseDecoder } from 'geotiff';
import { canDecode, COMPRESSION, decodeBlock, type BlockLayout } from './block-decoder.js';

interface DecoderParameters {
  tileWidth: number;
  tileHeight: number;
  predictor: number;
  bitsPerSample: number | ArrayLike<number>;
  planarConfiguration: number;
  samplesPerPixel?: number;
}

function layoutOf(p: DecoderParameters, compression: number): BlockLayout | null {
  const bits = typeof p.bitsPerSample === 'number' ? [p.bitsPerSample] : Array.from(p.bitsPerSample);
  if (!bits.length || bits.some((b) => b !== bits[0])) return null;
  const bytesPerSample = bits[0]! / 8;
  if (bytesPerSample !== 1 && bytesPerSample !== 2 && bytesPerSample !== 4) return null;
  const layout: BlockLayout = {
    compression,
    predictor: p.predictor ?? 1,
    width: p.tileWidth,
    rows: p.tileHeight,
    samples: p.planarConfiguration === 2 ? 1 : (p.samplesPerPixel ?? bits.length),
    bytesPerSample,
  };
  return canDecode(layout) ? layout : null;
}

function makeDecoder(compression: number) {
  return class WasmBlockDecoder extends BaseDecoder {
    override decodeBlock(buffer: ArrayBufferLike): ArrayBufferLike {
      // Only the decompression, as bytes (geotiff.js undoes its own predictors afterwards when
      // decode() below hands a layout it cannot take to BaseDecoder.decode).
      const p = this.parameters as unknown as DecoderParameters;
      const bits = typeof p.bitsPerSample === 'number' ? [p.bitsPerSample] : Array.from(p.bitsPerSample);
      const pixelBits = p.planarConfiguration === 2 ? bits[0]! : bits.reduce((a, b) => a + b, 0);
      const rowBytes = Math.ceil((p.tileWidth * pixelBits) / 8);
      const out = decodeBlock(new Uint8Array(buffer), { compression, predictor: 1, width: rowBytes, rows: p.tileHeight, samples: 1, bytesPerSample: 1 }, { partial: true });
      return out.slice().buffer;
    }

    override async decode(buffer: ArrayBufferLike): Promise<ArrayBufferLike> {
      const layout = layoutOf(this.parameters as unknown as DecoderParameters, compression);
      if (!layout) return super.decode(buffer);
      // A copy: geotiff.js may keep the block in its tile cache.
      return decodeBlock(new Uint8Array(buffer), layout, { partial: true }).slice().buffer;
    }
  };
}

let registered = false;

export function registerFastDecoders(): void {
  if (registered) return;
  registered = true;
  addDecoder([COMPRESSION.deflate, COMPRESSION.adobeDeflate], async () => makeDecoder(COMPRESSION.deflate) as unknown as typeof BaseDecoder, undefined, false);
  addDecoder(COMPRESSION.lzw, async () => makeDecoder(COMPRESSION.lzw) as unknown as typeof BaseDecoder, undefined, false);
}
