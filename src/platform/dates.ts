/**
 * `YYYY-MM-DD` that names a real calendar day from 0001-01-01 on: 2025-02-30 does not, nor does
 * any day of the year 0000, which JavaScript's proleptic calendar has and PostgreSQL's `date` refuses.
 */
export function isCalendarDate(s: string): boolean {
  if (!/^\d{4}-\d{2}-\d{2}$/.test(s) || s.startsWith('0000')) return false;
  const d = new Date(`${s}T00:00:00Z`);
  return !Number.isNaN(d.getTime()) && d.toISOString().slice(0, 10) === s;
}
