// The notification endpoints (docs/events.md): what GET /_berth/v1/notifications shows operators,
// refreshed every few seconds.
import { el, setChildren, count, table, badge, note, DASH } from '../dom.js';
import { polledView } from '../widgets.js';

const REFRESH_MS = 3000;

function seconds(s) {
  if (typeof s !== 'number' || s <= 0) return DASH;
  return s < 60 ? `${s.toFixed(1)} s` : `${Math.floor(s / 60)} min ${Math.round(s % 60)} s`;
}

function state(e) {
  if (e.disabled) return badge('disabled', 'bad', e.disabled_reason || null);
  return e.delivering ? badge('delivering here', 'ok') : badge('another replica delivers', 'muted');
}

function row(e) {
  return el('tr', { class: 'endpoint', 'data-name': e.name },
    el('td', { class: 'name' }, el('code', {}, e.name)),
    el('td', { class: 'state' }, state(e)),
    el('td', { class: 'number lag-events' }, count(e.lag?.events ?? 0)),
    el('td', { class: 'number lag-seconds' }, seconds(e.lag?.seconds)),
    el('td', { class: 'number delivered' }, count(e.delivered)),
    el('td', { class: 'number failed' }, count(e.failed)),
    el('td', { class: 'number retried' }, count(e.retried)),
    el('td', { class: 'number dead-lettered' }, count(e.dead_lettered)),
    el('td', { class: 'last-error' }, e.last_error || ''));
}

function view(data) {
  const endpoints = data.endpoints ?? [];
  if (!endpoints.length) return el('p', { id: 'no-endpoints' }, 'No notification endpoints are configured.');
  return table({ id: 'endpoints' },
    ['Endpoint', 'State', 'Lag (events)', 'Lag (time)', 'Delivered', 'Failed', 'Retried', 'Dead-lettered',
      'Last error'],
    endpoints.map(row));
}

export async function render(ctx) {
  ctx.setTitle('Events');
  const status = note();
  const body = el('div', { class: 'events' }, el('p', { class: 'loading' }, 'Loading…'));
  setChildren(ctx.root, el('h1', {}, 'Events'), status, body);
  await polledView(ctx, 'api/notifications', body, view, () => {
    status.textContent = `Counts since this replica started. Updated ${new Date().toLocaleTimeString()}; ` +
      'refreshes every 3 seconds. Dead letters: GET /_berth/v1/notifications/NAME/dead-letters.';
  }, REFRESH_MS);
}
