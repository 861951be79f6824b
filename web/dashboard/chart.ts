/**
 * The time-series chart, drawn as SVG by hand: the mean as a line, the min–max band behind it, both
 * broken at gaps (an interval without a usable capture is never interpolated; it is marked on the
 * axis), a readout of the point under the pointer or keyboard focus, and a click (or Enter) on a
 * point to show that capture on the map.
 */
import { fmt, h, s } from './dom.js';

export interface SeriesPoint {
  date: string;
  mean: number | null;
  min: number | null;
  max: number | null;
  imagery_id: string | null;
  interval_start: string;
  interval_end: string;
  cloud_cover: number | null;
}

const H = 220;
const PAD = { l: 44, r: 12, t: 10, b: 26 };
const day = (d: string) => Date.parse(`${d}T00:00:00Z`);

export function renderSeries(box: HTMLElement, points: SeriesPoint[], onPick: (p: SeriesPoint) => void): void {
  box.replaceChildren();
  // Drawn at the box's own width, so that its text is at the page's scale.
  const W = Math.max(300, Math.round(box.clientWidth || 640));
  const readout = h('output', { id: 'series-readout', 'aria-live': 'polite' }, 'Point at the chart to read a value.');
  if (!points.length) {
    box.append(h('p', { class: 'hint' }, 'No interval in this period.'));
    return;
  }
  const valued = points.filter((p) => p.mean !== null);
  const x0 = day(points[0]!.interval_start);
  const x1 = Math.max(day(points[points.length - 1]!.interval_end), x0 + 86_400_000);
  let y0 = Math.min(...valued.map((p) => p.min ?? p.mean!));
  let y1 = Math.max(...valued.map((p) => p.max ?? p.mean!));
  if (!valued.length) [y0, y1] = [0, 1];
  if (y1 - y0 < 1e-6) [y0, y1] = [y0 - 0.05, y1 + 0.05];
  const padY = (y1 - y0) * 0.08;
  y0 -= padY;
  y1 += padY;
  const X = (d: string) => PAD.l + ((day(d) - x0) / (x1 - x0)) * (W - PAD.l - PAD.r);
  const Y = (v: number) => PAD.t + (1 - (v - y0) / (y1 - y0)) * (H - PAD.t - PAD.b);

  const svg = s('svg', { viewBox: `0 0 ${W} ${H}`, class: 'chart', role: 'group', 'aria-label': 'Index time series' });
  // Axes and grid.
  for (let k = 0; k <= 4; k++) {
    const v = y0 + ((y1 - y0) * k) / 4;
    svg.append(s('line', { x1: PAD.l, x2: W - PAD.r, y1: Y(v), y2: Y(v), class: 'grid' }));
    const t = s('text', { x: PAD.l - 4, y: Y(v) + 4, class: 'tick', 'text-anchor': 'end' });
    t.textContent = v.toFixed(2);
    svg.append(t);
  }
  const first = new Date(x0);
  for (let m = new Date(Date.UTC(first.getUTCFullYear(), first.getUTCMonth() + 1, 1)); m.getTime() < x1; ) {
    const iso = m.toISOString().slice(0, 10);
    const x = X(iso);
    svg.append(s('line', { x1: x, x2: x, y1: PAD.t, y2: H - PAD.b, class: 'grid' }));
    const t = s('text', { x, y: H - 8, class: 'tick', 'text-anchor': 'middle' });
    t.textContent = m.toLocaleString('en', { month: 'short', timeZone: 'UTC' });
    svg.append(t);
    m = new Date(Date.UTC(m.getUTCFullYear(), m.getUTCMonth() + 1, 1));
  }
  // Runs of consecutive valued points: a band and a line each; gaps break them.
  const runs: SeriesPoint[][] = [];
  let run: SeriesPoint[] = [];
  for (const p of points) {
    if (p.mean === null) {
      if (run.length) runs.push(run);
      run = [];
      svg.append(
        s('rect', {
          x: X(p.interval_start),
          y: H - PAD.b - 4,
          width: Math.max(2, X(p.interval_end) - X(p.interval_start)),
          height: 4,
          class: 'gap',
        }),
      );
    } else run.push(p);
  }
  if (run.length) runs.push(run);
  for (const r of runs) {
    const top = r.map((p) => `${X(p.date).toFixed(1)},${Y(p.max ?? p.mean!).toFixed(1)}`);
    const bottom = r.map((p) => `${X(p.date).toFixed(1)},${Y(p.min ?? p.mean!).toFixed(1)}`).reverse();
    if (r.length > 1) svg.append(s('polygon', { points: [...top, ...bottom].join(' '), class: 'band' }));
    else
      svg.append(
        s('line', { x1: X(r[0]!.date), x2: X(r[0]!.date), y1: Y(r[0]!.max!), y2: Y(r[0]!.min!), class: 'band-line' }),
      );
    svg.append(
      s('path', { d: `M${r.map((p) => `${X(p.date).toFixed(1)},${Y(p.mean!).toFixed(1)}`).join('L')}`, class: 'line' }),
    );
  }
  const cursor = s('line', { y1: PAD.t, y2: H - PAD.b, class: 'cursor', visibility: 'hidden' });
  svg.append(cursor);
  const describe = (p: SeriesPoint) =>
    p.mean === null
      ? `${p.interval_start} – ${p.interval_end}: gap (no usable capture${p.cloud_cover !== null ? `; best had ${fmt(p.cloud_cover, 0)} % cloud` : ''})`
      : `${p.date}: mean ${fmt(p.mean)} (min ${fmt(p.min)}, max ${fmt(p.max)})`;
  const show = (p: SeriesPoint) => {
    readout.textContent = describe(p);
    const x = p.mean === null ? (X(p.interval_start) + X(p.interval_end)) / 2 : X(p.date);
    cursor.setAttribute('x1', String(x));
    cursor.setAttribute('x2', String(x));
    cursor.setAttribute('visibility', 'visible');
  };
  for (const p of valued) {
    const c = s('circle', {
      cx: X(p.date),
      cy: Y(p.mean!),
      r: 4,
      class: 'point',
      tabindex: 0,
      role: 'button',
      'data-date': p.date,
      'aria-label': `${describe(p)}. Show on the map.`,
    });
    c.addEventListener('click', () => onPick(p));
    c.addEventListener('focus', () => show(p));
    c.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' || e.key === ' ') {
        e.preventDefault();
        onPick(p);
      }
    });
    svg.append(c);
  }
  svg.addEventListener('pointermove', (e) => {
    const rect = svg.getBoundingClientRect();
    const x = ((e.clientX - rect.left) / rect.width) * W;
    let best = points[0]!;
    let bestD = Number.POSITIVE_INFINITY;
    for (const p of points) {
      const px = p.mean === null ? (X(p.interval_start) + X(p.interval_end)) / 2 : X(p.date);
      const d = Math.abs(px - x);
      if (d < bestD) [best, bestD] = [p, d];
    }
    show(best);
  });
  box.append(svg, readout);
}
