/*
 * Backup-level hooks (spec.hooks.backup.pre[]/.post[]; docs/architecture.md#backup-level-hooks): each runs once per backup in the
 * pods core's backupHookTargets picks, through the same runPodHooks as pod hooks (timeouts, retries,
 * every run recorded, counted in hookStatus). They run in a backup worker (the `run-backup-hooks`
 * job, processors/backup-hooks.processor.ts: only the workers may exec), which the plan job waits
 * for before the first block is added, so no pod hook and no PVB can start before `pre`; `post` is
 * awaited by the finalize job, which BullMQ releases only after every block's post hooks (and
 * after a failed block, the deadline or a cancel alike). What each phase did is kept on the backup
 * record (`backupHooks`), which also makes the phase run once when its job is delivered again.
 */
import {
  type BackupHookPreview,
  type BackupHookTarget,
  type BackupLevelHook,
  type BackupSpec,
  backupHookTargets,
  describeBackupHookSelection,
  type Pod,
} from '@stowage/core';
import type { PipelineDeps } from '../deps.js';
import type { HookPhase, PlannedHook } from '../plan/block-plan.js';
import type { HookRunRecord } from '../state/run-state.js';
import { runPodHooks } from './hook-runner.js';

/** The scope (blockId) of backup-level hook runs and once-keys: not a block id (those are hashes). */
export const BACKUP_HOOK_SCOPE = 'backup-hooks';

export interface BackupHookPhaseRecord {
  doneAt: number;
  /**
   * Why the phase failed: a hook with onError: Fail failed, or the job running the phase failed
   * for good (pre: the backup fails, no block runs).
   */
  failed?: string;
  hooksRun: number;
  hooksFailed: number;
  /** Every run of the phase (each try of each hook in each pod), as the hook log has them. */
  runs: HookRunRecord[];
  /** The backup was canceled before every hook had run (`options.canceled`): the rest were not. */
  canceled?: true;
}

export type BackupHooksRecord = Partial<Record<HookPhase, BackupHookPhaseRecord>>;

export interface BackupHooksOutcome {
  /** Why the phase failed (a hook with onError: Fail, or the job that ran the phase); undefined when it did not. */
  failed: string | undefined;
  /** The backup was canceled before every hook had run (`options.canceled`): the rest were not. */
  canceled?: boolean;
}

export interface BackupHooksOptions {
  /** Asked before each hook (and each pod a hook runs in): true stops the phase there. */
  canceled?: () => Promise<boolean>;
}

type Deps = Pick<PipelineDeps, 'kube' | 'clock' | 'config' | 'logger' | 'state'>;

/** Runs the backup's `phase` hooks once (a re-delivered job finds them done and returns what they did). */
export async function runBackupHooks(
  deps: Deps,
  backupName: string,
  spec: BackupSpec,
  phase: HookPhase,
  options: BackupHooksOptions = {},
): Promise<BackupHooksOutcome> {
  const hooks = spec.hooks.backup?.[phase] ?? [];
  if (hooks.length === 0) return { failed: undefined };
  const { state } = deps;
  const record = await state.getBackup(backupName);
  const done = (record?.backupHooks as BackupHooksRecord | undefined)?.[phase];
  if (done) return { failed: done.failed, ...(done.canceled ? { canceled: true } : {}) };

  await state.appendEvent(backupName, 'backup-hooks.started', { phase, hooks: hooks.length });
  const targetsOf = backupHookTargetReader(deps);
  let failed: string | undefined;
  let hooksRun = 0;
  let hooksFailed = 0;
  let canceledAt: number | undefined;
  for (const [index, hook] of hooks.entries()) {
    if (failed === undefined && canceledAt === undefined && (await options.canceled?.())) {
      canceledAt = index;
      await state.log(backupName, {
        level: 'info',
        msg: `backup ${phase} hooks ${index + 1}-${hooks.length} of ${hooks.length} not run: the backup was canceled`,
      });
    }
    if (canceledAt !== undefined) break;
    if (failed !== undefined) {
      await state.log(backupName, {
        level: 'info',
        msg: `backup ${phase} hook ${hook.name} not run: an earlier one failed with onError: Fail`,
      });
      continue;
    }
    const { targets, why } = await targetsOf(hook);
    if (why !== undefined) {
      // Nothing to run it in: the hook failed (a pause that never ran must not pass silently).
      hooksFailed++;
      await state.countOnce(backupName, `hook:${BACKUP_HOOK_SCOPE}:-:${phase}:${index}`, 'hooksAttempted');
      await state.countOnce(backupName, `hook-failed:${BACKUP_HOOK_SCOPE}:-:${phase}:${index}`, 'hooksFailed');
      await state.recordHookRun(backupName, {
        blockId: BACKUP_HOOK_SCOPE,
        podNamespace: hook.namespace,
        podName: '',
        container: hook.container ?? '',
        phase,
        source: 'backup',
        hookName: hook.name,
        index,
        command: hook.command,
        outcome: 'invalid',
        message: why,
      });
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `hook:${BACKUP_HOOK_SCOPE}:-:${phase}:${index}`,
        msg: `backup ${phase} hook ${hook.name} cannot run: ${why}`,
        namespace: hook.namespace,
      });
      if (hook.onError === 'Fail') failed = `backup ${phase} hook ${hook.name} failed: ${why} (onError: Fail)`;
      continue;
    }
    for (const target of targets) {
      if (target !== targets[0] && (await options.canceled?.())) {
        canceledAt = index;
        await state.log(backupName, {
          level: 'info',
          msg: `backup ${phase} hook ${hook.name} stopped between pods: the backup was canceled`,
        });
        break;
      }
      const res = await runPodHooks(deps, {
        runName: backupName,
        scope: BACKUP_HOOK_SCOPE,
        pod: target,
        phase,
        hooks: [plannedHook(hook, index, target)],
        attempt: 1,
      });
      hooksRun += res.ran;
      hooksFailed += res.failed;
      if (res.failedWithFail) {
        failed = `backup ${phase} hook ${hook.name} failed in ${target.namespace}/${target.name} (onError: Fail)`;
        break;
      }
    }
  }
  const runs = (await state.hookRuns(backupName)).filter((r) => r.blockId === BACKUP_HOOK_SCOPE && r.phase === phase);
  const phaseRecord: BackupHookPhaseRecord = {
    doneAt: deps.clock.now(),
    hooksRun,
    hooksFailed,
    runs,
    ...(failed ? { failed } : {}),
    ...(canceledAt !== undefined ? { canceled: true as const } : {}),
  };
  const latest = ((await state.getBackup(backupName))?.backupHooks as BackupHooksRecord | undefined) ?? {};
  await state.updateBackup(backupName, { backupHooks: { ...latest, [phase]: phaseRecord } });
  await state.appendEvent(backupName, 'backup-hooks.done', {
    phase,
    hooksRun,
    hooksFailed,
    failed: failed ?? null,
    ...(canceledAt !== undefined ? { canceled: true } : {}),
  });
  return { failed, ...(canceledAt !== undefined ? { canceled: true } : {}) };
}

function plannedHook(
  hook: BackupLevelHook,
  index: number,
  target: { container: string; invalid: { message: string } | null },
): PlannedHook {
  return {
    container: target.container,
    command: hook.command,
    onError: hook.onError,
    timeoutMs: hook.timeoutMs,
    source: 'backup',
    hookName: hook.name,
    index,
    ...(target.invalid ? { invalid: target.invalid.message } : {}),
    ...(hook.retries ? { retries: hook.retries } : {}),
  };
}

/**
 * What `runBackupHooks` would do for each phase, read only: the same pod list and the same
 * target choice, no exec and no record.
 */
export async function previewBackupHooks(
  deps: Pick<PipelineDeps, 'kube'>,
  spec: BackupSpec,
): Promise<Record<HookPhase, BackupHookPreview[]>> {
  const targetsOf = backupHookTargetReader(deps);
  const preview = async (hook: BackupLevelHook): Promise<BackupHookPreview> => {
    const { targets, why } = await targetsOf(hook);
    const base = { name: hook.name, namespace: hook.namespace, command: hook.command, onError: hook.onError, timeoutMs: hook.timeoutMs };
    const shown = targets.map((t) => ({ pod: t.name, container: t.container, ...(t.invalid ? { invalid: t.invalid.message } : {}) }));
    return why === undefined ? { ...base, targets: shown } : { ...base, targets: [], failure: why };
  };
  const phase = async (p: HookPhase) => {
    const out: BackupHookPreview[] = [];
    for (const hook of spec.hooks.backup?.[p] ?? []) out.push(await preview(hook));
    return out;
  };
  return { pre: await phase('pre'), post: await phase('post') };
}

/**
 * The pods each backup-level hook runs in (core's backupHookTargets over its namespace's pods,
 * each namespace listed once per reader), or why there are none. One reader serves a real run and
 * a dry run, so both pick the same pods.
 */
function backupHookTargetReader(
  deps: Pick<PipelineDeps, 'kube'>,
): (hook: BackupLevelHook) => Promise<{ targets: BackupHookTarget[]; why?: string }> {
  const podsByNamespace = new Map<string, Pod[] | Error>();
  return async (hook) => {
    let pods = podsByNamespace.get(hook.namespace);
    if (pods === undefined) {
      pods = await listPods(deps, hook.namespace).catch((err: unknown) => (err instanceof Error ? err : new Error(String(err))));
      podsByNamespace.set(hook.namespace, pods);
    }
    if (pods instanceof Error) return { targets: [], why: `pods of namespace ${hook.namespace} cannot be listed: ${pods.message}` };
    const targets = backupHookTargets(hook, pods);
    return targets.length > 0 ? { targets } : { targets, why: describeBackupHookSelection(hook) };
  };
}

async function listPods(deps: Pick<PipelineDeps, 'kube'>, namespace: string): Promise<Pod[]> {
  const list = await deps.kube.requestJson<{ items?: Pod[] }>({
    path: `/api/v1/namespaces/${encodeURIComponent(namespace)}/pods`,
    description: `list pods of namespace ${namespace} for backup hooks`,
  });
  return list.items ?? [];
}
