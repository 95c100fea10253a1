import { el, routes } from '../dom.js';

export async function render(ctx) {
  ctx.setTitle('Not found');
  ctx.root.replaceChildren(
    el('h1', {}, 'No such page'),
    el('p', {}, 'This address does not name a page of berth. ',
      el('a', { href: routes.repositories() }, 'See the repositories'), '.'));
}
