// TIFF block decoding helpers, built as their own module (dist/wasm/decode.wasm) apart from the
// index kernel: LZW (TIFF 6.0, MSB-first codes, "early change") and undoing the horizontal
// predictor (predictor 2) in place. The host owns all memory above workspace(): it copies the
// compressed block in, reserves room for the output, and reads the result straight out.

// The LZW string table: for each code, where its bytes first appeared in the output and how many
// there are. Every LZW string is a prefix of an earlier output plus one byte that follows it in
// the output, so a code decodes to one forward copy from earlier output (no chained lookups).
const TABLE_ENTRIES: i32 = 4096;
// One u64 per code: output position in the low half, length in the high half.
const TABLE: usize = (__heap_base + 15) & ~(<usize>15);

/** First byte the host may use; the LZW table lives below it. */
export function workspace(): usize {
  return (TABLE + (<usize>TABLE_ENTRIES << 3) + 63) & ~(<usize>63);
}

// Copies n bytes from s to d where s + n <= d, eight at a time: may write up to 7 bytes past
// d + n (the host leaves that slack) and never overwrites a byte before it is read, because
// every write lands at or after d >= s + n.
// @ts-ignore: decorator
@inline function copyForward(d: usize, s: usize, n: i32): void {
  let i: i32 = 0;
  do {
    store<u64>(d + <usize>i, load<u64>(s + <usize>i));
    i += 8;
  } while (i < n);
}

/**
 * Decodes one LZW-compressed block. `src` must be followed by 8 readable bytes of slack (zeros) and `dst`
 * by 16. Returns the number of bytes written (at most dstLen; the block ends at EOI or at the end
 * of the input), -1 for a code that cannot occur in a valid stream, or -2 when the data decodes to
 * more than dstLen bytes (a decompression bomb: nothing is written past dstLen).
 */
export function lzwDecode(src: usize, srcLen: i32, dst: usize, dstLen: i32): i32 {
  const outEnd = dst + <usize>dstLen;
  const totalBits: u64 = <u64>srcLen << 3;
  let bitPos: u64 = 0;
  let width: i32 = 9;
  let next: i32 = 258;
  let out = dst;
  let prevPos: usize = 0;
  let prevLen: i32 = 0; // 0: no previous string (start, or just after a Clear code)
  while (true) {
    // Codes are read big-endian from any bit position: one unaligned 8-byte load (the host leaves
    // 8 bytes of slack after the input), no refill branch.
    if (bitPos + <u64>width > totalBits) break; // input exhausted without an EOI
    const word = bswap<u64>(load<u64>(src + <usize>(bitPos >> 3)));
    const code = <i32>((word << (bitPos & 7)) >> <u64>(64 - width));
    bitPos += <u64>width;
    if (code == 257) break;
    if (code == 256) {
      width = 9;
      next = 258;
      prevLen = 0;
      continue;
    }
    let len: i32;
    if (code < 256) {
      if (out >= outEnd) return -2;
      store<u8>(out, <u8>code);
      len = 1;
    } else if (code < next) {
      const entry = load<u64>(TABLE + (<usize>code << 3));
      const pos = <usize>(<u32>entry);
      len = <i32>(entry >> 32);
      if (out + <usize>len > outEnd) return -2;
      copyForward(out, pos, len);
    } else if (code == next && prevLen > 0) {
      // The string being defined right now: the previous one plus its own first byte.
      len = prevLen + 1;
      if (out + <usize>len > outEnd) return -2;
      copyForward(out, prevPos, prevLen);
      store<u8>(out + <usize>prevLen, load<u8>(prevPos));
    } else {
      return -1;
    }
    if (prevLen > 0 && next < TABLE_ENTRIES) {
      // The previous string followed by the first byte of this one, which sits right after it.
      store<u64>(TABLE + (<usize>next << 3), (<u64>(prevLen + 1) << 32) | <u64>(<u32>prevPos));
      next++;
      // TIFF's early change: the width grows one code before the table needs it.
      if (next >= (1 << width) - 1 && width < 12) width++;
    }
    prevPos = out;
    prevLen = len;
    out += <usize>len;
  }
  return <i32>(out - dst);
}

/**
 * Undoes the horizontal predictor in place: each sample is stored as the difference from the same
 * sample of the pixel to its left, row by row. `bytesPerSample` is 1, 2 or 4, `samples` the
 * samples per pixel (interleaved), the data little-endian. Returns 0, or -1 for an unsupported size.
 */
export function unpredict(ptr: usize, width: i32, rows: i32, samples: i32, bytesPerSample: i32): i32 {
  const rowItems = width * samples;
  if (rowItems <= samples || rows <= 0) return 0;
  if (bytesPerSample == 2) {
    for (let r: i32 = 0; r < rows; r++) {
      const row = ptr + (<usize>(r * rowItems) << 1);
      if (samples == 1) {
        let acc: u32 = load<u16>(row);
        for (let i: i32 = 1; i < rowItems; i++) {
          const a = row + (<usize>i << 1);
          acc += <u32>load<u16>(a);
          store<u16>(a, <u16>acc);
        }
      } else {
        for (let i: i32 = samples; i < rowItems; i++) {
          const a = row + (<usize>i << 1);
          store<u16>(a, <u16>(load<u16>(a) + load<u16>(a - (<usize>samples << 1))));
        }
      }
    }
  } else if (bytesPerSample == 1) {
    for (let r: i32 = 0; r < rows; r++) {
      const row = ptr + <usize>(r * rowItems);
      if (samples == 1) {
        let acc: u32 = load<u8>(row);
        for (let i: i32 = 1; i < rowItems; i++) {
          const a = row + <usize>i;
          acc += <u32>load<u8>(a);
          store<u8>(a, <u8>acc);
        }
      } else {
        for (let i: i32 = samples; i < rowItems; i++) {
          const a = row + <usize>i;
          store<u8>(a, <u8>(load<u8>(a) + load<u8>(a - <usize>samples)));
        }
      }
    }
  } else if (bytesPerSample == 4) {
    for (let r: i32 = 0; r < rows; r++) {
      const row = ptr + (<usize>(r * rowItems) << 2);
      for (let i: i32 = samples; i < rowItems; i++) {
        const a = row + (<usize>i << 2);
        store<u32>(a, load<u32>(a) + load<u32>(a - (<usize>samples << 2)));
      }
    }
  } else {
    return -1;
  }
  return 0;
}
