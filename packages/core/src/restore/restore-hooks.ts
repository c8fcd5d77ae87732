/*
 * Restore hooks of one restored pod (Velero's restore hooks):
 * - exec hooks from the annotations `post.hook.restore.velero.io/{command,container,on-error,
 *   exec-timeout,wait-timeout,wait-for-ready}`: when the pod has the command annotation, that is
 *   the only exec hook of the pod and the spec's exec hooks are not used;
 * - otherwise the spec's `hooks.resources[].postHooks[].exec` of every entry that applies to the
 *   pod (namespace it is restored into, resource `pods`, labels), in spec order;
 * - defaults: first container, onError `Continue`, execTimeout 30 s, waitTimeout none,
 *   waitForReady false;
 * - init hooks from `init.hook.restore.velero.io/{container-image,container-name,command}`, or
 *   else from the spec's `postHooks[].init.initContainers`, become init containers (the pod
 *   transform puts them before the pod's own init containers);
 * - bad annotation values are warnings and the default is used; a hook naming a container the
 *   pod lacks is returned with `invalid` set (recorded as failed, never run).
 */
import { DEFAULT_MAX_HOOK_TIMEOUT_MS, type HookOnError } from '../backup-spec.js';
import { formatDuration, parseDuration } from '../duration.js';
import { CORE_ERROR_CODES } from '../errors.js';
import { type HookInvalidReason, type HookWarning, parseHookCommand } from '../hooks.js';
import { matchesLabelSelector } from '../label-selector.js';
import { isNamespaceIncluded, isResourceIncluded } from '../resource-selection.js';
import { DEFAULT_RESTORE_EXEC_TIMEOUT_MS, type RestoreResourceHookSpec, type RestoreSpec } from './restore-spec.schema.js';
import type { JsonObject, RestoreObject } from './types.js';

export const RESTORE_EXEC_HOOK_ANNOTATION_PREFIX = 'post.hook.restore.velero.io/';
export const RESTORE_INIT_HOOK_ANNOTATION_PREFIX = 'init.hook.restore.velero.io/';
/** The init hook container's name when the annotation gives none. */
export const DEFAULT_INIT_HOOK_CONTAINER_NAME = 'stowage-restore-init';

/** Go's strconv.ParseBool, which Velero uses for wait-for-ready. */
const GO_BOOLEANS: Record<string, boolean> = {
  '1': true,
  t: true,
  T: true,
  TRUE: true,
  true: true,
  True: true,
  '0': false,
  f: false,
  F: false,
  FALSE: false,
  false: false,
  False: false,
};

export interface RestoreExecHook {
  source: 'annotation' | 'spec';
  /** The spec entry's name; null for the annotation hook. */
  specName: string | null;
  /** Index in the spec entry's postHooks (0 for the annotation hook): part of the hook's identity. */
  index: number;
  container: string;
  /** argv; never run through a shell by Stowage. */
  command: string[];
  onError: HookOnError;
  execTimeoutMs: number;
  /** How long to wait for the container to run (be ready, with waitForReady); 0 = no limit. */
  waitTimeoutMs: number;
  waitForReady: boolean;
  /** Set when the hook cannot run (missing container): record it as attempted and failed. */
  invalid: HookInvalidReason | null;
}

export interface RestoreHookResolution {
  /** Exec hooks to run once the pod's volume restores are terminal and the container is up, in order. */
  execHooks: RestoreExecHook[];
  /** Init containers to add to the pod (before its own), in order. */
  initContainers: JsonObject[];
  warnings: HookWarning[];
}

interface ContainerLike {
  name: string;
  restartPolicy?: string;
}

function asRecord(value: unknown): Record<string, unknown> | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Record<string, unknown>) : undefined;
}

function containersOf(pod: RestoreObject, field: 'containers' | 'initContainers'): ContainerLike[] {
  const list = asRecord(pod.spec)?.[field];
  if (!Array.isArray(list)) return [];
  return list.flatMap((entry) => {
    const record = asRecord(entry);
    return record && typeof record.name === 'string'
      ? [{ name: record.name, ...(typeof record.restartPolicy === 'string' ? { restartPolicy: record.restartPolicy } : {}) }]
      : [];
  });
}

function resolveContainer(pod: RestoreObject, requested: string | null): { container: string; invalid: HookInvalidReason | null } {
  const podName = `${pod.metadata.namespace ?? ''}/${pod.metadata.name}`;
  const containers = containersOf(pod, 'containers');
  if (requested === null) {
    const first = containers[0]?.name;
    if (first === undefined) {
      return {
        container: '',
        invalid: { code: CORE_ERROR_CODES.CORE_HOOK_POD_HAS_NO_CONTAINERS, message: `pod ${podName} has no containers to run the hook in` },
      };
    }
    return { container: first, invalid: null };
  }
  // native sidecars (init containers that keep running) may run hooks too
  const available = [
    ...containers.map((c) => c.name),
    ...containersOf(pod, 'initContainers')
      .filter((c) => c.restartPolicy === 'Always')
      .map((c) => c.name),
  ];
  if (available.includes(requested)) return { container: requested, invalid: null };
  return {
    container: requested,
    invalid: {
      code: CORE_ERROR_CODES.CORE_HOOK_CONTAINER_NOT_FOUND,
      message: `pod ${podName} has no container ${JSON.stringify(requested)} (it has ${available.map((n) => JSON.stringify(n)).join(', ') || 'none'}); the hook was not run`,
    },
  };
}

/** Does this `hooks.resources[]` entry apply to the pod? (namespace, resource `pods`, labels) */
export function restoreHookSpecAppliesToPod(hookSpec: RestoreResourceHookSpec, pod: RestoreObject): boolean {
  if (!isNamespaceIncluded(pod.metadata.namespace ?? '', hookSpec)) return false;
  if (!isResourceIncluded({ group: '', resource: 'pods' }, hookSpec)) return false;
  if (hookSpec.labelSelector && !matchesLabelSelector(hookSpec.labelSelector, pod.metadata.labels)) return false;
  return true;
}

function annotationDuration(
  annotations: Record<string, string>,
  key: string,
  fallbackMs: number,
  warn: (key: string, message: string) => void,
): number {
  const value = annotations[key];
  if (value === undefined) return fallbackMs;
  const parsed = parseDuration(value);
  if (!parsed.ok || parsed.ms < 0) {
    warn(
      key,
      `${JSON.stringify(value)} is not a duration (e.g. "30s", "5m"); using ${fallbackMs > 0 ? formatDuration(fallbackMs) : 'no limit'}`,
    );
    return fallbackMs;
  }
  return parsed.ms > 0 ? parsed.ms : fallbackMs;
}

/** A pod's exec-timeout annotation held to the operator's cap on hook timeouts (clamped, with a warning). */
function cappedExecTimeout(ms: number, maxTimeoutMs: number, warn: (message: string) => void): number {
  if (ms <= maxTimeoutMs) return ms;
  warn(
    `is ${formatDuration(ms)}, longer than the ${formatDuration(maxTimeoutMs)} limit on hook timeouts (STOWAGE_MAX_HOOK_TIMEOUT); using ${formatDuration(maxTimeoutMs)}`,
  );
  return maxTimeoutMs;
}

function annotationExecHook(pod: RestoreObject, warnings: HookWarning[], maxTimeoutMs: number): RestoreExecHook | null | 'empty' {
  const annotations = pod.metadata.annotations ?? {};
  const prefix = RESTORE_EXEC_HOOK_ANNOTATION_PREFIX;
  const commandValue = annotations[`${prefix}command`];
  if (commandValue === undefined) return null;
  const warn = (annotation: string, message: string): void => {
    warnings.push({ code: CORE_ERROR_CODES.CORE_HOOK_ANNOTATION_INVALID, annotation, message });
  };
  const parsed = parseHookCommand(commandValue);
  if (parsed.warning) warn(`${prefix}command`, parsed.warning);
  if (parsed.command.length === 0 || parsed.command[0] === '') {
    warn(`${prefix}command`, 'is an empty command; no exec hook is run in this pod');
    return 'empty';
  }
  let onError: HookOnError = 'Continue';
  const onErrorValue = annotations[`${prefix}on-error`];
  if (onErrorValue !== undefined) {
    if (onErrorValue === 'Fail' || onErrorValue === 'Continue') onError = onErrorValue;
    else warn(`${prefix}on-error`, `${JSON.stringify(onErrorValue)} is not Fail or Continue; using Continue`);
  }
  let waitForReady = false;
  const readyValue = annotations[`${prefix}wait-for-ready`];
  if (readyValue !== undefined) {
    const parsedReady = GO_BOOLEANS[readyValue];
    if (parsedReady !== undefined) waitForReady = parsedReady;
    else warn(`${prefix}wait-for-ready`, `${JSON.stringify(readyValue)} is not true or false; using false`);
  }
  const containerValue = annotations[`${prefix}container`];
  const { container, invalid } = resolveContainer(pod, containerValue ? containerValue : null);
  return {
    source: 'annotation',
    specName: null,
    index: 0,
    container,
    command: parsed.command,
    onError,
    execTimeoutMs: cappedExecTimeout(
      annotationDuration(annotations, `${prefix}exec-timeout`, DEFAULT_RESTORE_EXEC_TIMEOUT_MS, warn),
      maxTimeoutMs,
      (message) => warn(`${prefix}exec-timeout`, message),
    ),
    waitTimeoutMs: annotationDuration(annotations, `${prefix}wait-timeout`, 0, warn),
    waitForReady,
    invalid,
  };
}

function annotationInitContainer(pod: RestoreObject, warnings: HookWarning[]): JsonObject | null {
  const annotations = pod.metadata.annotations ?? {};
  const prefix = RESTORE_INIT_HOOK_ANNOTATION_PREFIX;
  const image = annotations[`${prefix}container-image`];
  const name = annotations[`${prefix}container-name`];
  const commandValue = annotations[`${prefix}command`];
  if (!image) {
    if (name !== undefined || commandValue !== undefined) {
      warnings.push({
        code: CORE_ERROR_CODES.CORE_HOOK_ANNOTATION_INVALID,
        annotation: `${prefix}container-image`,
        message: 'is missing: an init hook needs an image; no init container is added',
      });
    }
    return null;
  }
  // Velero makes up a random name; core has no randomness and a re-run must create the same pod
  const container: JsonObject = { name: name || DEFAULT_INIT_HOOK_CONTAINER_NAME, image };
  if (commandValue) {
    const parsed = parseHookCommand(commandValue);
    if (parsed.warning)
      warnings.push({ code: CORE_ERROR_CODES.CORE_HOOK_ANNOTATION_INVALID, annotation: `${prefix}command`, message: parsed.warning });
    container.command = parsed.command;
  }
  return container;
}

/**
 * The restore hooks of `pod` — pass the pod as it is restored (namespace mapped), since hook
 * specs select pods by the namespace they are restored into. An exec-timeout annotation longer than
 * `maxTimeoutMs` (the operator's cap on hook timeouts) is clamped to it, with a warning.
 */
export function resolveRestoreHooks(
  pod: RestoreObject,
  spec: Pick<RestoreSpec, 'hooks'>,
  maxTimeoutMs: number = DEFAULT_MAX_HOOK_TIMEOUT_MS,
): RestoreHookResolution {
  const warnings: HookWarning[] = [];
  const applicable = spec.hooks.resources.filter((hookSpec) => restoreHookSpecAppliesToPod(hookSpec, pod));

  const fromAnnotation = annotationExecHook(pod, warnings, maxTimeoutMs);
  const execHooks: RestoreExecHook[] = [];
  if (fromAnnotation === null) {
    for (const hookSpec of applicable) {
      hookSpec.postHooks.forEach((hook, index) => {
        if (!('exec' in hook)) return;
        const { container, invalid } = resolveContainer(pod, hook.exec.container);
        execHooks.push({
          source: 'spec',
          specName: hookSpec.name,
          index,
          container,
          command: [...hook.exec.command],
          onError: hook.exec.onError,
          execTimeoutMs: hook.exec.execTimeoutMs,
          waitTimeoutMs: hook.exec.waitTimeoutMs,
          waitForReady: hook.exec.waitForReady,
          invalid,
        });
      });
    }
  } else if (fromAnnotation !== 'empty') {
    execHooks.push(fromAnnotation);
  }

  const initFromAnnotation = annotationInitContainer(pod, warnings);
  const initContainers: JsonObject[] = [];
  if (initFromAnnotation) initContainers.push(initFromAnnotation);
  else {
    for (const hookSpec of applicable) {
      for (const hook of hookSpec.postHooks) {
        if ('init' in hook) for (const container of hook.init.initContainers) initContainers.push(structuredClone(container));
      }
    }
  }
  return { execHooks, initContainers, warnings };
}
