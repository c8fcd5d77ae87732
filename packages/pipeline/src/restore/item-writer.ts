import { decideExistingResource, type ExistingResourcePolicy, RESTORE_NAME_LABEL, type RestoreObject } from '@stowage/core';
import { groupVersionPath, isKubeError, type KubeClients, KubeErrorCodes } from '@stowage/kube';
import type { InFlightLimit } from './in-flight-limit.js';
import type { PlannedRestoreItem } from './restore-plan-types.js';
import type { ItemOutcome } from './restore-state.js';

export interface ItemWriteResult {
  outcome: ItemOutcome;
  reason?: string | undefined;
  /** A warning worth telling the user (an existing object that differs and was left alone, a failed update). */
  warning?: string | undefined;
  /** The object as the cluster has it now (created, updated or ours from an earlier attempt), when known. */
  object?: RestoreObject | undefined;
  /** The object existed already and was created by this restore (an earlier attempt of this job). */
  ours?: boolean;
}

/** Errors that retrying the job may fix: the job throws them after recording the rest of its batch. */
export function isRetryableKubeError(err: unknown): boolean {
  return !isKubeError(err) || err.code === KubeErrorCodes.unavailable || err.code === KubeErrorCodes.unexpected;
}

export function collectionPathOf(item: Pick<PlannedRestoreItem, 'group' | 'version' | 'resource' | 'namespace'>): string {
  const base = groupVersionPath(item.group, item.version);
  return item.namespace === null ? `${base}/${item.resource}` : `${base}/namespaces/${encodeURIComponent(item.namespace)}/${item.resource}`;
}

export function objectPathOf(item: PlannedRestoreItem): string {
  return `${collectionPathOf(item)}/${encodeURIComponent(item.name)}`;
}

/**
 * Creates one item. A 409 reads the object back: one this restore labelled is ours (an earlier
 * attempt made it: `created`, never created twice); otherwise core's decideExistingResource
 * decides — left alone (`exists-skipped`, with a warning when it differs) or merge-patched
 * under `existingResourcePolicy: update`. A refusal the API server will repeat (invalid,
 * forbidden, missing namespace or kind) is `failed` with its reason; anything else throws so the
 * job is retried.
 */
export async function writeRestoreItem(
  kube: KubeClients,
  limit: InFlightLimit,
  input: { item: PlannedRestoreItem; restoreName: string; policy: ExistingResourcePolicy },
): Promise<ItemWriteResult> {
  const { item } = input;
  const desired = item.object as RestoreObject;
  const what = `${item.groupResource} ${item.namespace ? `${item.namespace}/` : ''}${item.name}`;
  try {
    const created = await limit.run(() =>
      kube.requestJson<RestoreObject>({ method: 'POST', path: collectionPathOf(item), body: desired, description: `restore ${what}` }),
    );
    return { outcome: 'created', object: created };
  } catch (err) {
    if (!isKubeError(err, KubeErrorCodes.alreadyExists)) return refusal(err);
  }
  let existing: RestoreObject;
  try {
    existing = await limit.run(() => kube.requestJson<RestoreObject>({ path: objectPathOf(item), description: `read existing ${what}` }));
  } catch (err) {
    // Deleted between the 409 and the read: the job's retry creates it.
    if (isKubeError(err, KubeErrorCodes.notFound)) throw err;
    // The restorer may create this kind but not read it (Secrets: it must not read those it does
    // not restore): it exists, and is left alone without comparing.
    if (isKubeError(err, KubeErrorCodes.forbidden))
      return {
        outcome: 'exists-skipped',
        warning: `${what} exists already and was left alone: Stowage may not read it to compare (${err.message})`,
      };
    return refusal(err);
  }
  if (existing.metadata?.labels?.[RESTORE_NAME_LABEL] === input.restoreName) return { outcome: 'created', object: existing, ours: true };
  const decision = decideExistingResource({
    item: { group: item.group, resource: item.resource, targetNamespace: item.namespace, targetName: item.name },
    desired,
    existing,
    policy: input.policy,
  });
  if (decision.action === 'skip') return { outcome: 'exists-skipped', warning: decision.warning ?? undefined, object: existing };
  try {
    const patched = await limit.run(() =>
      kube.requestJson<RestoreObject>({
        method: 'PATCH',
        path: objectPathOf(item),
        body: decision.patch,
        contentType: 'application/merge-patch+json',
        description: `update existing ${what}`,
      }),
    );
    return { outcome: decision.result, object: patched };
  } catch (err) {
    if (isRetryableKubeError(err)) throw err;
    return { outcome: 'exists-skipped', warning: `${decision.warningIfFailed}: ${(err as Error).message}`, object: existing };
  }
}

function refusal(err: unknown): ItemWriteResult {
  if (isRetryableKubeError(err)) throw err;
  return { outcome: 'failed', reason: (err as Error).message };
}
