import { randomUUID } from 'node:crypto';
import { execInPod } from '@stowage/kube';
import type { PipelineDeps } from '../deps.js';
import { type HookPhase, type PlannedHook, podKey } from '../plan/block-plan.js';
import type { RunRecord, RunState } from '../state/run-state.js';

/** The pod whose hooks run, and the hooks of the phase, in order. */
export interface HookTargetPod {
  namespace: string;
  name: string;
}

export interface RunPodHooksInput {
  /** The backup or restore whose state records the runs. */
  runName: string;
  /** Where in the run: the block id (backups) or the restore-hooks scope (restores). Part of every once-key. */
  scope: string;
  pod: HookTargetPod;
  phase: HookPhase;
  hooks: readonly PlannedHook[];
  /** The job attempt, recorded with each run (a retry re-runs hooks: at-least-once). */
  attempt: number;
}

export interface RunPodHooksResult {
  /** A hook with `onError: Fail` failed: the pod is not backed up (pre) and later hooks were skipped. */
  failedWithFail: boolean;
  ran: number;
  failed: number;
}

/**
 * Runs one pod's hooks of one phase in order (backup pre/post hooks and post-restore hooks alike), through pod exec with a real timeout. Every hook
 * that applies counts as attempted once per key `hook:<scope>:<pod>:<phase>:<index>`; a failed
 * run counts `hooksFailed` once per key and is an error (→ PartiallyFailed). After a failure with
 * `onError: Fail` the later hooks of this pod and phase are skipped (still counted attempted).
 * Every run, and every skip, is recorded with pod, container, phase, source, exit code and times.
 */
export async function runPodHooks(
  deps: Pick<PipelineDeps, 'kube' | 'clock' | 'config' | 'logger'> & { state: RunState<RunRecord> },
  input: RunPodHooksInput,
): Promise<RunPodHooksResult> {
  const { state } = deps;
  const { runName: backupName, scope: blockId, pod, phase, hooks } = input;
  const result: RunPodHooksResult = { failedWithFail: false, ran: 0, failed: 0 };
  const pk = podKey(pod);
  for (const hook of hooks) {
    const onceKey = `hook:${blockId}:${pk}:${phase}:${hook.index}`;
    const attempted = state.countOnce(backupName, onceKey, 'hooksAttempted');
    const base = {
      blockId,
      podNamespace: pod.namespace,
      podName: pod.name,
      container: hook.container,
      phase,
      source: hook.source,
      hookName: hook.hookName,
      index: hook.index,
      command: hook.command,
      attempt: input.attempt,
    };
    if (result.failedWithFail) {
      await attempted;
      await state.recordHookRun(backupName, {
        ...base,
        outcome: 'skipped',
        message: `an earlier ${phase} hook of this pod failed with onError: Fail`,
      });
      continue;
    }
    if (hook.invalid !== undefined) {
      await attempted;
      result.failed++;
      await state.recordHookRun(backupName, { ...base, outcome: 'invalid', message: hook.invalid });
      await state.countOnce(backupName, `hook-failed:${blockId}:${pk}:${phase}:${hook.index}`, 'hooksFailed');
      await state.recordProblem(backupName, {
        level: 'error',
        onceKey: `hook:${blockId}:${pk}:${phase}:${hook.index}`,
        msg: `${phase} hook ${hook.hookName || hook.source} #${hook.index} in ${pk} cannot run: ${hook.invalid}`,
        namespace: pod.namespace,
        blockId,
        pod: pk,
      });
      if (hook.onError === 'Fail') result.failedWithFail = true;
      continue;
    }
    const startedAt = deps.clock.now();
    // Recorded before the exec, so a run cut off by a crash still shows in the backup's hook log.
    // The three writes before the exec are independent: one round trip's wait, not three (the
    // post-hook lag is a chain of such waits).
    const runId = randomUUID();
    await Promise.all([
      attempted,
      state.recordHookRun(backupName, { ...base, runId, outcome: 'running', startedAt }),
      state.appendEvent(backupName, 'hook.started', { blockId, pod: pk, container: hook.container, phase, index: hook.index }),
    ]);
    const res = await execInPod(deps.kube, {
      namespace: pod.namespace,
      pod: pod.name,
      container: hook.container,
      command: hook.command,
      timeoutMs: hook.timeoutMs,
      tailBytes: deps.config.hookOutputTailBytes,
    });
    const endedAt = deps.clock.now();
    result.ran++;
    const ok = res.outcome === 'exited' && res.exitCode === 0;
    const exitCode = res.outcome === 'exited' ? res.exitCode : undefined;
    const message =
      res.outcome === 'exited'
        ? ok
          ? undefined
          : `exited with code ${res.exitCode}`
        : res.outcome === 'timeout'
          ? res.message
          : `${res.reason}: ${res.message}`;
    // The run's record and its event are independent: one round trip's wait.
    await Promise.all([
      state.recordHookRun(backupName, {
        ...base,
        runId,
        outcome: res.outcome,
        exitCode,
        startedAt,
        endedAt,
        stdoutTail: res.stdoutTail,
        stderrTail: res.stderrTail,
        message,
      }),
      state.appendEvent(backupName, 'hook.done', {
        blockId,
        pod: pk,
        container: hook.container,
        phase,
        index: hook.index,
        ok,
        exitCode: exitCode ?? null,
      }),
    ]);
    if (ok) continue;
    result.failed++;
    await state.countOnce(backupName, `hook-failed:${blockId}:${pk}:${phase}:${hook.index}`, 'hooksFailed');
    await state.recordProblem(backupName, {
      level: 'error',
      onceKey: `hook:${blockId}:${pk}:${phase}:${hook.index}`,
      msg: `error executing ${phase} hook ${hook.hookName || hook.source} #${hook.index} in ${pk}/${hook.container}: ${message}`,
      namespace: pod.namespace,
      blockId,
      pod: pk,
      container: hook.container,
      onError: hook.onError,
    });
    if (hook.onError === 'Fail') result.failedWithFail = true;
  }
  return result;
}
