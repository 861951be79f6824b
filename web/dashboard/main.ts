/** The dashboard's entry: the key form, the screens behind the hash (#fields, #reports, …), and the problem banner. */
import 'leaflet/dist/leaflet.css';
import './style.css';
import { alertsList, ReportsView, subscriptionsList, WebhooksView } from './admin.js';
import { Problem, storedKey, storeKey } from './api.js';
import { $, fill, h } from './dom.js';
import { FieldsView } from './fields.js';

const banner = $('problem');
const app = $('app');

/** Every failure of the API is shown as the problem's title and detail (and its field errors). */
function report(err: unknown): void {
  const p =
    err instanceof Problem ? err : new Problem('Something went wrong', String((err as Error)?.message ?? err), 0);
  const errors = Array.isArray(p.body.errors) ? (p.body.errors as Array<{ path?: string; message?: string }>) : [];
  banner.className = 'problem';
  fill(
    banner,
    h('strong', { class: 'problem-title' }, p.title),
    h('span', { class: 'problem-detail' }, ` ${p.detail}`),
    errors.length ? h('ul', {}, ...errors.map((e) => h('li', {}, `${e.path ?? ''} ${e.message ?? ''}`))) : null,
    h(
      'button',
      { type: 'button', class: 'close', 'aria-label': 'Dismiss', onclick: () => (banner.hidden = true) },
      '×',
    ),
  );
  banner.hidden = false;
  if (p.status === 401) {
    storeKey(null);
    keyState();
  }
}
function notice(text: string): void {
  banner.className = 'notice';
  banner.replaceChildren(
    h('span', {}, text),
    h(
      'button',
      { type: 'button', class: 'close', 'aria-label': 'Dismiss', onclick: () => (banner.hidden = true) },
      '×',
    ),
  );
  banner.hidden = false;
}

const fields = new FieldsView(report);
const getFields = () => fields.fields;
const screens = {
  fields: { el: fields.el, render: () => fields.resize() },
  reports: new ReportsView(getFields, report, notice),
  webhooks: new WebhooksView(report, notice),
  alerts: alertsList(getFields, report),
  subscriptions: subscriptionsList(report),
} as const;
type Screen = keyof typeof screens;

function show(): void {
  if (!storedKey()) return;
  const name = (location.hash.slice(1) || 'fields') as Screen;
  const screen = screens[name] ?? screens.fields;
  for (const [k, v] of Object.entries(screens)) v.el.hidden = k !== name;
  for (const a of document.querySelectorAll<HTMLAnchorElement>('nav a'))
    a.toggleAttribute('aria-current', a.dataset.view === name);
  screen.render();
}

function keyState(): void {
  const has = Boolean(storedKey());
  $('forget-key').hidden = !has;
  ($('api-key') as HTMLInputElement).placeholder = has ? 'connected (paste another key to switch)' : 'fak_…';
  ($('api-key') as HTMLInputElement).required = !has;
  $('key-hint').hidden = has;
  for (const v of Object.values(screens)) v.el.hidden = !has;
}

async function connect(): Promise<void> {
  keyState();
  if (!storedKey()) return;
  try {
    await fields.load();
    show();
  } catch (err) {
    report(err);
  }
}

for (const v of Object.values(screens)) app.append(v.el);
$('key-form').addEventListener('submit', async (e) => {
  e.preventDefault();
  const input = $('api-key') as HTMLInputElement;
  const key = input.value.trim();
  if (!key) return;
  storeKey(key);
  input.value = '';
  banner.hidden = true;
  await connect();
});
$('forget-key').addEventListener('click', () => {
  storeKey(null);
  location.hash = '';
  keyState();
});
window.addEventListener('hashchange', show);
void connect();
