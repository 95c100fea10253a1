// DOM helpers. Everything from the API goes through text nodes or
// attribute values here, never through HTML parsing.

export function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs)) {
    if (value == null || value === false) continue;
    if (key === 'class') node.className = value;
    else if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2), value);
    } else node.setAttribute(key, value === true ? '' : String(value));
  }
  append(node, children);
  return node;
}

// replaceChildren that skips null and false, like el()
export function setChildren(node, ...children) {
  node.replaceChildren();
  append(node, children);
}

function append(node, children) {
  for (const child of children) {
    if (child == null || child === false) continue;
    if (Array.isArray(child)) append(node, child);
    else node.append(child instanceof Node ? child : String(child));
  }
}

// Hash routes; the only place that builds hrefs from API strings.
const enc = encodeURIComponent;
export const routes = {
  repositories: (q) => (q ? `#/?q=${enc(q)}` : '#/'),
  repository: (name) => `#/repository/${enc(name)}`,
  manifest: (name, reference) => `#/manifest/${enc(name)}/${enc(reference)}`,
  retention: (name) => (name ? `#/retention/${enc(name)}` : '#/retention'),
};

export const DASH = '—';

export function formatBytes(n) {
  if (typeof n !== 'number' || !Number.isFinite(n)) return DASH;
  if (n < 1024) return `${n} B`;
  const units = ['KiB', 'MiB', 'GiB', 'TiB', 'PiB', 'EiB'];
  let value = n / 1024;
  let i = 0;
  while (value >= 1023.95 && i < units.length - 1) {
    value /= 1024;
    i++;
  }
  return `${value.toFixed(1)} ${units[i]}`;
}

export function size(n, tag = 'span') {
  const known = typeof n === 'number' && Number.isFinite(n);
  return el(tag, {
    class: 'size',
    'data-bytes': known ? n : null,
    title: known ? `${n} bytes` : null,
  }, formatBytes(n));
}

export const sizeCell = (n) => size(n, 'td');

export function count(n) {
  return typeof n === 'number' ? n.toLocaleString() : DASH;
}

// ms since the epoch, or null
export function time(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return el('span', { class: 'time' }, DASH);
  const date = new Date(ms);
  const iso = date.toISOString();
  return el('time', { datetime: iso, title: iso }, date.toLocaleString());
}

export function timeCell(ms, cls) {
  return el('td', { class: cls }, time(ms));
}

// Pull times are kept rounded up to the hour: the pull happened in the hour before.
export function pullTime(ms) {
  if (typeof ms !== 'number' || !Number.isFinite(ms)) return el('span', { class: 'time' }, DASH);
  const iso = new Date(ms).toISOString();
  const title = `in the hour before ${iso}`;
  if (ms > Date.now()) return el('time', { datetime: iso, title }, 'within the last hour');
  return el('time', { datetime: iso, title }, `by ${new Date(ms).toLocaleString()}`);
}

export function pullTimeCell(ms) {
  return el('td', { class: 'last-pull' }, pullTime(ms));
}

export function shortDigest(digest) {
  const text = String(digest ?? '');
  const colon = text.indexOf(':');
  if (colon < 0 || text.length - colon - 1 <= 12) return text;
  return `${text.slice(0, colon + 13)}…`;
}

export function digest(value) {
  if (!value) return el('span', {}, DASH);
  return el('code', { class: 'digest', title: value }, shortDigest(value));
}

export function digestLink(repository, value) {
  return el('a', { class: 'digest-link', href: routes.manifest(repository, value) }, digest(value));
}

export function badge(text, kind, title) {
  return el('span', { class: `badge badge-${kind}`, title }, text);
}

const SIGNATURE_KINDS = { verified: 'ok', signed: 'info', unsigned: 'muted', invalid: 'bad' };

export function signatureBadge(state, detail) {
  if (!state) return el('span', { class: 'signature' }, DASH);
  const node = badge(state, SIGNATURE_KINDS[state] ?? 'muted', detail || null);
  node.classList.add('signature');
  node.dataset.signature = state;
  return node;
}

export function heading(level, text, attrs = {}) {
  return el(`h${level}`, attrs, text);
}

export function note(...children) {
  return el('p', { class: 'note' }, ...children);
}

export function table(attrs, headers, rows) {
  const head = el('tr', {}, headers.map((h) => el('th', { scope: 'col' }, h)));
  return el('div', { class: 'table-wrap' },
    el('table', attrs, el('thead', {}, head), el('tbody', {}, rows)));
}

// A key/value table for annotations and labels.
export function keyValueTable(object, attrs = {}) {
  const rows = Object.entries(object ?? {}).map(([k, v]) =>
    el('tr', {}, el('th', { scope: 'row' }, el('code', {}, k)), el('td', { class: 'value' }, String(v))));
  return table({ class: 'kv', ...attrs }, ['Key', 'Value'], rows);
}

export function definitions(pairs, attrs = {}) {
  const list = el('dl', { class: 'facts', ...attrs });
  for (const [term, value] of pairs) {
    if (value == null || value === false) continue;
    list.append(el('dt', {}, term), el('dd', {}, value));
  }
  return list;
}

// ---- errors ----

const errorBox = () => document.getElementById('error');

export function clearError() {
  const box = errorBox();
  if (!box) return;
  box.hidden = true;
  box.replaceChildren();
}

export function showError(error) {
  if (error?.name === 'AbortError') return;
  const box = errorBox();
  if (!box) return;
  box.replaceChildren(...errorContent(error));
  box.hidden = false;
}

function errorContent(error) {
  const status = error?.status;
  if (status === 401) {
    return ['Sign in to see this. ', el('a', { class: 'error-login', href: 'login' }, 'Sign in')];
  }
  if (status === 404) return ['Not found, or you may not see it.'];
  if (status === 403) return ['You may not see this.'];
  if (typeof status === 'number') {
    const parts = [`Error ${status}`];
    if (error.code) parts.push(` (${error.code})`);
    parts.push(`: ${error.message}`);
    if (error.detail) parts.push(` — ${error.detail}`);
    return [parts.join('')];
  }
  return [`Could not reach berth: ${error?.message ?? error}`];
}

// ---- copying ----

export async function copyText(text) {
  try {
    if (navigator.clipboard?.writeText) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    // not a secure context, or no permission: try the old way
  }
  const buffer = el('textarea', { class: 'copy-buffer', readonly: true, 'aria-hidden': 'true', tabindex: '-1' });
  buffer.value = text;
  document.body.append(buffer);
  buffer.select();
  let ok = false;
  try {
    ok = document.execCommand('copy');
  } catch {
    ok = false;
  }
  buffer.remove();
  return ok;
}

// target gets data-copied="true"; source is the element holding the text.
export function copyButton(text, target, source) {
  const button = el('button', { type: 'button', class: 'copy' }, 'Copy');
  button.addEventListener('click', async () => {
    if (await copyText(text)) {
      button.textContent = 'Copied';
      target.dataset.copied = 'true';
    } else {
      button.textContent = 'Select and copy';
      if (source) window.getSelection()?.selectAllChildren(source);
    }
  });
  return button;
}

export function copyable(value, child) {
  const wrap = el('span', { class: 'copyable' });
  const shown = child ?? el('code', {}, value);
  wrap.append(shown, ' ', copyButton(value, wrap, shown));
  return wrap;
}
