/**
 * The text blocks of report PDFs, each placed at doc.y and leaving doc.y below itself: the title
 * band, key figures, sections, paragraphs, a status box, tables that break across pages, and the
 * small key/value lines beside a map.
 */
import {
  ACCENT,
  BOTTOM,
  CONTENT_W,
  type Doc,
  ensureSpace,
  fitName,
  INK,
  MUTED,
  type NamedLine,
  PAGE,
  RULE,
} from './pdf-document.js';

/** Height of the title band at the top of a report's first page, in points. */
export const BAND_H = 96;

/** `note`: one smaller line under the subtitle (cut with an ellipsis), or '' for none. */
export function titleBand(
  doc: Doc,
  title: string,
  subtitle: NamedLine,
  facts: Array<[string, string]>,
  note = '',
): void {
  doc.save().rect(0, 0, PAGE.width, BAND_H).fill(ACCENT).restore();
  doc.font('Helvetica-Bold').fontSize(20).fillColor('#ffffff').text(title, PAGE.margin, 26, { width: CONTENT_W });
  // A long field name wraps: the subtitle keeps to two lines (three without a note), the name cut
  // with an ellipsis past them, so the note and the subtitle stay inside the band.
  doc.font('Helvetica').fontSize(11).fillColor('#e4f0e6');
  const lines = note ? 2 : 3;
  const fits = (text: string) =>
    doc.heightOfString(text, { width: CONTENT_W }) <= (lines + 0.5) * doc.currentLineHeight(true);
  doc.text(fitName(subtitle, fits), PAGE.margin, 54, { width: CONTENT_W });
  if (note)
    doc.fontSize(9).text(note, PAGE.margin, Math.max(72, doc.y + 2), {
      width: CONTENT_W,
      height: 11,
      ellipsis: true,
      lineBreak: false,
    });
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
    doc
      .font('Helvetica')
      .fontSize(7.5)
      .fillColor(MUTED)
      .text(label.toUpperCase(), x, y, { width: w - 8, lineBreak: false, height: 10 });
    doc
      .font('Helvetica-Bold')
      .fontSize(11)
      .fillColor(INK)
      .text(value, x, y + 11, { width: w - 8, lineBreak: false, height: 14 });
  });
  doc.y = y + 40;
  doc.x = PAGE.margin;
}

export function section(doc: Doc, title: string): void {
  ensureSpace(doc, 60);
  doc.moveDown(0.4);
  const y = doc.y;
  doc.font('Helvetica-Bold').fontSize(13).fillColor(ACCENT).text(title, PAGE.margin, y, { width: CONTENT_W });
  doc
    .save()
    .moveTo(PAGE.margin, doc.y + 2)
    .lineTo(PAGE.width - PAGE.margin, doc.y + 2)
    .lineWidth(0.75)
    .strokeColor(ACCENT)
    .stroke()
    .restore();
  doc.y += 8;
  doc.x = PAGE.margin;
}

export function paragraph(doc: Doc, text: string, opts: { size?: number; colour?: string } = {}): void {
  doc
    .font('Helvetica')
    .fontSize(opts.size ?? 9.5)
    .fillColor(opts.colour ?? INK)
    .text(text, PAGE.margin, doc.y, { width: CONTENT_W, lineGap: 1.5 });
  doc.moveDown(0.5);
}

const STATUS = {
  good: ['#1a9641', 'Good'],
  watch: ['#e8a33d', 'Watch'],
  action: ['#d7191c', 'Action needed'],
} as const;

export function statusBox(doc: Doc, status: keyof typeof STATUS, text: string): void {
  const [colour, label] = STATUS[status];
  doc.font('Helvetica').fontSize(9.5);
  const h = Math.max(34, doc.heightOfString(text, { width: CONTENT_W - 110 }) + 16);
  ensureSpace(doc, h + 8);
  const y = doc.y;
  doc.save().roundedRect(PAGE.margin, y, CONTENT_W, h, 4).fillAndStroke('#f5f7fa', RULE).restore();
  doc
    .save()
    .roundedRect(PAGE.margin + 8, y + 8, 84, 18, 9)
    .fill(colour)
    .restore();
  doc
    .font('Helvetica-Bold')
    .fontSize(9)
    .fillColor('#ffffff')
    .text(label, PAGE.margin + 8, y + 13, { width: 84, align: 'center', lineBreak: false, height: 12 });
  doc
    .font('Helvetica')
    .fontSize(9.5)
    .fillColor(INK)
    .text(text, PAGE.margin + 102, y + 8, { width: CONTENT_W - 110, lineGap: 1.5 });
  doc.y = y + h + 10;
  doc.x = PAGE.margin;
}

export interface Column {
  header: string;
  width: number;
  align?: 'left' | 'right' | 'center';
}

/**
 * A table with a grey header row, zebra rows and page breaks that repeat the header; `swatches`
 * draw a colour square in column 0. With
 * `minRowHeight`, rows shrink (down to it) when that keeps the whole table on the current page:
 * a handful of rows spilling onto an otherwise empty page helps nobody.
 */
export function table(
  doc: Doc,
  columns: Column[],
  rows: string[][],
  opts: { swatches?: string[]; minRowHeight?: number } = {},
): void {
  const total = columns.reduce((s, c) => s + c.width, 0);
  const scale = CONTENT_W / total;
  const widths = columns.map((c) => c.width * scale);
  const room = (BOTTOM - doc.y - 17 - 8) / Math.max(1, rows.length);
  const rowH = opts.minRowHeight && room < 15 && room >= opts.minRowHeight ? room : 15;
  const textDy = (rowH - 7) / 2;
  const head = () => {
    const y = doc.y;
    doc
      .save()
      .rect(PAGE.margin, y, CONTENT_W, rowH + 2)
      .fill('#e4e7eb')
      .restore();
    let x = PAGE.margin;
    doc.font('Helvetica-Bold').fontSize(8).fillColor(INK);
    columns.forEach((c, k) => {
      doc.text(c.header, x + 4, y + 4.5, {
        width: widths[k]! - 8,
        align: c.align ?? 'left',
        lineBreak: false,
        height: 10,
      });
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
        doc
          .save()
          .rect(x + 4, y + textDy - 0.5, 8, 8)
          .fill(opts.swatches[r]!)
          .restore();
        pad = 16;
      }
      doc.fillColor(INK).text(cell, x + pad, y + textDy, {
        width: widths[k]! - pad - 4,
        align: columns[k]!.align ?? 'left',
        lineBreak: false,
        height: 10,
      });
      x += widths[k]!;
    });
    doc.y = y + rowH;
  });
  doc
    .save()
    .moveTo(PAGE.margin, doc.y)
    .lineTo(PAGE.width - PAGE.margin, doc.y)
    .lineWidth(0.5)
    .strokeColor(RULE)
    .stroke()
    .restore();
  doc.y += 8;
  doc.x = PAGE.margin;
}

/** Continues the right-hand column beside the map: small key/value lines. */
export function sideFacts(doc: Doc, x: number, y: number, facts: Array<[string, string]>): number {
  for (const [k, v] of facts) {
    doc.font('Helvetica').fontSize(8).fillColor(MUTED).text(k, x, y, { width: 78, lineBreak: false, height: 9 });
    doc
      .font('Helvetica-Bold')
      .fontSize(8)
      .fillColor(INK)
      .text(v, x + 78, y, { width: PAGE.width - PAGE.margin - x - 78, lineBreak: false, height: 9 });
    y += 12;
  }
  return y;
}
