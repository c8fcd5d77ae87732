/**
 * RBAC's rule semantics, as Kubernetes defines them: whether a PolicyRule allows a request, whether
 * one set of rules covers another (escalation prevention), and how the API server prints rules in
 * its "not currently held" message. Pure functions over plain data.
 */
import { isPlainObject } from '../kube-object.js';

export interface PolicyRule {
  verbs: string[];
  apiGroups?: string[];
  resources?: string[];
  resourceNames?: string[];
  nonResourceURLs?: string[];
}

/** What the authorizer decides on: Kubernetes' authorizer.Attributes. */
export interface RequestAttributes {
  verb: string;
  resourceRequest: boolean;
  apiGroup: string;
  apiVersion: string;
  resource: string;
  subresource: string;
  namespace: string;
  name: string;
  /** Non-resource requests: the URL path. */
  path: string;
}

export function resourceAttributes(
  verb: string,
  fields: Partial<Omit<RequestAttributes, 'verb' | 'resourceRequest' | 'path'>> = {},
): RequestAttributes {
  return {
    verb,
    resourceRequest: true,
    apiGroup: fields.apiGroup ?? '',
    apiVersion: fields.apiVersion ?? '',
    resource: fields.resource ?? '',
    subresource: fields.subresource ?? '',
    namespace: fields.namespace ?? '',
    name: fields.name ?? '',
    path: '',
  };
}

export function nonResourceAttributes(verb: string, path: string): RequestAttributes {
  return { verb, resourceRequest: false, apiGroup: '', apiVersion: '', resource: '', subresource: '', namespace: '', name: '', path };
}

const all = '*';

function verbMatches(rule: PolicyRule, verb: string): boolean {
  for (const v of rule.verbs) if (v === all || v === verb) return true;
  return false;
}

function apiGroupMatches(rule: PolicyRule, group: string): boolean {
  for (const g of rule.apiGroups ?? []) if (g === all || g === group) return true;
  return false;
}

/** `*`, the exact `resource[/subresource]`, or `*\/subresource` for any resource's subresource. */
function resourceMatches(rule: PolicyRule, combined: string, subresource: string): boolean {
  for (const r of rule.resources ?? []) {
    if (r === all || r === combined) return true;
    if (subresource !== '' && r.length === subresource.length + 2 && r.startsWith('*/') && r.endsWith(subresource)) return true;
  }
  return false;
}

function resourceNameMatches(rule: PolicyRule, name: string): boolean {
  const names = rule.resourceNames ?? [];
  if (names.length === 0) return true;
  return names.includes(name);
}

/** `*`, an exact path, or a prefix ending in `*` (`/apis/*` matches `/apis/v1`, not `/apis`). */
function nonResourceURLMatches(rule: PolicyRule, path: string): boolean {
  for (const url of rule.nonResourceURLs ?? []) {
    if (url === all || url === path) return true;
    if (url.endsWith('*') && path.startsWith(url.replace(/\*+$/, ''))) return true;
  }
  return false;
}

export function ruleAllows(request: RequestAttributes, rule: PolicyRule): boolean {
  if (request.resourceRequest) {
    const combined = request.subresource ? `${request.resource}/${request.subresource}` : request.resource;
    return (
      verbMatches(rule, request.verb) &&
      apiGroupMatches(rule, request.apiGroup) &&
      resourceMatches(rule, combined, request.subresource) &&
      resourceNameMatches(rule, request.name)
    );
  }
  return verbMatches(rule, request.verb) && nonResourceURLMatches(rule, request.path);
}

/** Reads the rules of a Role/ClusterRole object, ignoring malformed entries (validation refuses them on write). */
export function rulesOf(role: Record<string, unknown> | undefined): PolicyRule[] {
  const rules = role?.rules;
  if (!Array.isArray(rules)) return [];
  const strings = (value: unknown): string[] | undefined =>
    Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : undefined;
  const out: PolicyRule[] = [];
  for (const rule of rules) {
    if (!isPlainObject(rule)) continue;
    const parsed: PolicyRule = { verbs: strings(rule.verbs) ?? [] };
    for (const key of ['apiGroups', 'resources', 'resourceNames', 'nonResourceURLs'] as const) {
      const value = strings(rule[key]);
      if (value && value.length > 0) parsed[key] = value;
    }
    out.push(parsed);
  }
  return out;
}

function hasAll(set: readonly string[] | undefined, wanted: readonly string[] | undefined): boolean {
  for (const w of wanted ?? []) if (!(set ?? []).includes(w)) return false;
  return true;
}

/** One rule per (group, resource, verb[, name]) and per (URL, verb). */
export function breakdownRule(rule: PolicyRule): PolicyRule[] {
  const out: PolicyRule[] = [];
  for (const group of rule.apiGroups ?? [])
    for (const resource of rule.resources ?? [])
      for (const verb of rule.verbs) {
        if ((rule.resourceNames ?? []).length > 0)
          for (const name of rule.resourceNames!)
            out.push({ apiGroups: [group], resources: [resource], verbs: [verb], resourceNames: [name] });
        else out.push({ apiGroups: [group], resources: [resource], verbs: [verb] });
      }
  for (const url of rule.nonResourceURLs ?? []) for (const verb of rule.verbs) out.push({ nonResourceURLs: [url], verbs: [verb] });
  return out;
}

function resourceCoversAll(owner: readonly string[] | undefined, wanted: readonly string[] | undefined): boolean {
  const set = owner ?? [];
  if (set.includes(all) || hasAll(set, wanted)) return true;
  for (const path of wanted ?? []) {
    if (set.includes(path)) continue;
    const slash = path.indexOf('/');
    if (slash < 0) return false;
    if (!set.includes(`*/${path.slice(slash + 1)}`)) return false;
  }
  return true;
}

export function nonResourceURLCovers(owner: string, requested: string): boolean {
  if (owner === requested) return true;
  return owner.endsWith('*') && requested.startsWith(owner.replace(/\*+$/, ''));
}

function nonResourceURLsCoverAll(owner: readonly string[] | undefined, wanted: readonly string[] | undefined): boolean {
  for (const path of wanted ?? []) if (!(owner ?? []).some((o) => nonResourceURLCovers(o, path))) return false;
  return true;
}

function ruleCovers(owner: PolicyRule, sub: PolicyRule): boolean {
  const verbs = owner.verbs.includes(all) || hasAll(owner.verbs, sub.verbs);
  const groups = (owner.apiGroups ?? []).includes(all) || hasAll(owner.apiGroups, sub.apiGroups);
  const resources = resourceCoversAll(owner.resources, sub.resources);
  const urls = nonResourceURLsCoverAll(owner.nonResourceURLs, sub.nonResourceURLs);
  const ownerNames = owner.resourceNames ?? [];
  const names =
    (sub.resourceNames ?? []).length === 0 ? ownerNames.length === 0 : ownerNames.length === 0 || hasAll(ownerNames, sub.resourceNames);
  return verbs && groups && resources && names && urls;
}

/** Whether `owner` holds every permission of `servant`; the broken-down rules it does not hold. */
export function covers(owner: PolicyRule[], servant: PolicyRule[]): { covered: boolean; uncovered: PolicyRule[] } {
  const uncovered: PolicyRule[] = [];
  for (const rule of servant) for (const sub of breakdownRule(rule)) if (!owner.some((o) => ruleCovers(o, sub))) uncovered.push(sub);
  return { covered: uncovered.length === 0, uncovered };
}

/** Merges simple rules (one group, one resource, at most one name, no URLs) that differ only in verbs. */
export function compactRules(rules: PolicyRule[]): PolicyRule[] {
  const compacted: PolicyRule[] = [];
  const simple = new Map<string, PolicyRule>();
  for (const rule of rules) {
    const isSimple =
      rule.verbs.length > 0 &&
      (rule.apiGroups ?? []).length === 1 &&
      (rule.resources ?? []).length === 1 &&
      (rule.resourceNames ?? []).length <= 1 &&
      (rule.nonResourceURLs ?? []).length === 0;
    if (!isSimple) {
      compacted.push(rule);
      continue;
    }
    const key = JSON.stringify([rule.apiGroups![0], rule.resources![0], rule.resourceNames?.[0] ?? null]);
    const existing = simple.get(key);
    if (existing) existing.verbs = [...existing.verbs, ...rule.verbs];
    else simple.set(key, { ...rule, verbs: [...rule.verbs] });
  }
  return [...compacted, ...simple.values()];
}

/** Go's `%q` of a []string: `["a" "b"]`. */
export function goQuotedList(values: readonly string[]): string {
  return `[${values.map((v) => JSON.stringify(v)).join(' ')}]`;
}

/** How the API server prints a rule: `{APIGroups:["apps"], Resources:["deployments"], Verbs:["create"]}`. */
export function compactString(rule: PolicyRule): string {
  const parts: string[] = [];
  if ((rule.apiGroups ?? []).length > 0) parts.push(`APIGroups:${goQuotedList(rule.apiGroups!)}`);
  if ((rule.resources ?? []).length > 0) parts.push(`Resources:${goQuotedList(rule.resources!)}`);
  if ((rule.nonResourceURLs ?? []).length > 0) parts.push(`NonResourceURLs:${goQuotedList(rule.nonResourceURLs!)}`);
  if ((rule.resourceNames ?? []).length > 0) parts.push(`ResourceNames:${goQuotedList(rule.resourceNames!)}`);
  if (rule.verbs.length > 0) parts.push(`Verbs:${goQuotedList(rule.verbs)}`);
  return `{${parts.join(', ')}}`;
}
