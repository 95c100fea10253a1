import { getSession } from './api.js';
import { el, clearError, showError } from './dom.js';
import * as repositories from './pages/repositories.js';
import * as repository from './pages/repository.js';
import * as manifest from './pages/manifest.js';
import * as mirrors from './pages/mirrors.js';
import * as namespaces from './pages/namespaces.js';
import * as retention from './pages/retention.js';
import * as cluster from './pages/cluster.js';
import * as events from './pages/events.js';
import * as notFound from './pages/not-found.js';

// first path segment of the hash => [page, nav entry to mark current, arguments needed]
const PAGES = {
  '': [repositories, 'repositories'],
  repository: [repository, 'repositories', 1],
  manifest: [manifest, 'repositories', 2],
  mirrors: [mirrors, 'mirrors'],
  namespaces: [namespaces, 'namespaces'],
  retention: [retention, 'retention'],
  cluster: [cluster, 'cluster'],
  events: [events, 'events'],
};

const session = getSession();

function showAccount({ user, auth }) {
  const account = document.getElementById('account');
  if (!account) return;
  if (auth === false) {
    account.replaceChildren(); // nobody to sign in as: everyone sees everything
    return;
  }
  if (user == null) {
    if (!document.getElementById('login-link')) {
      account.replaceChildren(el('a', { id: 'login-link', href: 'login' }, 'Sign in'));
    }
    return;
  }
  account.replaceChildren(
    el('form', { class: 'logout', method: 'post', action: 'logout' },
      el('span', { class: 'signed-in' }, 'Signed in as ', el('strong', { id: 'user' }, user)),
      el('button', { type: 'submit', class: 'link-button' }, 'Sign out')));
}

// "#/manifest/a%2Fb/v1?x=y" => { name: 'manifest', args: ['a/b', 'v1'], query }
function parseHash() {
  const raw = location.hash.replace(/^#\/?/, '');
  const mark = raw.indexOf('?');
  const path = mark < 0 ? raw : raw.slice(0, mark);
  const query = new URLSearchParams(mark < 0 ? '' : raw.slice(mark + 1));
  const [name, ...rest] = path.split('/');
  let args;
  try {
    args = rest.filter((s) => s !== '').map(decodeURIComponent);
  } catch {
    args = null; // malformed percent-encoding
  }
  return { name, args, query };
}

function markNav(current) {
  for (const link of document.querySelectorAll('[data-nav]')) {
    if (link.dataset.nav === current) link.setAttribute('aria-current', 'page');
    else link.removeAttribute('aria-current');
  }
}

let controller = null;

async function route() {
  controller?.abort();
  controller = new AbortController();
  const { signal } = controller;
  clearError();

  const { name, args, query } = parseHash();
  const known = args && Object.hasOwn(PAGES, name) ? PAGES[name] : null;
  const [page, nav] = known && args.length >= (known[2] ?? 0) ? known : [notFound, null];
  markNav(nav);

  const main = document.getElementById('main');
  const root = el('div', { class: 'page' }, el('p', { class: 'loading' }, 'Loading…'));
  main.replaceChildren(root);

  const ctx = {
    root,
    args: args ?? [],
    query,
    signal,
    session,
    reload: route,
    setTitle: (title) => { document.title = title ? `${title} — berth` : 'berth'; },
  };
  try {
    await page.render(ctx);
  } catch (error) {
    if (signal.aborted) return;
    root.replaceChildren();
    showError(error);
  }
}

session.then(showAccount);
window.addEventListener('hashchange', () => {
  window.scrollTo(0, 0);
  route();
});
route();
