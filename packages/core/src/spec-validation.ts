/*
 * What every spec schema (backup, restore, schedule template, resource policy) shares: strict
 * objects whose unknown fields get a helpful message, Velero's name and duration rules, the
 * selection shape and its cross-field rules, and the conversion of zod issues into problems with
 * a JSON path. Internal to core: the schema modules export what callers use.
 */
import { z } from 'zod';
import { formatDuration, parseDuration } from './duration.js';
import { namespacePatternProblems } from './glob.js';
import { checkLabelSelector, type LabelSelector } from './label-selector.js';
import { explainDns1123Label } from './names.js';

export interface ValidationProblem {
  /** JSON path, e.g. `spec.hooks.resources[0].pre[0].exec.command`. */
  path: string;
  message: string;
}

const UNKNOWN_KEYS_MARK = '\u0000allowed:';

/** A strict object whose unknown-field issue remembers the allowed fields, for a helpful message. */
export function strictObject<S extends z.ZodRawShape>(shape: S, what: string) {
  const allowed = Object.keys(shape).join(',');
  return z.strictObject(shape, {
    error: (issue) => {
      if (issue.code === 'unrecognized_keys') return `${UNKNOWN_KEYS_MARK}${allowed}`;
      return issue.input === undefined ? `is required (${what})` : `must be an object (${what})`;
    },
  });
}

/** A DNS-1123 label (a namespace, a backup name), its problems named after `what`. */
export function dns1123Label(what: string, opts: { required?: string; suffix?: string } = {}) {
  const base = opts.required === undefined ? z.string() : z.string({ error: opts.required });
  return base.superRefine((value, ctx) => {
    const problems = explainDns1123Label(value);
    if (problems.length > 0) {
      ctx.addIssue({ code: 'custom', message: `${what} ${JSON.stringify(value)} ${problems.join('; ')}${opts.suffix ?? ''}` });
    }
  });
}

/** The optional `name` of a backup or restore request: a DNS-1123 label, its problems named. */
export function requestNameSchema(kind: 'backup' | 'restore') {
  return dns1123Label(`${kind} name`, { suffix: ' (names are DNS-1123 labels)' }).optional();
}

/** A request `{name?, spec}` of the given kind: its spec is the selection (Velero's names) and the kind's own `fields`. */
export function requestSchema<S extends z.ZodRawShape>(kind: 'backup' | 'restore', fields: S) {
  const spec = strictObject({ ...selectionShape(kind === 'backup' ? 'backed up' : 'restored'), ...fields }, `the ${kind} spec`);
  return strictObject({ name: requestNameSchema(kind), spec }, `a ${kind} request: {name, spec}`);
}

export const namespacePattern = z.string().superRefine((value, ctx) => {
  if (value === '*') return;
  for (const message of namespacePatternProblems(value, explainDns1123Label)) ctx.addIssue({ code: 'custom', message });
});

const RESOURCE_NAME = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;
export const resourceName = z.string().superRefine((value, ctx) => {
  if (value === '*' || RESOURCE_NAME.test(value)) return;
  const hint = /[A-Z]/.test(value) ? ' (resource names are lowercase)' : '';
  ctx.addIssue({
    code: 'custom',
    message: `${JSON.stringify(value)} is not a resource name${hint}; use the plural resource with its group, e.g. "pods", "persistentvolumeclaims", "deployments.apps", or "*"`,
  });
});

export const durationString = (what: string, opts: { min: number; max?: number }) =>
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

/** A validated duration in ms; absent or 0 = the fallback (as in Velero), unless 0 is a value of its own. */
export function durationOr(text: string | undefined, fallbackMs: number, zeroAllowed = false): number {
  if (text === undefined) return fallbackMs;
  const parsed = parseDuration(text);
  if (parsed.ok && zeroAllowed && parsed.ms === 0) return 0;
  return parsed.ok && parsed.ms > 0 ? parsed.ms : fallbackMs;
}

export const labelSelectorInput = z.unknown().superRefine((value, ctx) => {
  for (const problem of checkLabelSelector(value, [])) ctx.addIssue({ code: 'custom', message: problem.message, path: problem.path });
});

export const containerName = z.string().superRefine((value, ctx) => {
  const problems = explainDns1123Label(value);
  if (problems.length > 0) ctx.addIssue({ code: 'custom', message: `container name ${JSON.stringify(value)} ${problems.join('; ')}` });
});

/** A hook's argv: the program first, never empty. */
export const hookCommand = z.array(z.string(), { error: 'must be a non-empty array of strings' }).superRefine((command, ctx) => {
  if (command.length === 0) ctx.addIssue({ code: 'custom', message: 'must be a non-empty array of strings' });
  else if (command[0] === '')
    ctx.addIssue({ code: 'custom', message: 'the first element (the program to run) must not be empty', path: [0] });
});

/** Namespace and resource filters, Velero's names: a spec's selection and a hook set's scope alike. */
const namespaceResourceFilters = {
  includedNamespaces: z.array(namespacePattern).optional(),
  excludedNamespaces: z.array(namespacePattern).optional(),
  includedResources: z.array(resourceName).optional(),
  excludedResources: z.array(resourceName).optional(),
};

/** A hook set's name and the pods it applies to (Velero's `hooks.resources[]`, backups and restores alike). */
export const hookSetScopeShape = {
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

/** What a validated spec selects (backups and restores alike), every default applied. */
export interface SpecSelection {
  /** Empty = all namespaces (same as `['*']`); a restore matches the backed-up namespace. */
  includedNamespaces: string[];
  excludedNamespaces: string[];
  /** Empty = all resources (same as `['*']`). */
  includedResources: string[];
  excludedResources: string[];
  /** null = auto: cluster-scoped items are included only when every namespace is. */
  includeClusterResources: boolean | null;
  labelSelector: LabelSelector | null;
  orLabelSelectors: LabelSelector[];
}

/** A validated hook set's name and the pods it applies to. */
export interface HookSetScope {
  name: string;
  includedNamespaces: string[];
  excludedNamespaces: string[];
  includedResources: string[];
  excludedResources: string[];
  labelSelector: LabelSelector | null;
}

type SelectionInput = {
  includedNamespaces?: string[];
  excludedNamespaces?: string[];
  includedResources?: string[];
  excludedResources?: string[];
  includeClusterResources?: boolean | null;
  labelSelector?: unknown;
  orLabelSelectors?: unknown[];
};

/** A parsed selection with its defaults: empty lists, no selector, cluster resources automatic. */
function toSelection(spec: SelectionInput): SpecSelection {
  return {
    includedNamespaces: spec.includedNamespaces ?? [],
    excludedNamespaces: spec.excludedNamespaces ?? [],
    includedResources: spec.includedResources ?? [],
    excludedResources: spec.excludedResources ?? [],
    includeClusterResources: spec.includeClusterResources ?? null,
    labelSelector: (spec.labelSelector as LabelSelector | null | undefined) ?? null,
    orLabelSelectors: (spec.orLabelSelectors ?? []) as LabelSelector[],
  };
}

/** A parsed hook set's name and scope with its defaults. */
export function toHookSetScope(
  hookSet: Omit<SelectionInput, 'includeClusterResources' | 'orLabelSelectors'> & { name: string },
): HookSetScope {
  return {
    name: hookSet.name,
    includedNamespaces: hookSet.includedNamespaces ?? [],
    excludedNamespaces: hookSet.excludedNamespaces ?? [],
    includedResources: hookSet.includedResources ?? [],
    excludedResources: hookSet.excludedResources ?? [],
    labelSelector: (hookSet.labelSelector as LabelSelector | undefined) ?? null,
  };
}

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

function unknownFieldMessage(key: string, allowed: string[], unsupported: string | undefined): string {
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

/**
 * Turns zod issues into problems: one per unknown key, plain-language type messages. An unknown
 * field directly under `spec` that Velero has gets its reason from `unsupportedSpecFields`.
 */
export function toProblems(
  issues: readonly z.core.$ZodIssue[],
  unsupportedSpecFields: Readonly<Record<string, string>> = {},
): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  for (const issue of issues) {
    if (issue.code === 'unrecognized_keys' && issue.message.startsWith(UNKNOWN_KEYS_MARK)) {
      const allowed = issue.message.slice(UNKNOWN_KEYS_MARK.length).split(',');
      const atSpecLevel = issue.path.length === 1 && issue.path[0] === 'spec';
      for (const key of issue.keys) {
        const unsupported = atSpecLevel && Object.hasOwn(unsupportedSpecFields, key) ? unsupportedSpecFields[key] : undefined;
        problems.push({ path: formatPath([...issue.path, key]), message: unknownFieldMessage(key, allowed, unsupported) });
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
export const messageFor: z.core.$ZodErrorMap = (issue) => {
  if (issue.code === 'invalid_type') {
    if (issue.input === undefined) return 'is required';
    return `must be ${EXPECTED_WORDS[issue.expected] ?? issue.expected} (got ${describeType(issue.input)})`;
  }
  if (issue.code === 'too_small' && issue.origin === 'string') return 'must not be empty';
  if (issue.code === 'too_small' && issue.origin === 'array') return 'must not be empty';
  return undefined;
};

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

export const nonEmptyList = (value: unknown): value is string[] => Array.isArray(value) && value.length > 0;

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

function includesExcludesProblems(scope: Record<string, unknown>, path: string): ValidationProblem[] {
  return [
    ...checkIncludesExcludes(scope.includedNamespaces, scope.excludedNamespaces, path, 'Namespaces'),
    ...checkIncludesExcludes(scope.includedResources, scope.excludedResources, path, 'Resources'),
  ];
}

/**
 * The selection rules zod cannot express per field, for backups and restores alike: labelSelector
 * or orLabelSelectors, and Velero's include/exclude rules on the spec and on each hook set in
 * `spec.hooks.resources[]`. `hookSetProblems` adds a spec kind's own rules for each hook set.
 * Runs on the raw spec so it reports whatever else is wrong.
 */
function selectionProblems(
  spec: Record<string, unknown>,
  hookSetProblems: (hookSet: Record<string, unknown>, path: string) => ValidationProblem[],
): ValidationProblem[] {
  const problems: ValidationProblem[] = [];
  const hasSelector = spec.labelSelector !== undefined && spec.labelSelector !== null;
  if (hasSelector && Array.isArray(spec.orLabelSelectors) && spec.orLabelSelectors.length > 0) {
    problems.push({ path: 'spec.orLabelSelectors', message: 'set either labelSelector or orLabelSelectors, not both (as in Velero)' });
  }
  problems.push(...includesExcludesProblems(spec, 'spec'));
  if (isRecord(spec.hooks) && Array.isArray(spec.hooks.resources)) {
    spec.hooks.resources.forEach((hookSet, index) => {
      if (!isRecord(hookSet)) return;
      const path = `spec.hooks.resources[${index}]`;
      problems.push(...includesExcludesProblems(hookSet, path), ...hookSetProblems(hookSet, path));
    });
  }
  return problems;
}

export type RequestValidation<T> = { ok: true; name: string | null; value: T } | { ok: false; problems: ValidationProblem[] };

/**
 * Validates a request `{name?, spec}` (untrusted JSON, `schema` from requestSchema): every field by
 * the schema, then the cross-field rules on the raw spec, so they run whatever else is wrong — the
 * selection's (with the kind's `hookSetProblems` per hook set) and the kind's own `specProblems`.
 * On success the parsed spec and its selection (defaults applied) through `toSpec`; otherwise
 * every problem at once.
 */
export function validateRequest<I extends SelectionInput, T>(
  request: unknown,
  schema: z.ZodType<{ name?: string | undefined; spec: I }>,
  rules: {
    /** Velero fields Stowage knows but does not take, with the reason the user hears. */
    unsupportedSpecFields: Readonly<Record<string, string>>;
    hookSetProblems: (hookSet: Record<string, unknown>, path: string) => ValidationProblem[];
    specProblems: (spec: Record<string, unknown>) => ValidationProblem[];
    toSpec: (spec: I, selection: SpecSelection) => T;
  },
): RequestValidation<T> {
  const parsed = schema.safeParse(request, { error: messageFor });
  const rawSpec = isRecord(request) && isRecord(request.spec) ? request.spec : undefined;
  const problems = [
    ...(parsed.success ? [] : toProblems(parsed.error.issues, rules.unsupportedSpecFields)),
    ...(rawSpec ? [...selectionProblems(rawSpec, rules.hookSetProblems), ...rules.specProblems(rawSpec)] : []),
  ];
  if (!parsed.success || problems.length > 0) return { ok: false, problems: tidy(problems) };
  return { ok: true, name: parsed.data.name ?? null, value: rules.toSpec(parsed.data.spec, toSelection(parsed.data.spec)) };
}

/** Problems sorted by path so the report reads top-down and is stable; duplicates dropped. */
export function tidy(problems: ValidationProblem[]): ValidationProblem[] {
  const seen = new Set<string>();
  const unique = problems.filter((problem) => {
    const key = `${problem.path}\u0000${problem.message}`;
    if (seen.has(key)) return false;
    seen.add(key);
    return true;
  });
  return unique.sort((a, b) => (a.path < b.path ? -1 : a.path > b.path ? 1 : 0));
}
