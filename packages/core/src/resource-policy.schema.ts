/*
 * Volume policies and resource-policy documents (Velero's `resourcePolicies` ConfigMap, version
 * v1): their validation, and the merge of a document's includeExcludePolicy into a backup's
 * scoped filters. A backup spec carries volume policies inline or names such a ConfigMap.
 */
import { z } from 'zod';
import { type BackupSpec, usesOldResourceFilters } from './backup-spec.js';
import { explainLabelKey, explainLabelValue } from './label-selector.js';
import { canonicalResourceEntry } from './resource-selection.js';
import { isRecord, messageFor, resourceName, strictObject, tidy, toProblems, type ValidationProblem } from './spec-validation.js';
import { parseCapacityRange, VOLUME_POLICY_ACTIONS, VOLUME_TYPES, type VolumePolicy } from './volume-policy.js';

const labelMap = z.record(z.string(), z.string()).superRefine((labels, ctx) => {
  for (const [key, value] of Object.entries(labels)) {
    const keyProblem = explainLabelKey(key);
    if (keyProblem) ctx.addIssue({ code: 'custom', message: keyProblem, path: [key] });
    const valueProblem = explainLabelValue(value);
    if (valueProblem) ctx.addIssue({ code: 'custom', message: valueProblem, path: [key] });
  }
});

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

/** csi.volumeAttributes are matched per driver, so they need csi.driver (raw input, paths under `path`). */
export function csiConditionProblems(policies: unknown[], path: string): ValidationProblem[] {
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
