/*
 * Hook resolution per pod and phase (docs/architecture.md#hooks, Velero's: docs/velero.md#hooks):
 * - annotations `pre.hook.backup.velero.io/{command,container,on-error,timeout}` and `post.…`;
 *   the legacy un-prefixed `hook.backup.velero.io/*` keys are the pre hook when there is no
 *   `pre.` command (all four legacy keys are then read, as Velero does);
 * - the command annotation is a JSON array of strings, or any other string = one argument;
 * - an annotation hook for a phase REPLACES the spec hooks for that pod and phase;
 * - spec hooks apply by namespace / resource (`pods`) / label match, in spec order, each spec's
 *   list in order;
 * - defaults: first container, 30 s; on-error defaults to `Fail` (Velero's documented default);
 * - bad annotation values become warnings and the default is used;
 * - a hook naming a container the pod lacks is returned with `invalid` set: counted as attempted
 *   and failed, never run;
 * - pods in phase Succeeded/Failed get no hooks (Velero skips them).
 */
import {
  type BackupResourceHookSpec,
  type BackupSpec,
  DEFAULT_HOOK_TIMEOUT_MS,
  DEFAULT_MAX_HOOK_TIMEOUT_MS,
  type HookExecutionPolicy,
  type HookOnError,
  type HookRetries,
  MAX_HOOK_TIMEOUT_MS,
} from './backup-spec.js';
import { formatDuration, parseDuration } from './duration.js';
import { CORE_ERROR_CODES } from './errors.js';
import type { Pod } from './kube-types.js';
import { matchesLabelSelector } from './label-selector.js';
import { isNamespaceIncluded, isResourceIncluded } from './resource-selection.js';

export type HookPhase = 'pre' | 'post';
export type HookSource = 'annotation' | 'spec';

export interface HookInvalidReason {
  code: typeof CORE_ERROR_CODES.CORE_HOOK_CONTAINER_NOT_FOUND | typeof CORE_ERROR_CODES.CORE_HOOK_POD_HAS_NO_CONTAINERS;
  message: string;
}

export interface ResolvedHook {
  phase: HookPhase;
  source: HookSource;
  /** The spec entry's name (`spec.hooks.resources[].name`); null for annotation hooks. */
  specName: string | null;
  /** Index in the spec entry's pre/post list (0 for annotation hooks): part of the hook's identity. */
  index: number;
  container: string;
  /** argv; never run through a shell by Stowage. */
  command: string[];
  onError: HookOnError;
  timeoutMs: number;
  /** Set when the hook cannot run (missing container): record it as attempted and failed. */
  invalid: HookInvalidReason | null;
  /** Spec hooks only (annotations have no such keys): absent = no retry, Always. */
  retries?: HookRetries;
  executionPolicy?: HookExecutionPolicy;
}

export interface HookWarning {
  code: typeof CORE_ERROR_CODES.CORE_HOOK_ANNOTATION_INVALID;
  annotation: string;
  message: string;
}

export type PodHookResolution =
  | { status: 'resolved'; hooks: ResolvedHook[]; warnings: HookWarning[] }
  | { status: 'skipped'; code: typeof CORE_ERROR_CODES.CORE_HOOK_POD_FINISHED; reason: string; hooks: []; warnings: [] };

const ANNOTATION_PREFIX: Record<HookPhase, string> = { pre: 'pre.hook.backup.velero.io/', post: 'post.hook.backup.velero.io/' };
const LEGACY_PREFIX = 'hook.backup.velero.io/';

/** Velero's rule: a JSON array of strings is argv; anything else is one argument. */
export function parseHookCommand(value: string): { command: string[]; warning: string | null } {
  if (value.startsWith('[')) {
    try {
      const parsed: unknown = JSON.parse(value);
      if (Array.isArray(parsed) && parsed.every((part) => typeof part === 'string')) {
        return { command: parsed, warning: null };
      }
    } catch {
      // fall through: used as a single argument, as Velero does
    }
    return { command: [value], warning: 'looks like a JSON array but is not an array of strings; it is used as one argument' };
  }
  return { command: [value], warning: null };
}

function containerNames(pod: Pod): string[] {
  const names = pod.spec.containers.map((container) => container.name);
  // native sidecars (init containers that keep running) may run hooks too (Velero main, #9403)
  for (const init of pod.spec.initContainers ?? []) if (init.restartPolicy === 'Always') names.push(init.name);
  return names;
}

/** The container a hook runs in: the requested one, or the pod's first; `invalid` when the pod lacks it. */
export function resolveHookContainer(pod: Pod, requested: string | null): { container: string; invalid: HookInvalidReason | null } {
  return resolveContainer(pod, requested);
}

function resolveContainer(pod: Pod, requested: string | null): { container: string; invalid: HookInvalidReason | null } {
  const podName = `${pod.metadata.namespace ?? ''}/${pod.metadata.name}`;
  if (requested === null) {
    const first = pod.spec.containers[0]?.name;
    if (first === undefined) {
      return {
        container: '',
        invalid: { code: CORE_ERROR_CODES.CORE_HOOK_POD_HAS_NO_CONTAINERS, message: `pod ${podName} has no containers to run the hook in` },
      };
    }
    return { container: first, invalid: null };
  }
  const available = containerNames(pod);
  if (!available.includes(requested)) {
    return {
      container: requested,
      invalid: {
        code: CORE_ERROR_CODES.CORE_HOOK_CONTAINER_NOT_FOUND,
        message: `pod ${podName} has no container ${JSON.stringify(requested)} (it has ${available.map((name) => JSON.stringify(name)).join(', ') || 'none'}); the hook was not run`,
      },
    };
  }
  return { container: requested, invalid: null };
}

function annotationHook(pod: Pod, phase: HookPhase, warnings: HookWarning[], maxTimeoutMs: number): ResolvedHook | null {
  const annotations = pod.metadata.annotations ?? {};
  let prefix = ANNOTATION_PREFIX[phase];
  let commandValue = annotations[`${prefix}command`];
  if (!commandValue && phase === 'pre' && annotations[`${LEGACY_PREFIX}command`]) {
    prefix = LEGACY_PREFIX;
    commandValue = annotations[`${LEGACY_PREFIX}command`];
  }
  if (!commandValue) return null;

  const warn = (field: string, message: string): void => {
    warnings.push({ code: CORE_ERROR_CODES.CORE_HOOK_ANNOTATION_INVALID, annotation: `${prefix}${field}`, message });
  };
  const parsedCommand = parseHookCommand(commandValue);
  if (parsedCommand.warning) warn('command', parsedCommand.warning);
  if (parsedCommand.command.length === 0 || parsedCommand.command[0] === '') {
    warn('command', 'is an empty command; no hook is run for this phase');
    return null;
  }

  let onError: HookOnError = 'Fail';
  const onErrorValue = annotations[`${prefix}on-error`];
  if (onErrorValue !== undefined) {
    if (onErrorValue === 'Fail' || onErrorValue === 'Continue') onError = onErrorValue;
    else warn('on-error', `${JSON.stringify(onErrorValue)} is not Fail or Continue; using Fail`);
  }

  let timeoutMs = DEFAULT_HOOK_TIMEOUT_MS;
  const timeoutValue = annotations[`${prefix}timeout`];
  if (timeoutValue !== undefined) {
    const parsed = parseDuration(timeoutValue);
    if (!parsed.ok) {
      warn(
        'timeout',
        `${JSON.stringify(timeoutValue)} is not a duration (e.g. "30s", "2m"); using ${formatDuration(DEFAULT_HOOK_TIMEOUT_MS)}`,
      );
    } else if (parsed.ms < 0) {
      warn('timeout', `${JSON.stringify(timeoutValue)} is negative; using ${formatDuration(DEFAULT_HOOK_TIMEOUT_MS)}`);
    } else if (parsed.ms > maxTimeoutMs) {
      // A pod's annotation is not a request we can refuse: the hook runs, held to the operator's cap.
      warn(
        'timeout',
        `${JSON.stringify(timeoutValue)} is longer than the ${formatDuration(maxTimeoutMs)} limit on hook timeouts (STOWAGE_MAX_HOOK_TIMEOUT); using ${formatDuration(maxTimeoutMs)}`,
      );
      timeoutMs = maxTimeoutMs;
    } else if (parsed.ms > 0) {
      timeoutMs = parsed.ms;
    }
  }

  const containerValue = annotations[`${prefix}container`];
  const { container, invalid } = resolveContainer(pod, containerValue ? containerValue : null);
  return { phase, source: 'annotation', specName: null, index: 0, container, command: parsedCommand.command, onError, timeoutMs, invalid };
}

/** Does this `spec.hooks.resources[]` entry apply to the pod? (namespace, resource `pods`, labels) */
export function hookSpecAppliesToPod(hookSpec: BackupResourceHookSpec, pod: Pod): boolean {
  if (!isNamespaceIncluded(pod.metadata.namespace ?? '', hookSpec)) return false;
  if (!isResourceIncluded({ group: '', resource: 'pods' }, hookSpec)) return false;
  if (hookSpec.labelSelector && !matchesLabelSelector(hookSpec.labelSelector, pod.metadata.labels)) return false;
  return true;
}

/**
 * The hooks to run in `pod` for `phase`, in order, with warnings about annotation values. A
 * timeout annotation longer than `maxTimeoutMs` (the operator's cap on hook timeouts, which a spec
 * is held to with a 400) is clamped to it, with a warning.
 */
export function resolvePodHooks(
  pod: Pod,
  spec: Pick<BackupSpec, 'hooks'>,
  phase: HookPhase,
  maxTimeoutMs: number = DEFAULT_MAX_HOOK_TIMEOUT_MS,
): PodHookResolution {
  const podPhase = pod.status?.phase;
  if (podPhase === 'Succeeded' || podPhase === 'Failed') {
    return {
      status: 'skipped',
      code: CORE_ERROR_CODES.CORE_HOOK_POD_FINISHED,
      reason: `pod ${pod.metadata.namespace ?? ''}/${pod.metadata.name} is ${podPhase}; its hooks are skipped`,
      hooks: [],
      warnings: [],
    };
  }
  const warnings: HookWarning[] = [];
  const fromAnnotation = annotationHook(pod, phase, warnings, Math.min(maxTimeoutMs, MAX_HOOK_TIMEOUT_MS));
  if (fromAnnotation) return { status: 'resolved', hooks: [fromAnnotation], warnings };

  const hooks: ResolvedHook[] = [];
  for (const hookSpec of spec.hooks.resources) {
    if (!hookSpecAppliesToPod(hookSpec, pod)) continue;
    hookSpec[phase].forEach(({ exec }, index) => {
      const { container, invalid } = resolveContainer(pod, exec.container);
      hooks.push({
        phase,
        source: 'spec',
        specName: hookSpec.name,
        index,
        container,
        command: [...exec.command],
        onError: exec.onError,
        timeoutMs: exec.timeoutMs,
        invalid,
        ...(exec.retries ? { retries: exec.retries } : {}),
        ...(phase === 'post' && exec.executionPolicy ? { executionPolicy: exec.executionPolicy } : {}),
      });
    });
  }
  return { status: 'resolved', hooks, warnings };
}
