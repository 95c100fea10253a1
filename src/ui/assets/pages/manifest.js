import { getJSON, registryHost } from '../api.js';
import {
  el, setChildren, routes, size, sizeCell, count, table, keyValueTable, badge, signatureBadge,
  digest, digestLink, definitions, copyable, note, DASH,
} from '../dom.js';
import { pullCommands } from '../widgets.js';

const isDigest = (reference) => reference.includes(':');

function section(id, title, ...children) {
  return el('section', { id, 'aria-labelledby': `${id}-title` },
    el('h2', { id: `${id}-title` }, title), ...children);
}

function showing(shown, total, what) {
  return total > shown ? note(`Showing the first ${count(shown)} of ${count(total)} ${what}.`) : null;
}

function tagLinks(repository, tags, immutable = []) {
  if (!tags?.length) return null;
  const locked = new Set(immutable);
  return el('ul', { class: 'inline-list' }, tags.map((tag) => el('li', {},
    el('a', { class: 'tag-link', href: routes.manifest(repository, tag) }, tag),
    locked.has(tag) ? [' ', badge('immutable', 'info')] : null)));
}

function summary(m) {
  return el('section', { id: 'summary', 'aria-label': 'Summary' }, definitions([
    ['Repository', el('a', { class: 'repository-link', href: routes.repository(m.repository) }, m.repository)],
    ['Digest', copyable(m.digest, el('code', { class: 'digest full' }, m.digest))],
    ['Kind', m.kind],
    ['Media type', el('code', {}, m.mediaType ?? DASH)],
    ['Artifact type', m.artifact_type ? el('code', {}, m.artifact_type) : null],
    ['Size', size(m.size)],
    ['Tags', tagLinks(m.repository, m.tags, m.immutable_tags) ?? 'none (untagged)'],
    ['Signature', el('span', {}, signatureBadge(m.signature, m.signature_detail),
      m.signature_detail ? [' ', el('span', { class: 'signature-detail' }, m.signature_detail)] : null)],
  ]));
}

function platforms(m) {
  if (!m.platforms?.length) return null;
  const rows = m.platforms.map((p) => el('tr', { class: 'platform' },
    el('td', { class: 'platform-name' }, p.platform || 'unknown'),
    el('td', {}, digestLink(m.repository, p.digest)),
    el('td', {}, el('code', {}, p.mediaType ?? DASH)),
    sizeCell(p.size)));
  return section('platforms', 'Platforms',
    table({ class: 'platforms' }, ['Platform', 'Manifest', 'Media type', 'Size'], rows));
}

function layers(m) {
  if (!m.layers?.length) return null;
  const rows = m.layers.map((layer, i) => el('tr', { class: 'layer' },
    el('td', { class: 'number' }, String(i + 1)),
    el('td', {}, digest(layer.digest)),
    el('td', {}, el('code', {}, layer.mediaType ?? DASH)),
    sizeCell(layer.size)));
  return section('layers', 'Layers',
    note(`${count(m.layers_total)} layers, `, size(m.layers_bytes), ' in all.'),
    showing(m.layers.length, m.layers_total, 'layers'),
    table({ class: 'layers' }, ['#', 'Digest', 'Media type', 'Size'], rows));
}

const list = (value) => (Array.isArray(value) && value.length ? el('code', {}, JSON.stringify(value)) : null);
const code = (value) => (value ? el('code', {}, value) : null);

function history(c) {
  if (!c.history?.length) return null;
  const rows = c.history.map((h, i) => el('tr', { class: 'history-step' },
    el('td', { class: 'number' }, String(i + 1)),
    el('td', {}, h.created || DASH),
    el('td', { class: 'command' }, h.created_by ? el('code', {}, h.created_by) : DASH),
    el('td', {}, h.empty_layer ? 'yes' : 'no'),
    el('td', {}, h.comment || '')));
  return [
    el('h3', {}, 'History'),
    showing(c.history.length, c.history_total, 'steps'),
    table({ id: 'history' }, ['#', 'Created', 'Created by', 'Empty layer', 'Comment'], rows),
  ];
}

function config(c) {
  if (!c) return null;
  const platform = [c.os, c.architecture, c.variant].filter(Boolean).join('/');
  const labels = Object.keys(c.labels ?? {}).length ? c.labels : null;
  return section('config', 'Configuration',
    definitions([
      ['Created', c.created || null],
      ['Author', c.author || null],
      ['Platform', platform || null],
      ['Entrypoint', list(c.entrypoint)],
      ['Command', list(c.cmd)],
      ['Working directory', code(c.working_dir)],
      ['User', code(c.user)],
      ['Exposed ports', c.exposed_ports?.length ? c.exposed_ports.join(', ') : null],
      ['Config blob', el('span', { title: c.mediaType ?? null }, digest(c.digest), ' ', size(c.size))],
    ]),
    c.env?.length ? [el('h3', {}, 'Environment'),
      el('ul', { class: 'env' }, c.env.map((entry) => el('li', {}, el('code', {}, entry))))] : null,
    labels ? [el('h3', {}, 'Labels'), keyValueTable(labels, { id: 'labels' })] : null,
    history(c));
}

function annotations(m) {
  if (!Object.keys(m.annotations ?? {}).length) return null;
  return section('annotations', 'Annotations', keyValueTable(m.annotations));
}

function referrers(m) {
  if (!m.referrers?.length) return null;
  const rows = m.referrers.map((r) => el('tr', { class: 'referrer' },
    el('td', {}, el('code', {}, r.artifact_type || r.mediaType || DASH)),
    el('td', {}, digestLink(m.repository, r.digest)),
    sizeCell(r.size),
    el('td', {}, el('ul', { class: 'plain' }, Object.entries(r.annotations ?? {}).map(([k, v]) =>
      el('li', {}, el('code', {}, k), ': ', String(v)))))));
  return section('referrers', 'Referrers',
    note('Signatures, SBOMs and other artifacts that refer to this manifest.'),
    showing(m.referrers.length, m.referrers_total, 'referrers'),
    table({ class: 'referrers' }, ['Artifact type', 'Digest', 'Size', 'Annotations'], rows));
}

function subject(m) {
  const s = m.subject;
  if (!s) return null;
  return section('subject', 'Subject',
    el('p', {}, 'This artifact refers to ', digestLink(m.repository, s.digest),
      ' (', el('code', {}, s.mediaType ?? DASH), ', ', size(s.size), ').'));
}

function base(m) {
  const b = m.base;
  if (!b) return null;
  return section('base', 'Base image',
    definitions([
      ['Repository', el('a', { class: 'repository-link', href: routes.repository(b.repository) }, b.repository)],
      ['Tags', tagLinks(b.repository, b.tags) ?? 'none (untagged)'],
      ['Digest', digestLink(b.repository, b.digest)],
      ['Shared', `shares ${count(b.layers)} ${b.layers === 1 ? 'layer' : 'layers'}`],
    ]));
}

function raw(m) {
  return section('raw', 'Manifest JSON',
    el('details', {},
      el('summary', {}, m.raw_truncated ? 'Show the manifest (cut short)' : 'Show the manifest'),
      el('pre', { class: 'raw' }, m.raw ?? '')));
}

export async function render(ctx) {
  const [name, reference] = [ctx.args.slice(0, -1).join('/'), ctx.args.at(-1) ?? ''];
  const byDigest = isDigest(reference);
  ctx.setTitle(byDigest ? `${name}@${reference}` : `${name}:${reference}`);
  const [m, session] = await Promise.all([
    getJSON('api/manifest', { name, reference }, ctx.signal), ctx.session]);

  const title = byDigest
    ? el('h1', {}, `${m.repository}@`, digest(m.digest))
    : el('h1', {}, `${m.repository}:${reference}`);
  setChildren(ctx.root,
    el('nav', { class: 'breadcrumb', 'aria-label': 'Breadcrumb' },
      el('a', { href: routes.repositories() }, 'Repositories'), ' / ',
      el('a', { href: routes.repository(m.repository) }, m.repository), ' / '),
    title,
    summary(m),
    section('pull', 'Pull', pullCommands(registryHost(session), m.repository, byDigest ? null : reference, m.digest)),
    platforms(m), layers(m), config(m.config), annotations(m), referrers(m), subject(m), base(m), raw(m));
}
