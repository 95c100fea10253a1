import { getJSON } from '../api.js';
import { el, setChildren, routes, size, sizeCell, count, table, note } from '../dom.js';
import { moreButton } from '../widgets.js';

const PAGE_SIZE = 50;
const WARN = 0.9;

function usage(used, max) {
  if (max == null) return el('span', { class: 'no-quota' }, 'no quota');
  const ratio = max > 0 ? used / max : 1;
  const percent = `${Math.round(ratio * 100)} %`;
  return el('span', { class: 'usage' },
    el('meter', { min: 0, max, value: Math.min(used, max), low: max * 0.75, high: max * WARN, optimum: 0, title: percent }, percent),
    ' ', el('span', { class: ratio >= WARN ? 'percent warn' : 'percent' }, percent));
}

function repositoryCount(ns) {
  const text = count(ns.repositories);
  return ns.max_repositories == null ? text : `${text} of ${count(ns.max_repositories)}`;
}

const near = (used, max) => max != null && (max === 0 ? used > 0 : used / max >= WARN);

function row(ns) {
  const full = near(ns.used_bytes, ns.max_bytes) || near(ns.repositories, ns.max_repositories);
  return el('tr', { class: full ? 'namespace near-quota' : 'namespace', 'data-namespace': ns.namespace },
    el('td', { class: 'name' },
      el('a', { href: routes.repositories(ns.namespace ? `${ns.namespace}/` : '') }, ns.namespace || '(top level)')),
    el('td', { class: 'number repositories' }, repositoryCount(ns)),
    sizeCell(ns.used_bytes),
    el('td', { class: 'quota' }, ns.max_bytes == null ? '—' : size(ns.max_bytes)),
    el('td', { class: 'usage-cell' }, usage(ns.used_bytes, ns.max_bytes)));
}

export async function render(ctx) {
  ctx.setTitle('Namespaces');
  const fetchPage = (last) => getJSON('api/namespaces', { n: PAGE_SIZE, last }, ctx.signal);
  const first = await fetchPage(null);

  const wrap = table({ id: 'namespaces' },
    ['Namespace', 'Repositories', 'Used', 'Quota', 'Usage'], first.namespaces.map(row));
  const tbody = wrap.querySelector('tbody');
  const more = moreButton(async (last) => {
    const page = await fetchPage(last);
    tbody.append(...page.namespaces.map(row));
    return page.next;
  }, first.next);

  const empty = first.namespaces.length === 0 && first.next == null;
  setChildren(ctx.root,
    el('h1', {}, 'Namespaces'),
    note('Storage used per namespace against its quota; rows at 90 % or more are highlighted.'),
    empty ? el('p', {}, 'No namespaces yet.') : [wrap, more]);
}
