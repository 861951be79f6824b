/** The band layouts a JIT module is specialised on, and the load arithmetic they imply. */

export type JitDtype = 'f32' | 'u16' | 'i16' | 'u8';

export interface JitBand {
  dtype: JitDtype;
  scale?: number;
  offset?: number;
  nodata?: number | null;
}

export interface Band {
  dtype: JitDtype;
  scale: number;
  offset: number;
  nodata: number;
  hasNodata: boolean;
  /** The integer nodata the interpreter compares DNs with (0: none). */
  nd: number;
}

export function normalise(b: JitBand): Band {
  const hasNodata = b.nodata !== undefined && b.nodata !== null;
  const nodata = Math.fround(b.nodata ?? 0);
  // AssemblyScript's <i32>f32 (saturating)
  const nd = hasNodata
    ? Number.isNaN(nodata)
      ? 0
      : Math.max(-2147483648, Math.min(2147483647, Math.trunc(nodata)))
    : 0;
  return {
    dtype: b.dtype,
    scale: Math.fround(b.scale ?? 1),
    offset: Math.fround(b.offset ?? 0),
    nodata,
    hasNodata,
    nd,
  };
}

/** Whether NDB on these bands takes the interpreter's integer path (ndMode 2). */
export function ndbIntMath(a: Band, b: Band): boolean {
  return (
    a.dtype === 'u16' &&
    b.dtype === 'u16' &&
    a.scale === b.scale &&
    a.scale !== 0 &&
    Number.isFinite(a.scale) &&
    a.offset === 0 &&
    b.offset === 0
  );
}

/** The scale multiplication and offset addition that change a value (the others are identities). */
export function loadArith(b: Band): { mul: boolean; add: boolean } {
  const mul = b.scale !== 1;
  // integers: DN ≠ 0 (DN 0 is masked) × scale ≠ 0 is never −0, so + 0 changes nothing;
  // floats: x × s may be −0, and −0 + 0 is +0: only an offset of −0 can be left out
  const add = b.dtype === 'f32' ? !Object.is(b.offset, -0) : !(b.offset === 0 && b.scale !== 0);
  return { mul, add };
}

/** log2 of the bytes per pixel of each dtype. */
export const SHIFT: Record<JitDtype, number> = { f32: 2, u16: 1, i16: 1, u8: 0 };
