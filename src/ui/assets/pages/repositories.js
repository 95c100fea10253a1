import { getJSON } from '../api.js';
import { el, routes, sizeCell, timeCell, pullTimeCell, count, table, note } from '../dom.js';
import { moreButton } from '../widgets.js';

const PAGE_SIZE = 50;

function row(repo) {
  return el('tr', { class: 'repository' },
    el('td', { class: 'name' },
      el('a', { class: 'repository-link', href: routes.repository(repo.name) }, repo.name)),
    el('td', { class: 'tags number', title: `${count(repo.manifests)} manifests` }, count(repo.tags)),
    sizeCell(repo.bytes),
    timeCell(repo.last_push, 'last-push'),
    pullTimeCell(repo.last_pull));
}

function searchForm(ctx, q) {
  const input = el('input', {
    id: 'search', type: 'search', name: 'q', value: q,
    placeholder: 'Part of a repository name', autocomplete: 'off', spellcheck: 'false',
  });
  const form = el('form', { id: 'search-form', class: 'inline-form', role: 'search' },
    el('label', { for: 'search' }, 'Search'), input, el('button', { type: 'submit' }, 'Search'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const target = routes.repositories(input.value.trim());
    if (location.hash === target || (target === '#/' && location.hash === '')) ctx.reload();
    else location.hash = target;
  });
  return form;
}

export async function render(ctx) {
  const q = ctx.query.get('q') ?? '';
  ctx.setTitle(q ? `Repositories matching “${q}”` : 'Repositories');

  const fetchPage = (last) => getJSON('api/repositories', { q, n: PAGE_SIZE, last }, ctx.signal);
  const first = await fetchPage(null);

  const wrap = table({ id: 'repositories' },
    ['Repository', 'Tags', 'Size', 'Last push', 'Last pull'],
    first.repositories.map(row));
  const tbody = wrap.querySelector('tbody');
  const status = note();
  const updateStatus = () => {
    const empty = tbody.rows.length === 0;
    wrap.hidden = empty;
    if (!empty) status.textContent = '';
    else if (more.hidden) status.textContent = q ? `No repository name contains “${q}”.` : 'No repositories yet.';
    else status.textContent = 'No match in this page of names; “More” looks further.';
    status.hidden = status.textContent === '';
  };
  const more = moreButton(async (last) => {
    const page = await fetchPage(last);
    tbody.append(...page.repositories.map(row));
    more.hidden = page.next == null;
    updateStatus();
    return page.next;
  }, first.next);
  updateStatus();

  ctx.root.replaceChildren(
    el('h1', {}, q ? `Repositories matching “${q}”` : 'Repositories'),
    searchForm(ctx, q),
    wrap, status, more);
}
