/*
 * The backup request: Velero's field names, validated strictly (unknown fields rejected), every
 * problem reported at once with its JSON path and a reason a person can act on. The validated
 * shape and its defaults are in `backup-spec.ts`; what restore shares is in `spec-validation.ts`.
 */
import { z } from 'zod';
import {
  type BackupHookExec,
  type BackupLevelHook,
  type BackupRequestValidation,
  type BackupSpec,
  type BackupSpecDefaults,
  DEFAULT_CSI_SNAPSHOT_TIMEOUT_MS,
  DEFAULT_FS_BACKUP_TIMEOUT_MS,
  DEFAULT_HOOK_RETRY_BACKOFF_MS,
  DEFAULT_HOOK_TIMEOUT_MS,
  DEFAULT_STORAGE_LOCATION,
  DEFAULT_TTL_MS,
  type HookRetries,
  MAX_HOOK_RETRIES,
  MAX_HOOK_RETRY_BACKOFF_MS,
  MAX_HOOK_TIMEOUT_MS,
  type ResourcePolicyRef,
  SCOPED_FILTER_FIELDS,
  usesOldResourceFilters,
} from './backup-spec.js';
import { parseDuration } from './duration.js';
import { explainLabelKey, explainLabelValue, type LabelSelector } from './label-selector.js';
import { csiConditionProblems, volumePolicyInputSchema } from './resource-policy.schema.js';
import {
  containerName,
  dns1123Label,
  durationOr,
  durationString,
  hookCommand,
  hookSetScopeShape,
  isRecord,
  labelSelectorInput,
  nonEmptyList,
  requestSchema,
  resourceName,
  type SpecSelection,
  strictObject,
  tidy,
  toHookSetScope,
  type ValidationProblem,
  validateRequest,
} from './spec-validation.js';
import type { VolumePolicy } from './volume-policy.js';

/** Velero spec fields Stowage knows but does not support, so the user hears why, not just "unknown". */
export const UNSUPPORTED_VELERO_FIELDS: Record<string, string> = {
  volumeSnapshotLocations:
    'Stowage takes CSI snapshots only (snapshotVolumes, volume policy snapshot); native volume snapshotters are not supported',
  datamover: 'Stowage moves snapshot data with its own node agents: set snapshotMoveData: true',
  itemOperationTimeout: 'Stowage has no asynchronous item operations',
  orderedResources: 'not supported; items are grouped into ItemBlocks instead',
  defaultVolumesToRestic: 'use defaultVolumesToFsBackup',
  uploaderConfig: 'not supported',
  volumeGroupSnapshotLabelKey: 'not supported',
  metadata: 'put the backup name in the top-level "name" field',
};

const hookRetriesInput = strictObject(
  {
    max: z
      .number({ error: `must be a whole number from 0 to ${MAX_HOOK_RETRIES}` })
      .int(`must be a whole number from 0 to ${MAX_HOOK_RETRIES}`)
      .min(0, `must be a whole number from 0 to ${MAX_HOOK_RETRIES}`)
      .max(MAX_HOOK_RETRIES, `must be at most ${MAX_HOOK_RETRIES} (retries of one hook)`),
    backoff: durationString('a retry backoff', { min: 0, max: MAX_HOOK_RETRY_BACKOFF_MS }).optional(),
  },
  'retries: {max, backoff}',
);

const hookExecInput = strictObject(
  {
    container: containerName.optional(),
    command: hookCommand,
    onError: z
      .enum(['Continue', 'Fail', 'FailBlock'], {
        error: (issue) => `must be "Continue", "Fail" or "FailBlock" (got ${JSON.stringify(issue.input)})`,
      })
      .optional(),
    timeout: durationString('a hook timeout', { min: 0, max: MAX_HOOK_TIMEOUT_MS }).optional(),
    retries: hookRetriesInput.optional(),
    executionPolicy: z
      .enum(['Always', 'OnSuccess', 'OnFailure'], {
        error: (issue) => `must be "Always", "OnSuccess" or "OnFailure" (got ${JSON.stringify(issue.input)})`,
      })
      .optional(),
  },
  'exec: {container, command, onError, timeout, retries, executionPolicy}',
);

const hookInput = strictObject({ exec: hookExecInput }, 'a hook: {exec: {...}}');

const backupLevelHookInput = strictObject(
  {
    name: z.string().min(1, 'must not be empty').optional(),
    namespace: dns1123Label('namespace', { required: 'is required: the namespace of the pods the hook runs in' }),
    labelSelector: labelSelectorInput.optional(),
    container: containerName.optional(),
    mode: z.enum(['all', 'one'], { error: (issue) => `must be "all" or "one" (got ${JSON.stringify(issue.input)})` }).optional(),
    command: hookCommand,
    onError: z
      .enum(['Continue', 'Fail'], {
        error: (issue) => `must be "Continue" or "Fail" (got ${JSON.stringify(issue.input)}; FailBlock applies to pod pre hooks only)`,
      })
      .optional(),
    timeout: durationString('a hook timeout', { min: 0, max: MAX_HOOK_TIMEOUT_MS }).optional(),
    retries: hookRetriesInput.optional(),
  },
  'a backup hook: {name, namespace, labelSelector, container, mode, command, onError, timeout, retries}',
);

const resourceHookInput = strictObject(
  {
    ...hookSetScopeShape,
    pre: z.array(hookInput).optional(),
    post: z.array(hookInput).optional(),
  },
  'a hook spec',
);

const resourcePolicyInput = strictObject(
  {
    kind: z
      .string()
      .refine((kind) => kind.toLowerCase() === 'configmap', { message: 'must be "ConfigMap" (or give volumePolicies inline instead)' })
      .optional(),
    name: z.string().min(1, 'must not be empty').optional(),
    apiGroup: z.string().optional(),
    volumePolicies: z.array(volumePolicyInputSchema).optional(),
  },
  'resourcePolicy: either {volumePolicies: [...]} or {kind: ConfigMap, name}',
);

const backupRequestInput = requestSchema('backup', {
  defaultVolumesToFsBackup: z.boolean().optional(),
  hooks: strictObject(
    {
      resources: z.array(resourceHookInput).optional(),
      backup: strictObject(
        { pre: z.array(backupLevelHookInput).optional(), post: z.array(backupLevelHookInput).optional() },
        'backup: {pre: [...], post: [...]}',
      ).optional(),
    },
    'hooks: {resources: [...], backup: {pre, post}}',
  ).optional(),
  resourcePolicy: resourcePolicyInput.nullable().optional(),
  includedClusterScopedResources: z.array(resourceName).optional(),
  excludedClusterScopedResources: z.array(resourceName).optional(),
  includedNamespaceScopedResources: z.array(resourceName).optional(),
  excludedNamespaceScopedResources: z.array(resourceName).optional(),
  fsBackupTimeout: durationString('fsBackupTimeout', { min: 1000 }).optional(),
  snapshotVolumes: z.boolean().optional(),
  snapshotMoveData: z.boolean().optional(),
  csiSnapshotTimeout: durationString('csiSnapshotTimeout', { min: 1000 }).optional(),
  ttl: durationString('ttl', { min: 0 }).optional(),
  storageLocation: z
    .string()
    .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a backup storage location name (lowercase letters, digits, "-" and ".")')
    .optional(),
});

type BackupSpecInput = z.infer<typeof backupRequestInput>['spec'];

/** The backup's own rules zod cannot express per field, on the raw spec: scoped filters, the resource policy. */
function crossFieldProblems(spec: Record<string, unknown>): ValidationProblem[] {
  const problems = scopedFilterProblems(spec);
  const policy = spec.resourcePolicy;
  if (isRecord(policy)) {
    const inline = policy.volumePolicies !== undefined;
    const reference = policy.kind !== undefined || policy.name !== undefined;
    if (inline && reference) {
      problems.push({ path: 'spec.resourcePolicy', message: 'give either volumePolicies (inline) or kind: ConfigMap with name, not both' });
    } else if (!inline && !reference) {
      problems.push({ path: 'spec.resourcePolicy', message: 'give either volumePolicies (inline) or kind: ConfigMap with name' });
    } else if (reference && (policy.kind === undefined || policy.name === undefined)) {
      problems.push({
        path: `spec.resourcePolicy.${policy.kind === undefined ? 'kind' : 'name'}`,
        message: 'is required: a ConfigMap reference needs both kind: ConfigMap and name',
      });
    }
    if (Array.isArray(policy.volumePolicies))
      problems.push(...csiConditionProblems(policy.volumePolicies, 'spec.resourcePolicy.volumePolicies'));
  }
  return problems;
}

/** FailBlock is for pre hooks (a post hook runs after the block), executionPolicy for post hooks. */
function phaseOnlyHookFields(hookSpec: Record<string, unknown>, path: string): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  const execsOf = (phase: string) =>
    (Array.isArray(hookSpec[phase]) ? (hookSpec[phase] as unknown[]) : []).map((h) => (isRecord(h) && isRecord(h.exec) ? h.exec : {}));
  execsOf('pre').forEach((exec, i) => {
    if (exec.executionPolicy !== undefined) {
      problems.push({
        path: `${path}.pre[${i}].exec.executionPolicy`,
        message: 'applies to post hooks only (a pre hook runs before its block has any PVB)',
      });
    }
  });
  execsOf('post').forEach((exec, i) => {
    if (exec.onError === 'FailBlock') {
      problems.push({
        path: `${path}.post[${i}].exec.onError`,
        message: 'FailBlock applies to pre hooks only (a post hook runs after its block is backed up); use Continue or Fail',
      });
    }
  });
  return problems;
}

/** Velero's rules for the scoped filters: never mixed with the old ones; each pair like `ValidateScopedIncludesExcludes`. */
function scopedFilterProblems(spec: Record<string, unknown>): ValidationProblem[] {
  const used = SCOPED_FILTER_FIELDS.filter((field) => nonEmptyList(spec[field]));
  if (used.length === 0) return [];
  const problems: ValidationProblem[] = [];
  if (usesOldResourceFilters(spec)) {
    problems.push({
      path: `spec.${used[0]}`,
      message:
        'includedResources, excludedResources and includeClusterResources are the old resource filters; the cluster-scoped and namespace-scoped ones are the new filters; they cannot be used together (as in Velero)',
    });
  }
  for (const scope of ['Cluster', 'Namespace'] as const) {
    const includeField = `included${scope}ScopedResources` as const;
    const excludeField = `excluded${scope}ScopedResources` as const;
    const inc = Array.isArray(spec[includeField])
      ? (spec[includeField] as unknown[]).filter((v): v is string => typeof v === 'string')
      : [];
    const exc = Array.isArray(spec[excludeField])
      ? (spec[excludeField] as unknown[]).filter((v): v is string => typeof v === 'string')
      : [];
    if (inc.length > 1 && inc.includes('*'))
      problems.push({ path: `spec.${includeField}`, message: 'list either "*" alone or specific resources' });
    if (exc.length > 1 && exc.includes('*'))
      problems.push({ path: `spec.${excludeField}`, message: 'list either "*" alone or specific resources' });
    if (inc.length > 0 && exc.includes('*')) {
      problems.push({ path: `spec.${excludeField}`, message: `when it is "*", ${includeField} must be empty` });
    }
    for (const value of exc) {
      if (value !== '*' && inc.includes(value)) {
        problems.push({
          path: `spec.${excludeField}`,
          message: `${JSON.stringify(value)} is both included and excluded; remove it from one list`,
        });
      }
    }
  }
  return problems;
}

function hookTimeoutMs(timeout: string | undefined): number {
  const ms = timeout !== undefined ? (parseDuration(timeout) as { ok: true; ms: number }).ms : 0;
  // 0 means "use the default", as in Velero
  return ms > 0 ? ms : DEFAULT_HOOK_TIMEOUT_MS;
}

function toRetries(input: z.infer<typeof hookRetriesInput> | undefined): { retries: HookRetries } | Record<string, never> {
  if (input === undefined || input.max === 0) return {};
  return { retries: { max: input.max, backoffMs: durationOr(input.backoff, DEFAULT_HOOK_RETRY_BACKOFF_MS, true) } };
}

function toHookExec(input: z.infer<typeof hookInput>): { exec: BackupHookExec } {
  const exec = input.exec;
  return {
    exec: {
      container: exec.container ?? null,
      command: [...exec.command],
      onError: exec.onError ?? 'Fail',
      timeoutMs: hookTimeoutMs(exec.timeout),
      ...toRetries(exec.retries),
      ...(exec.executionPolicy !== undefined ? { executionPolicy: exec.executionPolicy } : {}),
    },
  };
}

function toBackupLevelHook(input: z.infer<typeof backupLevelHookInput>, phase: 'pre' | 'post', index: number): BackupLevelHook {
  return {
    name: input.name ?? `backup-${phase}-${index}`,
    namespace: input.namespace,
    labelSelector: (input.labelSelector as LabelSelector | undefined) ?? null,
    container: input.container ?? null,
    mode: input.mode ?? 'all',
    command: [...input.command],
    onError: input.onError ?? 'Fail',
    timeoutMs: hookTimeoutMs(input.timeout),
    ...toRetries(input.retries),
  };
}

function toBackupSpec(spec: BackupSpecInput, selection: SpecSelection, defaults: BackupSpecDefaults): BackupSpec {
  let resourcePolicy: ResourcePolicyRef | null = null;
  if (spec.resourcePolicy?.volumePolicies) {
    resourcePolicy = { kind: 'Inline', volumePolicies: spec.resourcePolicy.volumePolicies as VolumePolicy[] };
  } else if (spec.resourcePolicy?.name) {
    resourcePolicy = { kind: 'ConfigMap', name: spec.resourcePolicy.name };
  }
  return {
    ...selection,
    defaultVolumesToFsBackup: spec.defaultVolumesToFsBackup ?? defaults.defaultVolumesToFsBackup ?? false,
    hooks: {
      resources: (spec.hooks?.resources ?? []).map((hookSpec) => ({
        ...toHookSetScope(hookSpec),
        pre: (hookSpec.pre ?? []).map(toHookExec),
        post: (hookSpec.post ?? []).map(toHookExec),
      })),
      ...(spec.hooks?.backup
        ? {
            backup: {
              pre: (spec.hooks.backup.pre ?? []).map((h, i) => toBackupLevelHook(h, 'pre', i)),
              post: (spec.hooks.backup.post ?? []).map((h, i) => toBackupLevelHook(h, 'post', i)),
            },
          }
        : {}),
    },
    resourcePolicy,
    ...Object.fromEntries(
      SCOPED_FILTER_FIELDS.filter((field) => nonEmptyList(spec[field])).map((field) => [field, [...(spec[field] ?? [])]]),
    ),
    fsBackupTimeoutMs: durationOr(spec.fsBackupTimeout, defaults.fsBackupTimeoutMs ?? DEFAULT_FS_BACKUP_TIMEOUT_MS),
    snapshotVolumes: spec.snapshotVolumes ?? false,
    snapshotMoveData: spec.snapshotMoveData ?? false,
    csiSnapshotTimeoutMs: durationOr(spec.csiSnapshotTimeout, DEFAULT_CSI_SNAPSHOT_TIMEOUT_MS),
    ttlMs: durationOr(spec.ttl, defaults.ttlMs ?? DEFAULT_TTL_MS),
    storageLocation: spec.storageLocation ?? defaults.storageLocation ?? DEFAULT_STORAGE_LOCATION,
  };
}

/**
 * Validates a backup request `{name?, spec}` (untrusted JSON). On success returns the spec with
 * defaults applied (durations in ms); otherwise every problem at once.
 */
export function validateBackupRequest(request: unknown, defaults: BackupSpecDefaults = {}): BackupRequestValidation {
  // The backup's own labels and annotations sit beside name and spec; the spec validator sees {name, spec}.
  const { labels, annotations, ...rest } = isRecord(request) ? request : { labels: undefined, annotations: undefined };
  const metadataProblems = [...stringMapProblems('labels', labels, true), ...stringMapProblems('annotations', annotations, false)];
  const validated = validateRequest(isRecord(request) ? rest : request, backupRequestInput, {
    unsupportedSpecFields: UNSUPPORTED_VELERO_FIELDS,
    hookSetProblems: phaseOnlyHookFields,
    specProblems: crossFieldProblems,
    toSpec: (spec, selection) => toBackupSpec(spec, selection, defaults),
  });
  if (!validated.ok || metadataProblems.length > 0)
    return { ok: false, problems: tidy([...(validated.ok ? [] : validated.problems), ...metadataProblems]) };
  return {
    ...validated,
    metadata: {
      labels: { ...(labels as Record<string, string> | undefined) },
      annotations: { ...(annotations as Record<string, string> | undefined) },
    },
  };
}

/** Kubernetes' bound on all annotations of one object together (keys and values). */
export const MAX_ANNOTATIONS_BYTES = 256 * 1024;

/** A request's `labels` (keys and values as Kubernetes labels) or `annotations` (label keys, any values, 256 KiB in all). */
function stringMapProblems(field: 'labels' | 'annotations', value: unknown, valuesAreLabels: boolean): ValidationProblem[] {
  if (value === undefined) return [];
  if (!isRecord(value)) return [{ path: field, message: 'must be an object of string keys and string values' }];
  const problems: ValidationProblem[] = [];
  const utf8 = new TextEncoder();
  let bytes = 0;
  for (const [key, v] of Object.entries(value)) {
    const path = `${field}${/^[A-Za-z_$][\w$]*$/.test(key) ? `.${key}` : `[${JSON.stringify(key)}]`}`;
    if (typeof v !== 'string') {
      problems.push({ path, message: 'must be a string' });
      continue;
    }
    const keyProblem = explainLabelKey(key);
    if (keyProblem) problems.push({ path, message: keyProblem });
    const valueProblem = valuesAreLabels ? explainLabelValue(v) : undefined;
    if (valueProblem) problems.push({ path, message: valueProblem });
    bytes += utf8.encode(key).length + utf8.encode(v).length;
  }
  if (!valuesAreLabels && bytes > MAX_ANNOTATIONS_BYTES)
    problems.push({ path: field, message: `annotations are ${bytes} bytes together; at most ${MAX_ANNOTATIONS_BYTES} (as in Kubernetes)` });
  return problems;
}

/** The backup spec's schema (Velero field names), for what is generated from it: the CRDs' OpenAPI schemas. */
export const backupSpecSchema = backupRequestInput.shape.spec;
