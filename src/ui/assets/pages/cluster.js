import { el, setChildren, time, count, table, badge, note, formatBytes, DASH } from '../dom.js';
import { polledView } from '../widgets.js';

const REFRESH_MS = 3000;

function lag(seconds) {
  if (typeof seconds !== 'number') return DASH;
  if (seconds < 60) return `${seconds < 10 ? seconds.toFixed(1) : Math.round(seconds)} s`;
  const minutes = Math.floor(seconds / 60);
  return minutes < 60 ? `${minutes} min ${Math.round(seconds % 60)} s` : `${Math.floor(minutes / 60)} h ${minutes % 60} min`;
}

function bootstrap(b) {
  if (!b) return DASH;
  return `${b.part}, ${count(b.copied)} records`;
}

function changeLog(log) {
  if (!log) return DASH;
  return el('span', { title: log.oldest ? `oldest entry ${new Date(log.oldest).toISOString()}` : null },
    `${count(log.length)} entries, ${formatBytes(log.bytes)}`);
}

function lastBackup(b) {
  if (!b) return 'never';
  return el('span', { title: b.id ?? null },
    time(b.finished), ' ',
    b.ok ? badge('ok', 'ok') : badge('failed', 'bad', b.error || null),
    !b.ok && b.error ? el('div', { class: 'last-error' }, b.error) : null);
}

function row(r) {
  return el('tr', { class: r.self ? 'replica self' : 'replica', 'data-id': r.id },
    el('td', { class: 'id' }, el('code', {}, r.id), r.self ? [' ', badge('this one', 'muted')] : null),
    el('td', { class: 'address' }, r.address ? el('code', {}, r.address) : DASH),
    el('td', { class: 'ready' }, r.ready ? badge('ready', 'ok') : badge('not ready', 'bad')),
    el('td', { class: 'reachable' }, r.reachable ? badge('reachable', 'ok') : badge('unreachable', 'bad')),
    el('td', { class: 'number log-head' }, count(r.head)),
    el('td', { class: 'number behind' }, count(r.behind)),
    el('td', { class: 'number lag' }, lag(r.lag_seconds)),
    el('td', { class: 'bootstrap' }, bootstrap(r.bootstrap)),
    el('td', { class: 'protocol' }, r.protocol ?? DASH),
    el('td', { class: 'change-log' }, changeLog(r.change_log)),
    el('td', { class: 'last-backup' }, lastBackup(r.last_backup)),
    el('td', { class: 'replica-error' }, r.error ?? ''));
}

function view(data) {
  const problems = data.problems ?? [];
  return [
    problems.length
      ? el('ul', { id: 'problems' }, problems.map((p) => el('li', { class: 'problem' }, p)))
      : el('p', { id: 'healthy' }, 'All replicas are ready.'),
    table({ id: 'replicas' },
      ['Replica', 'Address', 'Ready', 'Reachable', 'Log head', 'Behind', 'Lag', 'Bootstrap',
        'Protocol', 'Change log', 'Last backup', 'Error'],
      (data.replicas ?? []).map(row)),
  ];
}

export async function render(ctx) {
  ctx.setTitle('Cluster');
  const status = note();
  const body = el('div', { class: 'cluster' }, el('p', { class: 'loading' }, 'Loading…'));
  setChildren(ctx.root, el('h1', {}, 'Cluster'), status, body);
  await polledView(ctx, 'api/cluster', body, view, (data) => {
    status.textContent = `This replica: ${data.self}. Updated ${new Date().toLocaleTimeString()}; refreshes every 3 seconds.`;
  }, REFRESH_MS);
}
