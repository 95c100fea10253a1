import { getJSON } from '../api.js';
import { el, setChildren, routes, sizeCell, count, table, badge, note } from '../dom.js';

function reachable(mirror) {
  if (mirror.reachable === true) return badge('reachable', 'ok');
  if (mirror.reachable === false) return badge('unreachable', 'bad', mirror.last_error || null);
  return badge('unknown', 'muted', 'Not contacted yet');
}

function repositories(mirror) {
  const names = mirror.repositories ?? [];
  if (!names.length) return '—';
  return el('ul', { class: 'inline-list' },
    names.map((name) => el('li', {}, el('a', { class: 'repository-link', href: routes.repository(name) }, name))),
    mirror.repositories_more ? el('li', { class: 'more-items' }, 'and more') : null);
}

// The answer lists every URL of the upstream (urls), not one url.
function upstreamUrls(mirror) {
  const urls = mirror.urls ?? [];
  if (!urls.length) return '—';
  return el('ul', { class: 'plain' }, urls.map((url) => el('li', {}, el('code', {}, url))));
}

function row(mirror) {
  return el('tr', { class: 'mirror', 'data-host': mirror.host },
    el('td', { class: 'host' }, el('code', {}, mirror.host)),
    el('td', { class: 'url' }, upstreamUrls(mirror)),
    el('td', { class: 'reachable' }, reachable(mirror),
      mirror.last_error ? el('div', { class: 'last-error' }, mirror.last_error) : null),
    el('td', { class: 'number hits' }, count(mirror.hits)),
    el('td', { class: 'number misses' }, count(mirror.misses)),
    el('td', { class: 'number stale' }, count(mirror.stale)),
    sizeCell(mirror.fetched_bytes),
    el('td', { class: 'number errors' }, count(mirror.errors)),
    el('td', { class: 'repositories' }, repositories(mirror)));
}

export async function render(ctx) {
  ctx.setTitle('Mirrors');
  const data = await getJSON('api/mirrors', null, ctx.signal);
  const mirrors = data.mirrors ?? [];
  setChildren(ctx.root,
    el('h1', {}, 'Mirrors'),
    note('Upstream registries that berth pulls through and caches.'),
    mirrors.length
      ? table({ id: 'mirrors' },
        ['Host', 'Upstream', 'Reachable', 'Hits', 'Misses', 'Stale', 'Fetched', 'Errors', 'Repositories'],
        mirrors.map(row))
      : el('p', { id: 'no-mirrors' }, 'No mirrors are configured.'));
}
