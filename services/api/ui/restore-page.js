// The restores list (#/restores) and a restore page (#/restores/<name>): progress, the same
// timeline as a backup's (a lane per node with its PVR bars and post-restore hooks, each tier's
// end as an item mark), then its tiers, PVRs, hook runs and item results as tables.

import { api, explainFailure, UnauthorizedError } from './api.js';
import { durationOf, formatBytes, formatDuration, formatTime, h, phaseBadge, TERMINAL_PHASES } from './format.js';
import { runAction } from './forms.js';
import { createRefresher, mayRetry, RETRY_MS } from './refresher.js';
import { followEvents } from './sse.js';
import { createTimeline } from './timeline.js';

/** How many item results the page shows (the API pages the rest; the CLI lists them all). */
const ITEMS_SHOWN = 500;

/** The timeline's "block" of a pod and of a tier, and the table row that shows it. */
const podBlockId = (pod) => `pod ${pod}`;
const tierBlockId = (index) => `tier ${index}`;

/**
 * The restore as timeline blocks (pure): one per restored pod with PVRs or hook runs (its PVRs as
 * bars on their node's lane, its hooks as post marks), one per tier with its start and end (an item
 * mark when it is done). `tierTimes`: tier index → { startedAt, doneAt } (ISO), from the events.
 */
export function restoreTimelineBlocks(restore, tierTimes) {
  const pods = new Map();
  const podOf = (pod) => {
    let block = pods.get(pod);
    if (!block) {
      block = { id: podBlockId(pod), pods: [pod], podVolumeBackups: [], hookRuns: [] };
      pods.set(pod, block);
    }
    return block;
  };
  for (const pvr of restore.pvrs ?? []) podOf(pvr.pod).podVolumeBackups.push(pvr);
  for (const run of restore.hookRuns ?? []) podOf(run.pod).hookRuns.push({ ...run, phase: 'post' });
  const tiers = (restore.tiers ?? []).map((t) => ({
    id: tierBlockId(t.index),
    pods: [],
    podVolumeBackups: [],
    hookRuns: [],
    startedAt: tierTimes.get(t.index)?.startedAt,
    itemsDoneAt: tierTimes.get(t.index)?.doneAt,
    itemCount: t.items,
  }));
  return [...tiers, ...pods.values()];
}

/** Tier start and end times from the restore's events (tier 0 starts when the plan is done). */
export function tierTimesOf(events) {
  const times = new Map();
  const at = (index) => {
    if (!times.has(index)) times.set(index, {});
    return times.get(index);
  };
  for (const ev of events) {
    if (ev.type === 'plan.done') at(0).startedAt ??= ev.at;
    else if (ev.type === 'tier.started') at(ev.data?.tier).startedAt = ev.at;
    else if (ev.type === 'tier.done') at(ev.data?.tier).doneAt = ev.at;
  }
  return times;
}

function table(caption, headings, rows, attrs = {}) {
  return h(
    'div',
    { class: 'table-scroll' },
    h(
      'table',
      attrs,
      h('caption', { class: 'visually-hidden' }, caption),
      h('thead', {}, h('tr', {}, ...headings.map((t) => h('th', { scope: 'col' }, t)))),
      h('tbody', {}, ...rows),
    ),
  );
}

function progressBar(value, max, label) {
  return h('progress', { value: String(value), max: String(Math.max(1, max)), 'aria-label': label }, `${value} / ${max}`);
}

function stat(label, ...value) {
  return h('div', { class: 'stat' }, h('dt', {}, label), h('dd', {}, ...value));
}

/** `#/restores`: newest first, with progress and problems. `ui` = { setView, header, onTeardown }. */
export function showRestoreList(ui) {
  document.title = 'Restores — Stowage console';
  const body = h('div', {});
  const status = h('p', { class: 'muted small', 'aria-live': 'polite' }, 'Loading…');
  ui.setView(
    ui.header(),
    h(
      'main',
      { id: 'main', tabindex: '-1' },
      h('div', { class: 'page-head' }, h('h1', {}, 'Restores')),
      h(
        'p',
        { class: 'muted small' },
        'Start a restore from a backup’s page (Restore this backup), with POST /v1/restores or `stowage restore create --from-backup <backup>`; it appears here.',
      ),
      h('section', { class: 'card' }, body, status),
    ),
  );
  let alive = true;
  let timer;
  const load = async () => {
    // Polled until the page is left, after a failed read too: the next one may answer.
    let running = true;
    try {
      const page = await api.listRestores(50);
      const details = await Promise.all(page.items.map((r) => api.getRestore(r.name).catch(() => r)));
      if (!alive) return;
      body.replaceChildren(
        table(
          'Restores, newest first',
          ['Restore', 'Namespace', 'From backup', 'Phase', 'Started', 'Duration', 'Items', 'PVRs', 'Problems'],
          details.map((r) =>
            h(
              'tr',
              {},
              h('th', { scope: 'row' }, h('a', { href: `#/restores/${encodeURIComponent(r.name)}` }, r.name)),
              h('td', {}, r.namespace ?? h('span', { class: 'muted' }, 'cluster-wide')),
              h('td', {}, h('a', { href: `#/backups/${encodeURIComponent(r.backupName)}` }, r.backupName)),
              h('td', {}, phaseBadge(r.phase)),
              h('td', {}, formatTime(r.startedAt ?? r.createdAt)),
              h('td', { class: 'num' }, formatDuration(durationOf(r.startedAt, r.completedAt))),
              h('td', { class: 'num' }, `${r.progress?.itemsRestored ?? 0} / ${r.progress?.totalItems ?? 0}`),
              h('td', { class: 'num' }, `${r.podVolumeRestores?.Completed ?? 0} / ${r.podVolumeRestores?.total ?? 0}`),
              h(
                'td',
                {},
                r.errors ? h('span', { class: 'bad' }, `${r.errors} error(s)`) : null,
                r.errors && r.warnings ? ', ' : null,
                r.warnings ? h('span', { class: 'warn' }, `${r.warnings} warning(s)`) : null,
                !r.errors && !r.warnings ? h('span', { class: 'muted' }, '–') : null,
              ),
            ),
          ),
          { class: 'restores' },
        ),
      );
      status.textContent = details.length === 0 ? 'No restores yet.' : `${details.length} restore(s)`;
      running = details.some((r) => !TERMINAL_PHASES.has(r.phase));
    } catch (err) {
      if (!alive || err instanceof UnauthorizedError) return;
      status.textContent = `Could not load restores: ${explainFailure(err)}`;
    }
    if (alive) timer = setTimeout(load, running ? 2000 : 10000);
  };
  load();
  ui.onTeardown(() => {
    alive = false;
    clearTimeout(timer);
  });
}

/** `#/restores/<name>`: follows the restore's events while it runs; the tables mirror the timeline. */
export function showRestore(name, ui) {
  document.title = `${name} — restore — Stowage console`;
  const phase = h('span', { class: 'phase-slot', 'aria-live': 'polite' });
  const live = h('span', { class: 'live-status muted small', 'aria-live': 'polite' });
  const stats = h('dl', { class: 'stats' });
  const problems = h('section', { class: 'card problems', 'aria-labelledby': 'problems-title' });
  const timelineBox = h('div', { class: 'timeline-box' });
  const tiersBox = h('div', {});
  const pvrsBox = h('div', {});
  const hooksBox = h('div', {});
  const itemsBox = h('div', {});
  const specText = h('pre', { class: 'spec', id: 'restore-spec' });
  const crumbs = h('p', { class: 'crumbs' }, h('a', { href: '#/restores' }, '← All restores'));
  const cancel = h('button', { type: 'button', class: 'danger', hidden: true }, 'Cancel restore');
  const remove = h('button', { type: 'button', class: 'danger', hidden: true }, 'Delete restore');
  const actionError = h('p', { class: 'form-error', role: 'alert' });
  const section = (id, title, box) => h('section', { class: 'card', 'aria-labelledby': id }, h('h2', { id }, title), box);
  const main = h(
    'main',
    { id: 'main', tabindex: '-1' },
    crumbs,
    h('div', { class: 'page-head' }, h('h1', {}, name), phase, live, h('div', { class: 'head-links' }, cancel, remove)),
    actionError,
    h('section', { class: 'card', 'aria-label': 'Progress' }, stats),
    problems,
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'timeline-title' },
      h('h2', { id: 'timeline-title' }, 'Timeline'),
      h(
        'p',
        { class: 'muted small' },
        'A lane per node: bars are PodVolumeRestores (start → completion), ▲ post-restore hooks of the pod; ■ marks each tier’s end. The tables below list the same data.',
      ),
      timelineBox,
    ),
    section('tiers-title', 'Tiers', tiersBox),
    section('pvrs-title', 'Pod volume restores', pvrsBox),
    section('hooks-title', 'Hooks', hooksBox),
    section('items-title', 'Items', itemsBox),
    h('details', { class: 'card' }, h('summary', {}, 'Spec'), specText),
  );
  ui.setView(ui.header(), main);

  /** Shows the table row of a pod or tier chosen on the timeline. */
  const showRow = (blockId) => {
    const row = main.querySelector(`[data-block="${CSS.escape(blockId)}"]`);
    if (!row) return;
    for (const r of main.querySelectorAll('tr.selected')) r.classList.remove('selected');
    row.classList.add('selected');
    row.scrollIntoView({ block: 'nearest' });
  };
  const timeline = createTimeline(timelineBox, { onSelectBlock: showRow, volumeKind: 'PVR', subject: 'Restore', unit: 'pod or tier' });
  const events = [];
  let restore;
  let alive = true;
  let lastProblemsKey = '';

  function render() {
    const r = restore;
    const times = tierTimesOf(events);
    phase.replaceChildren(phaseBadge(r.phase));
    cancel.hidden = TERMINAL_PHASES.has(r.phase) || Boolean(r.cancelRequestedAt);
    remove.hidden = !TERMINAL_PHASES.has(r.phase);
    specText.textContent = JSON.stringify(r.spec ?? {}, null, 2);
    const pvrDone = (r.podVolumeRestores.Completed ?? 0) + (r.podVolumeRestores.Failed ?? 0) + (r.podVolumeRestores.Canceled ?? 0);
    stats.replaceChildren(
      stat('From backup', h('a', { href: `#/backups/${encodeURIComponent(r.backupName)}` }, r.backupName)),
      stat('Started', formatTime(r.startedAt ?? r.createdAt)),
      stat('Duration', formatDuration(durationOf(r.startedAt, r.completedAt)), r.completedAt ? '' : ' so far'),
      stat(
        'Items',
        progressBar(r.progress.itemsRestored, r.progress.totalItems, 'items restored'),
        ` ${r.progress.itemsRestored} / ${r.progress.totalItems}`,
      ),
      stat(
        'Results',
        `${r.itemResults.created} created, ${r.itemResults.updated} updated, ${r.itemResults.existsSkipped} skipped, `,
        h('span', { class: r.itemResults.failed ? 'bad' : '' }, `${r.itemResults.failed} failed`),
      ),
      stat(
        'PVRs',
        progressBar(pvrDone, r.podVolumeRestores.total, 'PVRs finished'),
        ` ${r.podVolumeRestores.Completed} / ${r.podVolumeRestores.total} done`,
      ),
      stat(
        'Hooks',
        `${r.hookStatus.hooksAttempted} run, `,
        h('span', { class: r.hookStatus.hooksFailed ? 'bad' : '' }, `${r.hookStatus.hooksFailed} failed`),
      ),
      stat('Errors', h('span', { class: r.errors ? 'bad' : '' }, String(r.errors))),
      stat('Warnings', h('span', { class: r.warnings ? 'warn' : '' }, String(r.warnings))),
    );
    timeline.update(r, restoreTimelineBlocks(r, times));
    tiersBox.replaceChildren(
      table(
        'Tiers in the order they are restored',
        ['Tier', 'Resources', 'Items', 'Batches', 'Waits for', 'Started', 'Done'],
        r.tiers.map((t) =>
          h(
            'tr',
            { 'data-block': tierBlockId(t.index) },
            h('th', { scope: 'row' }, String(t.index)),
            h('td', {}, t.groupResources.join(', ')),
            h('td', { class: 'num' }, String(t.items)),
            h('td', { class: 'num' }, String(t.batches)),
            h('td', {}, t.waitUntil ?? '–'),
            h('td', {}, formatTime(times.get(t.index)?.startedAt)),
            h('td', {}, formatTime(times.get(t.index)?.doneAt)),
          ),
        ),
        { class: 'tiers' },
      ),
    );
    pvrsBox.replaceChildren(
      r.pvrs.length === 0
        ? h('p', { class: 'muted' }, 'No pod volumes to restore.')
        : table(
            'PodVolumeRestores',
            ['PVR', 'Pod', 'Volume', 'Node', 'Phase', 'Bytes', 'Started', 'Completed'],
            r.pvrs.map((p) =>
              h(
                'tr',
                { 'data-block': podBlockId(p.pod) },
                h('th', { scope: 'row' }, p.name),
                h('td', {}, p.pod),
                h('td', {}, p.volume),
                h('td', {}, p.node ?? '–'),
                h('td', {}, phaseBadge(p.phase), p.message ? h('span', { class: 'small' }, ` ${p.message}`) : null),
                h(
                  'td',
                  { class: 'num' },
                  p.totalBytes !== undefined ? `${formatBytes(p.bytesDone ?? 0)} / ${formatBytes(p.totalBytes)}` : '–',
                ),
                h('td', {}, formatTime(p.startTimestamp)),
                h('td', {}, formatTime(p.completionTimestamp)),
              ),
            ),
            { class: 'pvrs' },
          ),
    );
    hooksBox.replaceChildren(
      r.hookRuns.length === 0
        ? h('p', { class: 'muted' }, 'No hooks ran.')
        : table(
            'Post-restore hook runs',
            ['Pod', 'Container', 'Command', 'Result', 'Started', 'Duration', 'Output'],
            r.hookRuns.map((run) =>
              h(
                'tr',
                { 'data-block': podBlockId(run.pod) },
                h('th', { scope: 'row' }, run.pod),
                h('td', {}, run.container),
                h('td', {}, h('code', {}, (run.command ?? []).join(' '))),
                h(
                  'td',
                  { class: run.outcome === 'exited' && run.exitCode === 0 ? '' : 'bad' },
                  run.outcome === 'exited' ? `exit ${run.exitCode}` : run.outcome,
                ),
                h('td', {}, formatTime(run.startedAt)),
                h('td', { class: 'num' }, formatDuration(run.durationMs)),
                h('td', { class: 'small' }, run.stderrTail || run.stdoutTail || run.message || ''),
              ),
            ),
            { class: 'hooks' },
          ),
    );
    const key = `${r.errors}/${r.warnings}/${r.phase}`;
    if (key !== lastProblemsKey) {
      lastProblemsKey = key;
      loadProblems();
      loadItems();
    }
  }

  // Items and problems are read again at each change of phase or counts; only the latest read
  // asked for is shown (an earlier one may be answered after it).
  let itemsAsked = 0;
  let problemsAsked = 0;

  async function loadItems() {
    const asked = ++itemsAsked;
    try {
      const page = await api.restoreItems(name, ITEMS_SHOWN);
      if (!alive || asked !== itemsAsked) return;
      itemsBox.replaceChildren(
        page.total > page.items.length
          ? h(
              'p',
              { class: 'muted small' },
              `The first ${page.items.length} of ${page.total} items; GET /v1/restores/${name}/items lists them all.`,
            )
          : '',
        table(
          'Item results',
          ['Item', 'Outcome', 'Reason'],
          page.items.map((it) =>
            h(
              'tr',
              {},
              h('th', { scope: 'row' }, it.key),
              h('td', { class: it.outcome === 'failed' ? 'bad' : '' }, it.outcome),
              h('td', { class: 'small' }, it.reason ?? ''),
            ),
          ),
          { class: 'items' },
        ),
      );
    } catch (err) {
      if (alive && asked === itemsAsked && !(err instanceof UnauthorizedError))
        itemsBox.replaceChildren(h('p', { class: 'bad' }, `Could not load items: ${err.message}`));
    }
  }

  async function loadProblems() {
    const asked = ++problemsAsked;
    const heading = h('h2', { id: 'problems-title' }, 'Errors and warnings');
    if (!restore.errors && !restore.warnings && !restore.failureReason) {
      problems.replaceChildren(heading, h('p', { class: 'muted' }, 'None so far.'));
      return;
    }
    try {
      const lines = (await api.logs(name, 'restore')).filter((l) => l.level === 'error' || l.level === 'warn');
      if (!alive || asked !== problemsAsked) return;
      problems.replaceChildren(
        heading,
        restore.failureReason ? h('p', { class: 'bad' }, restore.failureReason) : '',
        h(
          'ul',
          { class: 'problem-list' },
          lines.slice(-200).map((l) => h('li', { class: l.level === 'error' ? 'bad' : 'warn' }, h('strong', {}, l.level), ` ${l.msg}`)),
        ),
      );
    } catch (err) {
      if (alive && asked === problemsAsked && !(err instanceof UnauthorizedError))
        problems.replaceChildren(heading, h('p', { class: 'bad' }, `Could not load logs: ${err.message}`));
    }
  }

  // The record changes with almost every event; read it at most twice a second, one read at a
  // time (refresher.js: an answer read before the end must never land after the last one).
  const refresher = createRefresher({
    load: () => api.getRestore(name),
    onValue: (value) => {
      restore = value;
      if (alive) render();
    },
    onError: (err) => {
      if (!alive || err instanceof UnauthorizedError) return;
      live.textContent = `Could not refresh: ${err.message}`;
      if (mayRetry(err)) refresher.soon(RETRY_MS);
    },
  });
  const refreshSoon = (delay = 500) => refresher.soon(delay);

  cancel.addEventListener('click', () =>
    runAction({
      button: cancel,
      errorLine: actionError,
      what: 'Cancel',
      confirm: {
        title: `Cancel restore ${name}?`,
        body: 'No further objects or volumes are restored and hooks not yet run are skipped; what is already restored stays.',
        confirmLabel: 'Cancel restore',
      },
      action: async () => {
        await api.cancelRestore(name);
        refreshSoon(0);
      },
    }),
  );
  remove.addEventListener('click', () =>
    runAction({
      button: remove,
      errorLine: actionError,
      what: 'Delete',
      confirm: {
        title: `Delete restore ${name}?`,
        body: 'Its record, results and logs are deleted; the objects it restored stay in the cluster.',
        confirmLabel: 'Delete restore',
      },
      action: async () => {
        await api.deleteRestore(name);
        location.hash = '#/restores';
      },
    }),
  );

  let follow;
  (async () => {
    try {
      restore = await api.getRestore(name);
    } catch (err) {
      if (err instanceof UnauthorizedError || !alive) return;
      main.replaceChildren(
        crumbs,
        h('h1', {}, name),
        h(
          'p',
          { class: 'bad', role: 'alert' },
          err.status === 404
            ? `There is no restore named "${name}".`
            : err.status === 403
              ? `You may not see this restore. ${explainFailure(err)}`
              : `Could not load the restore: ${err.message}`,
        ),
      );
      return;
    }
    if (!alive) return;
    render();
    follow = followEvents(name, {
      kind: 'restore',
      onEvent: (ev) => {
        events.push(ev);
        if (ev.type !== 'pvr.progress') refreshSoon();
      },
      onStatus: (s) => {
        live.textContent = s === 'live' ? '● live' : s === 'ended' ? '' : s;
      },
    });
    if ((await follow.done) === 'ended' && alive) refreshSoon(0);
  })();

  ui.onTeardown(() => {
    alive = false;
    follow?.stop();
    refresher.stop();
    timeline.destroy();
  });
}
