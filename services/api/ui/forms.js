// What every form of the console shares: a labelled field with its own message line, the API's
// validation problems shown next to the fields they name, and a confirmation before anything
// destructive. The API is the one judge of a value: the console checks nothing it would check.

import { explainFailure, UnauthorizedError } from './api.js';
import { h } from './format.js';

/**
 * A labelled input and the line under it where its problems show. `path` is the request path the
 * field fills (`spec.ttl`): a problem the API reports at that path or below it
 * (`spec.includedNamespaces[1]`, `spec.namespaceMapping.shop`) shows here.
 */
export function formField({ id, label, input, path, help, check = false, wide = false }) {
  input.id = id;
  if (!input.name) input.name = id;
  const helpLine = help ? h('span', { id: `${id}-help`, class: 'muted small' }, help) : null;
  const error = h('span', { id: `${id}-error`, class: 'field-error', 'aria-live': 'polite' });
  input.setAttribute('aria-describedby', [helpLine ? `${id}-help` : '', `${id}-error`].filter(Boolean).join(' '));
  const labelEl = h('label', { for: id }, label);
  const element = check
    ? h('div', { class: 'field check' }, input, labelEl, error)
    : h('div', { class: wide ? 'field wide' : 'field' }, labelEl, input, helpLine, error);
  return { element, input, path, error };
}

/** Whether `problemPath` is `fieldPath` or lies below it. */
function under(problemPath, fieldPath) {
  return problemPath === fieldPath || problemPath.startsWith(`${fieldPath}.`) || problemPath.startsWith(`${fieldPath}[`);
}

/**
 * The messages of one form: `fields` from formField, `formError` the form's own line for what
 * no field answers for (and for failures that are not validation problems).
 */
export function formMessages(fields, formError) {
  const clear = () => {
    formError.textContent = '';
    for (const f of fields) {
      f.error.textContent = '';
      f.input.removeAttribute('aria-invalid');
    }
  };
  const mark = (field, message) => {
    field.error.textContent = field.error.textContent ? `${field.error.textContent}; ${message}` : message;
    field.input.setAttribute('aria-invalid', 'true');
  };
  return {
    clear,
    /** A problem the form itself finds (its own syntax, e.g. `source:target`), before anything is sent. */
    local(field, message) {
      clear();
      mark(field, message);
      field.input.focus();
    },
    /** Shows a failed request: each API problem next to the field of the longest path it lies under. */
    show(err) {
      clear();
      if (err instanceof UnauthorizedError) return; // the app is back at the token prompt
      const problems = err?.problems ?? [];
      const elsewhere = [];
      let first;
      for (const p of problems) {
        const field = fields.filter((f) => f.path && under(p.path, f.path)).sort((a, b) => b.path.length - a.path.length)[0];
        if (!field) {
          elsewhere.push(`${p.path}: ${p.message}`);
          continue;
        }
        // The exact path is the field's; below it (an index, a key), the rest of the path says which part.
        mark(field, p.path === field.path ? p.message : `${p.path.slice(field.path.length).replace(/^\./, '')}: ${p.message}`);
        first ??= field;
      }
      if (problems.length === 0) formError.textContent = explainFailure(err);
      else if (elsewhere.length > 0) formError.textContent = elsewhere.join('; ');
      else formError.textContent = 'Not accepted: see the messages by the fields.';
      (first?.input ?? formError).focus?.();
    },
  };
}

/**
 * Asks before something that cannot be undone: a modal dialog naming the action, what it does,
 * and two buttons; resolves true only for the confirming one (Escape or "Keep" is false).
 */
export function confirmAction({ title, body, confirmLabel }) {
  return new Promise((resolve) => {
    const keep = h('button', { type: 'button' }, 'Keep it');
    const go = h('button', { type: 'button', class: 'danger' }, confirmLabel);
    const dialog = h(
      'dialog',
      { class: 'confirm', 'aria-labelledby': 'confirm-title', 'aria-describedby': 'confirm-body' },
      h('h2', { id: 'confirm-title' }, title),
      h('p', { id: 'confirm-body' }, body),
      h('div', { class: 'form-actions' }, keep, go),
    );
    keep.addEventListener('click', () => dialog.close('keep'));
    go.addEventListener('click', () => dialog.close('confirm'));
    dialog.addEventListener('close', () => {
      resolve(dialog.returnValue === 'confirm');
      dialog.remove();
    });
    document.body.append(dialog);
    dialog.showModal();
    keep.focus();
  });
}

/**
 * What a button of the console does: asks first when `confirm` is given ({title, body,
 * confirmLabel}: confirmAction), keeps the button disabled while `action` runs, and says on
 * `errorLine` what failed (`<what> failed: <the API's message>`, or `<what> refused: <why>` for a 403).
 */
export async function runAction({ button, errorLine, what, confirm, action }) {
  if (confirm && !(await confirmAction(confirm))) return;
  button.disabled = true;
  errorLine.textContent = '';
  try {
    await action();
  } catch (err) {
    if (!(err instanceof UnauthorizedError))
      errorLine.textContent = err?.status === 403 ? `${what} refused: ${err.message}` : `${what} failed: ${err.message}`;
  } finally {
    button.disabled = false;
  }
}

/** `a, b ,c` → ['a', 'b', 'c'] (empty entries dropped). */
export function splitList(text) {
  return text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
}
