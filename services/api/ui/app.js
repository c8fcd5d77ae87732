// The Stowage console: a token prompt until a token is accepted, then the backups list with
// the new-backup form (#/) and a backup page (#/backups/<name>) with live progress, timeline and
// blocks, cancel, delete and the restore form; the restores (#/restores, #/restores/<name>:
// restore-page.js) and the schedules (#/schedules: schedules-page.js).

import { api, clearToken, explainFailure, getIdentity, getToken, onUnauthorized, setIdentity, setToken, UnauthorizedError } from './api.js';
import { BlocksStore } from './blocks-store.js';
import { createBlocksTable, hookCell } from './blocks-table.js';
import { renderDryRunPlan } from './dry-run-plan.js';
import { durationOf, formatDuration, formatTime, h, phaseBadge, TERMINAL_PHASES } from './format.js';
import { formField, formMessages, runAction, splitList } from './forms.js';
import { createRefresher, mayRetry, RETRY_MS } from './refresher.js';
import { restoreForm } from './restore-form.js';
import { showRestore, showRestoreList } from './restore-page.js';
import { showSchedules } from './schedules-page.js';
import { followEvents } from './sse.js';
import { createTimeline } from './timeline.js';

const root = document.getElementById('app');
let teardown = () => {};
let promptMessage = '';

function setView(...nodes) {
  teardown();
  teardown = () => {};
  root.replaceChildren(...nodes);
}

// ---- token prompt ----------------------------------------------------------------------------

function showPrompt(message = promptMessage) {
  promptMessage = '';
  document.title = 'Stowage console — sign in';
  const input = h('input', {
    id: 'token',
    name: 'token',
    type: 'password',
    autocomplete: 'off',
    spellcheck: 'false',
    required: true,
    'aria-describedby': 'token-help token-error',
  });
  const error = h('p', { id: 'token-error', class: 'form-error', role: 'alert' }, message);
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Open console');
  const form = h(
    'form',
    { class: 'card prompt', 'aria-labelledby': 'prompt-title' },
    h('h1', { id: 'prompt-title' }, 'Stowage console'),
    h('label', { for: 'token' }, 'API token or Kubernetes token'),
    input,
    h(
      'p',
      { id: 'token-help', class: 'muted small' },
      'One of the tokens in STOWAGE_API_TOKENS (it sees everything), or your own Kubernetes token (e.g. `kubectl create token`): the console then shows and does only what RBAC on stowage.dev grants you. It is kept in this tab only (sessionStorage) and sent as "Authorization: Bearer".',
    ),
    error,
    submit,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const token = input.value.trim();
    if (!token) {
      error.textContent = 'Enter a token.';
      input.focus();
      return;
    }
    submit.disabled = true;
    error.textContent = '';
    try {
      const identity = await api.checkToken(token);
      setToken(token);
      setIdentity(identity);
      // The cookie lets the browser open the queue dashboard and /docs (GET only); best effort.
      // Not for a Kubernetes user: those pages run with Stowage's own rights (the API sets none).
      if (identity.kind !== 'user') await api.openSession().catch(() => undefined);
      route();
    } catch (err) {
      error.textContent =
        err instanceof UnauthorizedError
          ? `That token was not accepted: ${err.message}. Check it and try again.`
          : `Could not reach the API: ${err.message}`;
      submit.disabled = false;
      input.select();
      input.focus();
    }
  });
  setView(h('main', { id: 'main', class: 'prompt-page', tabindex: '-1' }, form));
  input.focus();
}

onUnauthorized((err) => {
  if (!getToken()) return;
  clearToken();
  promptMessage = `Your token is no longer accepted (${err.message}). Enter a valid token.`;
  showPrompt();
});

// ---- chrome ----------------------------------------------------------------------------------

/** `Signed in as User "alice"`: who the API takes the token for (asked once per tab). */
function signedInAs() {
  const line = h('span', { class: 'identity small', id: 'signed-in-as' });
  const show = (identity) => {
    line.textContent = `Signed in as ${identity.description}`;
    line.title =
      identity.kind === 'user'
        ? 'A Kubernetes identity: you see and do what RBAC on stowage.dev grants it (backups, restores, schedules; cluster* for the cluster-wide ones).'
        : 'Stowage’s own rights: everything.';
  };
  const known = getIdentity();
  if (known) show(known);
  else
    api
      .identity()
      .then((identity) => {
        setIdentity(identity);
        show(identity);
      })
      .catch(() => undefined);
  return line;
}

function header() {
  const forget = h('button', { type: 'button', class: 'link-button' }, 'Forget token');
  // The dashboard and the docs open with a session cookie, which only Stowage's own tokens get.
  const user = getIdentity()?.kind === 'user';
  forget.addEventListener('click', async () => {
    await api.closeSession().catch(() => undefined);
    clearToken();
    location.hash = '#/';
    showPrompt('Token forgotten. Enter a token to continue.');
  });
  return h(
    'header',
    { class: 'top' },
    h('a', { href: '#/', class: 'brand' }, h('img', { src: '/ui/favicon.svg', alt: '', width: '22', height: '22' }), 'Stowage'),
    h(
      'nav',
      { 'aria-label': 'Main' },
      h('a', { href: '#/' }, 'Backups'),
      h('a', { href: '#/restores' }, 'Restores'),
      h('a', { href: '#/schedules' }, 'Schedules'),
      user ? null : h('a', { href: '/admin/queues', target: '_blank', rel: 'noopener' }, 'Queue dashboard'),
      user ? null : h('a', { href: '/docs', target: '_blank', rel: 'noopener' }, 'API docs'),
      signedInAs(),
      forget,
    ),
  );
}

function progressOf(b) {
  const total = b.progress?.totalItems ?? 0;
  const done = b.progress?.itemsBackedUp ?? 0;
  const pvbs = b.podVolumeBackups ?? { total: 0 };
  const pvbDone = (pvbs.Completed ?? 0) + (pvbs.Failed ?? 0) + (pvbs.Canceled ?? 0);
  return { total, done, pvbs, pvbDone };
}

function progressBar(value, max, label) {
  return h('progress', { value: String(value), max: String(Math.max(1, max)), 'aria-label': label }, `${value} / ${max}`);
}

// ---- backups list ----------------------------------------------------------------------------

function newBackupForm(onCreated) {
  const name = formField({
    id: 'nb-name',
    label: 'Name',
    path: 'name',
    input: h('input', { placeholder: 'generated when empty' }),
  });
  const scope = formField({
    id: 'nb-namespace',
    label: 'In namespace',
    path: 'namespace',
    input: h('input', { placeholder: 'empty: a ClusterBackup' }),
    help: 'A Backup of one namespace (it may back up only that namespace; needs create backups there), or empty for a ClusterBackup of the whole cluster (create clusterbackups).',
  });
  const namespaces = formField({
    id: 'nb-ns',
    label: 'Included namespaces',
    path: 'spec.includedNamespaces',
    input: h('input', { placeholder: 'shop, media (empty: all)' }),
  });
  const ttl = formField({ id: 'nb-ttl', label: 'Keep for (TTL)', path: 'spec.ttl', input: h('input', { placeholder: '720h' }) });
  const fs = formField({
    id: 'nb-fs',
    label: 'Back up all pod volumes (defaultVolumesToFsBackup)',
    path: 'spec.defaultVolumesToFsBackup',
    input: h('input', { type: 'checkbox', checked: true }),
    check: true,
  });
  const specJson = formField({
    id: 'nb-spec',
    label: 'More spec fields (JSON, optional)',
    path: 'spec',
    input: h('textarea', { rows: '5', spellcheck: 'false', placeholder: '{"hooks": {"resources": [...]}, "labelSelector": {...}}' }),
    help: 'Merged into the spec; the API lists every problem with its path.',
    wide: true,
  });
  const fields = [name, scope, namespaces, ttl, fs, specJson];
  const error = h('p', { class: 'form-error', role: 'alert', tabindex: '-1' });
  const messages = formMessages(fields, error);
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Start backup');
  const plan = h('button', { type: 'button' }, 'Plan (dry run)');
  const planOut = h('div', { class: 'plan-out' });
  const form = h(
    'form',
    { class: 'new-backup', 'aria-label': 'New backup', novalidate: true },
    ...fields.map((f) => f.element),
    h('div', { class: 'form-actions' }, submit, plan),
    error,
  );
  // The request both buttons send; undefined (with the problem shown) when the spec JSON is bad.
  function readRequest() {
    messages.clear();
    let extra = {};
    if (specJson.input.value.trim()) {
      try {
        extra = JSON.parse(specJson.input.value);
      } catch (err) {
        messages.local(specJson, `not valid JSON: ${err.message}`);
        return undefined;
      }
    }
    const spec = { defaultVolumesToFsBackup: fs.input.checked, ...extra };
    const ns = splitList(namespaces.input.value);
    if (ns.length) spec.includedNamespaces = ns;
    if (ttl.input.value.trim()) spec.ttl = ttl.input.value.trim();
    return {
      ...(name.input.value.trim() ? { name: name.input.value.trim() } : {}),
      ...(scope.input.value.trim() ? { namespace: scope.input.value.trim() } : {}),
      spec,
    };
  }
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    const request = readRequest();
    if (!request) return;
    submit.disabled = true;
    try {
      const created = await api.createBackup(request);
      onCreated(created.name);
    } catch (err) {
      messages.show(err);
      submit.disabled = false;
    }
  });
  // Plan (dry run): the same request with ?dryRun=true; the plan shows below the form, nothing is created.
  plan.addEventListener('click', async () => {
    const request = readRequest();
    if (!request) return;
    plan.disabled = true;
    planOut.replaceChildren(h('p', { class: 'muted small', 'aria-live': 'polite' }, 'Planning…'));
    try {
      planOut.replaceChildren(renderDryRunPlan(await api.planBackup(request)));
    } catch (err) {
      planOut.replaceChildren();
      messages.show(err);
    } finally {
      plan.disabled = false;
    }
  });
  return h('details', { class: 'card new-backup-card' }, h('summary', {}, 'New backup'), form, planOut);
}

function showList() {
  document.title = 'Backups — Stowage console';
  const tbody = h('tbody');
  const status = h('p', { class: 'muted small', 'aria-live': 'polite' }, 'Loading…');
  const more = h('button', { type: 'button', hidden: true }, 'Load more');
  const table = h(
    'table',
    { class: 'backups' },
    h('caption', { class: 'visually-hidden' }, 'Backups, newest first'),
    h(
      'thead',
      {},
      h(
        'tr',
        {},
        ...['Backup', 'Namespace', 'Phase', 'Started', 'Duration', 'Items', 'PVBs', 'Problems'].map((t) => h('th', { scope: 'col' }, t)),
      ),
    ),
    tbody,
  );
  const main = h(
    'main',
    { id: 'main', tabindex: '-1' },
    h('div', { class: 'page-head' }, h('h1', {}, 'Backups')),
    newBackupForm((n) => {
      location.hash = `#/backups/${encodeURIComponent(n)}`;
    }),
    h('section', { class: 'card' }, h('div', { class: 'table-scroll' }, table), status, more),
  );
  setView(header(), main);

  let cursor;
  let shown = [];
  let timer;
  let alive = true;
  const details = new Map();

  async function load(reset) {
    try {
      const page = await api.listBackups(50, reset ? undefined : cursor);
      if (!alive) return;
      shown = reset ? page.items : [...shown, ...page.items];
      cursor = page.nextCursor;
      // The list has phase and times; progress and counts come from each backup.
      const wanted = shown.filter((b) => !details.has(b.name) || !TERMINAL_PHASES.has(details.get(b.name).phase));
      for (let i = 0; i < wanted.length; i += 6) {
        await Promise.all(
          wanted.slice(i, i + 6).map(async (b) => {
            try {
              details.set(b.name, await api.getBackup(b.name));
            } catch (err) {
              if (err instanceof UnauthorizedError) throw err;
            }
          }),
        );
        if (!alive) return;
      }
      render();
    } catch (err) {
      if (!alive || err instanceof UnauthorizedError) return;
      status.textContent = `Could not load backups: ${explainFailure(err)}`;
    }
    if (!alive) return;
    const running = shown.some((b) => !TERMINAL_PHASES.has(details.get(b.name)?.phase ?? b.phase));
    timer = setTimeout(() => load(true), running ? 2000 : 10000);
  }

  function render() {
    tbody.replaceChildren(
      ...shown.map((s) => {
        const b = details.get(s.name) ?? s;
        const p = progressOf(b);
        return h(
          'tr',
          {},
          h('th', { scope: 'row' }, h('a', { href: `#/backups/${encodeURIComponent(b.name)}` }, b.name)),
          h('td', {}, b.namespace ?? h('span', { class: 'muted' }, 'cluster-wide')),
          h('td', {}, phaseBadge(b.phase)),
          h('td', {}, formatTime(b.startedAt ?? b.createdAt)),
          h('td', { class: 'num' }, formatDuration(durationOf(b.startedAt, b.completedAt))),
          h('td', {}, progressBar(p.done, p.total, `items of ${b.name}`), h('span', { class: 'small' }, ` ${p.done} / ${p.total}`)),
          h('td', { class: 'num' }, `${p.pvbDone} / ${p.pvbs.total ?? 0}`),
          h(
            'td',
            {},
            b.errors ? h('span', { class: 'bad' }, `${b.errors} error(s)`) : null,
            b.errors && b.warnings ? ', ' : null,
            b.warnings ? h('span', { class: 'warn' }, `${b.warnings} warning(s)`) : null,
            !b.errors && !b.warnings ? h('span', { class: 'muted' }, '–') : null,
          ),
        );
      }),
    );
    const user = getIdentity()?.kind === 'user';
    status.textContent =
      shown.length === 0
        ? user
          ? 'No backups you may see: only those in namespaces where RBAC lets you list backups are shown. Start one above.'
          : 'No backups yet. Start one above.'
        : `${shown.length} backup(s)${user ? ' you may see' : ''}`;
    more.hidden = !cursor;
  }

  more.addEventListener('click', () => {
    clearTimeout(timer);
    load(false);
  });
  load(true);
  teardown = () => {
    alive = false;
    clearTimeout(timer);
  };
}

// ---- one backup ------------------------------------------------------------------------------

/** The phases of a backup a restore accepts (the API says why for any other). */
const RESTORABLE_PHASES = new Set(['Completed', 'PartiallyFailed']);

function stat(label, ...value) {
  return h('div', { class: 'stat' }, h('dt', {}, label), h('dd', {}, ...value));
}

function showBackup(name) {
  document.title = `${name} — Stowage console`;
  const title = h('h1', {}, name);
  const phase = h('span', { class: 'phase-slot', 'aria-live': 'polite' });
  const live = h('span', { class: 'live-status muted small', 'aria-live': 'polite' });
  const cancel = h('button', { type: 'button', class: 'danger', hidden: true }, 'Cancel backup');
  const remove = h('button', { type: 'button', class: 'danger', hidden: true }, 'Delete backup');
  const actionError = h('p', { class: 'form-error', role: 'alert' });
  // Restoring: once the backup has ended in a phase a restore accepts.
  const restoreSlot = h('div', {});
  const stats = h('dl', { class: 'stats' });
  const problems = h('section', { class: 'card problems', 'aria-labelledby': 'problems-title' });
  // Backup-level hooks (spec.hooks.backup): shown once a phase of them has run.
  const backupHooks = h('section', { class: 'card', id: 'backup-hooks', 'aria-labelledby': 'backup-hooks-title', hidden: true });
  const timelineBox = h('div', { class: 'timeline-box' });
  const tableBox = h('div', { class: 'blocks-box' });
  // The spec as a Velero user writes it (the API shows durations as `4h0m0s`, not milliseconds).
  const specText = h('pre', { class: 'spec', id: 'backup-spec' });
  const main = h(
    'main',
    { id: 'main', tabindex: '-1' },
    h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← All backups')),
    h(
      'div',
      { class: 'page-head' },
      title,
      phase,
      live,
      h(
        'div',
        { class: 'head-links' },
        ...(getIdentity()?.kind === 'user'
          ? []
          : [
              h('a', { href: '/admin/queues', target: '_blank', rel: 'noopener' }, 'Queue dashboard'),
              h('a', { href: '/docs', target: '_blank', rel: 'noopener' }, 'OpenAPI docs'),
            ]),
        cancel,
        remove,
      ),
    ),
    actionError,
    h('section', { class: 'card', 'aria-label': 'Progress' }, stats),
    problems,
    restoreSlot,
    backupHooks,
    h(
      'section',
      { class: 'card', 'aria-labelledby': 'timeline-title' },
      h('h2', { id: 'timeline-title' }, 'Timeline'),
      h(
        'p',
        { class: 'muted small' },
        'A lane per node: ▼ pre hooks, ■ items written, ▲ post hooks, bars are PVBs (start → completion). Hover or focus an item to see its block; the table below lists the same data.',
      ),
      timelineBox,
    ),
    h('section', { class: 'card', 'aria-labelledby': 'blocks-title' }, h('h2', { id: 'blocks-title' }, 'Blocks'), tableBox),
    h('details', { class: 'card' }, h('summary', {}, 'Spec'), specText),
  );
  setView(header(), main);

  const table = createBlocksTable(tableBox);
  const timeline = createTimeline(timelineBox, { onSelectBlock: (id) => table.showBlock(id) });
  const store = new BlocksStore(name);
  let backup;
  let alive = true;
  let lastProblemsKey = '';

  function renderBackup() {
    if (!backup) return;
    const p = progressOf(backup);
    phase.replaceChildren(phaseBadge(backup.phase));
    specText.textContent = JSON.stringify(backup.spec ?? {}, null, 2);
    cancel.hidden = TERMINAL_PHASES.has(backup.phase) || Boolean(backup.cancelRequestedAt);
    remove.hidden = !TERMINAL_PHASES.has(backup.phase);
    if (RESTORABLE_PHASES.has(backup.phase) && restoreSlot.childElementCount === 0) {
      restoreSlot.append(
        restoreForm(
          name,
          (restore) => {
            location.hash = `#/restores/${encodeURIComponent(restore.name)}`;
          },
          backup.namespace,
        ),
      );
    }
    stats.replaceChildren(
      stat('Namespace', backup.namespace ?? 'cluster-wide'),
      stat('Started', formatTime(backup.startedAt ?? backup.createdAt)),
      stat('Duration', formatDuration(durationOf(backup.startedAt, backup.completedAt)), backup.completedAt ? '' : ' so far'),
      stat('Items', progressBar(p.done, p.total, 'items backed up'), ` ${p.done} / ${p.total}`),
      stat('PVBs', progressBar(p.pvbDone, p.pvbs.total, 'PVBs finished'), ` ${p.pvbs.Completed ?? 0} / ${p.pvbs.total ?? 0} done`),
      stat(
        'Hooks',
        `${backup.hookStatus.hooksAttempted} run, `,
        h('span', { class: backup.hookStatus.hooksFailed ? 'bad' : '' }, `${backup.hookStatus.hooksFailed} failed`),
      ),
      stat('Errors', h('span', { class: backup.errors ? 'bad' : '' }, String(backup.errors))),
      stat('Warnings', h('span', { class: backup.warnings ? 'warn' : '' }, String(backup.warnings))),
    );
    renderBackupHooks();
    timeline.update(backup, store.blocks);
    const key = `${backup.errors}/${backup.warnings}/${backup.phase}`;
    if (key !== lastProblemsKey) {
      lastProblemsKey = key;
      loadProblems();
    }
  }

  function renderBackupHooks() {
    const phases = ['pre', 'post'].filter((p) => backup.backupHooks?.[p]);
    backupHooks.hidden = phases.length === 0;
    if (phases.length === 0) return;
    backupHooks.replaceChildren(
      h('h2', { id: 'backup-hooks-title' }, 'Backup hooks'),
      ...phases.map((p) => {
        const done = backup.backupHooks[p];
        return h(
          'div',
          {},
          h('h3', {}, p === 'pre' ? 'Before the first block' : 'After every block'),
          done.failed ? h('p', { class: 'bad small' }, done.failed) : null,
          h(
            'ul',
            { class: 'cell-list' },
            done.runs.map((r, k) => hookCell(r, `backup-${p}/${k}`, new Set())),
          ),
        );
      }),
    );
  }

  // Read again at each change of phase or counts; only the latest read asked for is shown.
  let problemsAsked = 0;
  async function loadProblems() {
    const asked = ++problemsAsked;
    const heading = h('h2', { id: 'problems-title' }, 'Errors and warnings');
    if (!backup.errors && !backup.warnings && !backup.failureReason) {
      problems.replaceChildren(heading, h('p', { class: 'muted' }, 'None so far.'));
      return;
    }
    try {
      const lines = (await api.logs(name)).filter((l) => l.level === 'error' || l.level === 'warn');
      if (!alive || asked !== problemsAsked) return;
      problems.replaceChildren(
        heading,
        backup.failureReason ? h('p', { class: 'bad' }, backup.failureReason) : '',
        h(
          'ul',
          { class: 'problem-list' },
          lines
            .slice(-200)
            .map((l) =>
              h(
                'li',
                { class: l.level === 'error' ? 'bad' : 'warn' },
                h('strong', {}, l.level),
                ` ${formatTime(new Date(l.at).toISOString())} ${l.msg}`,
              ),
            ),
        ),
      );
    } catch (err) {
      if (alive && asked === problemsAsked && !(err instanceof UnauthorizedError))
        problems.replaceChildren(heading, h('p', { class: 'bad' }, `Could not load logs: ${err.message}`));
    }
  }

  // The backup record changes with almost every event; read it at most twice a second, one read
  // at a time (refresher.js: an answer read before the end must never land after the last one).
  const refresher = createRefresher({
    load: () => api.getBackup(name),
    onValue: (value) => {
      backup = value;
      if (alive) renderBackup();
    },
    onError: (err) => {
      if (!alive || err instanceof UnauthorizedError) return;
      live.textContent = `Could not refresh: ${err.message}`;
      if (mayRetry(err)) refresher.soon(RETRY_MS);
    },
  });
  const refreshBackupSoon = (delay = 500) => refresher.soon(delay);

  store.onChange((s, err) => {
    if (err) {
      if (!(err instanceof UnauthorizedError)) live.textContent = `Could not load blocks: ${err.message}`;
      return;
    }
    table.update(s.blocks, s.total);
    if (backup) timeline.update(backup, s.blocks);
  });

  cancel.addEventListener('click', () =>
    runAction({
      button: cancel,
      errorLine: actionError,
      what: 'Cancel',
      confirm: {
        title: `Cancel backup ${name}?`,
        body: 'No further block starts and running volume copies are stopped; the backup ends Canceled and cannot be resumed.',
        confirmLabel: 'Cancel backup',
      },
      action: async () => {
        await api.cancelBackup(name);
        refreshBackupSoon(0);
      },
    }),
  );
  remove.addEventListener('click', () =>
    runAction({
      button: remove,
      errorLine: actionError,
      what: 'Delete',
      confirm: {
        title: `Delete backup ${name}?`,
        body: 'Its data in backup storage, its volume snapshots and its record are deleted for good; it can no longer be restored.',
        confirmLabel: 'Delete backup',
      },
      action: async () => {
        await api.deleteBackup(name);
        location.hash = '#/';
      },
    }),
  );

  let events;
  (async () => {
    try {
      backup = await api.getBackup(name);
    } catch (err) {
      if (err instanceof UnauthorizedError || !alive) return;
      main.replaceChildren(
        h('p', { class: 'crumbs' }, h('a', { href: '#/' }, '← All backups')),
        h('h1', {}, name),
        h(
          'p',
          { class: 'bad', role: 'alert' },
          err.status === 404
            ? `There is no backup named "${name}".`
            : err.status === 403
              ? `You may not see this backup. ${explainFailure(err)}`
              : `Could not load the backup: ${err.message}`,
        ),
      );
      return;
    }
    if (!alive) return;
    renderBackup();
    store.schedule(true);
    events = followEvents(name, {
      onEvent: (ev) => {
        store.applyEvent(ev);
        if (ev.type !== 'pvb.progress') refreshBackupSoon();
      },
      onStatus: (s) => {
        live.textContent = s === 'live' ? '● live' : s === 'ended' ? '' : s;
      },
    });
    const outcome = await events.done;
    if (!alive) return;
    // Final state: everything once more, so the last events' effects are all shown.
    if (outcome === 'ended') {
      refreshBackupSoon(0);
      store.schedule(true, { all: true });
    }
  })();

  teardown = () => {
    alive = false;
    events?.stop();
    refresher.stop();
    store.close();
    timeline.destroy();
  };
}

// ---- routing ---------------------------------------------------------------------------------

function route() {
  if (!getToken()) {
    showPrompt();
    return;
  }
  const m = /^#\/backups\/([^/]+)$/.exec(location.hash);
  const r = /^#\/restores(?:\/([^/]+))?$/.exec(location.hash);
  // The restore pages share the page chrome and teardown with the backup pages.
  const ui = {
    setView,
    header,
    onTeardown: (fn) => {
      teardown = fn;
    },
  };
  if (m) showBackup(decodeURIComponent(m[1]));
  else if (r?.[1]) showRestore(decodeURIComponent(r[1]), ui);
  else if (r) showRestoreList(ui);
  else if (location.hash === '#/schedules') showSchedules(ui);
  else showList();
  document.getElementById('main')?.focus({ preventScroll: true });
}

window.addEventListener('hashchange', () => {
  if (getToken()) route();
});
route();

// The skip link moves focus without touching the hash (the hash is the router's).
document.querySelector('.skip-link')?.addEventListener('click', (e) => {
  e.preventDefault();
  document.getElementById('main')?.focus();
});
