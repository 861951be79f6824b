/** Vector charts for report PDFs: a line chart over dates and a bar chart per period. */
import { ACCENT, CONTENT_W, type Doc, ensureSpace, INK, MUTED, PAGE } from './pdf-document.js';
import { MONTHS } from './pdf-format.js';

const DAY = 86_400_000;
const ms = (d: string) => Date.parse(`${d}T00:00:00Z`);

/** A round step (1, 2, 2.5 or 5 × 10^k) that cuts `span` into about `n` parts. */
export function niceStep(span: number, n: number): number {
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
    gridLine(doc, f, Y(v), v.toFixed(step < 0.1 ? 2 : 1));
  }
  // Month ticks when the span is long enough, else weekly ones.
  const ticks: Array<[number, string]> = [];
  const d0 = new Date(f.t0);
  if (f.t1 - f.t0 > 50 * DAY) {
    for (
      let m = new Date(Date.UTC(d0.getUTCFullYear(), d0.getUTCMonth() + (d0.getUTCDate() > 1 ? 1 : 0), 1));
      m.getTime() <= f.t1;
      m = new Date(Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + 1, 1))
    ) {
      ticks.push([m.getTime(), `${MONTHS[m.getUTCMonth()]}${m.getUTCMonth() === 0 ? ` ${m.getUTCFullYear()}` : ''}`]);
    }
  } else {
    for (let t = f.t0; t <= f.t1; t += 7 * DAY) {
      const d = new Date(t);
      ticks.push([t, `${d.getUTCDate()} ${MONTHS[d.getUTCMonth()]}`]);
    }
  }
  for (const [t, label] of ticks) {
    doc
      .save()
      .moveTo(X(t), f.y + f.h)
      .lineTo(X(t), f.y + f.h + 3)
      .lineWidth(0.5)
      .strokeColor(MUTED)
      .stroke()
      .restore();
    doc.text(label, X(t) - 20, f.y + f.h + 5, { width: 40, align: 'center', lineBreak: false, height: 9 });
  }
  drawAxes(doc, f, yLabel);
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
  o: {
    points: LinePoint[];
    start: string;
    end: string;
    yLabel: string;
    height?: number;
    markers?: Array<{ date: string; label: string; colour: string }>;
    levels?: Array<{ value: number; label: string }>;
  },
): void {
  const h = o.height ?? 190;
  ensureSpace(doc, h + 40);
  const vals = o.points.flatMap((p) => [p.value, p.lo ?? p.value, p.hi ?? p.value]);
  const step = niceStep(Math.max(0.1, Math.max(...vals) - Math.min(...vals)), 5);
  const f: Frame = {
    x: PAGE.margin + 44,
    y: doc.y + 6,
    w: CONTENT_W - 52,
    h,
    t0: ms(o.start),
    t1: ms(o.end),
    lo: Math.floor(Math.min(...vals) / step) * step,
    hi: Math.ceil(Math.max(...vals) / step) * step,
  };
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
    doc
      .save()
      .moveTo(f.x, Y(l.value))
      .lineTo(f.x + f.w, Y(l.value))
      .dash(2, { space: 2 })
      .lineWidth(0.6)
      .strokeColor(MUTED)
      .stroke()
      .undash()
      .restore();
    doc
      .font('Helvetica')
      .fontSize(6.5)
      .fillColor(MUTED)
      .text(l.label, f.x + f.w - 150, Y(l.value) - 8, { width: 148, align: 'right', lineBreak: false, height: 8 });
  }
  for (const m of o.markers ?? []) {
    const x = X(ms(m.date));
    doc
      .save()
      .moveTo(x, f.y)
      .lineTo(x, f.y + f.h)
      .dash(3, { space: 2 })
      .lineWidth(0.8)
      .strokeColor(m.colour)
      .stroke()
      .undash()
      .restore();
    doc
      .font('Helvetica-Bold')
      .fontSize(6.5)
      .fillColor(m.colour)
      .text(m.label, x + 2, f.y + 2, { width: 80, lineBreak: false, height: 8 });
  }
  if (o.points.length) {
    doc.save();
    for (const [k, p] of o.points.entries()) {
      if (k) doc.lineTo(X(ms(p.date)), Y(p.value));
      else doc.moveTo(X(ms(p.date)), Y(p.value));
    }
    doc.lineWidth(1.6).strokeColor(ACCENT).stroke().restore();
    for (const p of o.points)
      doc
        .save()
        .circle(X(ms(p.date)), Y(p.value), 2.2)
        .fill(ACCENT)
        .restore();
  }
  doc.y = f.y + f.h + 22;
  doc.x = PAGE.margin;
}

/** One bar per period (gaps left empty), value labels on top, and an optional trend line. */
export function barChart(
  doc: Doc,
  o: {
    bars: Array<{ label: string; value: number | null }>;
    yLabel: string;
    trend?: { first: number; last: number };
    height?: number;
  },
): void {
  const h = o.height ?? 170;
  ensureSpace(doc, h + 40);
  const vals = o.bars.flatMap((b) => (b.value === null ? [] : [b.value]));
  const lo = Math.min(0, ...vals);
  const hi = Math.max(...vals, 0.1);
  const step = niceStep(hi - lo, 5);
  const f = {
    x: PAGE.margin + 44,
    y: doc.y + 6,
    w: CONTENT_W - 52,
    h,
    lo: Math.floor(lo / step) * step,
    hi: Math.ceil(hi / step) * step,
  };
  const Y = (v: number) => f.y + f.h - ((v - f.lo) / (f.hi - f.lo)) * f.h;
  doc.font('Helvetica').fontSize(7).fillColor(MUTED);
  for (let v = f.lo; v <= f.hi + 1e-9; v += step) {
    gridLine(doc, f, Y(v), v.toFixed(step < 0.1 ? 2 : 1));
  }
  const slot = f.w / Math.max(1, o.bars.length);
  const bw = Math.min(28, slot * 0.7);
  const every = Math.ceil(o.bars.length / 14);
  o.bars.forEach((b, k) => {
    const cx = f.x + slot * (k + 0.5);
    if (b.value !== null) {
      doc
        .save()
        .rect(cx - bw / 2, Y(b.value), bw, Y(f.lo) - Y(b.value))
        .fill('#66a86f')
        .restore();
      if (o.bars.length <= 16)
        doc
          .font('Helvetica')
          .fontSize(6.5)
          .fillColor(INK)
          .text(b.value.toFixed(2), cx - 20, Y(b.value) - 9, {
            width: 40,
            align: 'center',
            lineBreak: false,
            height: 8,
          });
    } else {
      doc
        .font('Helvetica')
        .fontSize(6.5)
        .fillColor(MUTED)
        .text('no data', cx - 20, Y(f.lo) - 10, { width: 40, align: 'center', lineBreak: false, height: 8 });
    }
    if (k % every === 0)
      doc
        .font('Helvetica')
        .fontSize(6.5)
        .fillColor(MUTED)
        .text(b.label, cx - 26, f.y + f.h + 5, { width: 52, align: 'center', lineBreak: false, height: 8 });
  });
  if (o.trend) {
    doc
      .save()
      .moveTo(f.x + slot * 0.5, Y(o.trend.first))
      .lineTo(f.x + slot * (o.bars.length - 0.5), Y(o.trend.last))
      .dash(4, { space: 2 })
      .lineWidth(1.2)
      .strokeColor('#d7191c')
      .stroke()
      .undash()
      .restore();
  }
  drawAxes(doc, f, o.yLabel);
  doc.y = f.y + f.h + 22;
  doc.x = PAGE.margin;
}

/** The left and bottom axis lines of a chart frame and its vertical y-axis label. */
function drawAxes(doc: Doc, f: Pick<Frame, 'x' | 'y' | 'w' | 'h'>, yLabel: string): void {
  doc
    .save()
    .moveTo(f.x, f.y)
    .lineTo(f.x, f.y + f.h)
    .lineTo(f.x + f.w, f.y + f.h)
    .lineWidth(0.75)
    .strokeColor(INK)
    .stroke()
    .restore();
  doc
    .save()
    .rotate(-90, { origin: [f.x - 38, f.y + f.h / 2] })
    .font('Helvetica')
    .fontSize(7.5)
    .fillColor(MUTED)
    .text(yLabel, f.x - 38 - 60, f.y + f.h / 2 - 4, { width: 120, align: 'center', lineBreak: false, height: 10 })
    .restore();
}

/** A horizontal grid line across the frame at `y`, labelled on the left. */
function gridLine(doc: Doc, f: Pick<Frame, 'x' | 'w'>, y: number, label: string): void {
  doc
    .save()
    .moveTo(f.x, y)
    .lineTo(f.x + f.w, y)
    .lineWidth(0.4)
    .strokeColor('#e4e7eb')
    .stroke()
    .restore();
  doc.text(label, f.x - 30, y - 3, { width: 26, align: 'right', lineBreak: false, height: 9 });
}
