/** How report PDFs write dates and numbers (plain ASCII: the standard fonts are WinAnsi). */

export const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
export function longDate(d: string): string {
  const [y, m, day] = d.split('-').map(Number);
  return `${day} ${MONTHS[m! - 1]} ${y}`;
}
export function dateRange(a: string, b: string): string {
  const [ya, ma, da] = a.split('-').map(Number);
  const [yb, mb, db] = b.split('-').map(Number);
  return ya === yb ? `${da} ${MONTHS[ma! - 1]} - ${db} ${MONTHS[mb! - 1]} ${yb}` : `${longDate(a)} - ${longDate(b)}`;
}
/** Fixed decimals without "-0.000". */
export const fixed = (x: number | null | undefined, n = 3) =>
  x === null || x === undefined ? '-' : (Math.abs(x) < 0.5 * 10 ** -n ? 0 : x).toFixed(n);
export const signed = (x: number | null | undefined, n = 3) =>
  x === null || x === undefined ? '-' : `${x >= 0.5 * 10 ** -n ? '+' : ''}${fixed(x, n)}`;
export const thousands = (x: number, n = 0) =>
  x.toLocaleString('en-GB', { minimumFractionDigits: n, maximumFractionDigits: n });
