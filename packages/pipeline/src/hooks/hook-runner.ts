import { randomUUID } from 'node:crypto';
import { describeRefusal, isCheckedRequester, podExecAttributes } from '@stowage/core';
import { execInPod } from '@stowage/kube';
import type { PipelineDeps } from '../deps.js';
import { type HookPhase, type PlannedHook, podKey } from '../plan/block-plan.js';
import type { HookRunRecord, RunRecord, RunState } from '../state/run-state.js';

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
  /**
   * Post hooks of a backup block: whether every PVB of the block completed. A hook whose
   * `executionPolicy` does not match is recorded as skipped (not attempted); absent = run all.
   */
  pvbsAllCompleted?: boolean;
}

export interface RunPodHooksResult {
  /** A hook with `onError: Fail` (or FailBlock) failed: the pod is not backed up (pre) and later hooks were skipped. */
  failedWithFail: boolean;
  /** A pre hook with `onError: FailBlock` failed: its whole block is skipped. */
  failedBlock: { reason: string } | undefined;
  ran: number;
  failed: number;
}

/** Why a post hook is not run under its executionPolicy, or undefined when it runs. */
function policySkip(hook: PlannedHook, pvbsAllCompleted: boolean | undefined): string | undefined {
  if (pvbsAllCompleted === undefined || hook.executionPolicy === undefined || hook.executionPolicy === 'Always') return undefined;
  if (hook.executionPolicy === 'OnSuccess' && !pvbsAllCompleted) return 'executionPolicy OnSuccess: a PVB of the block did not complete';
  if (hook.executionPolicy === 'OnFailure' && pvbsAllCompleted) return 'executionPolicy OnFailure: every PVB of the block completed';
  return undefined;
}

/**
 * Runs one pod's hooks of one phase in order (backup pre/post hooks and post-restore hooks alike), through pod exec with a real timeout. Every hook
 * that applies counts as attempted once per key `hook:<scope>:<pod>:<phase>:<index>`; a failed
 * run counts `hooksFailed` once per key and is an error (→ PartiallyFailed). After a failure with
 * `onError: Fail` the later hooks of this pod and phase are skipped (still counted attempted).
 * Every run, and every skip, is recorded with pod, container, phase, source, exit code and times.
 */
export async function runPodHooks(
  deps: Pick<PipelineDeps, 'kube' | 'clock' | 'config' | 'logger' | 'access'> & { state: RunState<RunRecord> },
  input: RunPodHooksInput,
): Promise<RunPodHooksResult> {
  const { state } = deps;
  const { runName: backupName, scope: blockId, pod, phase } = input;
  const hooks = await refuseUnauthorizedHooks(deps, input);
  const result: RunPodHooksResult = { failedWithFail: false, failedBlock: undefined, ran: 0, failed: 0 };
  const pk = podKey(pod);
  for (const hook of hooks) {
    const onceKey = `hook:${blockId}:${pk}:${phase}:${hook.index}`;
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
    const skippedByPolicy = policySkip(hook, input.pvbsAllCompleted);
    if (skippedByPolicy !== undefined) {
      // Not attempted: its policy chose not to run it (recorded, so the user sees why).
      await state.recordHookRun(backupName, { ...base, outcome: 'skipped', message: skippedByPolicy });
      continue;
    }
    const attempted = state.countOnce(backupName, onceKey, 'hooksAttempted');
    if (result.failedWithFail) {
      await attempted;
      await state.recordHookRun(backupName, {
        ...base,
        outcome: 'skipped',
        message: `an earlier ${phase} hook of this pod failed with onError: ${result.failedBlock ? 'FailBlock' : 'Fail'}`,
      });
      continue;
    }
    const failWith = (message: string) => {
      if (hook.onError === 'Fail' || hook.onError === 'FailBlock') result.failedWithFail = true;
      if (hook.onError === 'FailBlock')
        result.failedBlock = { reason: `${phase} hook ${hook.hookName || hook.source} #${hook.index} in ${pk} failed: ${message}` };
    };
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
      failWith(hook.invalid);
      continue;
    }
    // A hook with retries runs up to 1 + max times until it succeeds; every try is its own run
    // record (try n of tries), and only the last failure is the hook's error.
    const tries = 1 + (hook.retries?.max ?? 0);
    let message: string | undefined;
    let ok = false;
    for (let attemptNo = 1; attemptNo <= tries; attemptNo++) {
      const run = await runOnce(
        deps,
        backupName,
        { ...base, ...(tries > 1 ? { try: attemptNo, tries } : {}) },
        hook,
        pod,
        attemptNo === 1 ? attempted : undefined,
      );
      result.ran++;
      ok = run.ok;
      message = run.message;
      if (ok) break;
      if (attemptNo < tries) {
        const backoffMs = hook.retries?.backoffMs ?? 0;
        await state.log(backupName, {
          level: 'info',
          msg: `${phase} hook ${hook.hookName || hook.source} #${hook.index} in ${pk}/${hook.container} failed (try ${attemptNo} of ${tries}: ${message}); trying again in ${backoffMs} ms`,
          blockId,
          pod: pk,
        });
        if (backoffMs > 0) await new Promise((resolve) => setTimeout(resolve, backoffMs));
      }
    }
    if (ok) continue;
    result.failed++;
    const triesNote = tries > 1 ? ` (after ${tries} tries)` : '';
    await state.countOnce(backupName, `hook-failed:${blockId}:${pk}:${phase}:${hook.index}`, 'hooksFailed');
    await state.recordProblem(backupName, {
      level: 'error',
      onceKey: `hook:${blockId}:${pk}:${phase}:${hook.index}`,
      msg: `error executing ${phase} hook ${hook.hookName || hook.source} #${hook.index} in ${pk}/${hook.container}: ${message}${triesNote}`,
      namespace: pod.namespace,
      blockId,
      pod: pk,
      container: hook.container,
      onError: hook.onError,
    });
    failWith(`${message}${triesNote}`);
  }
  return result;
}

/**
 * Acts for the requester, not for Stowage: a hook from a spec (not a pod's own annotation) runs
 * with the worker's `pods/exec`, so a run whose requester is a Kubernetes identity first asks the
 * API server whether that identity may `create pods/exec` on this pod (SubjectAccessReview). A
 * refused hook never execs: it is recorded as invalid with kube-apiserver's words (an error of the
 * run). No reviewer in this process refuses too; a review that fails throws (the job retries).
 */
async function refuseUnauthorizedHooks(
  deps: Pick<PipelineDeps, 'access'> & { state: RunState<RunRecord> },
  input: RunPodHooksInput,
): Promise<readonly PlannedHook[]> {
  const fromSpec = input.hooks.some((h) => h.source !== 'annotation' && h.invalid === undefined);
  if (!fromSpec) return input.hooks;
  const requester = (await deps.state.getRun(input.runName))?.requester;
  if (!isCheckedRequester(requester)) return input.hooks;
  const attrs = podExecAttributes(input.pod.namespace, input.pod.name);
  const decision = deps.access
    ? await deps.access.review(requester, attrs)
    : { allowed: false, reason: 'this process has no SubjectAccessReview client to check the requester with' };
  if (decision.allowed) return input.hooks;
  const refusal = `${describeRefusal(requester, attrs)}${decision.reason ? `: ${decision.reason}` : ''} (a spec hook runs only where its requester may exec)`;
  return input.hooks.map((h) => (h.source === 'annotation' || h.invalid !== undefined ? h : { ...h, invalid: refusal }));
}

type HookRunBase = Omit<HookRunRecord, 'outcome'>;

/**
 * One exec of a hook, recorded before (so a run cut off by a crash still shows in the hook log)
 * and after. The writes before the exec are independent: one round trip's wait, not three (the
 * post-hook lag is a chain of such waits).
 */
async function runOnce(
  deps: Pick<PipelineDeps, 'kube' | 'clock' | 'config'> & { state: RunState<RunRecord> },
  runName: string,
  base: HookRunBase,
  hook: PlannedHook,
  pod: HookTargetPod,
  attempted: Promise<unknown> | undefined,
): Promise<{ ok: boolean; message: string | undefined }> {
  const { state } = deps;
  const pk = podKey(pod);
  const startedAt = deps.clock.now();
  const runId = randomUUID();
  const eventData = {
    blockId: base.blockId,
    pod: pk,
    container: hook.container,
    phase: base.phase,
    index: hook.index,
    ...(base.try ? { try: base.try } : {}),
  };
  await Promise.all([
    attempted,
    state.recordHookRun(runName, { ...base, runId, outcome: 'running', startedAt }),
    state.appendEvent(runName, 'hook.started', eventData),
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
    state.recordHookRun(runName, {
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
    state.appendEvent(runName, 'hook.done', { ...eventData, ok, exitCode: exitCode ?? null }),
  ]);
  return { ok, message };
}
