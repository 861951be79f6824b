/**
 * Decoders registered with geotiff.js for the reads that still go through readRasters (files the
 * raw-window path does not handle, and any direct use of geotiff.js): DEFLATE (and Adobe
 * deflate) through Node's zlib instead of pako (readRasters on a 4096² uint16 file: 42 Mpx/s
 * instead of 32; see docs/compute-engine.md, "Reading rasters");
 * LZW in WebAssembly instead of geotiff.js's JavaScript decoder (~30× slower than GDAL); the
 * horizontal predictor undone in WebAssembly. Other predictors fall back to geotiff.js's own.
 *
 * Every codec is bounded by the block's declared size (decompression bombs, decode-limits.ts):
 * DEFLATE and LZW in block-decoder.ts; PackBits here, into a buffer of that size; JPEG and ZSTD by
 * geotiff.js's own decoders, once the JPEG frame header (its dimensions, from which geotiff.js
 * allocates) and the ZSTD frame and block headers (an upper bound of the output) have been checked.
 * LERC is refused: its decoder allocates from the data's own header and inflates without a bound.
 */
import { addDecoder, BaseDecoder, getDecoder } from 'geotiff';
import { BlockDecodeError, canDecode, COMPRESSION, decodeBlock, type BlockLayout } from './block-decoder.js';
import { checkBlockBytes, decompressionBomb, ImageryLimitError, spendDecoded } from './decode-limits.js';

interface DecoderParameters {
  tileWidth: number;
  tileHeight: number;
  predictor: number;
  bitsPerSample: number | ArrayLike<number>;
  planarConfiguration: number;
  samplesPerPixel?: number;
  JPEGTables?: Uint8Array;
}

const JPEG = 7;
const PACKBITS = 32773;
const LERC = 34887;
const ZSTD = 50000;

function bitsOf(p: DecoderParameters): number[] {
  return typeof p.bitsPerSample === 'number' ? [p.bitsPerSample] : Array.from(p.bitsPerSample);
}

/** Bytes of one decoded row of a block. */
function rowBytesOf(p: DecoderParameters): number {
  const bits = bitsOf(p);
  const pixelBits = p.planarConfiguration === 2 ? bits[0]! : bits.reduce((a, b) => a + b, 0);
  return Math.ceil((p.tileWidth * pixelBits) / 8);
}

function layoutOf(p: DecoderParameters, compression: number): BlockLayout | null {
  const bits = bitsOf(p);
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

/**
 * The bytes in an ArrayBuffer of their own, which is what geotiff.js reads from its start. Not
 * `bytes.slice().buffer`: a DEFLATE block comes from zlib as a Node Buffer, whose slice() is a
 * view, and a block under 4 KiB lies in Buffer's shared 8 KiB pool at some offset, so `.buffer`
 * was the pool and geotiff.js read other bytes (an 80 × 48 uint8 tile: every pixel wrong).
 */
function ownBuffer(bytes: Uint8Array): ArrayBuffer {
  return new Uint8Array(bytes).buffer; // the constructor copies into a buffer of its own
}

function makeDecoder(compression: number) {
  return class WasmBlockDecoder extends BaseDecoder {
    override decodeBlock(buffer: ArrayBufferLike): ArrayBufferLike {
      // Only the decompression, as bytes (geotiff.js undoes its own predictors afterwards when
      // decode() below hands a layout it cannot take to BaseDecoder.decode).
      const p = this.parameters as unknown as DecoderParameters;
      const out = decodeBlock(
        new Uint8Array(buffer),
        { compression, predictor: 1, width: rowBytesOf(p), rows: p.tileHeight, samples: 1, bytesPerSample: 1 },
        { partial: true },
      );
      return ownBuffer(out);
    }

    override async decode(buffer: ArrayBufferLike): Promise<ArrayBufferLike> {
      const layout = layoutOf(this.parameters as unknown as DecoderParameters, compression);
      if (!layout) return super.decode(buffer);
      // A copy: geotiff.js may keep the block in its tile cache.
      return ownBuffer(decodeBlock(new Uint8Array(buffer), layout, { partial: true }));
    }
  };
}

/** The declared size of the block, checked and charged before anything is decoded. */
function admit(p: DecoderParameters): number {
  const bytes = rowBytesOf(p) * p.tileHeight;
  checkBlockBytes(bytes, 'a strip or tile');
  spendDecoded(bytes);
  return bytes;
}

/** PackBits (TIFF 6.0 section 9) into a buffer of the declared size; -128 is a no-op. */
class PackBitsDecoder extends BaseDecoder {
  override decodeBlock(buffer: ArrayBufferLike): ArrayBufferLike {
    const bound = admit(this.parameters as unknown as DecoderParameters);
    const src = new Uint8Array(buffer);
    const out = new Uint8Array(bound);
    let o = 0;
    for (let i = 0; i < src.length; ) {
      const h = (src[i++]! << 24) >> 24;
      if (h === -128) continue;
      const n = h >= 0 ? h + 1 : 1 - h;
      if (o + n > bound) throw decompressionBomb('PackBits', bound);
      if (h >= 0) {
        out.set(src.subarray(i, i + n), o);
        i += n;
      } else {
        out.fill(src[i++] ?? 0, o, o + n);
      }
      o += n;
    }
    return out.buffer.slice(0, o);
  }
}

const u16be = (d: Uint8Array, i: number) => (d[i]! << 8) | d[i + 1]!;
const u32le = (d: Uint8Array, i: number) => (d[i]! | (d[i + 1]! << 8) | (d[i + 2]! << 16) | (d[i + 3]! << 24)) >>> 0;

/**
 * Every frame header (SOFn) of a JPEG stream must fit the block: geotiff.js allocates its
 * coefficient blocks from these dimensions before it reads any image data.
 */
function checkJpegFrames(d: Uint8Array, p: DecoderParameters): void {
  for (let i = 0; i + 1 < d.length; ) {
    const m = d[i + 1]!;
    if (d[i] !== 0xff || m === 0xff) {
      i++; // entropy-coded data, or a fill byte before a marker
      continue;
    }
    if (m === 0x00 || m === 0x01 || (m >= 0xd0 && m <= 0xd9)) {
      i += 2; // stuffed byte, TEM, RSTn, SOI, EOI: no length
      continue;
    }
    if (i + 3 >= d.length) return;
    if (m >= 0xc0 && m <= 0xcf && m !== 0xc4 && m !== 0xc8 && m !== 0xcc && i + 9 < d.length) {
      const height = u16be(d, i + 5);
      const width = u16be(d, i + 7);
      const n = d[i + 9]!;
      let sampling = true;
      for (let c = 0; c < n; c++) {
        const hv = d[i + 11 + 3 * c] ?? 0x11;
        if (hv >> 4 < 1 || hv >> 4 > 4 || (hv & 15) < 1 || (hv & 15) > 4) sampling = false;
      }
      if (width > p.tileWidth || height > p.tileHeight || n > 4 || !sampling) {
        throw new ImageryLimitError(
          'decompression_bomb',
          `a strip or tile's JPEG frame declares ${width} × ${height} pixels × ${n} components, more than the ${p.tileWidth} × ${p.tileHeight} block`,
        );
      }
    }
    i += 2 + u16be(d, i + 2);
  }
}

const ZSTD_BLOCK_MAX = 128 * 1024;

/**
 * An upper bound of what a Zstandard stream decodes to, from its headers alone: each frame's
 * content size when it declares one, and the sum over its blocks (raw and RLE blocks say their
 * size, a compressed block yields at most 128 KiB).
 */
function zstdBound(d: Uint8Array): number {
  let total = 0;
  for (let i = 0; i + 4 <= d.length; ) {
    const magic = u32le(d, i);
    if ((magic & 0xfffffff0) >>> 0 === 0x184d2a50) {
      i += 8 + (i + 8 <= d.length ? u32le(d, i + 4) : 0); // skippable frame
      continue;
    }
    if (magic !== 0xfd2fb528) throw new BlockDecodeError('the ZSTD data has no frame header: the data is corrupt');
    const fhd = d[i + 4] ?? 0;
    const single = (fhd >> 5) & 1;
    i += 5 + (single ? 0 : 1) + [0, 1, 2, 4][fhd & 3]!;
    const fcsBytes = [single, 2, 4, 8][fhd >> 6]!;
    let fcs = 0;
    for (let k = fcsBytes - 1; k >= 0; k--) fcs = fcs * 256 + (d[i + k] ?? 0);
    if (fcsBytes === 2) fcs += 256;
    i += fcsBytes;
    let blocks = 0;
    for (let last = 0; !last && i + 3 <= d.length; ) {
      const h = d[i]! | (d[i + 1]! << 8) | (d[i + 2]! << 16);
      last = h & 1;
      const type = (h >> 1) & 3;
      const size = h >>> 3;
      blocks += type === 2 ? ZSTD_BLOCK_MAX : size;
      i += 3 + (type === 1 ? 1 : size);
    }
    // The decoder allocates the declared content size up front, and writes what the blocks yield.
    total += Math.max(fcs, blocks);
    if ((fhd >> 2) & 1) i += 4;
  }
  return total;
}

// geotiff.js's own JPEG and ZSTD decoders, captured before ours take their place in the registry
// (getDecoder looks the registry up when called).
const originals = new Map<number, Promise<typeof BaseDecoder>>();

function checkedDecoder(compression: number, check: (data: Uint8Array, p: DecoderParameters, bytes: number) => void) {
  return async () => {
    const Original = await originals.get(compression)!;
    return class CheckedDecoder extends Original {
      constructor(parameters: DecoderParameters) {
        // JPEG tables are parsed when the decoder is made: a frame header among them counts too.
        if (compression === JPEG && parameters.JPEGTables) checkJpegFrames(parameters.JPEGTables, parameters);
        super(parameters as never);
      }

      override async decode(buffer: ArrayBufferLike): Promise<ArrayBufferLike> {
        const p = this.parameters as unknown as DecoderParameters;
        check(new Uint8Array(buffer), p, admit(p));
        return super.decode(buffer);
      }
    } as unknown as typeof BaseDecoder;
  };
}

class RefusedDecoder extends BaseDecoder {
  override decodeBlock(): ArrayBufferLike {
    throw new ImageryLimitError(
      'unsupported_compression',
      'LERC compression (34887) is not supported: its decoder allocates and inflates without a bound',
    );
  }
}

let registered = false;

export function registerFastDecoders(): void {
  if (registered) return;
  registered = true;
  for (const c of [JPEG, ZSTD]) {
    const Original = getDecoder(c, {} as never).then((d) => d.constructor as typeof BaseDecoder);
    Original.catch(() => {}); // reported when a file needs it
    originals.set(c, Original);
  }
  addDecoder(
    [COMPRESSION.deflate, COMPRESSION.adobeDeflate],
    async () => makeDecoder(COMPRESSION.deflate) as unknown as typeof BaseDecoder,
    undefined,
    false,
  );
  addDecoder(
    COMPRESSION.lzw,
    async () => makeDecoder(COMPRESSION.lzw) as unknown as typeof BaseDecoder,
    undefined,
    false,
  );
  addDecoder(PACKBITS, async () => PackBitsDecoder, undefined, false);
  addDecoder(LERC, async () => RefusedDecoder, undefined, false);
  addDecoder(
    JPEG,
    checkedDecoder(JPEG, (d, p) => checkJpegFrames(d, p)),
    async (fd) => {
      const tiled = !fd.hasTag('StripOffsets');
      return {
        tileWidth: await fd.loadValue(tiled ? 'TileWidth' : 'ImageWidth'),
        tileHeight: tiled
          ? await fd.loadValue('TileLength')
          : (await fd.loadValue('RowsPerStrip')) || (await fd.loadValue('ImageLength')),
        planarConfiguration: await fd.loadValue('PlanarConfiguration'),
        bitsPerSample: await fd.loadValue('BitsPerSample'),
        predictor: (await fd.loadValue('Predictor')) || 1,
        JPEGTables: await fd.loadValue('JPEGTables'),
      } as never;
    },
    false,
  );
  addDecoder(
    ZSTD,
    checkedDecoder(ZSTD, (d, _p, bytes) => {
      if (zstdBound(d) > bytes + ZSTD_BLOCK_MAX) throw decompressionBomb('ZSTD', bytes);
    }),
    undefined,
    false,
  );
}
