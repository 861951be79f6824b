/** The fields screen: list with search, map of outlines, details, index overlay, statistics and series. */
import { api, type Page, Problem, query } from './api.js';
import { renderSeries, type SeriesPoint } from './chart.js';
import { fill, fmt, h } from './dom.js';
import { FieldMap } from './map.js';
import { RAMPS, rampCss, rampOf } from './ramp.js';

export interface Field {
  id: string;
  name: string;
  boundary: GeoJSON.Polygon | GeoJSON.MultiPolygon;
  area_ha: number;
  bbox: [number, number, number, number];
  crop_type: string | null;
  planting_date: string | null;
  harvest_date: string | null;
  created_at: string;
}
interface Capture {
  id: string;
  source: string;
  capture_date: string;
  cloud_cover: number;
  valid_pixels: number;
  field_pixels: number;
}
interface CatalogEntry {
  name: string;
  long_name: string;
  formula: string;
  range: [number, number];
}
interface Stats {
  min: number | null;
  max: number | null;
  mean: number | null;
  std: number | null;
  count: number;
  valid_fraction: number | null;
  median: number | null;
  p10: number | null;
  p90: number | null;
}

export async function allPages<T>(path: string, params: Record<string, string | undefined> = {}): Promise<T[]> {
  const out: T[] = [];
  for (let page = 1; ; page++) {
    const p = await api<Page<T>>(`${path}${query({ ...params, per_page: 100, page })}`);
    out.push(...p.data);
    if (page >= p.total_pages) return out;
  }
}

export class FieldsView {
  readonly el: HTMLElement;
  fields: Field[] = [];
  private map: FieldMap | null = null;
  private catalog: CatalogEntry[] = [];
  private captures: Capture[] = [];
  private current: Field | null = null;
  private formulaOk = '';
  private validateTimer = 0;
  private loadSeq = 0;
  private list = h('ul', { id: 'field-list', class: 'field-list' });
  private search = h('input', {
    id: 'field-search',
    type: 'search',
    placeholder: 'name, crop or id',
    autocomplete: 'off',
  });
  private count = h('p', { class: 'hint', id: 'field-count' });
  private panel = h('section', { id: 'field-panel', class: 'panel', 'aria-live': 'polite', hidden: true });
  private indexSelect = h('select', { id: 'index-select' });
  private formula = h('input', {
    id: 'formula',
    type: 'text',
    spellcheck: 'false',
    autocomplete: 'off',
    placeholder: '(B08 - B04) / (B08 + B04)',
  });
  private formulaMsg = h('div', { id: 'formula-message', class: 'formula-message' });
  private dateSelect = h('select', { id: 'date-select' });
  private interval = h(
    'select',
    { id: 'interval-select' },
    ...['weekly', 'biweekly', 'daily'].map((v) => h('option', { value: v }, v)),
  );
  private legend = h('div', { id: 'legend', class: 'legend' });
  private stats = h('div', { id: 'stats' });
  private series = h('div', { id: 'series', class: 'series' });
  private overlayState = h('p', { id: 'overlay-state', class: 'hint' });

  constructor(private readonly report: (err: unknown) => void) {
    const mapEl = h('div', { id: 'map', class: 'map', role: 'region', 'aria-label': 'Map of the fields' });
    this.el = h(
      'section',
      { id: 'view-fields', class: 'fields-layout' },
      h(
        'div',
        { class: 'sidebar' },
        h('h2', {}, 'Fields'),
        h('label', { for: 'field-search' }, 'Search'),
        this.search,
        this.count,
        this.list,
      ),
      mapEl,
      this.panel,
    );
    this.search.addEventListener('input', () => this.renderList());
    this.indexSelect.addEventListener('change', () => this.indexChanged());
    this.formula.addEventListener('input', () => this.formulaChanged());
    this.dateSelect.addEventListener('change', () => this.refresh({ series: false }));
    this.interval.addEventListener('change', () => this.loadSeries());
    this.mapEl = mapEl;
  }
  private mapEl: HTMLElement;

  async load(): Promise<void> {
    this.count.textContent = 'Loading…';
    const [fields, catalog] = await Promise.all([
      allPages<Field>('/fields'),
      api<{ data: CatalogEntry[] }>('/indices/catalog').then((c) => c.data),
    ]);
    this.fields = fields;
    this.catalog = catalog;
    this.renderList();
    performance.mark('fields-listed');
    this.map ??= new FieldMap(this.mapEl, (id) => void this.open(id));
    this.map.setFields(fields);
    this.indexSelect.replaceChildren(
      ...catalog.map((c) => h('option', { value: c.name, title: c.long_name }, `${c.name} — ${c.long_name}`)),
      h('option', { value: 'custom' }, 'Custom formula…'),
    );
  }

  resize(): void {
    this.map?.resize();
  }

  private renderList(): void {
    const q = this.search.value.trim().toLowerCase();
    const shown = this.fields.filter(
      (f) =>
        !q ||
        f.name.toLowerCase().includes(q) ||
        (f.crop_type ?? '').toLowerCase().includes(q) ||
        f.id.toLowerCase().includes(q),
    );
    this.count.textContent = `${shown.length} of ${this.fields.length} field${this.fields.length === 1 ? '' : 's'}`;
    this.list.replaceChildren(
      ...shown.map((f) =>
        h(
          'li',
          {},
          h(
            'button',
            {
              type: 'button',
              class: f.id === this.current?.id ? 'field-item selected' : 'field-item',
              'data-id': f.id,
              onclick: () => void this.open(f.id),
            },
            // elementtiming: when the list's names are painted (npm run bench -- dashboard reads it).
            h('strong', { elementtiming: 'field-list' }, f.name),
            h('span', {}, `${f.crop_type ?? 'no crop'} · ${fmt(f.area_ha, 1)} ha`),
          ),
        ),
      ),
    );
  }

  async open(id: string): Promise<void> {
    const f = this.fields.find((x) => x.id === id);
    if (!f) return;
    this.current = f;
    this.renderList();
    this.map?.select(f);
    this.panel.hidden = false;
    this.panel.replaceChildren(
      h('h2', { id: 'field-name' }, f.name),
      h(
        'dl',
        { class: 'details', id: 'field-details' },
        h('dt', {}, 'Crop'),
        h('dd', {}, f.crop_type ?? '—'),
        h('dt', {}, 'Area'),
        h('dd', {}, `${fmt(f.area_ha, 2)} ha`),
        h('dt', {}, 'Planted'),
        h('dd', {}, f.planting_date ?? '—'),
        h('dt', {}, 'Harvest'),
        h('dd', {}, f.harvest_date ?? '—'),
        h('dt', {}, 'Id'),
        h('dd', { class: 'mono' }, f.id),
      ),
      h(
        'div',
        { class: 'controls' },
        h('label', { for: 'index-select' }, 'Index'),
        this.indexSelect,
        h('label', { for: 'formula', class: 'custom-only' }, 'Formula'),
        h('div', { class: 'custom-only' }, this.formula, this.formulaMsg),
        h('label', { for: 'date-select' }, 'Capture'),
        this.dateSelect,
      ),
      this.overlayState,
      this.legend,
      this.stats,
      h(
        'div',
        { class: 'series-head' },
        h('h3', {}, 'Time series'),
        h('label', { for: 'interval-select' }, 'Interval'),
        this.interval,
      ),
      this.series,
    );
    this.panel.classList.toggle('custom', this.indexSelect.value === 'custom');
    this.dateSelect.replaceChildren(h('option', {}, 'Loading captures…'));
    try {
      this.captures = (await allPages<Capture>(`/fields/${f.id}/imagery`)).sort((a, b) =>
        a.capture_date.localeCompare(b.capture_date),
      );
    } catch (err) {
      this.captures = [];
      this.report(err);
    }
    if (this.current !== f) return;
    this.dateSelect.replaceChildren(
      ...this.captures.map((c) =>
        h(
          'option',
          { value: c.id, 'data-date': c.capture_date },
          `${c.capture_date} · cloud ${fmt(c.cloud_cover, 0)} % · ${c.source}`,
        ),
      ),
    );
    if (!this.captures.length) {
      this.dateSelect.append(h('option', { value: '' }, 'No captures over this field'));
      this.stats.replaceChildren();
      this.series.replaceChildren(h('p', { class: 'hint' }, 'No captures over this field yet.'));
      return;
    }
    // The latest capture with most of the field usable (at most 30 % cloud) in the season (planting to
    // harvest) when the field has one, as reports choose; else the latest clear one; else the latest.
    const inSeason = (c: Capture) =>
      (!f.planting_date || c.capture_date >= f.planting_date) && (!f.harvest_date || c.capture_date <= f.harvest_date);
    const latest = [...this.captures].reverse();
    const clear =
      latest.find((c) => c.cloud_cover <= 30 && inSeason(c)) ??
      latest.find((c) => c.cloud_cover <= 30) ??
      this.captures[this.captures.length - 1]!;
    this.dateSelect.value = clear.id;
    await this.refresh({ series: true });
  }

  private indexParams(): { index: string; formula?: string } | null {
    const index = this.indexSelect.value;
    if (index !== 'custom') return { index };
    return this.formulaOk ? { index: 'custom', formula: this.formulaOk } : null;
  }

  private indexChanged(): void {
    this.panel.classList.toggle('custom', this.indexSelect.value === 'custom');
    if (this.indexSelect.value === 'custom') {
      this.formula.focus();
      if (this.formulaOk) void this.refresh({ series: true });
      return;
    }
    void this.refresh({ series: true });
  }

  private formulaChanged(): void {
    window.clearTimeout(this.validateTimer);
    this.validateTimer = window.setTimeout(() => void this.validate(), 350);
  }

  private async validate(): Promise<void> {
    const text = this.formula.value;
    if (!text.trim()) {
      this.formulaMsg.replaceChildren();
      return;
    }
    try {
      const r = await api<{ bands: string[]; operations: number }>('/indices/validate', {
        method: 'POST',
        body: { formula: text },
      });
      if (this.formula.value !== text) return;
      this.formula.removeAttribute('aria-invalid');
      this.formulaMsg.className = 'formula-message ok';
      this.formulaMsg.replaceChildren(`Valid: reads ${r.bands.join(', ') || 'no band'}.`);
      this.formulaOk = text;
      await this.refresh({ series: true });
    } catch (err) {
      if (this.formula.value !== text) return;
      if (!(err instanceof Problem) || err.code !== 'invalid_formula') return this.report(err);
      const pos = typeof err.body.position === 'number' ? err.body.position : null;
      this.formula.setAttribute('aria-invalid', 'true');
      this.formulaMsg.className = 'formula-message error';
      fill(
        this.formulaMsg,
        h('strong', {}, err.title),
        h('span', { id: 'formula-detail' }, ` ${err.detail}`),
        pos === null
          ? null
          : h('pre', { id: 'formula-caret', 'aria-hidden': 'true' }, text, '\n', `${' '.repeat(pos)}^`),
      );
      if (pos !== null) this.formula.setSelectionRange(pos, Math.min(text.length, pos + 1));
    }
  }

  private selectedCapture(): Capture | undefined {
    return this.captures.find((c) => c.id === this.dateSelect.value);
  }

  /** Statistics and overlay of the chosen capture (and the series when the index changed). */
  private async refresh(what: { series: boolean }): Promise<void> {
    const f = this.current;
    const cap = this.selectedCapture();
    const idx = this.indexParams();
    if (!f || !cap || !idx) return;
    const seq = ++this.loadSeq;
    if (what.series) void this.loadSeries();
    const common = { ...idx, date: cap.capture_date, imagery_id: cap.id };
    let stats: Stats | null = null;
    this.stats.replaceChildren(h('p', { class: 'hint' }, 'Computing statistics…'));
    try {
      const r = await api<{ zonal_stats: Stats; date: string }>(
        `/fields/${f.id}/indices${query({ ...common, zonal_stats: true, geojson: false })}`,
      );
      stats = r.zonal_stats;
    } catch (err) {
      this.stats.replaceChildren();
      this.report(err);
    }
    if (seq !== this.loadSeq) return;
    if (stats) this.renderStats(stats, cap);
    const entry = this.catalog.find((c) => c.name === idx.index);
    let lo = stats?.p10 ?? entry?.range[0] ?? 0;
    let hi = stats?.p90 ?? entry?.range[1] ?? 1;
    if (stats?.min !== null && stats?.max !== null && stats) [lo, hi] = [stats.min!, stats.max!];
    if (!(hi > lo)) [lo, hi] = [lo - 0.05, hi + 0.05];
    const rescale = `${lo.toFixed(3)},${hi.toFixed(3)}`;
    this.renderLegend(idx.index === 'custom' ? 'Custom' : idx.index, RAMPS[rampOf(entry?.range)], lo, hi);
    this.overlayState.textContent = 'Loading the overlay…';
    try {
      const tj = await api<{ tiles: string[]; bounds?: number[]; minzoom?: number; maxzoom?: number }>(
        `/fields/${f.id}/indices/tilejson.json${query({ ...common, rescale })}`,
      );
      if (seq !== this.loadSeq) return;
      this.map?.showOverlay(tj, (err) => this.report(err));
      this.overlayState.textContent = `Overlay: ${idx.index} on ${cap.capture_date} (cloud ${fmt(cap.cloud_cover, 0)} %).`;
    } catch (err) {
      this.map?.clearOverlay();
      this.overlayState.textContent = 'No overlay.';
      this.report(err);
    }
  }

  private renderStats(st: Stats, cap: Capture): void {
    const row = (k: string, v: string) => h('tr', {}, h('th', { scope: 'row' }, k), h('td', {}, v));
    this.stats.replaceChildren(
      h(
        'table',
        { class: 'stats', id: 'stats-table' },
        h('caption', {}, `Zonal statistics, ${cap.capture_date}`),
        h(
          'tbody',
          {},
          row('Mean', fmt(st.mean)),
          row('Median', fmt(st.median)),
          row('Min – max', `${fmt(st.min)} – ${fmt(st.max)}`),
          row('P10 – P90', `${fmt(st.p10)} – ${fmt(st.p90)}`),
          row('Std', fmt(st.std)),
          row('Valid pixels', `${st.count} (${fmt((st.valid_fraction ?? 0) * 100, 1)} %)`),
        ),
      ),
    );
  }

  private renderLegend(name: string, stops: string[], lo: number, hi: number): void {
    const bar = h('div', {
      class: 'ramp',
      role: 'img',
      'aria-label': `${name} colour scale from ${fmt(lo)} to ${fmt(hi)}`,
    });
    bar.style.background = rampCss(stops);
    this.legend.replaceChildren(
      h('span', { class: 'legend-title' }, name),
      bar,
      h(
        'div',
        { class: 'legend-ticks' },
        h('span', {}, fmt(lo, 2)),
        h('span', {}, fmt((lo + hi) / 2, 2)),
        h('span', {}, fmt(hi, 2)),
      ),
    );
  }

  private async loadSeries(): Promise<void> {
    const f = this.current;
    const idx = this.indexParams();
    if (!f || !idx || !this.captures.length) return;
    const start = this.captures[0]!.capture_date;
    const end = this.captures[this.captures.length - 1]!.capture_date;
    this.series.replaceChildren(h('p', { class: 'hint' }, 'Loading the series…'));
    try {
      const pts = await api<SeriesPoint[]>(
        `/fields/${f.id}/indices/timeseries${query({ ...idx, start_date: start, end_date: end, interval: this.interval.value })}`,
      );
      if (this.current !== f) return;
      renderSeries(this.series, pts, (p) => {
        const cap =
          this.captures.find((c) => c.id === p.imagery_id) ?? this.captures.find((c) => c.capture_date === p.date);
        if (!cap) return;
        this.dateSelect.value = cap.id;
        void this.refresh({ series: false });
      });
    } catch (err) {
      this.series.replaceChildren();
      this.report(err);
    }
  }
}
