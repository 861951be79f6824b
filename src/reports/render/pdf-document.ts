/**
 * The report PDF itself (pdfkit): A4 portrait, standard PDF fonts only (WinAnsi text), the colours
 * every block uses, page breaks, and the footers written on every page at the end.
 */
import PDFDocument from 'pdfkit';

export type Doc = PDFKit.PDFDocument;
export const PAGE = { width: 595.28, height: 841.89, margin: 48 };
export const INK = '#1f2933';
export const MUTED = '#616e7c';
export const RULE = '#cbd2d9';
export const ACCENT = '#2f6b3a';
/** The lowest y a block may reach (the footer is below). */
export const BOTTOM = PAGE.height - PAGE.margin - 24;
export const CONTENT_W = PAGE.width - 2 * PAGE.margin;

export function newDoc(title: string, subject: string): Doc {
  return new PDFDocument({
    size: 'A4',
    margin: PAGE.margin,
    bufferPages: true,
    info: { Title: title, Subject: subject, Author: 'Field analysis service', Creator: 'field-analysis-service' },
  });
}

/** A line with a name between two fixed parts (the footer: the report's type; its id and time). */
export interface NamedLine {
  before: string;
  name: string;
  after: string;
}

/** The line with its name cut (with an ellipsis) until `fits` takes it; the fixed parts are never cut. */
export function fitName(line: NamedLine, fits: (text: string) => boolean): string {
  const whole = line.before + line.name + line.after;
  if (fits(whole)) return whole;
  // by code points, so that a cut never leaves half of an emoji
  const chars = Array.from(line.name);
  while (chars.length && !fits(`${line.before}${chars.join('')}…${line.after}`)) chars.pop();
  return `${line.before}${chars.join('').trimEnd()}…${line.after}`;
}

export async function finish(doc: Doc, footer: NamedLine): Promise<Buffer> {
  const chunks: Buffer[] = [];
  doc.on('data', (c: Buffer) => chunks.push(c));
  const done = new Promise<void>((resolve, reject) => {
    doc.on('end', resolve);
    doc.on('error', reject);
  });
  const range = doc.bufferedPageRange();
  let line: string | undefined;
  for (let p = range.start; p < range.start + range.count; p++) {
    doc.switchToPage(p);
    const y = PAGE.height - PAGE.margin + 6;
    doc
      .save()
      .moveTo(PAGE.margin, y - 6)
      .lineTo(PAGE.width - PAGE.margin, y - 6)
      .lineWidth(0.5)
      .strokeColor(RULE)
      .stroke()
      .restore();
    doc.font('Helvetica').fontSize(7.5).fillColor(MUTED);
    line ??= fitName(footer, (text) => doc.widthOfString(text) <= CONTENT_W - 80);
    doc.text(line, PAGE.margin, y, { width: CONTENT_W - 80, lineBreak: false, height: 10 });
    doc.text(`Page ${p - range.start + 1} of ${range.count}`, PAGE.width - PAGE.margin - 80, y, {
      width: 80,
      align: 'right',
      lineBreak: false,
      height: 10,
    });
  }
  doc.end();
  await done;
  return Buffer.concat(chunks);
}

export function ensureSpace(doc: Doc, h: number): void {
  if (doc.y + h > BOTTOM) {
    doc.addPage();
    doc.y = PAGE.margin;
  }
}
