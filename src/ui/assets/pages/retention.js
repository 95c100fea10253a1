import { getJSON } from '../api.js';
import { el, setChildren, routes, table, digest, note, showError } from '../dom.js';

// Suggest repository names as the user types, one small request at a time.
function suggestions(input, list, signal) {
  let timer = null;
  input.addEventListener('input', () => {
    clearTimeout(timer);
    timer = setTimeout(async () => {
      try {
        const data = await getJSON('api/repositories', { q: input.value.trim(), n: 20 }, signal);
        list.replaceChildren(...data.repositories.map((r) => el('option', { value: r.name })));
      } catch {
        // suggestions are optional
      }
    }, 250);
  });
  signal.addEventListener('abort', () => clearTimeout(timer));
}

function picker(ctx, name) {
  const input = el('input', {
    id: 'retention-repository', name: 'repository', value: name, list: 'retention-repositories',
    placeholder: 'team/app', autocomplete: 'off', spellcheck: 'false', required: true,
  });
  const list = el('datalist', { id: 'retention-repositories' });
  suggestions(input, list, ctx.signal);
  const form = el('form', { id: 'retention-form', class: 'inline-form' },
    el('label', { for: 'retention-repository' }, 'Repository'), input, list,
    el('button', { type: 'submit' }, 'Show'));
  form.addEventListener('submit', (event) => {
    event.preventDefault();
    const target = routes.retention(input.value.trim());
    if (location.hash === target) ctx.reload();
    else location.hash = target;
  });
  return form;
}

function deletionRow(repository, d) {
  const shown = d.reference.includes(':') ? digest(d.reference) : d.reference;
  return el('tr', { class: 'deletion', 'data-kind': d.kind },
    el('td', { class: 'kind' }, d.kind),
    el('td', { class: 'reference' }, el('a', { href: routes.manifest(repository, d.reference) }, shown)),
    el('td', { class: 'reason' }, d.reason ?? ''));
}

function result(data) {
  const repo = data.repository;
  const title = el('h2', {}, el('a', { class: 'repository-link', href: routes.repository(repo) }, repo));
  if (!data.policy) return [title, el('p', { id: 'no-policy' }, 'No retention policy applies to this repository.')];
  const deletions = data.deletions ?? [];
  return [
    title,
    el('p', {}, 'Policy: ', el('strong', { id: 'policy' }, data.policy)),
    deletions.length
      ? table({ id: 'deletions' }, ['Kind', 'Reference', 'Reason'], deletions.map((d) => deletionRow(repo, d)))
      : el('p', { id: 'no-deletions' }, 'Nothing would be deleted now.'),
  ];
}

export async function render(ctx) {
  const name = ctx.args.join('/');
  ctx.setTitle(name ? `Retention for ${name}` : 'Retention');
  const box = el('div', { id: 'retention-result' });
  setChildren(ctx.root,
    el('h1', {}, 'Retention'),
    note('A dry run: this lists what the retention policy would delete from a repository right now. ',
      'Nothing is deleted from this page.'),
    picker(ctx, name),
    box);
  if (!name) return;
  // Errors are shown here so that the picker stays usable.
  try {
    setChildren(box, result(await getJSON('api/retention', { name }, ctx.signal)));
  } catch (error) {
    showError(error);
  }
}
