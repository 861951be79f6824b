/** Reports, webhooks, alerts and subscriptions: lists with paging and the actions the API offers. */
import { api, type Page, Problem, query } from './api.js';
import { fill, fmt, h, when } from './dom.js';
import type { Field } from './fields.js';

type Report = (err: unknown) => void;
type Notice = (text: string) => void;

function pager(p: Page<unknown>, go: (page: number) => void, label: string): HTMLElement {
  return h(
    'nav',
    { class: 'pager', 'aria-label': `${label} pages` },
    h('button', { type: 'button', disabled: p.page <= 1, onclick: () => go(p.page - 1) }, '‹ Previous'),
    h('span', {}, `Page ${p.page} of ${Math.max(1, p.total_pages)} · ${p.total} in all`),
    h('button', { type: 'button', disabled: p.page >= p.total_pages, onclick: () => go(p.page + 1) }, 'Next ›'),
  );
}

const select = (id: string, values: readonly string[], first?: [string, string]) =>
  h(
    'select',
    { id, name: id },
    first ? h('option', { value: first[0] }, first[1]) : null,
    ...values.map((v) => h('option', { value: v }, v)),
  );

// ---------------------------------------------------------------- reports
interface ReportRow {
  id: string;
  field_id: string;
  type: string;
  format: string;
  status: string;
  created_at: string;
  download_url: string | null;
  error: string | null;
  size_bytes: number | null;
  filename: string | null;
}
const TYPES = ['scouting', 'seasonal', 'health_summary', 'prescription'] as const;
const FORMATS = ['pdf', 'json', 'csv'] as const;
/** Options per type, as the API takes them (an option that does not apply is a 400). */
const OPTIONS: Record<
  string,
  { name: string; label: string; kind: 'date' | 'text' | 'number' | string[]; types: string[] }
> = {
  index: { name: 'index', label: 'Index', kind: 'text', types: [...TYPES] },
  date: { name: 'date', label: 'Date', kind: 'date', types: ['scouting', 'prescription'] },
  start_date: { name: 'start_date', label: 'Start', kind: 'date', types: ['seasonal', 'health_summary'] },
  end_date: { name: 'end_date', label: 'End', kind: 'date', types: ['seasonal', 'health_summary'] },
  period: { name: 'period', label: 'Period', kind: ['weekly', 'monthly'], types: ['health_summary'] },
  prescription_input: {
    name: 'prescription_input',
    label: 'Input',
    kind: ['nitrogen', 'seed_rate', 'phosphorus', 'potassium', 'lime'],
    types: ['prescription'],
  },
  base_rate: { name: 'base_rate', label: 'Base rate', kind: 'number', types: ['prescription'] },
  unit: { name: 'unit', label: 'Unit', kind: ['kg/ha', 't/ha', 'l/ha', 'seeds/ha'], types: ['prescription'] },
  zones: { name: 'zones', label: 'Zones (2–7)', kind: 'number', types: ['prescription'] },
  zoning: { name: 'zoning', label: 'Zoning', kind: ['quantiles', 'kmeans'], types: ['prescription'] },
  rate_direction: {
    name: 'rate_direction',
    label: 'Rate direction',
    kind: ['inverse', 'proportional'],
    types: ['prescription'],
  },
  rate_spread: { name: 'rate_spread', label: 'Rate spread (0–1)', kind: 'number', types: ['prescription'] },
  min_zone_ha: { name: 'min_zone_ha', label: 'Smallest zone (ha)', kind: 'number', types: ['prescription'] },
};

export class ReportsView {
  readonly el = h('section', { id: 'view-reports', class: 'screen' });
  private list = h('div', { id: 'report-list' });
  private filters = { field_id: '', type: '', status: '', page: 1 };
  private polling = new Set<string>();
  constructor(
    private readonly fields: () => Field[],
    private readonly report: Report,
    private readonly notice: Notice,
  ) {}

  render(): void {
    const fieldSel = h(
      'select',
      { id: 'report-field', name: 'field' },
      ...this.fields().map((f) => h('option', { value: f.id }, f.name)),
    );
    const typeSel = select('report-type', TYPES);
    const formatSel = select('report-format', FORMATS);
    const opts = h('div', { class: 'options', id: 'report-options' });
    const drawOptions = () => {
      opts.replaceChildren(
        ...Object.values(OPTIONS)
          .filter((o) => o.types.includes(typeSel.value))
          .map((o) => {
            const id = `opt-${o.name}`;
            const input = Array.isArray(o.kind)
              ? select(id, o.kind, ['', 'default'])
              : h('input', {
                  id,
                  name: id,
                  type: o.kind,
                  step: o.kind === 'number' ? 'any' : null,
                  placeholder: 'default',
                });
            return h('div', { class: 'opt' }, h('label', { for: id }, o.label), input);
          }),
      );
    };
    typeSel.addEventListener('change', drawOptions);
    drawOptions();
    const form = h(
      'form',
      { id: 'report-form', class: 'card' },
      h('h3', {}, 'Request a report'),
      h('div', { class: 'row' }, h('label', { for: 'report-field' }, 'Field'), fieldSel),
      h('div', { class: 'row' }, h('label', { for: 'report-type' }, 'Type'), typeSel),
      h('div', { class: 'row' }, h('label', { for: 'report-format' }, 'Format'), formatSel),
      opts,
      h('button', { type: 'submit' }, 'Request report'),
    );
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const options: Record<string, unknown> = {};
      for (const o of Object.values(OPTIONS)) {
        if (!o.types.includes(typeSel.value)) continue;
        const v = (form.querySelector(`#opt-${o.name}`) as HTMLInputElement | null)?.value.trim();
        if (v) options[o.name] = o.kind === 'number' ? Number(v) : v;
      }
      try {
        const r = await api<ReportRow>(`/fields/${fieldSel.value}/reports`, {
          method: 'POST',
          body: { type: typeSel.value, format: formatSel.value, ...(Object.keys(options).length ? { options } : {}) },
        });
        this.notice(`Report ${r.id} requested: ${r.status}.`);
        this.filters.page = 1;
        await this.load();
        this.poll(r.id);
      } catch (err) {
        this.report(err);
      }
    });
    const filter = h(
      'form',
      { class: 'filters', id: 'report-filters' },
      h('label', { for: 'filter-field' }, 'Field'),
      h(
        'select',
        { id: 'filter-field' },
        h('option', { value: '' }, 'all'),
        ...this.fields().map((f) => h('option', { value: f.id }, f.name)),
      ),
      h('label', { for: 'filter-type' }, 'Type'),
      select('filter-type', TYPES, ['', 'all']),
      h('label', { for: 'filter-status' }, 'Status'),
      select('filter-status', ['pending', 'processing', 'ready', 'failed'], ['', 'all']),
    );
    filter.addEventListener('change', () => {
      this.filters.field_id = (filter.querySelector('#filter-field') as HTMLSelectElement).value;
      this.filters.type = (filter.querySelector('#filter-type') as HTMLSelectElement).value;
      this.filters.status = (filter.querySelector('#filter-status') as HTMLSelectElement).value;
      this.filters.page = 1;
      void this.load();
    });
    filter.addEventListener('submit', (e) => e.preventDefault());
    this.el.replaceChildren(h('h2', {}, 'Reports'), form, h('h3', {}, 'Your reports'), filter, this.list);
    void this.load();
  }

  async load(): Promise<void> {
    try {
      const p = await api<Page<ReportRow>>(`/reports${query({ ...this.filters, per_page: 10 })}`);
      const names = new Map(this.fields().map((f) => [f.id, f.name]));
      this.list.replaceChildren(
        p.data.length
          ? h(
              'table',
              { class: 'list' },
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ...['Report', 'Field', 'Type', 'Format', 'Status', 'Requested', ''].map((t) =>
                    h('th', { scope: 'col' }, t),
                  ),
                ),
              ),
              h(
                'tbody',
                {},
                ...p.data.map((r) =>
                  h(
                    'tr',
                    { 'data-id': r.id },
                    h('td', { class: 'mono' }, r.id),
                    h('td', {}, names.get(r.field_id) ?? r.field_id),
                    h('td', {}, r.type),
                    h('td', {}, r.format),
                    h(
                      'td',
                      { class: `status status-${r.status}` },
                      r.status,
                      r.error ? h('div', { class: 'error-text' }, r.error) : null,
                    ),
                    h('td', {}, when(r.created_at)),
                    h(
                      'td',
                      { class: 'actions' },
                      r.download_url
                        ? h(
                            'a',
                            {
                              href: r.download_url,
                              download: r.filename ?? '',
                              class: 'button',
                              'aria-label': `Download ${r.id}`,
                            },
                            `Download${r.size_bytes ? ` (${fmt(r.size_bytes / 1024, 0)} kB)` : ''}`,
                          )
                        : null,
                      h(
                        'button',
                        {
                          type: 'button',
                          class: 'danger',
                          onclick: () => void this.remove(r.id),
                          'aria-label': `Delete ${r.id}`,
                        },
                        'Delete',
                      ),
                    ),
                  ),
                ),
              ),
            )
          : h('p', { class: 'hint' }, 'No report matches.'),
        pager(
          p,
          (page) => {
            this.filters.page = page;
            void this.load();
          },
          'Report',
        ),
      );
      for (const r of p.data) if (r.status === 'pending' || r.status === 'processing') this.poll(r.id);
    } catch (err) {
      this.report(err);
    }
  }

  private poll(id: string): void {
    if (this.polling.has(id)) return;
    this.polling.add(id);
    const tick = async () => {
      try {
        const r = await api<ReportRow>(`/reports/${id}`);
        if (r.status === 'ready' || r.status === 'failed') {
          this.polling.delete(id);
          this.notice(`Report ${id}: ${r.status}${r.error ? ` (${r.error})` : ''}.`);
          await this.load();
          return;
        }
        const cell = this.list.querySelector(`tr[data-id="${id}"] .status`);
        if (cell) cell.textContent = r.status;
        window.setTimeout(tick, 1000);
      } catch (err) {
        this.polling.delete(id);
        this.report(err);
      }
    };
    window.setTimeout(tick, 700);
  }

  private async remove(id: string): Promise<void> {
    if (!window.confirm(`Delete report ${id} and its file?`)) return;
    try {
      await api(`/reports/${id}`, { method: 'DELETE' });
      this.notice(`Report ${id} deleted.`);
      await this.load();
    } catch (err) {
      this.report(err);
    }
  }
}

// ---------------------------------------------------------------- webhooks
interface Webhook {
  id: string;
  url: string;
  events: string[];
  status: 'active' | 'disabled';
  disabled_reason: string | null;
  consecutive_failures: number;
  created_at: string;
  secret?: string;
}
interface Delivery {
  id: string;
  event_type: string;
  status: string;
  attempt_count: number;
  next_attempt_at: string | null;
  stopped_reason: string | null;
  created_at: string;
  attempts: Array<{
    attempt: number;
    attempted_at: string;
    status_code: number | null;
    error: string | null;
    latency_ms: number;
  }>;
}
const EVENTS = [
  'imagery.available',
  'alert.triggered',
  'report.ready',
  'field.updated',
  'season.started',
  'season.ended',
];

export class WebhooksView {
  readonly el = h('section', { id: 'view-webhooks', class: 'screen' });
  private list = h('div', { id: 'webhook-list' });
  private log = h('div', { id: 'delivery-log' });
  private outcome = h('div', { id: 'register-outcome', 'aria-live': 'polite' });
  private page = 1;
  constructor(
    private readonly report: Report,
    private readonly notice: Notice,
  ) {}

  render(): void {
    const form = h(
      'form',
      { id: 'webhook-form', class: 'card' },
      h('h3', {}, 'Register a webhook'),
      h(
        'div',
        { class: 'row' },
        h('label', { for: 'webhook-url' }, 'HTTPS URL'),
        h('input', { id: 'webhook-url', type: 'url', required: true, placeholder: 'https://hooks.example.com/fields' }),
      ),
      h(
        'fieldset',
        { class: 'events' },
        h('legend', {}, 'Events'),
        ...EVENTS.map((e) =>
          h(
            'label',
            {},
            h('input', { type: 'checkbox', name: 'event', value: e, checked: e === 'report.ready' }),
            ` ${e}`,
          ),
        ),
      ),
      h(
        'div',
        { class: 'row' },
        h('label', { for: 'webhook-secret' }, 'Secret (optional, 16–256 characters)'),
        h('input', { id: 'webhook-secret', type: 'password', autocomplete: 'off' }),
      ),
      h('button', { type: 'submit' }, 'Register (sends a test delivery)'),
      this.outcome,
    );
    form.addEventListener('submit', async (e) => {
      e.preventDefault();
      const url = (form.querySelector('#webhook-url') as HTMLInputElement).value.trim();
      const secret = (form.querySelector('#webhook-secret') as HTMLInputElement).value;
      const events = [...form.querySelectorAll<HTMLInputElement>('input[name=event]:checked')].map((i) => i.value);
      this.outcome.replaceChildren('Sending the test delivery…');
      try {
        const w = await api<Webhook>('/webhooks', {
          method: 'POST',
          body: { url, events, ...(secret ? { secret } : {}) },
        });
        fill(
          this.outcome,
          h('p', { class: 'ok' }, `Registered ${w.id}: the test delivery was answered 200.`),
          w.secret ? h('p', {}, 'Signing secret (shown once): ', h('code', { class: 'mono' }, w.secret)) : null,
        );
        await this.load();
      } catch (err) {
        const td =
          err instanceof Problem
            ? (err.body.test_delivery as { status_code: number | null; error: string | null } | undefined)
            : undefined;
        this.outcome.replaceChildren(
          h(
            'p',
            { class: 'error-text' },
            td
              ? `Test delivery: ${td.status_code !== null ? `HTTP ${td.status_code}` : 'no answer'}${td.error ? ` (${td.error})` : ''}. Nothing was stored.`
              : 'Not registered.',
          ),
        );
        this.report(err);
      }
    });
    this.el.replaceChildren(h('h2', {}, 'Webhooks'), this.list, form, this.log);
    void this.load();
  }

  async load(): Promise<void> {
    try {
      const p = await api<Page<Webhook>>(`/webhooks${query({ page: this.page, per_page: 20 })}`);
      this.list.replaceChildren(
        p.data.length
          ? h(
              'table',
              { class: 'list' },
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ...['Webhook', 'URL', 'Events', 'Status', 'Failures in a row', ''].map((t) =>
                    h('th', { scope: 'col' }, t),
                  ),
                ),
              ),
              h(
                'tbody',
                {},
                ...p.data.map((w) => {
                  const replay = h('input', { type: 'checkbox', id: `replay-${w.id}` });
                  return h(
                    'tr',
                    { 'data-id': w.id },
                    h('td', { class: 'mono' }, w.id),
                    h('td', { class: 'url' }, w.url),
                    h('td', {}, w.events.join(', ')),
                    h(
                      'td',
                      { class: `status status-${w.status}` },
                      w.status,
                      w.disabled_reason ? h('div', { class: 'error-text' }, w.disabled_reason) : null,
                    ),
                    h('td', {}, String(w.consecutive_failures)),
                    h(
                      'td',
                      { class: 'actions' },
                      h('button', { type: 'button', onclick: () => void this.showLog(w) }, 'Deliveries'),
                      w.status === 'disabled'
                        ? h(
                            'span',
                            { class: 'reenable' },
                            h(
                              'button',
                              {
                                type: 'button',
                                class: 'primary',
                                onclick: () => void this.reenable(w, replay.checked),
                              },
                              'Re-enable',
                            ),
                            h('label', { for: `replay-${w.id}` }, replay, ' replay'),
                          )
                        : null,
                      h('button', { type: 'button', class: 'danger', onclick: () => void this.remove(w) }, 'Delete'),
                    ),
                  );
                }),
              ),
            )
          : h('p', { class: 'hint' }, 'No webhook yet.'),
        pager(
          p,
          (page) => {
            this.page = page;
            void this.load();
          },
          'Webhook',
        ),
      );
    } catch (err) {
      this.report(err);
    }
  }

  private async reenable(w: Webhook, replay: boolean): Promise<void> {
    try {
      await api(`/webhooks/${w.id}`, {
        method: 'PATCH',
        body: { status: 'active', ...(replay ? { replay: true } : {}) },
      });
      this.notice(`Webhook ${w.id} re-enabled${replay ? ', stopped deliveries queued again' : ''}.`);
      await this.load();
    } catch (err) {
      this.report(err);
    }
  }

  private async remove(w: Webhook): Promise<void> {
    if (!window.confirm(`Delete webhook ${w.id}? Deliveries stop at once.`)) return;
    try {
      await api(`/webhooks/${w.id}`, { method: 'DELETE' });
      this.notice(`Webhook ${w.id} deleted.`);
      this.log.replaceChildren();
      await this.load();
    } catch (err) {
      this.report(err);
    }
  }

  private async showLog(w: Webhook, page = 1): Promise<void> {
    try {
      const p = await api<Page<Delivery>>(`/webhooks/${w.id}/deliveries${query({ page, per_page: 20 })}`);
      this.log.replaceChildren(
        h('h3', {}, `Deliveries of ${w.id}`),
        p.data.length
          ? h(
              'table',
              { class: 'list', id: 'deliveries' },
              h(
                'thead',
                {},
                h(
                  'tr',
                  {},
                  ...['Delivery', 'Event', 'Status', 'Attempts', ''].map((t) => h('th', { scope: 'col' }, t)),
                ),
              ),
              h(
                'tbody',
                {},
                ...p.data.map((d) =>
                  h(
                    'tr',
                    { 'data-id': d.id },
                    h('td', { class: 'mono' }, d.id, h('div', { class: 'hint' }, when(d.created_at))),
                    h('td', {}, d.event_type),
                    h(
                      'td',
                      { class: `status status-${d.status}` },
                      d.status,
                      d.stopped_reason ? h('div', { class: 'hint' }, d.stopped_reason) : null,
                    ),
                    h(
                      'td',
                      {},
                      h(
                        'ol',
                        { class: 'attempts' },
                        ...d.attempts.map((a) =>
                          h(
                            'li',
                            {},
                            `${when(a.attempted_at)}: `,
                            h(
                              'strong',
                              {},
                              a.status_code !== null ? `HTTP ${a.status_code}` : (a.error ?? 'no answer'),
                            ),
                            ` · ${fmt(a.latency_ms, 0)} ms`,
                          ),
                        ),
                      ),
                      d.next_attempt_at ? h('div', { class: 'hint' }, `next attempt ${when(d.next_attempt_at)}`) : null,
                    ),
                    h(
                      'td',
                      { class: 'actions' },
                      d.status === 'pending'
                        ? null
                        : h('button', { type: 'button', onclick: () => void this.redeliver(w, d) }, 'Redeliver'),
                    ),
                  ),
                ),
              ),
            )
          : h('p', { class: 'hint' }, 'No delivery yet.'),
        pager(p, (n) => void this.showLog(w, n), 'Delivery'),
      );
    } catch (err) {
      this.report(err);
    }
  }

  private async redeliver(w: Webhook, d: Delivery): Promise<void> {
    try {
      await api(`/webhooks/${w.id}/deliveries/${d.id}/retry`, { method: 'POST' });
      this.notice(`Delivery ${d.id} queued again.`);
      await this.showLog(w);
    } catch (err) {
      this.report(err);
    }
  }
}

// ---------------------------------------------------------------- alerts and subscriptions
interface Triggered {
  id: string;
  field_id: string;
  alert_type: string;
  index: string;
  value: number;
  threshold: number;
  triggered_at: string;
}
interface Subscription {
  id: string;
  stac_api_url: string;
  collection: string;
  status: string;
  max_cloud_cover: number | null;
  last_polled_at: string | null;
  last_error: string | null;
  items_registered: number;
}

export class SimpleList<T extends { id: string }> {
  readonly el: HTMLElement;
  private page = 1;
  private body = h('div');
  constructor(
    id: string,
    private readonly title: string,
    private readonly path: string,
    private readonly columns: Array<[string, (row: T) => string]>,
    private readonly report: Report,
    private readonly empty: string,
  ) {
    this.el = h('section', { id, class: 'screen' });
  }
  render(): void {
    this.el.replaceChildren(h('h2', {}, this.title), this.body);
    void this.load();
  }
  async load(): Promise<void> {
    try {
      const p = await api<Page<T>>(`${this.path}${query({ page: this.page, per_page: 20 })}`);
      this.body.replaceChildren(
        p.data.length
          ? h(
              'table',
              { class: 'list' },
              h('thead', {}, h('tr', {}, ...this.columns.map(([t]) => h('th', { scope: 'col' }, t)))),
              h(
                'tbody',
                {},
                ...p.data.map((r) => h('tr', { 'data-id': r.id }, ...this.columns.map(([, f]) => h('td', {}, f(r))))),
              ),
            )
          : h('p', { class: 'hint' }, this.empty),
        pager(
          p,
          (n) => {
            this.page = n;
            void this.load();
          },
          this.title,
        ),
      );
    } catch (err) {
      this.report(err);
    }
  }
}

export const alertsList = (fields: () => Field[], report: Report) =>
  new SimpleList<Triggered>(
    'view-alerts',
    'Alerts',
    '/alerts',
    [
      ['Triggered', (a) => when(a.triggered_at)],
      ['Field', (a) => fields().find((f) => f.id === a.field_id)?.name ?? a.field_id],
      ['Type', (a) => a.alert_type],
      ['Index', (a) => a.index],
      ['Value / threshold', (a) => `${fmt(a.value)} / ${fmt(a.threshold)}`],
    ],
    report,
    'No alert has triggered.',
  );

export const subscriptionsList = (report: Report) =>
  new SimpleList<Subscription>(
    'view-subscriptions',
    'Imagery subscriptions',
    '/imagery/subscriptions',
    [
      ['Subscription', (s) => s.id],
      ['STAC API', (s) => `${s.stac_api_url} (${s.collection})`],
      ['Status', (s) => s.status + (s.last_error ? `: ${s.last_error}` : '')],
      ['Max cloud', (s) => (s.max_cloud_cover === null ? '—' : `${s.max_cloud_cover} %`)],
      ['Last poll', (s) => when(s.last_polled_at)],
      ['Captures registered', (s) => String(s.items_registered)],
    ],
    report,
    'No subscription.',
  );
