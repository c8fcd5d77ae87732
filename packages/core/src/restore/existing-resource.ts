/*
 * What to do when a restored object already exists (a create answered 409), as Velero:
 * - the in-cluster object is compared with the one the restore would create, ignoring metadata
 *   the server owns, status, and fields the cluster fills in again (FIELDS_REFILLED_BY_CLUSTER);
 * - equal → skipped without a warning (with `update`, only the restore labels are patched on);
 * - ServiceAccount → merged either way: the backed-up secrets, imagePullSecrets, labels and
 *   annotations the in-cluster one lacks are added (nothing of the cluster's is removed);
 * - otherwise `none` → skipped with the warning "already exists … different"; `update` →
 *   patched to the backed-up form (a warning if that patch fails).
 * A re-run of a restore job meets its own earlier create here: that object equals the desired
 * one, so it is skipped quietly — nothing is created twice.
 */
import { groupResourceOf } from '../resource-selection.js';
import { createMergePatch, isJsonObject, jsonEqual, pathMatches } from './json.js';
import { FIELDS_REFILLED_BY_CLUSTER } from './restore-diff.js';
import type { ExistingResourcePolicy } from './restore-spec.schema.js';
import { RESTORE_BACKUP_NAME_LABEL, RESTORE_NAME_LABEL, resetMetadata } from './restore-transforms.js';
import type { JsonObject, RestoreItem, RestoreObject } from './types.js';

export type ExistingResourceDecision =
  /** Leave the in-cluster object alone; `warning` null when it equals the backed-up one. */
  | { action: 'skip'; result: 'exists-skipped'; warning: string | null }
  /**
   * Send `patch` as a JSON merge patch (`application/merge-patch+json`). `result` is what the
   * item's result is when the patch succeeds; when it fails, record `warningIfFailed`.
   */
  | { action: 'patch'; result: 'updated' | 'exists-skipped'; patch: JsonObject; warningIfFailed: string };

export interface ExistingResourceInput {
  item: Pick<RestoreItem, 'group' | 'resource' | 'targetNamespace' | 'targetName'>;
  /** The object the restore tried to create (transformForRestore's result). */
  desired: RestoreObject;
  /** The object in the cluster, as read back after the 409. */
  existing: RestoreObject;
  policy: ExistingResourcePolicy;
}

/** The in-cluster object as the restore would have written it: server metadata and status dropped. */
function comparable(existing: RestoreObject, desired: RestoreObject, groupResource: string): RestoreObject {
  const copy = structuredClone(existing) as RestoreObject;
  resetMetadata(copy.metadata);
  delete copy.status;
  // fields the restore leaves for the cluster to fill: not a difference when the cluster has them
  const patterns = [...(FIELDS_REFILLED_BY_CLUSTER['*'] ?? []), ...(FIELDS_REFILLED_BY_CLUSTER[groupResource] ?? [])];
  dropRefilled(copy, desired, '', patterns);
  const labels = { ...(copy.metadata.labels ?? {}) };
  for (const key of [RESTORE_BACKUP_NAME_LABEL, RESTORE_NAME_LABEL]) {
    const value = desired.metadata.labels?.[key];
    if (value !== undefined) labels[key] = value;
  }
  if (Object.keys(labels).length > 0) copy.metadata.labels = labels;
  return copy;
}

function dropRefilled(actual: JsonObject, desired: JsonObject, path: string, patterns: readonly string[]): void {
  for (const key of Object.keys(actual)) {
    const fieldPath = path ? (/^[A-Za-z_$][\w$]*$/.test(key) ? `${path}.${key}` : `${path}[${JSON.stringify(key)}]`) : key;
    const value = actual[key];
    if (!Object.hasOwn(desired, key)) {
      if (patterns.some((pattern) => pathMatches(pattern, fieldPath))) delete actual[key];
      else if (isJsonObject(value)) {
        dropRefilled(value, {}, fieldPath, patterns);
        if (Object.keys(value).length === 0) delete actual[key];
      }
      continue;
    }
    const wanted = desired[key];
    if (isJsonObject(value) && isJsonObject(wanted)) dropRefilled(value, wanted, fieldPath, patterns);
    else if (Array.isArray(value) && Array.isArray(wanted) && value.length === wanted.length) {
      value.forEach((element, index) => {
        const wantedElement = wanted[index];
        if (isJsonObject(element) && isJsonObject(wantedElement)) dropRefilled(element, wantedElement, `${fieldPath}[${index}]`, patterns);
      });
    }
  }
}

function mergeByName(current: unknown, backedUp: unknown): unknown[] | undefined {
  const merged = Array.isArray(current) ? [...current] : [];
  const names = new Set(merged.map((entry) => (isJsonObject(entry) ? entry.name : undefined)));
  for (const entry of Array.isArray(backedUp) ? backedUp : []) {
    if (isJsonObject(entry) && !names.has(entry.name)) merged.push(entry);
  }
  return merged.length > 0 ? merged : undefined;
}

function mergeMissing(
  current: Record<string, string> | undefined,
  backedUp: Record<string, string> | undefined,
): Record<string, string> | undefined {
  const merged = { ...(backedUp ?? {}), ...(current ?? {}) };
  return Object.keys(merged).length > 0 ? merged : undefined;
}

function describe(input: ExistingResourceInput): string {
  const where = input.item.targetNamespace ? `${input.item.targetNamespace}/${input.item.targetName}` : input.item.targetName;
  return `${groupResourceOf(input.item)} ${where}`;
}

/** Decides what to do about an object that already exists; pure. */
export function decideExistingResource(input: ExistingResourceInput): ExistingResourceDecision {
  const groupResource = groupResourceOf(input.item);
  const current = comparable(input.existing, input.desired, groupResource);
  const what = describe(input);

  if (groupResource === 'serviceaccounts') {
    const merged = structuredClone(current) as RestoreObject;
    const secrets = mergeByName(current.secrets, input.desired.secrets);
    if (secrets) merged.secrets = secrets;
    const pullSecrets = mergeByName(current.imagePullSecrets, input.desired.imagePullSecrets);
    if (pullSecrets) merged.imagePullSecrets = pullSecrets;
    const labels = mergeMissing(current.metadata.labels, input.desired.metadata.labels);
    if (labels) merged.metadata.labels = labels;
    const annotations = mergeMissing(current.metadata.annotations, input.desired.metadata.annotations);
    if (annotations) merged.metadata.annotations = annotations;
    const patch = createMergePatch(comparableWithoutRestoreLabels(input.existing, current), merged);
    if (patch === undefined) return { action: 'skip', result: 'exists-skipped', warning: null };
    return {
      action: 'patch',
      result: 'updated',
      patch,
      warningIfFailed: `could not merge the backed-up secrets into ${what}, which already exists`,
    };
  }

  if (jsonEqual(current, input.desired)) {
    if (input.policy === 'update') {
      const labelPatch = createMergePatch(
        { metadata: { labels: input.existing.metadata.labels ?? {} } },
        { metadata: { labels: { ...(input.existing.metadata.labels ?? {}), ...pickRestoreLabels(input.desired) } } },
      );
      if (labelPatch !== undefined) {
        return {
          action: 'patch',
          result: 'exists-skipped',
          patch: labelPatch,
          warningIfFailed: `could not label ${what} with this restore`,
        };
      }
    }
    return { action: 'skip', result: 'exists-skipped', warning: null };
  }

  if (input.policy === 'none') {
    return {
      action: 'skip',
      result: 'exists-skipped',
      warning: `could not restore ${what}: it already exists and the in-cluster version is different from the backed-up one (existingResourcePolicy: none)`,
    };
  }
  const keep = [...(FIELDS_REFILLED_BY_CLUSTER['*'] ?? []), ...(FIELDS_REFILLED_BY_CLUSTER[groupResource] ?? [])];
  const patch = createMergePatch(input.existing, input.desired, keep) ?? {};
  return {
    action: 'patch',
    result: 'updated',
    patch,
    warningIfFailed: `could not update ${what} to the backed-up version (existingResourcePolicy: update)`,
  };
}

function pickRestoreLabels(object: RestoreObject): Record<string, string> {
  const labels: Record<string, string> = {};
  for (const key of [RESTORE_BACKUP_NAME_LABEL, RESTORE_NAME_LABEL]) {
    const value = object.metadata.labels?.[key];
    if (value !== undefined) labels[key] = value;
  }
  return labels;
}

/** The comparable in-cluster object with its own labels (the patch base must be what the server has). */
function comparableWithoutRestoreLabels(existing: RestoreObject, current: RestoreObject): RestoreObject {
  const base = structuredClone(current) as RestoreObject;
  if (existing.metadata.labels) base.metadata.labels = { ...existing.metadata.labels };
  else delete base.metadata.labels;
  return base;
}
