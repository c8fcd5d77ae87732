// The Stowage console: a token prompt until a token is accepted, then the backups list
// (#/) and a backup page (#/backups/<name>) with live progress, timeline and blocks, and the
// restores (#/restores, #/restores/<name>: restore-page.js).

import { api, clearToken, getToken, onUnauthorized, setToken, UnauthorizedError } from './api.js';
import { BlocksStore } from './blocks-store.js';
import { createBlocksTable, hookCell } from './blocks-table.js';
import { renderDryRunPlan } from './dry-run-plan.js';
import { durationOf, formatDuration, formatTime, h, phaseBadge, TERMINAL_PHASES } from './format.js';
import { showRestore, showRestoreList } from './restore-page.js';
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
    h('label', { for: 'token' }, 'API token'),
    input,
    h(
      'p',
      { id: 'token-help', class: 'muted small' },
      'One of the tokens in STOWAGE_API_TOKENS. It is kept in this tab only (sessionStorage) and sent as "Authorization: Bearer".',
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
      await api.checkToken(token);
      setToken(token);
      // The cookie lets the browser open the queue dashboard and /docs (GET only); best effort.
      await api.openSession().catch(() => undefined);
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

function header() {
  const forget = h('button', { type: 'button', class: 'link-button' }, 'Forget token');
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
      h('a', { href: '/admin/queues', target: '_blank', rel: 'noopener' }, 'Queue dashboard'),
      h('a', { href: '/docs', target: '_blank', rel: 'noopener' }, 'API docs'),
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
  const name = h('input', { id: 'nb-name', name: 'name', placeholder: 'generated when empty', pattern: '[a-z0-9]([-a-z0-9]*[a-z0-9])?' });
  const namespaces = h('input', { id: 'nb-ns', name: 'namespaces', placeholder: 'shop, media (empty: all)' });
  const fs = h('input', { id: 'nb-fs', type: 'checkbox', checked: true });
  const specJson = h('textarea', {
    id: 'nb-spec',
    rows: '5',
    spellcheck: 'false',
    placeholder: '{"hooks": {"resources": [...]}, "labelSelector": {...}}',
    'aria-describedby': 'nb-spec-help',
  });
  const error = h('p', { class: 'form-error', role: 'alert' });
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Start backup');
  const plan = h('button', { type: 'button' }, 'Plan (dry run)');
  const planOut = h('div', { class: 'plan-out' });
  const form = h(
    'form',
    { class: 'new-backup', 'aria-label': 'New backup' },
    h('div', { class: 'field' }, h('label', { for: 'nb-name' }, 'Name'), name),
    h('div', { class: 'field' }, h('label', { for: 'nb-ns' }, 'Included namespaces'), namespaces),
    h('div', { class: 'field check' }, fs, h('label', { for: 'nb-fs' }, 'Back up all pod volumes (defaultVolumesToFsBackup)')),
    h(
      'div',
      { class: 'field wide' },
      h('label', { for: 'nb-spec' }, 'More spec fields (JSON, optional)'),
      specJson,
      h('span', { id: 'nb-spec-help', class: 'muted small' }, 'Merged into the spec; the API lists every problem with its path.'),
    ),
    h('div', { class: 'form-actions' }, submit, plan),
    error,
  );
  // The request both buttons send; undefined (with the error shown) when the spec JSON is bad.
  function readRequest() {
    error.textContent = '';
    let extra = {};
    if (specJson.value.trim()) {
      try {
        extra = JSON.parse(specJson.value);
      } catch (err) {
        error.textContent = `The spec fields are not valid JSON: ${err.message}`;
        specJson.focus();
        return undefined;
      }
    }
    const spec = { defaultVolumesToFsBackup: fs.checked, ...extra };
    const ns = namespaces.value
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean);
    if (ns.length) spec.includedNamespaces = ns;
    return { ...(name.value.trim() ? { name: name.value.trim() } : {}), spec };
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
      if (!(err instanceof UnauthorizedError)) error.textContent = err.message;
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
      if (!(err instanceof UnauthorizedError)) error.textContent = err.message;
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
      h('tr', {}, ...['Backup', 'Phase', 'Started', 'Duration', 'Items', 'PVBs', 'Problems'].map((t) => h('th', { scope: 'col' }, t))),
    ),
    tbody,
  );
  // Schedules: one row each (what runs next, what ran last, ticks skipped and why).
  const scheduleRows = h('tbody');
  const schedulesCard = h(
    'section',
    { class: 'card', 'aria-labelledby': 'schedules-title', hidden: true },
    h('h2', { id: 'schedules-title' }, 'Schedules'),
    h(
      'div',
      { class: 'table-scroll' },
      h(
        'table',
        { class: 'schedules' },
        h(
          'thead',
          {},
          h(
            'tr',
            {},
            ...['Schedule', 'Cron', 'State', 'Last backup', 'Next run', 'Skipped ticks'].map((t) => h('th', { scope: 'col' }, t)),
          ),
        ),
        scheduleRows,
      ),
    ),
  );
  const main = h(
    'main',
    { id: 'main', tabindex: '-1' },
    h('div', { class: 'page-head' }, h('h1', {}, 'Backups')),
    newBackupForm((n) => {
      location.hash = `#/backups/${encodeURIComponent(n)}`;
    }),
    h('section', { class: 'card' }, h('div', { class: 'table-scroll' }, table), status, more),
    schedulesCard,
  );
  setView(header(), main);

  let cursor;
  let shown = [];
  let timer;
  let alive = true;
  const details = new Map();

  async function loadSchedules() {
    try {
      const { items } = await api.listSchedules();
      if (!alive) return;
      schedulesCard.hidden = items.length === 0;
      scheduleRows.replaceChildren(
        ...items.map((s) =>
          h(
            'tr',
            {},
            h('th', { scope: 'row' }, s.name),
            h('td', {}, h('code', {}, String(s.spec.schedule ?? ''))),
            h(
              'td',
              {},
              s.status.phase === 'FailedValidation' ? h('span', { class: 'bad' }, 'invalid') : s.spec.paused ? 'paused' : 'enabled',
            ),
            h(
              'td',
              {},
              s.status.lastBackup
                ? h('a', { href: `#/backups/${encodeURIComponent(s.status.lastBackup.name)}` }, s.status.lastBackup.name)
                : '–',
            ),
            h('td', {}, s.status.nextRunAt ? formatTime(s.status.nextRunAt) : '–'),
            h('td', { class: 'num', title: s.status.lastSkipped?.reason ?? '' }, String(s.status.skipped)),
          ),
        ),
      );
    } catch (err) {
      if (err instanceof UnauthorizedError) return;
    }
  }

  async function load(reset) {
    if (reset) loadSchedules();
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
      status.textContent = `Could not load backups: ${err.message}`;
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
    status.textContent = shown.length === 0 ? 'No backups yet. Start one above.' : `${shown.length} backup(s)`;
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

function stat(label, ...value) {
  return h('div', { class: 'stat' }, h('dt', {}, label), h('dd', {}, ...value));
}

function showBackup(name) {
  document.title = `${name} — Stowage console`;
  const title = h('h1', {}, name);
  const phase = h('span', { class: 'phase-slot', 'aria-live': 'polite' });
  const live = h('span', { class: 'live-status muted small', 'aria-live': 'polite' });
  const cancel = h('button', { type: 'button', class: 'danger', hidden: true }, 'Cancel backup');
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
        h('a', { href: '/admin/queues', target: '_blank', rel: 'noopener' }, 'Queue dashboard'),
        h('a', { href: '/docs', target: '_blank', rel: 'noopener' }, 'OpenAPI docs'),
        cancel,
      ),
    ),
    h('section', { class: 'card', 'aria-label': 'Progress' }, stats),
    problems,
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
  let backupTimer;
  let lastProblemsKey = '';

  function renderBackup() {
    if (!backup) return;
    const p = progressOf(backup);
    phase.replaceChildren(phaseBadge(backup.phase));
    specText.textContent = JSON.stringify(backup.spec ?? {}, null, 2);
    cancel.hidden = TERMINAL_PHASES.has(backup.phase) || Boolean(backup.cancelRequestedAt);
    stats.replaceChildren(
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

  async function loadProblems() {
    const heading = h('h2', { id: 'problems-title' }, 'Errors and warnings');
    if (!backup.errors && !backup.warnings && !backup.failureReason) {
      problems.replaceChildren(heading, h('p', { class: 'muted' }, 'None so far.'));
      return;
    }
    try {
      const lines = (await api.logs(name)).filter((l) => l.level === 'error' || l.level === 'warn');
      if (!alive) return;
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
      if (!(err instanceof UnauthorizedError))
        problems.replaceChildren(heading, h('p', { class: 'bad' }, `Could not load logs: ${err.message}`));
    }
  }

  // The backup record changes with almost every event; read it at most twice a second.
  function refreshBackupSoon(delay = 500) {
    if (backupTimer !== undefined || !alive) return;
    backupTimer = setTimeout(async () => {
      backupTimer = undefined;
      try {
        backup = await api.getBackup(name);
        if (alive) renderBackup();
      } catch (err) {
        if (alive && !(err instanceof UnauthorizedError)) live.textContent = `Could not refresh: ${err.message}`;
      }
    }, delay);
  }

  store.onChange((s, err) => {
    if (err) {
      if (!(err instanceof UnauthorizedError)) live.textContent = `Could not load blocks: ${err.message}`;
      return;
    }
    table.update(s.blocks, s.total);
    if (backup) timeline.update(backup, s.blocks);
  });

  cancel.addEventListener('click', async () => {
    cancel.disabled = true;
    try {
      await api.cancelBackup(name);
      refreshBackupSoon(0);
    } catch (err) {
      if (!(err instanceof UnauthorizedError)) live.textContent = `Cancel failed: ${err.message}`;
    } finally {
      cancel.disabled = false;
    }
  });

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
          err.status === 404 ? `There is no backup named "${name}".` : `Could not load the backup: ${err.message}`,
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
      clearTimeout(backupTimer);
      backupTimer = undefined;
      refreshBackupSoon(0);
      store.schedule(true, { all: true });
    }
  })();

  teardown = () => {
    alive = false;
    events?.stop();
    clearTimeout(backupTimer);
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
