import { el, copyButton, showError, clearError, setChildren } from './dom.js';
import { getJSON } from './api.js';

const TOOLS = [
  ['docker', (ref) => `docker pull ${ref}`],
  // Over plain HTTP both need telling; docker needs the host in its insecure-registries instead.
  ['podman', (ref) => `podman pull ${location.protocol === 'http:' ? '--tls-verify=false ' : ''}${ref}`],
  // ctr stops reading flags at the first argument, so the flag goes first.
  ['ctr', (ref) => `ctr images pull ${location.protocol === 'http:' ? '--plain-http ' : ''}${ref}`],
];

function pullCommand(tool, command, by) {
  const row = el('div', { class: 'pull-command', 'data-tool': tool, 'data-by': by });
  const code = el('code', {}, command);
  row.append(code, copyButton(command, row, code));
  return row;
}

// Commands by tag (when there is one) and by digest.
export function pullCommands(host, repository, tag, digest) {
  const box = el('div', { class: 'pull-commands' });
  const refs = [];
  if (tag) refs.push(['tag', 'By tag', `${host}/${repository}:${tag}`]);
  if (digest) refs.push(['digest', 'By digest', `${host}/${repository}@${digest}`]);
  for (const [by, label, ref] of refs) {
    const group = el('div', { class: 'pull-group' }, el('p', { class: 'pull-label' }, label));
    for (const [tool, make] of TOOLS) group.append(pullCommand(tool, make(ref), by));
    box.append(group);
  }
  return box;
}

// A "More" button. load(cursor) appends one page and resolves to the next
// cursor, or null at the end.
export function moreButton(load, next) {
  let cursor = next;
  const button = el('button', { type: 'button', id: 'more', class: 'more' }, 'More');
  button.hidden = cursor == null;
  button.addEventListener('click', async () => {
    button.disabled = true;
    button.textContent = 'Loading…';
    try {
      cursor = await load(cursor);
      clearError();
    } catch (error) {
      showError(error);
    } finally {
      button.disabled = false;
      button.textContent = 'More';
      button.hidden = cursor == null;
    }
  });
  return button;
}

// A view that refreshes itself every `ms` while the page is visible: GETs `url`, puts
// render(data) into `body` and calls shown(data). It keeps polling after an error, so the page
// recovers by itself, and stops when the page is left.
export async function polledView(ctx, url, body, render, shown, ms = 3000) {
  let timer = null;
  ctx.signal.addEventListener('abort', () => clearTimeout(timer));
  let first = true;
  const refresh = async () => {
    if (first || !document.hidden) {
      first = false;
      try {
        const data = await getJSON(url, null, ctx.signal);
        setChildren(body, render(data));
        shown(data);
        clearError();
      } catch (error) {
        if (ctx.signal.aborted) return;
        body.querySelector('.loading')?.remove();
        showError(error);
      }
    }
    if (!ctx.signal.aborted) timer = setTimeout(refresh, ms);
  };
  await refresh();
}
