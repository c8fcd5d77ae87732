/*
 * The restore request: Velero's field names (`velero.io/v1` Restore spec), validated strictly,
 * every problem reported at once with its JSON path — the same helpers, selection rules and
 * message style as the backup spec (`spec-validation.ts`).
 */
import { z } from 'zod';
import type { HookOnError } from '../backup-spec.js';
import { UNSUPPORTED_VELERO_FIELDS } from '../backup-spec.schema.js';
import { explainDns1123Label } from '../names.js';
import {
  containerName,
  dns1123Label,
  durationOr,
  durationString,
  formatPath,
  type HookSetScope,
  hookCommand,
  hookSetScopeShape,
  isRecord,
  requestSchema,
  type SpecSelection,
  strictObject,
  toHookSetScope,
  type ValidationProblem,
  validateRequest,
} from '../spec-validation.js';
import type { JsonObject } from './types.js';

export type ExistingResourcePolicy = 'none' | 'update';

/** A post-restore exec hook with defaults applied (Velero's `ExecRestoreHook`). */
export interface RestoreExecHookSpec {
  /** null = the pod's first container. */
  container: string | null;
  command: string[];
  /** Velero's default for restore hooks is `Continue` (backup hooks default to `Fail`). */
  onError: HookOnError;
  /** How long the command may run once started; default 30 s. */
  execTimeoutMs: number;
  /** How long to wait for the container to be running (ready with waitForReady); 0 = no limit. */
  waitTimeoutMs: number;
  waitForReady: boolean;
}

/** An init container given in the spec: `name` and `image` are checked, the rest passed through. */
export type InitContainerSpec = JsonObject & { name: string; image: string };

export type RestorePostHookSpec = { exec: RestoreExecHookSpec } | { init: { initContainers: InitContainerSpec[] } };

export interface RestoreResourceHookSpec extends HookSetScope {
  postHooks: RestorePostHookSpec[];
}

/** A validated restore spec with every default applied and durations in milliseconds. */
export interface RestoreSpec extends SpecSelection {
  backupName: string;
  /** Backed-up namespace → namespace to restore into. */
  namespaceMapping: Record<string, string>;
  /** Restore volume data (PodVolumeRestores); default true. */
  restorePVs: boolean;
  existingResourcePolicy: ExistingResourcePolicy;
  /** Keep Services' `nodePort`s; default false (the cluster assigns new ones). */
  preserveNodePorts: boolean;
  hooks: { resources: RestoreResourceHookSpec[] };
  /** How long volume restores may take; default 4 h. */
  itemOperationTimeoutMs: number;
}

export type RestoreRequestValidation = { ok: true; name: string | null; value: RestoreSpec } | { ok: false; problems: ValidationProblem[] };

export const DEFAULT_ITEM_OPERATION_TIMEOUT_MS = 4 * 3_600_000;
export const DEFAULT_RESTORE_EXEC_TIMEOUT_MS = 30_000;
/** A wait or exec timeout beyond this is surely a typo (as Velero's 4 h hook cap). */
const MAX_RESTORE_HOOK_TIMEOUT_MS = 4 * 3_600_000;

/** Velero restore fields Stowage knows but does not support, so the user hears why (over the backup's). */
const UNSUPPORTED_RESTORE_FIELDS: Record<string, string> = {
  scheduleName: 'give the backup by backupName (restoring the newest backup of a schedule is not supported)',
  restoreStatus: 'status is never restored; the cluster computes it again',
  resourceModifier: 'resource modifiers are not supported',
  uploaderConfig: 'not supported',
  includedClusterScopedResources: 'use includedResources with includeClusterResources',
  excludedClusterScopedResources: 'use excludedResources with includeClusterResources',
  includedNamespaceScopedResources: 'use includedResources',
  excludedNamespaceScopedResources: 'use excludedResources',
  metadata: 'put the restore name in the top-level "name" field',
};

const restoreExecInput = strictObject(
  {
    container: containerName.optional(),
    command: hookCommand,
    onError: z
      .enum(['Continue', 'Fail'], { error: (issue) => `must be "Continue" or "Fail" (got ${JSON.stringify(issue.input)})` })
      .optional(),
    execTimeout: durationString('execTimeout', { min: 0, max: MAX_RESTORE_HOOK_TIMEOUT_MS }).optional(),
    waitTimeout: durationString('waitTimeout', { min: 0 }).optional(),
    waitForReady: z.boolean().optional(),
  },
  'exec: {container, command, onError, execTimeout, waitTimeout, waitForReady}',
);

const initContainerInput = z.looseObject(
  {
    name: containerName,
    image: z.string({ error: 'is required: the init container image' }).min(1, 'must not be empty'),
  },
  { error: 'must be an object (an init container: {name, image, command, ...})' },
);

const restoreInitInput = strictObject(
  {
    initContainers: z.array(initContainerInput).min(1, 'must not be empty'),
    // Velero's init hook timeout bounds its wait for the init containers; Stowage does not wait for them
    timeout: z
      .unknown()
      .superRefine((_value, ctx) => {
        ctx.addIssue({ code: 'custom', message: 'not supported: Stowage does not wait for init hook containers (remove timeout)' });
      })
      .optional(),
  },
  'init: {initContainers: [...]}',
);

const postHookInput = strictObject(
  { exec: restoreExecInput.optional(), init: restoreInitInput.optional() },
  'a post hook: {exec: {...}} or {init: {...}}',
);

const restoreResourceHookInput = strictObject(
  {
    ...hookSetScopeShape,
    postHooks: z.array(postHookInput).optional(),
  },
  'a restore hook spec',
);

const restoreRequestInput = requestSchema('restore', {
  backupName: dns1123Label('backup name', { required: 'is required: the name of the backup to restore from' }),
  namespaceMapping: z
    // source names are checked with the raw input (restoreCrossFieldProblems): a key issue here
    // would carry the record's message, not the key's
    .record(z.string(), dns1123Label('target namespace'))
    .optional(),
  restorePVs: z.boolean({ error: 'must be true or false' }).nullable().optional(),
  existingResourcePolicy: z
    .enum(['none', 'update'], { error: (issue) => `must be "none" or "update" (got ${JSON.stringify(issue.input)})` })
    .optional(),
  preserveNodePorts: z.boolean({ error: 'must be true or false' }).nullable().optional(),
  hooks: strictObject({ resources: z.array(restoreResourceHookInput).optional() }, 'hooks: {resources: [...]}').optional(),
  itemOperationTimeout: durationString('itemOperationTimeout', { min: 1000 }).optional(),
});

type RestoreSpecInput = z.infer<typeof restoreRequestInput>['spec'];

/** The restore's own rules zod cannot express per field: namespaceMapping's sources and collisions. */
function restoreCrossFieldProblems(spec: Record<string, unknown>): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  if (isRecord(spec.namespaceMapping)) {
    for (const source of Object.keys(spec.namespaceMapping)) {
      const sourceProblems = explainDns1123Label(source);
      if (sourceProblems.length > 0) {
        problems.push({
          path: formatPath(['spec', 'namespaceMapping', source]),
          message: `source namespace ${JSON.stringify(source)} ${sourceProblems.join('; ')}`,
        });
      }
    }
    const sourcesByTarget = new Map<string, string[]>();
    for (const [source, target] of Object.entries(spec.namespaceMapping)) {
      if (typeof target !== 'string') continue;
      sourcesByTarget.set(target, [...(sourcesByTarget.get(target) ?? []), source]);
    }
    for (const [target, sources] of sourcesByTarget) {
      if (sources.length > 1) {
        problems.push({
          path: formatPath(['spec', 'namespaceMapping', sources[1] ?? '']),
          message: `${sources.map((s) => JSON.stringify(s)).join(' and ')} all map to ${JSON.stringify(target)}; objects of the same name would collide`,
        });
      }
    }
  }
  return problems;
}

/** A post hook is exactly one of exec and init. */
function postHookKindProblems(hookSet: Record<string, unknown>, path: string): ValidationProblem[] {
  if (!Array.isArray(hookSet.postHooks)) return [];
  const problems: ValidationProblem[] = [];
  hookSet.postHooks.forEach((hook, hookIndex) => {
    if (!isRecord(hook)) return;
    const hasExec = hook.exec !== undefined;
    const hasInit = hook.init !== undefined;
    if (hasExec === hasInit) {
      problems.push({
        path: `${path}.postHooks[${hookIndex}]`,
        message: hasExec ? 'give either exec or init in one post hook, not both' : 'give exec: {...} or init: {...}',
      });
    }
  });
  return problems;
}

function toRestoreSpec(spec: RestoreSpecInput, selection: SpecSelection): RestoreSpec {
  return {
    backupName: spec.backupName,
    ...selection,
    namespaceMapping: { ...(spec.namespaceMapping ?? {}) },
    restorePVs: spec.restorePVs ?? true,
    existingResourcePolicy: spec.existingResourcePolicy ?? 'none',
    preserveNodePorts: spec.preserveNodePorts ?? false,
    hooks: {
      resources: (spec.hooks?.resources ?? []).map((hookSpec) => ({
        ...toHookSetScope(hookSpec),
        postHooks: (hookSpec.postHooks ?? []).map((hook): RestorePostHookSpec => {
          if (hook.exec) {
            return {
              exec: {
                container: hook.exec.container ?? null,
                command: [...hook.exec.command],
                onError: hook.exec.onError ?? 'Continue',
                execTimeoutMs: durationOr(hook.exec.execTimeout, DEFAULT_RESTORE_EXEC_TIMEOUT_MS),
                waitTimeoutMs: durationOr(hook.exec.waitTimeout, 0),
                waitForReady: hook.exec.waitForReady ?? false,
              },
            };
          }
          const initContainers = (hook.init?.initContainers ?? []).map((container) => structuredClone(container) as InitContainerSpec);
          return { init: { initContainers } };
        }),
      })),
    },
    itemOperationTimeoutMs: durationOr(spec.itemOperationTimeout, DEFAULT_ITEM_OPERATION_TIMEOUT_MS),
  };
}

/**
 * Validates a restore request `{name?, spec}` (untrusted JSON). On success returns the spec with
 * defaults applied (durations in ms); otherwise every problem at once, each naming its field
 * (`spec.namespaceMapping["shop"]`, `spec.hooks.resources[0].postHooks[1].exec.command`).
 */
export function validateRestoreRequest(request: unknown): RestoreRequestValidation {
  return validateRequest(request, restoreRequestInput, {
    unsupportedSpecFields: { ...UNSUPPORTED_VELERO_FIELDS, ...UNSUPPORTED_RESTORE_FIELDS },
    hookSetProblems: postHookKindProblems,
    specProblems: restoreCrossFieldProblems,
    toSpec: toRestoreSpec,
  });
}

/** The restore spec's schema (Velero field names), for what is generated from it: the CRDs' OpenAPI schemas. */
export const restoreSpecSchema = restoreRequestInput.shape.spec;
