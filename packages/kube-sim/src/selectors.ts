/** Label and field selectors with the syntax and semantics of the Kubernetes API. */
import { apiError } from './api-status.js';
import { type KubeObject, readPath } from './kube-object.js';

export type LabelRequirement =
  | { op: 'exists' | '!exists'; key: string }
  | { op: '=' | '!='; key: string; value: string }
  | { op: 'in' | 'notin'; key: string; values: string[] }
  | { op: 'gt' | 'lt'; key: string; value: number };

export type LabelSelector = LabelRequirement[];

const labelKeyPattern = /^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*\/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$/;
const labelValuePattern = /^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$/;

function badSelector(selector: string, why: string): Error {
  return apiError('BadRequest', `unable to parse requirement: ${why} (selector "${selector}")`);
}

function checkKey(selector: string, key: string): string {
  if (!labelKeyPattern.test(key) || key.length > 317) throw badSelector(selector, `invalid label key "${key}"`);
  return key;
}

function checkValue(selector: string, value: string): string {
  if (value.length > 63 || !labelValuePattern.test(value)) throw badSelector(selector, `invalid label value: "${value}"`);
  return value;
}

/** Splits on commas that are not inside parentheses. */
function splitTopLevel(text: string): string[] {
  const parts: string[] = [];
  let depth = 0;
  let start = 0;
  for (let i = 0; i < text.length; i++) {
    const ch = text[i];
    if (ch === '(') depth++;
    else if (ch === ')') depth--;
    else if (ch === ',' && depth === 0) {
      parts.push(text.slice(start, i));
      start = i + 1;
    }
  }
  parts.push(text.slice(start));
  return parts;
}

export function parseLabelSelector(selector: string): LabelSelector {
  const trimmed = selector.trim();
  if (trimmed === '') return [];
  const requirements: LabelSelector = [];
  for (const rawPart of splitTopLevel(trimmed)) {
    const part = rawPart.trim();
    if (part === '') throw badSelector(selector, 'empty requirement');
    const setMatch = /^(\S+)\s+(in|notin)\s*\((.*)\)$/.exec(part);
    if (setMatch) {
      const key = checkKey(selector, setMatch[1]!);
      const values = setMatch[3]!
        .split(',')
        .map((v) => v.trim())
        .filter((v) => v !== '')
        .map((v) => checkValue(selector, v));
      if (values.length === 0) throw badSelector(selector, `for 'in', 'notin' operators, values set can't be empty`);
      requirements.push({ op: setMatch[2] as 'in' | 'notin', key, values });
      continue;
    }
    if (part.startsWith('!')) {
      requirements.push({ op: '!exists', key: checkKey(selector, part.slice(1).trim()) });
      continue;
    }
    const opMatch = /^([^=!<>\s]+)\s*(==|=|!=|>|<)\s*(.*)$/.exec(part);
    if (opMatch) {
      const key = checkKey(selector, opMatch[1]!);
      const operator = opMatch[2]!;
      const value = opMatch[3]!.trim();
      if (operator === '>' || operator === '<') {
        const n = Number(value);
        if (value === '' || !Number.isInteger(n)) throw badSelector(selector, `for 'Gt', 'Lt' operators, the value must be an integer`);
        requirements.push({ op: operator === '>' ? 'gt' : 'lt', key, value: n });
      } else {
        requirements.push({ op: operator === '!=' ? '!=' : '=', key, value: checkValue(selector, value) });
      }
      continue;
    }
    requirements.push({ op: 'exists', key: checkKey(selector, part) });
  }
  return requirements;
}

export function matchesLabels(selector: LabelSelector, labels: Record<string, string> | undefined): boolean {
  for (const req of selector) {
    const has = labels !== undefined && Object.hasOwn(labels, req.key);
    const value = has ? labels![req.key] : undefined;
    switch (req.op) {
      case 'exists':
        if (!has) return false;
        break;
      case '!exists':
        if (has) return false;
        break;
      case '=':
        if (value !== req.value) return false;
        break;
      case '!=':
        if (value === req.value) return false;
        break;
      case 'in':
        if (value === undefined || !req.values.includes(value)) return false;
        break;
      case 'notin':
        if (value !== undefined && req.values.includes(value)) return false;
        break;
      case 'gt':
      case 'lt': {
        const n = Number(value);
        if (value === undefined || !Number.isInteger(n)) return false;
        if (req.op === 'gt' ? !(n > req.value) : !(n < req.value)) return false;
        break;
      }
    }
  }
  return true;
}

export interface FieldRequirement {
  field: string;
  op: '=' | '!=';
  value: string;
}

/** Field selectors each kind supports beyond metadata.name / metadata.namespace (as the real API server). */
const supportedFieldsByKind: Record<string, string[]> = {
  Pod: [
    'spec.nodeName',
    'spec.restartPolicy',
    'spec.schedulerName',
    'spec.serviceAccountName',
    'status.phase',
    'status.podIP',
    'status.nominatedNodeName',
  ],
  Node: ['spec.unschedulable'],
  Namespace: ['status.phase'],
  Secret: ['type'],
  PersistentVolume: [],
  PersistentVolumeClaim: [],
  Event: [
    'involvedObject.kind',
    'involvedObject.namespace',
    'involvedObject.name',
    'involvedObject.uid',
    'involvedObject.apiVersion',
    'involvedObject.resourceVersion',
    'involvedObject.fieldPath',
    'reason',
    'reportingComponent',
    'source',
    'type',
  ],
  Job: ['status.successful'],
  ReplicaSet: ['status.replicas'],
};

export function parseFieldSelector(selector: string, kind: string): FieldRequirement[] {
  const trimmed = selector.trim();
  if (trimmed === '') return [];
  const allowed = new Set(['metadata.name', 'metadata.namespace', ...(supportedFieldsByKind[kind] ?? [])]);
  return trimmed.split(',').map((rawPart) => {
    const match = /^\s*([^=!\s]+)\s*(==|=|!=)\s*(.*?)\s*$/.exec(rawPart);
    if (!match) throw apiError('BadRequest', `invalid selector: '${selector}'; can't understand '${rawPart}'`);
    const field = match[1]!;
    if (!allowed.has(field)) {
      throw apiError('BadRequest', `field label not supported: ${field}`);
    }
    return { field, op: match[2] === '!=' ? '!=' : '=', value: match[3]! };
  });
}

function fieldValue(object: KubeObject, field: string): string {
  const value = readPath(object, field);
  if (value === undefined || value === null) return '';
  return typeof value === 'object' ? JSON.stringify(value) : String(value);
}

export function matchesFields(requirements: FieldRequirement[], object: KubeObject): boolean {
  for (const req of requirements) {
    const actual = fieldValue(object, req.field);
    if (req.op === '=' ? actual !== req.value : actual === req.value) return false;
  }
  return true;
}

export interface ObjectFilter {
  labels: LabelSelector;
  fields: FieldRequirement[];
}

/** True when a list or watch names a label or field selector. */
export function hasSelector(filter: ObjectFilter): boolean {
  return filter.labels.length > 0 || filter.fields.length > 0;
}

export function matchesFilter(filter: ObjectFilter, object: KubeObject): boolean {
  return matchesLabels(filter.labels, object.metadata.labels) && matchesFields(filter.fields, object);
}

/**
 * A metav1.LabelSelector object (`matchLabels`, `matchExpressions`) as requirements; an empty one
 * selects everything. Malformed entries select nothing (`undefined`).
 */
export function labelSelectorFromObject(value: unknown): LabelSelector | undefined {
  if (typeof value !== 'object' || value === null || Array.isArray(value)) return undefined;
  const selector = value as { matchLabels?: unknown; matchExpressions?: unknown };
  const requirements: LabelSelector = [];
  if (selector.matchLabels !== undefined) {
    if (typeof selector.matchLabels !== 'object' || selector.matchLabels === null) return undefined;
    for (const [key, v] of Object.entries(selector.matchLabels)) {
      if (typeof v !== 'string') return undefined;
      requirements.push({ op: '=', key, value: v });
    }
  }
  if (selector.matchExpressions !== undefined) {
    if (!Array.isArray(selector.matchExpressions)) return undefined;
    for (const expression of selector.matchExpressions as { key?: unknown; operator?: unknown; values?: unknown }[]) {
      if (typeof expression?.key !== 'string') return undefined;
      const values = Array.isArray(expression.values) ? expression.values.filter((v): v is string => typeof v === 'string') : [];
      switch (expression.operator) {
        case 'In':
          requirements.push({ op: 'in', key: expression.key, values });
          break;
        case 'NotIn':
          requirements.push({ op: 'notin', key: expression.key, values });
          break;
        case 'Exists':
          requirements.push({ op: 'exists', key: expression.key });
          break;
        case 'DoesNotExist':
          requirements.push({ op: '!exists', key: expression.key });
          break;
        default:
          return undefined;
      }
    }
  }
  return requirements;
}
