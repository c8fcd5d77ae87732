// The schedules page (#/schedules): every schedule with what runs next, what ran last and the
// ticks skipped; a form to create one; per schedule pause or resume, back up now, and delete
// (confirmed). Problems the API finds in a new schedule show next to their fields.

import { api, explainFailure, UnauthorizedError } from './api.js';
import { formatTime, h } from './format.js';
import { formField, formMessages, runAction, splitList } from './forms.js';

function newScheduleForm(onCreated) {
  const name = formField({ id: 'ns-name', label: 'Name', path: 'name', input: h('input', { placeholder: 'nightly' }) });
  const cron = formField({
    id: 'ns-schedule',
    label: 'Schedule',
    path: 'spec.schedule',
    input: h('input', { placeholder: '0 3 * * *' }),
    help: 'Cron (5 fields, or 6 with seconds), @daily, @every 6h; CRON_TZ=Europe/Berlin first for a time zone.',
  });
  const namespaces = formField({
    id: 'ns-namespaces',
    label: 'Included namespaces',
    path: 'spec.template.includedNamespaces',
    input: h('input', { placeholder: 'shop, media (empty: all)' }),
  });
  const ttl = formField({
    id: 'ns-ttl',
    label: 'Keep backups for (TTL)',
    path: 'spec.template.ttl',
    input: h('input', { placeholder: '720h' }),
  });
  const fs = formField({
    id: 'ns-fs',
    label: 'Back up all pod volumes (defaultVolumesToFsBackup)',
    path: 'spec.template.defaultVolumesToFsBackup',
    input: h('input', { type: 'checkbox' }),
    check: true,
  });
  const paused = formField({
    id: 'ns-paused',
    label: 'Create paused',
    path: 'spec.paused',
    input: h('input', { type: 'checkbox' }),
    check: true,
  });
  const skip = formField({
    id: 'ns-skip',
    label: 'Skip the first backup (skipImmediately: wait for the first tick)',
    path: 'spec.skipImmediately',
    input: h('input', { type: 'checkbox' }),
    check: true,
  });
  const fields = [name, cron, namespaces, ttl, fs, paused, skip];
  const error = h('p', { class: 'form-error', role: 'alert', tabindex: '-1' });
  const messages = formMessages(fields, error);
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Create schedule');
  const form = h(
    'form',
    { class: 'new-backup', 'aria-label': 'New schedule', novalidate: true },
    ...fields.map((f) => f.element),
    h('div', { class: 'form-actions' }, submit),
    error,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    messages.clear();
    const template = { defaultVolumesToFsBackup: fs.input.checked };
    const included = splitList(namespaces.input.value);
    if (included.length) template.includedNamespaces = included;
    if (ttl.input.value.trim()) template.ttl = ttl.input.value.trim();
    const spec = { schedule: cron.input.value.trim(), template };
    if (paused.input.checked) spec.paused = true;
    if (skip.input.checked) spec.skipImmediately = true;
    submit.disabled = true;
    try {
      const created = await api.createSchedule({ name: name.input.value.trim(), spec });
      form.reset();
      onCreated(created);
    } catch (err) {
      messages.show(err);
    } finally {
      submit.disabled = false;
    }
  });
  return h('details', { class: 'card new-backup-card' }, h('summary', {}, 'New schedule'), form);
}

/** `#/schedules`. `ui` = { setView, header, onTeardown }. */
export function showSchedules(ui) {
  document.title = 'Schedules — Stowage console';
  const rows = h('tbody');
  const status = h('p', { class: 'muted small', 'aria-live': 'polite' }, 'Loading…');
  const actionError = h('p', { class: 'form-error', role: 'alert' });
  let alive = true;
  let timer;

  /** An action of a row: the list is read again after it. */
  const act = (button, what, action, confirm) =>
    runAction({
      button,
      errorLine: actionError,
      what,
      confirm,
      action: async () => {
        await action();
        await load();
      },
    });

  function actions(s) {
    const paused = s.spec.paused === true;
    const toggle = h('button', { type: 'button' }, paused ? 'Resume' : 'Pause');
    toggle.addEventListener('click', () =>
      act(toggle, `${paused ? 'Resuming' : 'Pausing'} ${s.name}`, () => api.changeSchedule(s.name, { paused: !paused })),
    );
    const now = h('button', { type: 'button' }, 'Back up now');
    now.addEventListener('click', () =>
      act(now, `Backing up from ${s.name}`, async () => {
        const backup = await api.runSchedule(s.name);
        location.hash = `#/backups/${encodeURIComponent(backup.name)}`;
      }),
    );
    const remove = h('button', { type: 'button', class: 'danger' }, 'Delete');
    remove.addEventListener('click', () =>
      act(remove, `Deleting ${s.name}`, () => api.deleteSchedule(s.name), {
        title: `Delete schedule ${s.name}?`,
        body: 'It stops and is forgotten, here and in backup storage; the backups it made stay.',
        confirmLabel: 'Delete schedule',
      }),
    );
    return h('td', { class: 'row-actions' }, toggle, ' ', now, ' ', remove);
  }

  /**
   * Reads the list again (now, or right after the read in flight: an answer read before an action
   * must not land after the one read after it, nor start a second chain of polls). Resolves once
   * a read begun after this call is shown.
   */
  let loading;
  let again;
  function load() {
    clearTimeout(timer);
    if (loading) {
      again ??= loading.then(() => {
        again = undefined;
        return load();
      });
      return again;
    }
    loading = readList().finally(() => {
      loading = undefined;
    });
    return loading;
  }

  async function readList() {
    try {
      const { items } = await api.listSchedules();
      if (!alive) return;
      rows.replaceChildren(
        ...items.map((s) =>
          h(
            'tr',
            { 'data-schedule': s.name },
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
            actions(s),
          ),
        ),
      );
      status.textContent = items.length === 0 ? 'No schedules yet. Create one above.' : `${items.length} schedule(s)`;
    } catch (err) {
      if (!alive || err instanceof UnauthorizedError) return;
      status.textContent = `Could not load schedules: ${explainFailure(err)}`;
    }
    if (alive) timer = setTimeout(load, 5000);
  }

  ui.setView(
    ui.header(),
    h(
      'main',
      { id: 'main', tabindex: '-1' },
      h('div', { class: 'page-head' }, h('h1', {}, 'Schedules')),
      newScheduleForm(() => load()),
      h(
        'section',
        { class: 'card', 'aria-label': 'Schedules' },
        h(
          'div',
          { class: 'table-scroll' },
          h(
            'table',
            { class: 'schedules' },
            h('caption', { class: 'visually-hidden' }, 'Schedules, oldest first'),
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                ...['Schedule', 'Cron', 'State', 'Last backup', 'Next run', 'Skipped ticks', 'Actions'].map((t) =>
                  h('th', { scope: 'col' }, t),
                ),
              ),
            ),
            rows,
          ),
        ),
        actionError,
        status,
      ),
    ),
  );
  load();
  ui.onTeardown(() => {
    alive = false;
    clearTimeout(timer);
  });
}
