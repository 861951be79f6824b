/** A map image in a report PDF, with pins, north arrow, scale bar and its legend. */
import { sideFacts } from './pdf-blocks.js';
import { niceStep } from './pdf-charts.js';
import { CONTENT_W, type Doc, ensureSpace, INK, MUTED, PAGE, RULE } from './pdf-document.js';

export type Legend =
  | { kind: 'ramp'; lo: number; hi: number; title: string; stops: string[]; masked?: string }
  | { kind: 'classes'; title: string; entries: Array<{ colour: string; label: string }> };

/**
 * The map image at the left (aspect kept, north up) with numbered pins, a scale bar, and the
 * legend at the right. Pins are in grid pixel coordinates of the image.
 */
export function mapWithLegend(
  doc: Doc,
  o: {
    png: Buffer;
    gridW: number;
    gridH: number;
    pixelSizeM: number;
    legend: Legend;
    pins?: Array<{ i: number; j: number; label: string }>;
    maxH?: number;
    facts?: Array<[string, string]>;
  },
): void {
  const boxW = 320;
  const boxH = o.maxH ?? 330;
  const s = Math.min(boxW / o.gridW, boxH / o.gridH);
  const w = o.gridW * s;
  const h = o.gridH * s;
  ensureSpace(doc, h + 30);
  const x0 = PAGE.margin;
  const y0 = doc.y + 4;
  doc
    .save()
    .rect(x0 - 1, y0 - 1, w + 2, h + 2)
    .lineWidth(0.5)
    .strokeColor(RULE)
    .stroke()
    .restore();
  doc.image(o.png, x0, y0, { width: w, height: h });
  for (const p of o.pins ?? []) {
    const px = x0 + p.i * s;
    const py = y0 + p.j * s;
    doc.save().circle(px, py, 6.5).fillAndStroke('#ffffff', INK).restore();
    doc
      .font('Helvetica-Bold')
      .fontSize(7)
      .fillColor(INK)
      .text(p.label, px - 6.5, py - 3, { width: 13, align: 'center', lineBreak: false, height: 8 });
  }
  // North arrow and a scale bar with a round length of about a quarter of the map width.
  doc
    .save()
    .moveTo(x0 + w - 12, y0 + 22)
    .lineTo(x0 + w - 7, y0 + 8)
    .lineTo(x0 + w - 2, y0 + 22)
    .closePath()
    .fill(INK)
    .restore();
  doc
    .font('Helvetica-Bold')
    .fontSize(7)
    .fillColor(INK)
    .text('N', x0 + w - 11, y0 + 24, { width: 8, align: 'center', lineBreak: false, height: 8 });
  const metresW = o.gridW * o.pixelSizeM;
  const bar = niceStep(metresW / 4, 1);
  const barPt = (bar / metresW) * w;
  const by = y0 + h + 8;
  doc.save().rect(x0, by, barPt, 3).fill(INK).restore();
  doc
    .font('Helvetica')
    .fontSize(7)
    .fillColor(MUTED)
    .text(bar >= 1000 ? `${bar / 1000} km` : `${bar} m`, x0 + barPt + 4, by - 2, {
      width: 60,
      lineBreak: false,
      height: 8,
    });
  const lx = x0 + boxW + 20;
  let ly = y0;
  doc
    .font('Helvetica-Bold')
    .fontSize(9)
    .fillColor(INK)
    .text(o.legend.title, lx, ly, { width: CONTENT_W - boxW - 20 });
  ly = doc.y + 6;
  if (o.legend.kind === 'ramp') {
    const gh = 140;
    const grad = doc.linearGradient(lx, ly + gh, lx, ly);
    for (const [k, c] of o.legend.stops.entries())
      grad.stop(k / (o.legend.kind === 'ramp' ? o.legend.stops.length - 1 : 1), c);
    doc.save().rect(lx, ly, 16, gh).fill(grad).restore();
    doc.save().rect(lx, ly, 16, gh).lineWidth(0.5).strokeColor(INK).stroke().restore();
    doc.font('Helvetica').fontSize(8).fillColor(INK);
    for (let k = 0; k <= 4; k++) {
      const v = o.legend.lo + ((o.legend.hi - o.legend.lo) * k) / 4;
      const y = ly + gh - (gh * k) / 4;
      doc
        .save()
        .moveTo(lx + 16, y)
        .lineTo(lx + 20, y)
        .lineWidth(0.5)
        .strokeColor(INK)
        .stroke()
        .restore();
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
      doc
        .font('Helvetica')
        .fontSize(8.5)
        .fillColor(INK)
        .text(e.label, lx + 23, ly + 2, { width: CONTENT_W - boxW - 45, lineBreak: false, height: 10 });
      ly += 18;
    }
  }
  if (o.facts?.length) ly = sideFacts(doc, lx, ly + 10, o.facts);
  doc.y = Math.max(y0 + h + 24, ly);
  doc.x = PAGE.margin;
}
