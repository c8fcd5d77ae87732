/*
 * Bounds on every list and size of a backup, restore or schedule request. A request is JSON from a
 * token holder (soon a tenant): without bounds, a spec naming 100,000 namespaces or 10,000 hooks is
 * accepted and its plan holds the api for minutes. Each bound is checked on the raw request before
 * anything else (a request over one is not worth validating further) and reported as a problem
 * naming the field and the limit. The limits are exported so the CRD schemas can carry them; an
 * operator may raise the few marked configurable (the api's config).
 */
import { DEFAULT_MAX_HOOK_TIMEOUT_MS } from './backup-spec.js';
import { formatDuration, parseDuration } from './duration.js';
import { formatPath, isRecord, type ValidationProblem } from './spec-validation.js';

export interface SpecLimits {
  /** Entries of a namespace list (included/excluded, a hook set's) and of a restore's namespaceMapping. Configurable. */
  namespaces: number;
  /** Entries of a resource list (included/excluded, the scoped ones, a hook set's). Configurable. */
  resources: number;
  /** `orLabelSelectors` entries. */
  orLabelSelectors: number;
  /** Terms of one label selector (matchLabels entries plus matchExpressions), and values of one expression. */
  labelSelectorTerms: number;
  /** Hook sets (`spec.hooks.resources[]`). */
  hookSets: number;
  /** Hooks in one list: a hook set's pre, post or postHooks, the backup-level pre or post, an init hook's containers. */
  hooksPerList: number;
  /** Hooks of a spec in all (every hook set's and the backup-level ones). Configurable. */
  hooks: number;
  /** Bytes of one hook's argv (its command, UTF-8, all elements). */
  argvBytes: number;
  /** Volume policies of an inline resource policy. */
  volumePolicies: number;
  /** Entries of a list or map inside a volume policy (storageClass, volumeTypes, pvcPhase, pvcLabels, volumeAttributes, parameters). */
  policyEntries: number;
  /** The request's own labels and annotations (entries each). */
  metadataEntries: number;
  /** The longest timeout a hook may ask for (exec timeout of backup and restore hooks). Configurable. */
  maxHookTimeoutMs: number;
}

export const DEFAULT_SPEC_LIMITS: Readonly<SpecLimits> = Object.freeze({
  namespaces: 1_000,
  resources: 500,
  orLabelSelectors: 64,
  labelSelectorTerms: 64,
  hookSets: 100,
  hooksPerList: 50,
  hooks: 500,
  argvBytes: 64 * 1024,
  volumePolicies: 100,
  policyEntries: 100,
  metadataEntries: 64,
  maxHookTimeoutMs: DEFAULT_MAX_HOOK_TIMEOUT_MS,
});

type Measure = 'entries' | 'selector' | 'argv' | 'timeout';
interface Rule {
  /** Dotted path from the request's root; `*` stands for every element of an array. */
  at: string;
  measure: Measure;
  /** The limit it is held to (entries); selectors, argv and timeouts have theirs. */
  limit?: keyof SpecLimits;
}

const entries = (at: string, limit: keyof SpecLimits): Rule => ({ at, measure: 'entries', limit });

/** A spec's selection (backup and restore alike), under `root` (`spec`, `spec.template`). */
function selectionRules(root: string): Rule[] {
  return [
    entries(`${root}.includedNamespaces`, 'namespaces'),
    entries(`${root}.excludedNamespaces`, 'namespaces'),
    entries(`${root}.includedResources`, 'resources'),
    entries(`${root}.excludedResources`, 'resources'),
    entries(`${root}.orLabelSelectors`, 'orLabelSelectors'),
    { at: `${root}.labelSelector`, measure: 'selector' },
    { at: `${root}.orLabelSelectors.*`, measure: 'selector' },
    entries(`${root}.hooks.resources`, 'hookSets'),
    entries(`${root}.hooks.resources.*.includedNamespaces`, 'namespaces'),
    entries(`${root}.hooks.resources.*.excludedNamespaces`, 'namespaces'),
    entries(`${root}.hooks.resources.*.includedResources`, 'resources'),
    entries(`${root}.hooks.resources.*.excludedResources`, 'resources'),
    { at: `${root}.hooks.resources.*.labelSelector`, measure: 'selector' },
  ];
}

function backupSpecRules(root: string): Rule[] {
  const rules = selectionRules(root);
  for (const scope of ['Cluster', 'Namespace']) {
    rules.push(
      entries(`${root}.included${scope}ScopedResources`, 'resources'),
      entries(`${root}.excluded${scope}ScopedResources`, 'resources'),
    );
  }
  for (const phase of ['pre', 'post']) {
    const set = `${root}.hooks.resources.*.${phase}`;
    const level = `${root}.hooks.backup.${phase}`;
    rules.push(
      entries(set, 'hooksPerList'),
      { at: `${set}.*.exec.command`, measure: 'argv' },
      { at: `${set}.*.exec.timeout`, measure: 'timeout' },
      entries(level, 'hooksPerList'),
      { at: `${level}.*.command`, measure: 'argv' },
      { at: `${level}.*.timeout`, measure: 'timeout' },
      { at: `${level}.*.labelSelector`, measure: 'selector' },
    );
  }
  const policies = `${root}.resourcePolicy.volumePolicies`;
  rules.push(entries(policies, 'volumePolicies'));
  for (const field of ['storageClass', 'volumeTypes', 'pvcPhase', 'pvcLabels', 'csi.volumeAttributes'])
    rules.push(entries(`${policies}.*.conditions.${field}`, 'policyEntries'));
  rules.push(entries(`${policies}.*.action.parameters`, 'policyEntries'));
  return rules;
}

const BACKUP_RULES: Rule[] = [...backupSpecRules('spec'), entries('labels', 'metadataEntries'), entries('annotations', 'metadataEntries')];
const SCHEDULE_RULES: Rule[] = backupSpecRules('spec.template');
const RESTORE_RULES: Rule[] = [
  ...selectionRules('spec'),
  entries('spec.namespaceMapping', 'namespaces'),
  entries('spec.hooks.resources.*.postHooks', 'hooksPerList'),
  { at: 'spec.hooks.resources.*.postHooks.*.exec.command', measure: 'argv' },
  { at: 'spec.hooks.resources.*.postHooks.*.exec.execTimeout', measure: 'timeout' },
  entries('spec.hooks.resources.*.postHooks.*.init.initContainers', 'hooksPerList'),
];

/** Where a spec kind's hooks are, for the bound on hooks in all. */
const HOOK_LISTS: Record<SpecKind, string[]> = {
  backup: ['spec.hooks.resources.*.pre', 'spec.hooks.resources.*.post', 'spec.hooks.backup.pre', 'spec.hooks.backup.post'],
  schedule: [
    'spec.template.hooks.resources.*.pre',
    'spec.template.hooks.resources.*.post',
    'spec.template.hooks.backup.pre',
    'spec.template.hooks.backup.post',
  ],
  restore: ['spec.hooks.resources.*.postHooks'],
};

export type SpecKind = 'backup' | 'restore' | 'schedule';

/** Every value at `at` in `root`, with its path segments. */
function resolve(root: unknown, at: string): Array<{ value: unknown; path: PropertyKey[] }> {
  let found: Array<{ value: unknown; path: PropertyKey[] }> = [{ value: root, path: [] }];
  for (const segment of at.split('.')) {
    const next: typeof found = [];
    for (const { value, path } of found) {
      if (segment === '*') {
        if (Array.isArray(value)) {
          for (const [i, element] of value.entries()) next.push({ value: element, path: [...path, i] });
        }
      } else if (isRecord(value) && Object.hasOwn(value, segment)) {
        next.push({ value: value[segment], path: [...path, segment] });
      }
    }
    found = next;
  }
  return found;
}

function countOf(value: unknown): number | undefined {
  if (Array.isArray(value)) return value.length;
  if (isRecord(value)) return Object.keys(value).length;
  return undefined;
}

const utf8 = new TextEncoder();

function measure(rule: Rule, value: unknown, path: PropertyKey[], limits: SpecLimits): ValidationProblem[] {
  const where = formatPath(path);
  switch (rule.measure) {
    case 'entries': {
      const n = countOf(value);
      const max = limits[rule.limit ?? 'namespaces'];
      return n !== undefined && n > max
        ? [{ path: where, message: `has ${n} entries; at most ${max} are accepted (limit: ${rule.limit})` }]
        : [];
    }
    case 'selector': {
      if (!isRecord(value)) return [];
      const max = limits.labelSelectorTerms;
      const problems: ValidationProblem[] = [];
      const terms = (countOf(value.matchLabels) ?? 0) + (Array.isArray(value.matchExpressions) ? value.matchExpressions.length : 0);
      if (terms > max)
        problems.push({
          path: where,
          message: `has ${terms} terms (matchLabels and matchExpressions); at most ${max} (limit: labelSelectorTerms)`,
        });
      if (Array.isArray(value.matchExpressions)) {
        value.matchExpressions.forEach((expression, i) => {
          const n = isRecord(expression) ? countOf(expression.values) : undefined;
          if (n !== undefined && n > max)
            problems.push({
              path: formatPath([...path, 'matchExpressions', i, 'values']),
              message: `has ${n} entries; at most ${max} are accepted (limit: labelSelectorTerms)`,
            });
        });
      }
      return problems;
    }
    case 'argv': {
      if (!Array.isArray(value)) return [];
      const bytes = value.reduce((n: number, arg) => n + (typeof arg === 'string' ? utf8.encode(arg).length : 0), 0);
      return bytes > limits.argvBytes
        ? [{ path: where, message: `is ${bytes} bytes; a hook's command is at most ${limits.argvBytes} bytes (limit: argvBytes)` }]
        : [];
    }
    case 'timeout': {
      if (typeof value !== 'string') return [];
      const parsed = parseDuration(value);
      return parsed.ok && parsed.ms > limits.maxHookTimeoutMs
        ? [
            {
              path: where,
              message: `a hook timeout must be at most ${formatDuration(limits.maxHookTimeoutMs)} (got ${JSON.stringify(value)}; limit: maxHookTimeoutMs)`,
            },
          ]
        : [];
    }
  }
}

/**
 * The bounds a request `{name?, spec, …}` of `kind` goes over, each naming its field and the limit;
 * empty when it keeps to them all. Run on the raw JSON before validation: a request over a bound is
 * answered with these problems only.
 */
export function specLimitProblems(kind: SpecKind, request: unknown, limits: SpecLimits = DEFAULT_SPEC_LIMITS): ValidationProblem[] {
  const rules = kind === 'backup' ? BACKUP_RULES : kind === 'restore' ? RESTORE_RULES : SCHEDULE_RULES;
  const problems: ValidationProblem[] = [];
  for (const rule of rules) {
    for (const { value, path } of resolve(request, rule.at)) problems.push(...measure(rule, value, path, limits));
  }
  const hooks = HOOK_LISTS[kind].reduce((n, at) => n + resolve(request, at).reduce((m, { value }) => m + (countOf(value) ?? 0), 0), 0);
  if (hooks > limits.hooks) {
    const at = kind === 'schedule' ? 'spec.template.hooks' : 'spec.hooks';
    problems.push({ path: at, message: `has ${hooks} hooks in all; at most ${limits.hooks} are accepted (limit: hooks)` });
  }
  return problems;
}
