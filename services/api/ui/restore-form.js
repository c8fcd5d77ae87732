// "Restore this backup" on a backup's page: which namespaces, where to (namespace mapping), what
// to do with objects that exist (existingResourcePolicy), whether pod volumes come back. The API's
// problems show next to their fields; overwriting existing objects is confirmed first.

import { api } from './api.js';
import { h } from './format.js';
import { confirmAction, formField, formMessages, splitList } from './forms.js';

/** `shop:shop-copy, media:media2` → `{shop: 'shop-copy', media: 'media2'}`; the entries without a colon separately. */
export function parseNamespaceMapping(text) {
  const mapping = {};
  const malformed = [];
  for (const entry of splitList(text)) {
    const colon = entry.indexOf(':');
    if (colon < 0) malformed.push(entry);
    else mapping[entry.slice(0, colon).trim()] = entry.slice(colon + 1).trim();
  }
  return { mapping, malformed };
}

/**
 * The form; `onCreated(restore)` once the API has accepted it. A namespaced backup (`namespace`)
 * is restored by a Restore in its namespace (what a team may create: `create restores` there); a
 * cluster-wide one by a ClusterRestore.
 */
export function restoreForm(backupName, onCreated, namespace) {
  const name = formField({
    id: 'rf-name',
    label: 'Restore name',
    path: 'name',
    input: h('input', { placeholder: 'generated when empty' }),
  });
  const namespaces = formField({
    id: 'rf-namespaces',
    label: 'Included namespaces',
    path: 'spec.includedNamespaces',
    input: h('input', { placeholder: 'shop (empty: all in the backup)' }),
  });
  const mapping = formField({
    id: 'rf-mapping',
    label: 'Namespace mapping',
    path: 'spec.namespaceMapping',
    input: h('input', { placeholder: 'shop:shop-copy' }),
    help: 'source:target, separated by commas: the objects of a source namespace are restored into the target.',
  });
  const policySelect = h(
    'select',
    {},
    h('option', { value: 'none' }, 'none: leave them as they are'),
    h('option', { value: 'update' }, 'update: replace them with the backed-up version'),
  );
  const policy = formField({
    id: 'rf-policy',
    label: 'Objects that already exist',
    path: 'spec.existingResourcePolicy',
    input: policySelect,
  });
  const volumes = formField({
    id: 'rf-volumes',
    label: 'Restore pod volumes (restorePVs)',
    path: 'spec.restorePVs',
    input: h('input', { type: 'checkbox', checked: true }),
    check: true,
  });
  const fields = [name, namespaces, mapping, policy, volumes];
  const error = h('p', { class: 'form-error', role: 'alert', tabindex: '-1' });
  const messages = formMessages(fields, error);
  const submit = h('button', { type: 'submit', class: 'primary' }, 'Restore');
  const form = h(
    'form',
    { class: 'new-backup', 'aria-label': `Restore ${backupName}`, novalidate: true },
    ...fields.map((f) => f.element),
    h('div', { class: 'form-actions' }, submit),
    error,
  );
  form.addEventListener('submit', async (e) => {
    e.preventDefault();
    messages.clear();
    const parsed = parseNamespaceMapping(mapping.input.value);
    if (parsed.malformed.length > 0) {
      messages.local(
        mapping,
        `write each mapping as source:target (${parsed.malformed.map((m) => JSON.stringify(m)).join(', ')} has no colon)`,
      );
      return;
    }
    const spec = { backupName, existingResourcePolicy: policySelect.value, restorePVs: volumes.input.checked };
    const included = splitList(namespaces.input.value);
    if (included.length) spec.includedNamespaces = included;
    if (Object.keys(parsed.mapping).length) spec.namespaceMapping = parsed.mapping;
    if (spec.existingResourcePolicy === 'update') {
      const sure = await confirmAction({
        title: `Restore ${backupName} over existing objects?`,
        body: 'With "update", every object of the backup that already exists in the cluster is replaced by its backed-up version.',
        confirmLabel: 'Restore and replace',
      });
      if (!sure) return;
    }
    submit.disabled = true;
    try {
      const created = await api.createRestore({
        ...(name.input.value.trim() ? { name: name.input.value.trim() } : {}),
        ...(namespace ? { namespace } : {}),
        spec,
      });
      onCreated(created);
    } catch (err) {
      messages.show(err);
    } finally {
      submit.disabled = false;
    }
  });
  return h(
    'section',
    { class: 'card', 'aria-labelledby': 'restore-title', id: 'restore-card' },
    h('h2', { id: 'restore-title' }, 'Restore this backup'),
    h(
      'p',
      { class: 'muted small' },
      namespace
        ? `A Restore in namespace "${namespace}": it restores this namespace's items, into it or a namespace mapped to (where you may create them).`
        : 'A ClusterRestore (create clusterrestores).',
    ),
    form,
  );
}
