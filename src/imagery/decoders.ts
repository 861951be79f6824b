/**
 * Faster decoders for geotiff.js: DEFLATE (and Adobe deflate) through Node's zlib instead of
 * pako, which inflates about four times faster here (PERFORMANCE.md). The predictor is still
 * undone by geotiff.js after the block is inflated.
 */
import { inflateSync } from 'node:zlib';
import { addDecoder, BaseDecoder } from 'geotiff';

class NodeDeflateDecoder extends BaseDecoder {
  override decodeBlock(buffer: ArrayBufferLike): ArrayBufferLike {
    const out = inflateSync(new Uint8Array(buffer));
    return out.buffer.slice(out.byteOffset, out.byteOffset + out.byteLength);
  }
}

let registered = false;

export function registerFastDecoders(): void {
  if (registered) return;
  registered = true;
  addDecoder([8, 32946], async () => NodeDeflateDecoder as unknown as typeof BaseDecoder, undefined, false);
}
