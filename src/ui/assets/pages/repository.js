import { getJSON, registryHost } from '../api.js';
import {
  el, setChildren, routes, size, sizeCell, time, timeCell, pullTime, pullTimeCell, count, table, badge, signatureBadge,
  digestLink, definitions, DASH,
} from '../dom.js';
import { moreButton, pullCommands } from '../widgets.js';

const PAGE_SIZE = 100;

function tagRow(name, host, tag) {
  return el('tr', { class: 'tag', 'data-tag': tag.tag },
    el('td', { class: 'tag-name' },
      el('a', { class: 'tag-link', href: routes.manifest(name, tag.tag) }, tag.tag),
      tag.immutable ? [' ', badge('immutable', 'info', 'This tag cannot be moved or deleted')] : null),
    el('td', { class: 'digest', title: tag.mediaType ?? null }, digestLink(name, tag.digest)),
    sizeCell(tag.size),
    timeCell(tag.pushed, 'pushed'),
    pullTimeCell(tag.last_pull),
    el('td', { class: 'signature-cell' }, signatureBadge(tag.signature, tag.signature_detail)),
    el('td', { class: 'platforms' }, tag.platforms?.length ? tag.platforms.join(', ') : DASH),
    el('td', { class: 'pull' }, pullDetails(host, name, tag)));
}

// One panel open at a time; the panels float over the rows below.
function pullDetails(host, name, tag) {
  const details = el('details', { class: 'pull-details' },
    el('summary', {}, 'Pull'), pullCommands(host, name, tag.tag, tag.digest));
  details.addEventListener('toggle', () => {
    if (!details.open) return;
    for (const other of details.closest('tbody')?.querySelectorAll('details[open]') ?? []) {
      if (other !== details) other.open = false;
    }
  });
  return details;
}

function retentionFacts(name, retention) {
  if (!retention) return null;
  if (!retention.policy) return 'no policy';
  return el('span', {},
    `${retention.policy}: `,
    el('a', { href: routes.retention(name) },
      retention.deletions === 1 ? '1 deletion due' : `${count(retention.deletions)} deletions due`));
}

export async function render(ctx) {
  const name = ctx.args.join('/');
  ctx.setTitle(name);
  const fetchPage = (last) => getJSON('api/repository', { name, n: PAGE_SIZE, last }, ctx.signal);
  const [data, session] = await Promise.all([fetchPage(null), ctx.session]);
  const host = registryHost(session);

  const wrap = table({ id: 'tags' },
    ['Tag', 'Digest', 'Size', 'Pushed', 'Last pull', 'Signature', 'Platforms', 'Pull'],
    data.tags.map((tag) => tagRow(name, host, tag)));
  wrap.classList.add('no-scroll'); // a scrolling box would clip the pull panels
  const tbody = wrap.querySelector('tbody');
  const more = moreButton(async (last) => {
    const page = await fetchPage(last);
    tbody.append(...page.tags.map((tag) => tagRow(name, host, tag)));
    return page.next;
  }, data.next);

  setChildren(ctx.root,
    el('nav', { class: 'breadcrumb', 'aria-label': 'Breadcrumb' },
      el('a', { href: routes.repositories() }, 'Repositories'), ' / '),
    el('h1', {}, data.name ?? name, data.mirrored ? [' ', badge('mirrored', 'info', 'Cached from an upstream registry')] : null),
    definitions([
      ['Tags', count(data.tags_total)],
      ['Manifests', count(data.manifests)],
      ['Size (deduplicated)', size(data.bytes)],
      ['Last push', time(data.last_push)],
      ['Last pull', pullTime(data.last_pull)],
      ['Retention', retentionFacts(name, data.retention)],
    ], { id: 'repository-summary' }),
    el('h2', {}, 'Tags'),
    data.tags.length ? null : el('p', { class: 'note' }, 'No tags.'),
    wrap, more);
  wrap.hidden = data.tags.length === 0 && data.next == null;
}
