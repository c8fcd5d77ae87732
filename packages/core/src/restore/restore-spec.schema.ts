/*
 * The restore request: Velero's field names (`velero.io/v1` Restore spec), validated strictly,
 * every problem reported at once with its JSON path — the same helpers and message style as the
 * backup spec (`backup-spec.schema.ts`).
 */
import { z } from 'zod';
import { formatPath, type HookOnError, requestNameSchema, specSchemaParts, type ValidationProblem } from '../backup-spec.schema.js';
import { parseDuration } from '../duration.js';
import type { LabelSelector } from '../label-selector.js';
import { explainDns1123Label } from '../names.js';
import type { JsonObject } from './types.js';

const {
  strictObject,
  durationString,
  containerName,
  hookSetScopeShape,
  selectionShape,
  toProblems,
  messageFor,
  tidy,
  checkIncludesExcludes,
  isRecord,
} = specSchemaParts;

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

export interface RestoreResourceHookSpec {
  name: string;
  includedNamespaces: string[];
  excludedNamespaces: string[];
  includedResources: string[];
  excludedResources: string[];
  labelSelector: LabelSelector | null;
  postHooks: RestorePostHookSpec[];
}

/** A validated restore spec with every default applied and durations in milliseconds. */
export interface RestoreSpec {
  backupName: string;
  /** Empty = all namespaces (same as `['*']`); matched against the backed-up namespace. */
  includedNamespaces: string[];
  excludedNamespaces: string[];
  /** Empty = all resources (same as `['*']`). */
  includedResources: string[];
  excludedResources: string[];
  /** null = auto: cluster-scoped items are restored only when the restore covers all namespaces. */
  includeClusterResources: boolean | null;
  labelSelector: LabelSelector | null;
  orLabelSelectors: LabelSelector[];
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

/** Velero restore fields Stowage knows but does not support, so the user hears why. */
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

const namespaceName = (what: string) =>
  z.string().superRefine((value, ctx) => {
    const problems = explainDns1123Label(value);
    if (problems.length > 0) ctx.addIssue({ code: 'custom', message: `${what} ${JSON.stringify(value)} ${problems.join('; ')}` });
  });

const restoreExecInput = strictObject(
  {
    container: containerName.optional(),
    command: z.array(z.string(), { error: 'must be a non-empty array of strings' }).superRefine((command, ctx) => {
      if (command.length === 0) ctx.addIssue({ code: 'custom', message: 'must be a non-empty array of strings' });
      else if (command[0] === '')
        ctx.addIssue({ code: 'custom', message: 'the first element (the program to run) must not be empty', path: [0] });
    }),
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

const restoreSpecInput = strictObject(
  {
    backupName: z.string({ error: 'is required: the name of the backup to restore from' }).superRefine((name, ctx) => {
      const problems = explainDns1123Label(name);
      if (problems.length > 0) ctx.addIssue({ code: 'custom', message: `backup name ${JSON.stringify(name)} ${problems.join('; ')}` });
    }),
    ...selectionShape('restored'),
    namespaceMapping: z
      // source names are checked with the raw input (restoreCrossFieldProblems): a key issue here
      // would carry the record's message, not the key's
      .record(z.string(), namespaceName('target namespace'))
      .optional(),
    restorePVs: z.boolean({ error: 'must be true or false' }).nullable().optional(),
    existingResourcePolicy: z
      .enum(['none', 'update'], { error: (issue) => `must be "none" or "update" (got ${JSON.stringify(issue.input)})` })
      .optional(),
    preserveNodePorts: z.boolean({ error: 'must be true or false' }).nullable().optional(),
    hooks: strictObject({ resources: z.array(restoreResourceHookInput).optional() }, 'hooks: {resources: [...]}').optional(),
    itemOperationTimeout: durationString('itemOperationTimeout', { min: 1000 }).optional(),
  },
  'the restore spec',
);

const restoreRequestInput = strictObject(
  {
    name: requestNameSchema('restore'),
    spec: restoreSpecInput,
  },
  'a restore request: {name, spec}',
);

type RestoreSpecInput = z.infer<typeof restoreSpecInput>;

/** Rules zod cannot express per field: pairs of fields, exactly-one-of, mapping collisions. */
function restoreCrossFieldProblems(request: unknown): ValidationProblem[] {
  if (!isRecord(request) || !isRecord(request.spec)) return [];
  const spec = request.spec;
  const problems: ValidationProblem[] = [];
  const hasSelector = spec.labelSelector !== undefined && spec.labelSelector !== null;
  if (hasSelector && Array.isArray(spec.orLabelSelectors) && spec.orLabelSelectors.length > 0) {
    problems.push({ path: 'spec.orLabelSelectors', message: 'set either labelSelector or orLabelSelectors, not both (as in Velero)' });
  }
  problems.push(...checkIncludesExcludes(spec.includedNamespaces, spec.excludedNamespaces, 'spec', 'Namespaces'));
  problems.push(...checkIncludesExcludes(spec.includedResources, spec.excludedResources, 'spec', 'Resources'));
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
  if (isRecord(spec.hooks) && Array.isArray(spec.hooks.resources)) {
    spec.hooks.resources.forEach((hookSpec, index) => {
      if (!isRecord(hookSpec)) return;
      const path = `spec.hooks.resources[${index}]`;
      problems.push(...checkIncludesExcludes(hookSpec.includedNamespaces, hookSpec.excludedNamespaces, path, 'Namespaces'));
      problems.push(...checkIncludesExcludes(hookSpec.includedResources, hookSpec.excludedResources, path, 'Resources'));
      if (!Array.isArray(hookSpec.postHooks)) return;
      hookSpec.postHooks.forEach((hook, hookIndex) => {
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
    });
  }
  return problems;
}

/** Unknown spec-level fields that Velero has get a reason instead of "unknown field". */
function explainUnsupportedFields(problems: ValidationProblem[]): ValidationProblem[] {
  return problems.map((problem) => {
    const match = /^spec\.(\w+)$/.exec(problem.path);
    const reason = match?.[1] !== undefined ? UNSUPPORTED_RESTORE_FIELDS[match[1]] : undefined;
    return reason && problem.message.startsWith('unknown field') ? { path: problem.path, message: `unknown field: ${reason}` } : problem;
  });
}

function durationMs(text: string | undefined, fallbackMs: number): number {
  if (text === undefined) return fallbackMs;
  const parsed = parseDuration(text);
  // 0 means "use the default", as in Velero
  return parsed.ok && parsed.ms > 0 ? parsed.ms : fallbackMs;
}

function toRestoreSpec(spec: RestoreSpecInput): RestoreSpec {
  return {
    backupName: spec.backupName,
    includedNamespaces: spec.includedNamespaces ?? [],
    excludedNamespaces: spec.excludedNamespaces ?? [],
    includedResources: spec.includedResources ?? [],
    excludedResources: spec.excludedResources ?? [],
    includeClusterResources: spec.includeClusterResources ?? null,
    labelSelector: (spec.labelSelector as LabelSelector | null | undefined) ?? null,
    orLabelSelectors: (spec.orLabelSelectors ?? []) as LabelSelector[],
    namespaceMapping: { ...(spec.namespaceMapping ?? {}) },
    restorePVs: spec.restorePVs ?? true,
    existingResourcePolicy: spec.existingResourcePolicy ?? 'none',
    preserveNodePorts: spec.preserveNodePorts ?? false,
    hooks: {
      resources: (spec.hooks?.resources ?? []).map((hookSpec) => ({
        name: hookSpec.name,
        includedNamespaces: hookSpec.includedNamespaces ?? [],
        excludedNamespaces: hookSpec.excludedNamespaces ?? [],
        includedResources: hookSpec.includedResources ?? [],
        excludedResources: hookSpec.excludedResources ?? [],
        labelSelector: (hookSpec.labelSelector as LabelSelector | undefined) ?? null,
        postHooks: (hookSpec.postHooks ?? []).map((hook): RestorePostHookSpec => {
          if (hook.exec) {
            return {
              exec: {
                container: hook.exec.container ?? null,
                command: [...hook.exec.command],
                onError: hook.exec.onError ?? 'Continue',
                execTimeoutMs: durationMs(hook.exec.execTimeout, DEFAULT_RESTORE_EXEC_TIMEOUT_MS),
                waitTimeoutMs: durationMs(hook.exec.waitTimeout, 0),
                waitForReady: hook.exec.waitForReady ?? false,
              },
            };
          }
          const initContainers = (hook.init?.initContainers ?? []).map((container) => structuredClone(container) as InitContainerSpec);
          return { init: { initContainers } };
        }),
      })),
    },
    itemOperationTimeoutMs: durationMs(spec.itemOperationTimeout, DEFAULT_ITEM_OPERATION_TIMEOUT_MS),
  };
}

/**
 * Validates a restore request `{name?, spec}` (untrusted JSON). On success returns the spec with
 * defaults applied (durations in ms); otherwise every problem at once, each naming its field
 * (`spec.namespaceMapping["shop"]`, `spec.hooks.resources[0].postHooks[1].exec.command`).
 */
export function validateRestoreRequest(request: unknown): RestoreRequestValidation {
  const parsed = restoreRequestInput.safeParse(request, { error: messageFor });
  const problems = explainUnsupportedFields([
    ...(parsed.success ? [] : toProblems(parsed.error.issues)),
    ...restoreCrossFieldProblems(request),
  ]);
  if (!parsed.success || problems.length > 0) return { ok: false, problems: tidy(problems) };
  return { ok: true, name: parsed.data.name ?? null, value: toRestoreSpec(parsed.data.spec) };
}
