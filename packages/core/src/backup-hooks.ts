/*
 * Backup-level hooks (`spec.hooks.backup.pre[]`/`.post[]`): which pods each one runs in. Pure: the
 * pipeline lists the namespace's pods and runs the execs (docs/architecture.md#backup-level-hooks).
 */
import type { BackupLevelHook } from './backup-spec.js';
import { type HookInvalidReason, resolveHookContainer } from './hooks.js';
import type { Pod } from './kube-types.js';
import { matchesLabelSelector } from './label-selector.js';

export interface BackupHookTarget {
  namespace: string;
  name: string;
  container: string;
  invalid: HookInvalidReason | null;
}

/**
 * The pods a backup-level hook runs in: the Running pods of its namespace that match its label
 * selector (no selector = every pod), by name; `mode: one` keeps the first. An empty list means
 * no pod matched: the caller records that as the hook's failure (a pause that never ran must not
 * pass silently).
 */
export function backupHookTargets(hook: BackupLevelHook, pods: readonly Pod[]): BackupHookTarget[] {
  const matching = pods
    .filter((pod) => (pod.metadata.namespace ?? '') === hook.namespace)
    .filter((pod) => pod.status?.phase === 'Running')
    .filter((pod) => hook.labelSelector === null || matchesLabelSelector(hook.labelSelector, pod.metadata.labels))
    .sort((a, b) => (a.metadata.name < b.metadata.name ? -1 : a.metadata.name > b.metadata.name ? 1 : 0));
  const chosen = hook.mode === 'one' ? matching.slice(0, 1) : matching;
  return chosen.map((pod) => {
    const { container, invalid } = resolveHookContainer(pod, hook.container);
    return { namespace: hook.namespace, name: pod.metadata.name, container, invalid };
  });
}

/** Why no pod was found for the hook, for its error. */
export function describeBackupHookSelection(hook: BackupLevelHook): string {
  const selector = hook.labelSelector ? ` matching ${JSON.stringify(hook.labelSelector)}` : '';
  return `no Running pod in namespace ${hook.namespace}${selector}`;
}
