/** Whether an Accept-Encoding header (RFC 9110 §12.5.3) allows a content coding. */
export function acceptsEncoding(header: string | string[] | undefined, coding: string): boolean {
  if (!header) return false;
  let wildcard: number | undefined;
  for (const part of (Array.isArray(header) ? header.join(',') : header).split(',')) {
    const [name = '', ...params] = part.trim().toLowerCase().split(';');
    let q = 1;
    for (const p of params) {
      const m = /^\s*q\s*=\s*([0-9.]+)\s*$/.exec(p);
      if (m) q = Number(m[1]);
    }
    if (name.trim() === coding) return q > 0;
    if (name.trim() === '*') wildcard = q;
  }
  return wildcard !== undefined && wildcard > 0;
}
