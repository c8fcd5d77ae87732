/*
 * The backup request: Velero's field names, validated strictly (unknown fields rejected), every
 * problem reported at once with its JSON path and a reason a person can act on.
 */
import { z } from 'zod';
import { formatDuration, parseDuration } from './duration.js';
import { namespacePatternProblems } from './glob.js';
import { checkLabelSelector, explainLabelKey, explainLabelValue, type LabelSelector } from './label-selector.js';
import { explainDns1123Label } from './names.js';
import { canonicalResourceEntry } from './resource-selection.js';
import { parseCapacityRange, VOLUME_POLICY_ACTIONS, VOLUME_TYPES, type VolumePolicy } from './volume-policy.js';

/** `FailBlock` (pre hooks only): the whole ItemBlock is skipped when the hook fails. */
export type HookOnError = 'Continue' | 'Fail' | 'FailBlock';
/** When a post hook runs, from its block's PVBs: always, only if all completed, only if one did not. */
export type HookExecutionPolicy = 'Always' | 'OnSuccess' | 'OnFailure';

/** A failed hook is run again up to `max` more times, `backoffMs` apart (every try recorded). */
export interface HookRetries {
  max: number;
  backoffMs: number;
}

export interface BackupHookExec {
  /** null = the pod's first container. */
  container: string | null;
  command: string[];
  onError: HookOnError;
  timeoutMs: number;
  /** Absent = no retry (specs stored before retries existed read the same). */
  retries?: HookRetries;
  /** Post hooks only; absent = Always. */
  executionPolicy?: HookExecutionPolicy;
}

/**
 * A backup-level hook (`spec.hooks.backup.pre[]`/`.post[]`): one exec in the Running pods of
 * `namespace` matching `labelSelector` (all of them, or the first by name with `mode: one`), run
 * once before the first block starts (pre) or once after every block ended (post).
 */
export interface BackupLevelHook {
  name: string;
  namespace: string;
  labelSelector: LabelSelector | null;
  /** null = each pod's first container. */
  container: string | null;
  mode: 'all' | 'one';
  command: string[];
  onError: 'Continue' | 'Fail';
  timeoutMs: number;
  retries?: HookRetries;
}

export interface BackupResourceHookSpec {
  name: string;
  includedNamespaces: string[];
  excludedNamespaces: string[];
  includedResources: string[];
  excludedResources: string[];
  labelSelector: LabelSelector | null;
  pre: { exec: BackupHookExec }[];
  post: { exec: BackupHookExec }[];
}

export type ResourcePolicyRef =
  | { kind: 'Inline'; volumePolicies: VolumePolicy[] }
  /** A ConfigMap in Stowage's namespace; the caller loads and validates it (`validateResourcePolicyDocument`). */
  | { kind: 'ConfigMap'; name: string };

/** A validated backup spec with every default applied and durations in milliseconds. */
export interface BackupSpec {
  /** Empty = all namespaces (same as `['*']`). */
  includedNamespaces: string[];
  excludedNamespaces: string[];
  /** Empty = all resources (same as `['*']`). */
  includedResources: string[];
  excludedResources: string[];
  /** null = auto: cluster-scoped items are listed only when the backup covers all namespaces. */
  includeClusterResources: boolean | null;
  labelSelector: LabelSelector | null;
  orLabelSelectors: LabelSelector[];
  defaultVolumesToFsBackup: boolean;
  /** `backup` is optional so specs stored before backup-level hooks still read. */
  hooks: { resources: BackupResourceHookSpec[]; backup?: { pre: BackupLevelHook[]; post: BackupLevelHook[] } };
  resourcePolicy: ResourcePolicyRef | null;
  /**
   * Velero's scoped resource filters (its "new" filters; see resource-selection.ts). Absent or
   * empty = not used; they cannot be mixed with includedResources, excludedResources or
   * includeClusterResources. Optional, so specs stored before them still read.
   */
  includedClusterScopedResources?: string[];
  excludedClusterScopedResources?: string[];
  includedNamespaceScopedResources?: string[];
  excludedNamespaceScopedResources?: string[];
  fsBackupTimeoutMs: number;
  ttlMs: number;
  storageLocation: string;
}

export interface ValidationProblem {
  /** JSON path, e.g. `spec.hooks.resources[0].pre[0].exec.command`. */
  path: string;
  message: string;
}

export type BackupRequestValidation = { ok: true; name: string | null; value: BackupSpec } | { ok: false; problems: ValidationProblem[] };

/** Server-side defaults (Velero's server flags); each has Velero's default when not given. */
export interface BackupSpecDefaults {
  defaultVolumesToFsBackup?: boolean;
  fsBackupTimeoutMs?: number;
  ttlMs?: number;
  storageLocation?: string;
}

export const DEFAULT_FS_BACKUP_TIMEOUT_MS = 4 * 3_600_000;
export const DEFAULT_TTL_MS = 720 * 3_600_000;
export const DEFAULT_STORAGE_LOCATION = 'default';
export const DEFAULT_HOOK_TIMEOUT_MS = 30_000;
/** Velero (main, #10125) caps a hook's timeout at 4 h. */
export const MAX_HOOK_TIMEOUT_MS = 4 * 3_600_000;
/** Retries of one hook: a few, not a loop that outlives the backup. */
export const MAX_HOOK_RETRIES = 10;
export const MAX_HOOK_RETRY_BACKOFF_MS = 10 * 60_000;
export const DEFAULT_HOOK_RETRY_BACKOFF_MS = 1_000;

/** Velero spec fields Stowage knows but does not support, so the user hears why, not just "unknown". */
const UNSUPPORTED_VELERO_FIELDS: Record<string, string> = {
  snapshotVolumes: 'Stowage backs up volume data with fs-backup only; native snapshots are not supported',
  volumeSnapshotLocations: 'Stowage backs up volume data with fs-backup only; native snapshots are not supported',
  snapshotMoveData: 'Stowage has no CSI data mover',
  datamover: 'Stowage has no CSI data mover',
  csiSnapshotTimeout: 'Stowage does not take CSI snapshots',
  itemOperationTimeout: 'Stowage has no asynchronous item operations',
  orderedResources: 'not supported; items are grouped into ItemBlocks instead',
  defaultVolumesToRestic: 'use defaultVolumesToFsBackup',
  uploaderConfig: 'not supported',
  volumeGroupSnapshotLabelKey: 'not supported',
  metadata: 'put the backup name in the top-level "name" field',
};

const UNKNOWN_KEYS_MARK = '\u0000allowed:';

/** A strict object whose unknown-field issue remembers the allowed fields, for a helpful message. */
function strictObject<S extends z.ZodRawShape>(shape: S, what: string) {
  const allowed = Object.keys(shape).join(',');
  return z.strictObject(shape, {
    error: (issue) => {
      if (issue.code === 'unrecognized_keys') return `${UNKNOWN_KEYS_MARK}${allowed}`;
      return issue.input === undefined ? `is required (${what})` : `must be an object (${what})`;
    },
  });
}

const namespacePattern = z.string().superRefine((value, ctx) => {
  if (value === '*') return;
  for (const message of namespacePatternProblems(value, explainDns1123Label)) ctx.addIssue({ code: 'custom', message });
});

const RESOURCE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
const resourceName = z.string().superRefine((value, ctx) => {
  if (value === '*' || RESOURCE_NAME.test(value)) return;
  const hint = /[A-Z]/.test(value) ? ' (resource names are lowercase)' : '';
  ctx.addIssue({
    code: 'custom',
    message: `${JSON.stringify(value)} is not a resource name${hint}; use the plural resource with its group, e.g. "pods", "persistentvolumeclaims", "deployments.apps", or "*"`,
  });
});

const durationString = (what: string, opts: { min: number; max?: number }) =>
  z.string().superRefine((value, ctx) => {
    const parsed = parseDuration(value);
    if (!parsed.ok) {
      ctx.addIssue({ code: 'custom', message: parsed.message });
    } else if (parsed.ms < opts.min) {
      ctx.addIssue({ code: 'custom', message: `${what} must be at least ${formatDuration(opts.min)} (got ${JSON.stringify(value)})` });
    } else if (opts.max !== undefined && parsed.ms > opts.max) {
      ctx.addIssue({ code: 'custom', message: `${what} must be at most ${formatDuration(opts.max)} (got ${JSON.stringify(value)})` });
    }
  });

const labelSelectorInput = z.unknown().superRefine((value, ctx) => {
  for (const problem of checkLabelSelector(value, [])) ctx.addIssue({ code: 'custom', message: problem.message, path: problem.path });
});

const labelMap = z.record(z.string(), z.string()).superRefine((labels, ctx) => {
  for (const [key, value] of Object.entries(labels)) {
    const keyProblem = explainLabelKey(key);
    if (keyProblem) ctx.addIssue({ code: 'custom', message: keyProblem, path: [key] });
    const valueProblem = explainLabelValue(value);
    if (valueProblem) ctx.addIssue({ code: 'custom', message: valueProblem, path: [key] });
  }
});

const containerName = z.string().superRefine((value, ctx) => {
  const problems = explainDns1123Label(value);
  if (problems.length > 0) ctx.addIssue({ code: 'custom', message: `container name ${JSON.stringify(value)} ${problems.join('; ')}` });
});

const hookCommand = z.array(z.string(), { error: 'must be a non-empty array of strings' }).superRefine((command, ctx) => {
  if (command.length === 0) ctx.addIssue({ code: 'custom', message: 'must be a non-empty array of strings' });
  else if (command[0] === '')
    ctx.addIssue({ code: 'custom', message: 'the first element (the program to run) must not be empty', path: [0] });
});

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
    namespace: z.string({ error: 'is required: the namespace of the pods the hook runs in' }).superRefine((value, ctx) => {
      const problems = explainDns1123Label(value);
      if (problems.length > 0) ctx.addIssue({ code: 'custom', message: `namespace ${JSON.stringify(value)} ${problems.join('; ')}` });
    }),
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

/** Namespace and resource filters, Velero's names: a spec's selection and a hook set's scope alike. */
const namespaceResourceFilters = {
  includedNamespaces: z.array(namespacePattern).optional(),
  excludedNamespaces: z.array(namespacePattern).optional(),
  includedResources: z.array(resourceName).optional(),
  excludedResources: z.array(resourceName).optional(),
};

/** A hook set's name and the pods it applies to (Velero's `hooks.resources[]`, backups and restores alike). */
const hookSetScopeShape = {
  name: z.string({ error: 'is required: a name for this hook set, shown in hook results' }).min(1, 'must not be empty'),
  ...namespaceResourceFilters,
  labelSelector: labelSelectorInput.optional(),
};

/** What a spec selects, with Velero's field names (backups and restores alike); `verb` ends includeClusterResources' message. */
function selectionShape(verb: string) {
  return {
    ...namespaceResourceFilters,
    includeClusterResources: z
      .boolean({ error: `must be true, false or null (null = only when all namespaces are ${verb})` })
      .nullable()
      .optional(),
    labelSelector: labelSelectorInput.nullable().optional(),
    orLabelSelectors: z.array(labelSelectorInput).optional(),
  };
}

const resourceHookInput = strictObject(
  {
    ...hookSetScopeShape,
    pre: z.array(hookInput).optional(),
    post: z.array(hookInput).optional(),
  },
  'a hook spec',
);

const csiCondition = strictObject(
  { driver: z.string().min(1).optional(), volumeAttributes: z.record(z.string(), z.string()).optional() },
  'csi: {driver, volumeAttributes}',
);

export const volumePolicyInputSchema = strictObject(
  {
    conditions: strictObject(
      {
        capacity: z
          .string()
          .superRefine((value, ctx) => {
            const parsed = parseCapacityRange(value);
            if (!parsed.ok) ctx.addIssue({ code: 'custom', message: parsed.message });
          })
          .optional(),
        storageClass: z.array(z.string()).optional(),
        nfs: strictObject({ server: z.string().optional(), path: z.string().optional() }, 'nfs: {server, path}').optional(),
        csi: csiCondition.optional(),
        volumeTypes: z
          .array(
            z.enum(VOLUME_TYPES, {
              error: (issue) => `${JSON.stringify(issue.input)} is not a volume type; use one of ${VOLUME_TYPES.join(', ')}`,
            }),
          )
          .optional(),
        pvcLabels: labelMap.optional(),
        pvcPhase: z
          .array(
            z.enum(['Pending', 'Bound', 'Lost'], {
              error: (issue) => `must be Pending, Bound or Lost (got ${JSON.stringify(issue.input)})`,
            }),
          )
          .optional(),
      },
      'conditions',
    ),
    action: strictObject(
      {
        type: z.enum(VOLUME_POLICY_ACTIONS, {
          error: (issue) => `must be one of ${VOLUME_POLICY_ACTIONS.join(', ')} (got ${JSON.stringify(issue.input)})`,
        }),
        parameters: z.record(z.string(), z.unknown()).optional(),
      },
      'action: {type, parameters}',
    ),
  },
  'a volume policy: {conditions, action}',
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

const backupSpecInput = strictObject(
  {
    ...selectionShape('backed up'),
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
    ttl: durationString('ttl', { min: 0 }).optional(),
    storageLocation: z
      .string()
      .regex(/^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$/, 'must be a backup storage location name (lowercase letters, digits, "-" and ".")')
      .optional(),
  },
  'the backup spec',
);

/** The optional `name` of a backup or restore request: a DNS-1123 label, its problems named. */
export function requestNameSchema(kind: 'backup' | 'restore') {
  return z
    .string()
    .superRefine((name, ctx) => {
      const problems = explainDns1123Label(name);
      if (problems.length > 0) {
        ctx.addIssue({
          code: 'custom',
          message: `${kind} name ${JSON.stringify(name)} ${problems.join('; ')} (names are DNS-1123 labels)`,
        });
      }
    })
    .optional();
}

const backupRequestInput = strictObject(
  {
    name: requestNameSchema('backup'),
    spec: backupSpecInput,
  },
  'a backup request: {name, spec}',
);

type BackupSpecInput = z.infer<typeof backupSpecInput>;

/** `spec.hooks.resources[0].pre[0]` from zod's path segments; odd keys in brackets. */
export function formatPath(segments: readonly PropertyKey[]): string {
  let out = '';
  for (const segment of segments) {
    if (typeof segment === 'number') out += `[${segment}]`;
    else if (typeof segment === 'string' && /^[A-Za-z_$][\w$]*$/.test(segment)) out += out ? `.${segment}` : segment;
    else out += `[${JSON.stringify(String(segment))}]`;
  }
  return out;
}

function editDistance(a: string, b: string): number {
  const row = Array.from({ length: b.length + 1 }, (_, j) => j);
  for (let i = 1; i <= a.length; i++) {
    let previous = row[0] ?? 0;
    row[0] = i;
    for (let j = 1; j <= b.length; j++) {
      const current = row[j] ?? 0;
      row[j] = Math.min((row[j] ?? 0) + 1, (row[j - 1] ?? 0) + 1, previous + (a[i - 1]?.toLowerCase() === b[j - 1]?.toLowerCase() ? 0 : 1));
      previous = current;
    }
  }
  return row[b.length] ?? 0;
}

function unknownFieldMessage(key: string, allowed: string[], atSpecLevel: boolean): string {
  const unsupported = atSpecLevel ? UNSUPPORTED_VELERO_FIELDS[key] : undefined;
  if (unsupported) return `unknown field: ${unsupported}`;
  const suggestion = allowed
    .map((candidate) => ({ candidate, distance: editDistance(key, candidate) }))
    .filter(({ distance }) => distance <= Math.max(2, Math.floor(key.length / 4)))
    .sort((x, y) => x.distance - y.distance)[0];
  const hint = suggestion ? `did you mean ${JSON.stringify(suggestion.candidate)}? ` : '';
  return `unknown field; ${hint}allowed here: ${allowed.join(', ')}`;
}

function describeType(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'an array';
  return typeof value === 'object' ? 'an object' : `${typeof value} ${JSON.stringify(value)}`;
}

/** Turns zod issues into problems: one per unknown key, plain-language type messages. */
function toProblems(issues: readonly z.core.$ZodIssue[]): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys' && issue.message.startsWith(UNKNOWN_KEYS_MARK)) {
      const allowed = issue.message.slice(UNKNOWN_KEYS_MARK.length).split(',');
      const atSpecLevel = issue.path.length === 1 && issue.path[0] === 'spec';
      for (const key of issue.keys) {
        problems.push({ path: formatPath([...issue.path, key]), message: unknownFieldMessage(key, allowed, atSpecLevel) });
      }
      continue;
    }
    problems.push({ path: formatPath(issue.path), message: issue.message });
  }
  return problems;
}

const EXPECTED_WORDS: Record<string, string> = {
  string: 'a string',
  number: 'a number',
  boolean: 'true or false',
  array: 'an array',
  object: 'an object',
  record: 'an object',
};

/** Per-parse messages for the structural issues zod raises itself. */
const messageFor: z.core.$ZodErrorMap = (issue) => {
  if (issue.code === 'invalid_type') {
    if (issue.input === undefined) return 'is required';
    return `must be ${EXPECTED_WORDS[issue.expected] ?? issue.expected} (got ${describeType(issue.input)})`;
  }
  if (issue.code === 'too_small' && issue.origin === 'string') return 'must not be empty';
  if (issue.code === 'too_small' && issue.origin === 'array') return 'must not be empty';
  return undefined;
};

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Velero's `ValidateIncludesExcludes` rules, on raw input so they run whatever else is wrong. */
function checkIncludesExcludes(includes: unknown, excludes: unknown, path: string, what: string): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  const inc = Array.isArray(includes) ? includes.filter((v): v is string => typeof v === 'string') : [];
  const exc = Array.isArray(excludes) ? excludes.filter((v): v is string => typeof v === 'string') : [];
  if (inc.includes('*') && inc.length > 1) {
    problems.push({
      path: `${path}.included${what}`,
      message: `"*" already means all ${what.toLowerCase()}; list either "*" alone or specific names`,
    });
  }
  if (exc.includes('*')) {
    problems.push({ path: `${path}.excluded${what}`, message: `cannot contain "*" (that would exclude all ${what.toLowerCase()})` });
  }
  for (const value of exc) {
    if (value !== '*' && inc.includes(value)) {
      problems.push({
        path: `${path}.excluded${what}`,
        message: `${JSON.stringify(value)} is both included and excluded; remove it from one list`,
      });
    }
  }
  return problems;
}

function crossFieldProblems(request: unknown): ValidationProblem[] {
  if (!isRecord(request) || !isRecord(request.spec)) return [];
  const spec = request.spec;
  const problems: ValidationProblem[] = [];
  const hasSelector = spec.labelSelector !== undefined && spec.labelSelector !== null;
  if (hasSelector && Array.isArray(spec.orLabelSelectors) && spec.orLabelSelectors.length > 0) {
    problems.push({ path: 'spec.orLabelSelectors', message: 'set either labelSelector or orLabelSelectors, not both (as in Velero)' });
  }
  problems.push(...checkIncludesExcludes(spec.includedNamespaces, spec.excludedNamespaces, 'spec', 'Namespaces'));
  problems.push(...checkIncludesExcludes(spec.includedResources, spec.excludedResources, 'spec', 'Resources'));
  problems.push(...scopedFilterProblems(spec));
  if (isRecord(spec.hooks) && Array.isArray(spec.hooks.resources)) {
    spec.hooks.resources.forEach((hookSpec, index) => {
      if (!isRecord(hookSpec)) return;
      const path = `spec.hooks.resources[${index}]`;
      problems.push(...checkIncludesExcludes(hookSpec.includedNamespaces, hookSpec.excludedNamespaces, path, 'Namespaces'));
      problems.push(...checkIncludesExcludes(hookSpec.includedResources, hookSpec.excludedResources, path, 'Resources'));
      problems.push(...phaseOnlyHookFields(hookSpec, path));
    });
  }
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

const SCOPED_FILTER_FIELDS = [
  'includedClusterScopedResources',
  'excludedClusterScopedResources',
  'includedNamespaceScopedResources',
  'excludedNamespaceScopedResources',
] as const;

const nonEmptyList = (value: unknown): value is string[] => Array.isArray(value) && value.length > 0;

/** True when the spec (raw or validated) uses the old resource filters (Velero's `UseOldResourceFilters`). */
export function usesOldResourceFilters(spec: Record<string, unknown>): boolean {
  return (
    (spec.includeClusterResources !== undefined && spec.includeClusterResources !== null) ||
    nonEmptyList(spec.includedResources) ||
    nonEmptyList(spec.excludedResources)
  );
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

function csiConditionProblems(policies: unknown[], path: string): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  policies.forEach((policy, index) => {
    if (!isRecord(policy) || !isRecord(policy.conditions)) return;
    const csi = policy.conditions.csi;
    if (isRecord(csi) && csi.volumeAttributes !== undefined && csi.driver === undefined) {
      problems.push({
        path: `${path}[${index}].conditions.csi.volumeAttributes`,
        message: 'needs csi.driver too (attributes are matched per driver, as in Velero)',
      });
    }
  });
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

function durationOr(text: string | undefined, fallbackMs: number, zeroAllowed = false): number {
  if (text === undefined) return fallbackMs;
  const parsed = parseDuration(text);
  // 0 means "use the default" (Velero does the same for ttl), unless 0 is a value of its own
  if (parsed.ok && zeroAllowed && parsed.ms === 0) return 0;
  return parsed.ok && parsed.ms > 0 ? parsed.ms : fallbackMs;
}

function toBackupSpec(spec: BackupSpecInput, defaults: BackupSpecDefaults): BackupSpec {
  let resourcePolicy: ResourcePolicyRef | null = null;
  if (spec.resourcePolicy?.volumePolicies) {
    resourcePolicy = { kind: 'Inline', volumePolicies: spec.resourcePolicy.volumePolicies as VolumePolicy[] };
  } else if (spec.resourcePolicy?.name) {
    resourcePolicy = { kind: 'ConfigMap', name: spec.resourcePolicy.name };
  }
  return {
    includedNamespaces: spec.includedNamespaces ?? [],
    excludedNamespaces: spec.excludedNamespaces ?? [],
    includedResources: spec.includedResources ?? [],
    excludedResources: spec.excludedResources ?? [],
    includeClusterResources: spec.includeClusterResources ?? null,
    labelSelector: (spec.labelSelector as LabelSelector | null | undefined) ?? null,
    orLabelSelectors: (spec.orLabelSelectors ?? []) as LabelSelector[],
    defaultVolumesToFsBackup: spec.defaultVolumesToFsBackup ?? defaults.defaultVolumesToFsBackup ?? false,
    hooks: {
      resources: (spec.hooks?.resources ?? []).map((hookSpec) => ({
        name: hookSpec.name,
        includedNamespaces: hookSpec.includedNamespaces ?? [],
        excludedNamespaces: hookSpec.excludedNamespaces ?? [],
        includedResources: hookSpec.includedResources ?? [],
        excludedResources: hookSpec.excludedResources ?? [],
        labelSelector: (hookSpec.labelSelector as LabelSelector | undefined) ?? null,
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
    ttlMs: durationOr(spec.ttl, defaults.ttlMs ?? DEFAULT_TTL_MS),
    storageLocation: spec.storageLocation ?? defaults.storageLocation ?? DEFAULT_STORAGE_LOCATION,
  };
}

/** Problems sorted by path so the report reads top-down and is stable; duplicates dropped. */
function tidy(problems: ValidationProblem[]): ValidationProblem[] {
  const seen = new Set<string>();
  const unique = problems.filter((problem) => {
    const key = `${problem.path}\u0000${problem.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return unique.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}

/**
 * Validates a backup request `{name?, spec}` (untrusted JSON). On success returns the spec with
 * defaults applied (durations in ms); otherwise every problem at once.
 */
export function validateBackupRequest(request: unknown, defaults: BackupSpecDefaults = {}): BackupRequestValidation {
  const parsed = backupRequestInput.safeParse(request, { error: messageFor });
  const problems = [...(parsed.success ? [] : toProblems(parsed.error.issues)), ...crossFieldProblems(request)];
  if (!parsed.success || problems.length > 0) return { ok: false, problems: tidy(problems) };
  return { ok: true, name: parsed.data.name ?? null, value: toBackupSpec(parsed.data.spec, defaults) };
}

export type ResourcePolicyValidation = { ok: true; value: VolumePolicy[] } | { ok: false; problems: ValidationProblem[] };

/** Velero 1.17's `includeExcludePolicy` of a resource-policy document: scoped filters merged into the backup's (spec wins). */
export interface IncludeExcludePolicy {
  includedClusterScopedResources: string[];
  excludedClusterScopedResources: string[];
  includedNamespaceScopedResources: string[];
  excludedNamespaceScopedResources: string[];
}

const policyResourceList = z.array(resourceName).superRefine((list, ctx) => {
  if (list.includes('*')) ctx.addIssue({ code: 'custom', message: 'cannot use "*" in an includeExcludePolicy (as in Velero)' });
});

const includeExcludePolicyInput = strictObject(
  {
    includedClusterScopedResources: policyResourceList.optional(),
    excludedClusterScopedResources: policyResourceList.optional(),
    includedNamespaceScopedResources: policyResourceList.optional(),
    excludedNamespaceScopedResources: policyResourceList.optional(),
  },
  'includeExcludePolicy: {included|excluded}{Cluster|Namespace}ScopedResources',
);

const resourcePolicyDocument = strictObject(
  {
    version: z.literal('v1', { error: (issue) => `must be "v1" (got ${JSON.stringify(issue.input)})` }),
    volumePolicies: z.array(volumePolicyInputSchema).optional(),
    includeExcludePolicy: includeExcludePolicyInput.optional(),
  },
  'a resource policy document: {version: v1, volumePolicies: [...], includeExcludePolicy: {...}}',
);

export type ResourcePoliciesValidation =
  | { ok: true; value: { volumePolicies: VolumePolicy[]; includeExcludePolicy: IncludeExcludePolicy | null } }
  | { ok: false; problems: ValidationProblem[] };

/**
 * Validates a resource-policy document already decoded from the ConfigMap's single YAML key
 * (`{version: v1, volumePolicies: [...], includeExcludePolicy: {...}}`); paths are relative to the document.
 */
export function validateResourcePolicies(document: unknown): ResourcePoliciesValidation {
  const parsed = resourcePolicyDocument.safeParse(document, { error: messageFor });
  const raw = isRecord(document) && Array.isArray(document.volumePolicies) ? document.volumePolicies : [];
  const problems = [...(parsed.success ? [] : toProblems(parsed.error.issues)), ...csiConditionProblems(raw, 'volumePolicies')];
  const policy = parsed.success ? parsed.data.includeExcludePolicy : undefined;
  for (const scope of ['Cluster', 'Namespace'] as const) {
    const excluded = policy?.[`excluded${scope}ScopedResources`] ?? [];
    for (const value of excluded) {
      if ((policy?.[`included${scope}ScopedResources`] ?? []).includes(value)) {
        problems.push({
          path: `includeExcludePolicy.excluded${scope}ScopedResources`,
          message: `${JSON.stringify(value)} is both included and excluded; remove it from one list`,
        });
      }
    }
  }
  if (!parsed.success || problems.length > 0) return { ok: false, problems: tidy(problems) };
  return {
    ok: true,
    value: {
      volumePolicies: (parsed.data.volumePolicies ?? []) as VolumePolicy[],
      includeExcludePolicy: policy
        ? {
            includedClusterScopedResources: policy.includedClusterScopedResources ?? [],
            excludedClusterScopedResources: policy.excludedClusterScopedResources ?? [],
            includedNamespaceScopedResources: policy.includedNamespaceScopedResources ?? [],
            excludedNamespaceScopedResources: policy.excludedNamespaceScopedResources ?? [],
          }
        : null,
    },
  };
}

/** The volume policies of a resource-policy document (see validateResourcePolicies). */
export function validateResourcePolicyDocument(document: unknown): ResourcePolicyValidation {
  const res = validateResourcePolicies(document);
  return res.ok ? { ok: true, value: res.value.volumePolicies } : res;
}

/**
 * Merges a policy's includeExcludePolicy into the backup's scoped filters as Velero's
 * `CombineWithPolicy` does: an entry is added only when the backup's own include and exclude lists
 * of that scope do not already name it (the spec wins). A backup that uses the old filters cannot
 * take an includeExcludePolicy: that is a problem, not a silent choice.
 */
export function applyIncludeExcludePolicy(
  spec: BackupSpec,
  policy: IncludeExcludePolicy,
): { ok: true; value: BackupSpec } | { ok: false; message: string } {
  if (usesOldResourceFilters(spec as unknown as Record<string, unknown>)) {
    return {
      ok: false,
      message:
        'includedResources, excludedResources and includeClusterResources are the old resource filters; they cannot be used with an includeExcludePolicy (as in Velero)',
    };
  }
  const next: BackupSpec = { ...spec };
  for (const scope of ['Namespace', 'Cluster'] as const) {
    const includeField = `included${scope}ScopedResources` as const;
    const excludeField = `excluded${scope}ScopedResources` as const;
    const includes = [...(spec[includeField] ?? [])];
    const excludes = [...(spec[excludeField] ?? [])];
    const names = (list: string[], entry: string) =>
      list.some((e) => e === '*' || canonicalResourceEntry(e) === canonicalResourceEntry(entry));
    const named = (entry: string) => names(includes, entry) || names(excludes, entry);
    for (const entry of policy[excludeField]) if (!named(entry)) excludes.push(entry);
    for (const entry of policy[includeField]) if (!named(entry)) includes.push(entry);
    if (includes.length > 0) next[includeField] = includes;
    if (excludes.length > 0) next[excludeField] = excludes;
  }
  return { ok: true, value: next };
}

/**
 * The building blocks of this schema, shared with the restore spec (`restore/restore-spec.schema.ts`)
 * so both report problems the same way; one export so core's API does not grow by a dozen names.
 */
export const specSchemaParts = {
  strictObject,
  namespacePattern,
  durationString,
  containerName,
  hookSetScopeShape,
  selectionShape,
  toProblems,
  messageFor,
  tidy,
  checkIncludesExcludes,
  isRecord,
};
