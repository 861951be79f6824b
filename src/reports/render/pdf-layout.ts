/**
 * Page furniture for report PDFs (pdfkit): a title band, sections, key figures, tables that break
 * across pages, vector line and bar charts with date axes, a map image with its legend, and page
 * footers. Standard PDF fonts only (WinAnsi text), A4 portrait.
 */
import PDFDocument from 'pdfkit';

export type Doc = PDFKit.PDFDocument;
export const PAGE = { width: 595.28, height: 841.89, margin: 48 };
export const INK = '#1f2933';
export const MUTED = '#616e7c';
export const RULE = '#cbd2d9';
export const ACCENT = '#2f6b3a';
const BOTTOM = PAGE.height - PAGE.margin - 24;
export const CONTENT_W = PAGE.width - 2 * PAGE.margin;

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec'];
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
export const fixed = (x: number | null | undefined, n = 3) => (x === null || x === undefined ? '-' : (Math.abs(x) < 0.5 * 10 ** -n ? 0 : x).toFixed(n));
export const signed = (x: number | null | undefined, n = 3) => (x === null || x === undefined ? '-' : `${x >= 0.5 * 10 ** -n ? '+' : ''}${fixed(x, n)}`);
export const thousands = (x: number, n = 0) => x.toLocaleString('en-GB', { minimumFractionDigits: n, maximumFractionDigits: n });

export function newDoc(title: string, subject: string): Doc {
  return new PDFDocument({ size: 'A4', margin: PAGE.margin, bufferPages: true, info: { Title: title, Subject: subject, Author: 'Field analysis service', Creator: 'field-analysis-service' } });
}

export async function finish(doc: Doc, footer: string): Promise<Buffer> {
  const chunks: Buffer[] = [];
  doc.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<void>((resolve, reject) => {
    doc.on('end', resolve);
    doc.on('error', reject);
  });
  const range = doc.bufferedPageRange();
  for (let p = range.start; p < range.start + range.count; p++) {
    doc.switchToPage(p);
    const y = PAGE.height - PAGE.margin + 6;
    doc.save().moveTo(PAGE.margin, y - 6).lineTo(PAGE.width - PAGE.margin, y - 6).lineWidth(0.5).strokeColor(RULE).stroke().restore();
    doc.font('Helvetica').fontSize(7.5).fillColor(MUTED);
    doc.text(footer, PAGE.margin, y, { width: CONTENT_W - 80, lineBreak: false, height: 10 });
    doc.text(`Page ${p - range.start + 1} of ${range.count}`, PAGE.width - PAGE.margin - 80, y, { width: 80, align: 'right', lineBreak: false, height: 10 });
  }
  doc.end();
  await done;
  return Buffer.concat(chunks);
}

export function titleBand(doc: Doc, title: string, subtitle: string, facts: Array<[string, string]>): void {
  doc.save().rect(0, 0, PAGE.width, 96).fill(ACCENT).restore();
  doc.font('Helvetica-Bold').fontSize(20).fillColor('#ffffff').text(title, PAGE.margin, 26, { width: CONTENT_W });
  doc.font('Helvetica').fontSize(11).fillColor('#e4f0e6').text(subtitle, PAGE.margin, 54, { width: CONTENT_W });
  doc.y = 110;
  keyFacts(doc, facts);
}

/** A grid of small labelled values (label above, value below), four per row. */
export function keyFacts(doc: Doc, facts: Array<[string, string]>, perRow = 4): void {
  const w = CONTENT_W / perRow;
  let y = doc.y;
  facts.forEach(([label, value], k) => {
    const col = k % perRow;
    if (col === 0 && k > 0) y += 34;
    const x = PAGE.margin + col * w;
    doc.font('Helvetica').fontSize(7.5).fillColor(MUTED).text(label.toUpperCase(), x, y, { width: w - 8, lineBreak: false, height: 10 });
    doc.font('Helvetica-Bold').fontSize(11).fillColor(INK).text(value, x, y + 11, { width: w - 8, lineBreak: false, height: 14 });
  });
  doc.y = y + 40;
  doc.x = PAGE.margin;
}

export function ensureSpace(doc: Doc, h: number): void {
  if (doc.y + h > BOTTOM) {
    doc.addPage();
    doc.y = PAGE.margin;
  }
}

export function section(doc: Doc, title: string): void {
  ensureSpace(doc, 60);
  doc.moveDown(0.4);
  const y = doc.y;
  doc.font('Helvetica-Bold').fontSize(13).fillColor(ACCENT).text(title, PAGE.margin, y, { width: CONTENT_W });
  doc.save().moveTo(PAGE.margin, doc.y + 2).lineTo(PAGE.width - PAGE.margin, doc.y + 2).lineWidth(0.75).strokeColor(ACCENT).stroke().restore();
  doc.y += 8;
  doc.x = PAGE.margin;
}

export function paragraph(doc: Doc, text: string, opts: { size?: number; colour?: string } = {}): void {
  doc.font('Helvetica').fontSize(opts.size ?? 9.5).fillColor(opts.colour ?? INK).text(text, PAGE.margin, doc.y, { width: CONTENT_W, lineGap: 1.5 });
  doc.moveDown(0.5);
}

const STATUS = { good: ['#1a9641', 'Good'], watch: ['#e8a33d', 'Watch'], action: ['#d7191c', 'Action needed'] } as const;

export function statusBox(doc: Doc, status: keyof typeof STATUS, text: string): void {
  const [colour, label] = STATUS[status];
  doc.font('Helvetica').fontSize(9.5);
  const h = Math.max(34, doc.heightOfString(text, { width: CONTENT_W - 110 }) + 16);
  ensureSpace(doc, h + 8);
  const y = doc.y;
  doc.save().roundedRect(PAGE.margin, y, CONTENT_W, h, 4).fillAndStroke('#f5f7fa', RULE).restore();
  doc.save().roundedRect(PAGE.margin + 8, y + 8, 84, 18, 9).fill(colour).restore();
  doc.font('Helvetica-Bold').fontSize(9).fillColor('#ffffff').text(label, PAGE.margin + 8, y + 13, { width: 84, align: 'center', lineBreak: false, height: 12 });
  doc.font('Helvetica').fontSize(9.5).fillColor(INK).text(text, PAGE.margin + 102, y + 8, { width: CONTENT_W - 110, lineGap: 1.5 });
  doc.y = y + h + 10;
  doc.x = PAGE.margin;
}

export interface Column {
  header: string;
  width: number;
  align?: 'left' | 'right' | 'center';
}

/** A table whose header repeats on each new page; `swatch` draws a colour square in column 0. */
/**
 * A table with a grey header row, zebra rows and page breaks that repeat the header. With
 * `minRowHeight`, rows shrink (down to it) when that keeps the whole table on the current page:
 * a handful of rows spilling onto an otherwise empty page helps nobody.
 */
export function table(doc: Doc, columns: Column[], rows: string[][], opts: { swatches?: string[]; minRowHeight?: number } = {}): void {
  const total = columns.reduce((s, c) => s + c.width, 0);
  const scale = CONTENT_W / total;
  const widths = columns.map((c) => c.width * scale);
  const room = (BOTTOM - doc.y - 17 - 8) / Math.max(1, rows.length);
  const rowH = opts.minRowHeight && room < 15 && room >= opts.minRowHeight ? room : 15;
  const textDy = (rowH - 7) / 2;
  const head = () => {
    const y = doc.y;
    doc.save().rect(PAGE.margin, y, CONTENT_W, rowH + 2).fill('#e4e7eb').restore();
    let x = PAGE.margin;
    doc.font('Helvetica-Bold').fontSize(8).fillColor(INK);
    columns.forEach((c, k) => {
      doc.text(c.header, x + 4, y + 4.5, { width: widths[k]! - 8, align: c.align ?? 'left', lineBreak: false, height: 10 });
      x += widths[k]!;
    });
    doc.y = y + rowH + 2;
  };
  ensureSpace(doc, rowH * 3);
  head();
  rows.forEach((row, r) => {
    if (doc.y + rowH > BOTTOM) {
      doc.addPage();
      doc.y = PAGE.margin;
      head();
    }
    const y = doc.y;
    if (r % 2 === 1) doc.save().rect(PAGE.margin, y, CONTENT_W, rowH).fill('#f5f7fa').restore();
    let x = PAGE.margin;
    doc.font('Helvetica').fontSize(8).fillColor(INK);
    row.forEach((cell, k) => {
      let pad = 4;
      if (k === 0 && opts.swatches?.[r]) {
        doc.save().rect(x + 4, y + textDy - 0.5, 8, 8).fill(opts.swatches[r]!).restore();
        pad = 16;
      }
      doc.fillColor(INK).text(cell, x + pad, y + textDy, { width: widths[k]! - pad - 4, align: columns[k]!.align ?? 'left', lineBreak: false, height: 10 });
      x += widths[k]!;
    });
    doc.y = y + rowH;
  });
  doc.save().moveTo(PAGE.margin, doc.y).lineTo(PAGE.width - PAGE.margin, doc.y).lineWidth(0.5).strokeColor(RULE).stroke().restore();
  doc.y += 8;
  doc.x = PAGE.margin;
}

const DAY = 86_400_000;
const ms = (d: string) => Date.parse(`${d}T00:00:00Z`);

function niceStep(span: number, n: number): number {
  const raw = span / n;
  const p = 10 ** Math.floor(Math.log10(raw));
  return [1, 2, 2.5, 5, 10].map((m) => m * p).find((s) => s >= raw) ?? 10 * p;
}

interface Frame {
  x: number;
  y: number;
  w: number;
  h: number;
  t0: number;
  t1: number;
  lo: number;
  hi: number;
}

function axes(doc: Doc, f: Frame, yLabel: string): { X: (t: number) => number; Y: (v: number) => number } {
  const X = (t: number) => f.x + ((t - f.t0) / (f.t1 - f.t0 || 1)) * f.w;
  const Y = (v: number) => f.y + f.h - ((v - f.lo) / (f.hi - f.lo || 1)) * f.h;
  const step = niceStep(f.hi - f.lo, 5);
  doc.font('Helvetica').fontSize(7).fillColor(MUTED);
  for (let v = Math.ceil(f.lo / step) * step; v <= f.hi + 1e-9; v += step) {
    doc.save().moveTo(f.x, Y(v)).lineTo(f.x + f.w, Y(v)).lineWidth(0.4).strokeColor('#e4e7eb').stroke().restore();
    doc.text(v.toFixed(step < 0.1 ? 2 : 1), f.x - 30, Y(v) - 3, { width: 26, align: 'right', lineBreak: false, height: 9 });
  }
  // Month ticks when the span is long enough, else weekly ones.
  const ticks: Array<[number, string]> = [];
  const d0 = new Date(f.t0);
  if (f.t1 - f.t0 > 50 * DAY) {
    for (let m = new Date(Date.UTC(d0.getUTCFullYear(), d0.getUTCMonth() + (d0.getUTCDate() > 1 ? 1 : 0), 1)); m.getTime() <= f.t1; m = new Date(Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + 1, 1))) {
      ticks.push([m.getTime(), `${MONTHS[m.getUTCMonth()]}${m.getUTCMonth() === 0 ? ` ${m.getUTCFullYear()}` : ''}`]);
    }
  } else {
    for (let t = f.t0; t <= f.t1; t += 7 * DAY) {
      const d = new Date(t);
      ticks.push([t, `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`]);
    }
  }
  for (const [t, label] of ticks) {
    doc.save().moveTo(X(t), f.y + f.h).lineTo(X(t), f.y + f.h + 3).lineWidth(0.5).strokeColor(MUTED).stroke().restore();
    doc.text(label, X(t) - 20, f.y + f.h + 5, { width: 40, align: 'center', lineBreak: false, height: 9 });
  }
  doc.save().moveTo(f.x, f.y).lineTo(f.x, f.y + f.h).lineTo(f.x + f.w, f.y + f.h).lineWidth(0.75).strokeColor(INK).stroke().restore();
  doc.save().rotate(-90, { origin: [f.x - 38, f.y + f.h / 2] }).font('Helvetica').fontSize(7.5).fillColor(MUTED).text(yLabel, f.x - 38 - 60, f.y + f.h / 2 - 4, { width: 120, align: 'center', lineBreak: false, height: 10 }).restore();
  return { X, Y };
}

export interface LinePoint {
  date: string;
  value: number;
  lo?: number | null;
  hi?: number | null;
}

/** Field mean over time as a line with dots, an optional min-max band, vertical event markers and horizontal reference lines. */
export function lineChart(
  doc: Doc,
  o: { points: LinePoint[]; start: string; end: string; yLabel: string; height?: number; markers?: Array<{ date: string; label: string; colour: string }>; levels?: Array<{ value: number; label: string }> },
): void {
  const h = o.height ?? 190;
  ensureSpace(doc, h + 40);
  const vals = o.points.flatMap((p) => [p.value, p.lo ?? p.value, p.hi ?? p.value]);
  const step = niceStep(Math.max(0.1, Math.max(...vals) - Math.min(...vals)), 5);
  const f: Frame = { x: PAGE.margin + 44, y: doc.y + 6, w: CONTENT_W - 52, h, t0: ms(o.start), t1: ms(o.end), lo: Math.floor(Math.min(...vals) / step) * step, hi: Math.ceil(Math.max(...vals) / step) * step };
  if (f.hi <= f.lo) f.hi = f.lo + step; // one value (a single capture of a uniform field): the axes need a span
  const { X, Y } = axes(doc, f, o.yLabel);
  const band = o.points.filter((p) => p.lo != null && p.hi != null);
  if (band.length > 1) {
    doc.save();
    doc.moveTo(X(ms(band[0]!.date)), Y(band[0]!.hi!));
    for (const p of band.slice(1)) doc.lineTo(X(ms(p.date)), Y(p.hi!));
    for (const p of [...band].reverse()) doc.lineTo(X(ms(p.date)), Y(p.lo!));
    doc.closePath().fillOpacity(0.15).fill(ACCENT).restore();
  }
  for (const l of o.levels ?? []) {
    doc.save().moveTo(f.x, Y(l.value)).lineTo(f.x + f.w, Y(l.value)).dash(2, { space: 2 }).lineWidth(0.6).strokeColor(MUTED).stroke().undash().restore();
    doc.font('Helvetica').fontSize(6.5).fillColor(MUTED).text(l.label, f.x + f.w - 150, Y(l.value) - 8, { width: 148, align: 'right', lineBreak: false, height: 8 });
  }
  for (const m of o.markers ?? []) {
    const x = X(ms(m.date));
    doc.save().moveTo(x, f.y).lineTo(x, f.y + f.h).dash(3, { space: 2 }).lineWidth(0.8).strokeColor(m.colour).stroke().undash().restore();
    doc.font('Helvetica-Bold').fontSize(6.5).fillColor(m.colour).text(m.label, x + 2, f.y + 2, { width: 80, lineBreak: false, height: 8 });
  }
  if (o.points.length) {
    doc.save();
    o.points.forEach((p, k) => (k ? doc.lineTo(X(ms(p.date)), Y(p.value)) : doc.moveTo(X(ms(p.date)), Y(p.value))));
    doc.lineWidth(1.6).strokeColor(ACCENT).stroke().restore();
    for (const p of o.points) doc.save().circle(X(ms(p.date)), Y(p.value), 2.2).fill(ACCENT).restore();
  }
  doc.y = f.y + f.h + 22;
  doc.x = PAGE.margin;
}

/** One bar per period (gaps left empty), value labels on top, and an optional trend line. */
export function barChart(doc: Doc, o: { bars: Array<{ label: string; value: number | null }>; yLabel: string; trend?: { first: number; last: number }; height?: number }): void {
  const h = o.height ?? 170;
  ensureSpace(doc, h + 40);
  const vals = o.bars.flatMap((b) => (b.value === null ? [] : [b.value]));
  const lo = Math.min(0, ...vals);
  const hi = Math.max(...vals, 0.1);
  const step = niceStep(hi - lo, 5);
  const f = { x: PAGE.margin + 44, y: doc.y + 6, w: CONTENT_W - 52, h, lo: Math.floor(lo / step) * step, hi: Math.ceil(hi / step) * step };
  const Y = (v: number) => f.y + f.h - ((v - f.lo) / (f.hi - f.lo)) * f.h;
  doc.font('Helvetica').fontSize(7).fillColor(MUTED);
  for (let v = f.lo; v <= f.hi + 1e-9; v += step) {
    doc.save().moveTo(f.x, Y(v)).lineTo(f.x + f.w, Y(v)).lineWidth(0.4).strokeColor('#e4e7eb').stroke().restore();
    doc.text(v.toFixed(step < 0.1 ? 2 : 1), f.x - 30, Y(v) - 3, { width: 26, align: 'right', lineBreak: false, height: 9 });
  }
  const slot = f.w / Math.max(1, o.bars.length);
  const bw = Math.min(28, slot * 0.7);
  const every = Math.ceil(o.bars.length / 14);
  o.bars.forEach((b, k) => {
    const cx = f.x + slot * (k + 0.5);
    if (b.value !== null) {
      doc.save().rect(cx - bw / 2, Y(b.value), bw, Y(f.lo) - Y(b.value)).fill('#66a86f').restore();
      if (o.bars.length <= 16) doc.font('Helvetica').fontSize(6.5).fillColor(INK).text(b.value.toFixed(2), cx - 20, Y(b.value) - 9, { width: 40, align: 'center', lineBreak: false, height: 8 });
    } else {
      doc.font('Helvetica').fontSize(6.5).fillColor(MUTED).text('no data', cx - 20, Y(f.lo) - 10, { width: 40, align: 'center', lineBreak: false, height: 8 });
    }
    if (k % every === 0) doc.font('Helvetica').fontSize(6.5).fillColor(MUTED).text(b.label, cx - 26, f.y + f.h + 5, { width: 52, align: 'center', lineBreak: false, height: 8 });
  });
  if (o.trend) {
    doc.save().moveTo(f.x + slot * 0.5, Y(o.trend.first)).lineTo(f.x + slot * (o.bars.length - 0.5), Y(o.trend.last)).dash(4, { space: 2 }).lineWidth(1.2).strokeColor('#d7191c').stroke().undash().restore();
  }
  doc.save().moveTo(f.x, f.y).lineTo(f.x, f.y + f.h).lineTo(f.x + f.w, f.y + f.h).lineWidth(0.75).strokeColor(INK).stroke().restore();
  doc.save().rotate(-90, { origin: [f.x - 38, f.y + f.h / 2] }).font('Helvetica').fontSize(7.5).fillColor(MUTED).text(o.yLabel, f.x - 38 - 60, f.y + f.h / 2 - 4, { width: 120, align: 'center', lineBreak: false, height: 10 }).restore();
  doc.y = f.y + f.h + 22;
  doc.x = PAGE.margin;
}

export type Legend =
  | { kind: 'ramp'; lo: number; hi: number; title: string; stops: string[]; masked?: string }
  | { kind: 'classes'; title: string; entries: Array<{ colour: string; label: string }> };

/**
 * The map image at the left (aspect kept, north up) with numbered pins, a scale bar, and the
 * legend at the right. Pins are in grid pixel coordinates of the image.
 */
export function mapWithLegend(
  doc: Doc,
  o: { png: Buffer; gridW: number; gridH: number; pixelSizeM: number; legend: Legend; pins?: Array<{ i: number; j: number; label: string }>; maxH?: number; facts?: Array<[string, string]> },
): void {
  const boxW = 320;
  const boxH = o.maxH ?? 330;
  const s = Math.min(boxW / o.gridW, boxH / o.gridH);
  const w = o.gridW * s;
  const h = o.gridH * s;
  ensureSpace(doc, h + 30);
  const x0 = PAGE.margin;
  const y0 = doc.y + 4;
  doc.save().rect(x0 - 1, y0 - 1, w + 2, h + 2).lineWidth(0.5).strokeColor(RULE).stroke().restore();
  doc.image(o.png, x0, y0, { width: w, height: h });
  for (const p of o.pins ?? []) {
    const px = x0 + p.i * s;
    const py = y0 + p.j * s;
    doc.save().circle(px, py, 6.5).fillAndStroke('#ffffff', INK).restore();
    doc.font('Helvetica-Bold').fontSize(7).fillColor(INK).text(p.label, px - 6.5, py - 3, { width: 13, align: 'center', lineBreak: false, height: 8 });
  }
  // North arrow and a scale bar with a round length of about a quarter of the map width.
  doc.save().moveTo(x0 + w - 12, y0 + 22).lineTo(x0 + w - 7, y0 + 8).lineTo(x0 + w - 2, y0 + 22).closePath().fill(INK).restore();
  doc.font('Helvetica-Bold').fontSize(7).fillColor(INK).text('N', x0 + w - 11, y0 + 24, { width: 8, align: 'center', lineBreak: false, height: 8 });
  const metresW = o.gridW * o.pixelSizeM;
  const bar = niceStep(metresW / 4, 1);
  const barPt = (bar / metresW) * w;
  const by = y0 + h + 8;
  doc.save().rect(x0, by, barPt, 3).fill(INK).restore();
  doc.font('Helvetica').fontSize(7).fillColor(MUTED).text(bar >= 1000 ? `${bar / 1000} km` : `${bar} m`, x0 + barPt + 4, by - 2, { width: 60, lineBreak: false, height: 8 });
  const lx = x0 + boxW + 20;
  let ly = y0;
  doc.font('Helvetica-Bold').fontSize(9).fillColor(INK).text(o.legend.title, lx, ly, { width: CONTENT_W - boxW - 20 });
  ly = doc.y + 6;
  if (o.legend.kind === 'ramp') {
    const gh = 140;
    const grad = doc.linearGradient(lx, ly + gh, lx, ly);
    o.legend.stops.forEach((c, k) => grad.stop(k / (o.legend.kind === 'ramp' ? o.legend.stops.length - 1 : 1), c));
    doc.save().rect(lx, ly, 16, gh).fill(grad).restore();
    doc.save().rect(lx, ly, 16, gh).lineWidth(0.5).strokeColor(INK).stroke().restore();
    doc.font('Helvetica').fontSize(8).fillColor(INK);
    for (let k = 0; k <= 4; k++) {
      const v = o.legend.lo + ((o.legend.hi - o.legend.lo) * k) / 4;
      const y = ly + gh - (gh * k) / 4;
      doc.save().moveTo(lx + 16, y).lineTo(lx + 20, y).lineWidth(0.5).strokeColor(INK).stroke().restore();
      doc.text(v.toFixed(2), lx + 23, y - 3.5, { width: 40, lineBreak: false, height: 9 });
    }
    ly += gh + 10;
    if (o.legend.masked) {
      doc.save().rect(lx, ly, 16, 10).fill(o.legend.masked).restore();
      doc.text('cloud / no data', lx + 23, ly + 1, { width: 100, lineBreak: false, height: 9 });
      ly += 16;
    }
  } else {
    for (const e of o.legend.entries) {
      doc.save().rect(lx, ly, 16, 12).fill(e.colour).restore();
      doc.font('Helvetica').fontSize(8.5).fillColor(INK).text(e.label, lx + 23, ly + 2, { width: CONTENT_W - boxW - 45, lineBreak: false, height: 10 });
      ly += 18;
    }
  }
  if (o.facts?.length) ly = sideFacts(doc, lx, ly + 10, o.facts);
  doc.y = Math.max(y0 + h + 24, ly);
  doc.x = PAGE.margin;
}

/** Continues the right-hand column beside the map: small key/value lines. */
export function sideFacts(doc: Doc, x: number, y: number, facts: Array<[string, string]>): number {
  for (const [k, v] of facts) {
    doc.font('Helvetica').fontSize(8).fillColor(MUTED).text(k, x, y, { width: 78, lineBreak: false, height: 9 });
    doc.font('Helvetica-Bold').fontSize(8).fillColor(INK).text(v, x + 78, y, { width: PAGE.width - PAGE.margin - x - 78, lineBreak: false, height: 9 });
    y += 12;
  }
  return y;
}
