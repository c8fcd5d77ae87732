/*
 * Kubernetes label selectors (metav1.LabelSelector): syntax checks with paths, and matching.
 */
export type LabelSelectorOperator = 'In' | 'NotIn' | 'Exists' | 'DoesNotExist';

export const LABEL_SELECTOR_OPERATORS: readonly LabelSelectorOperator[] = ['In', 'NotIn', 'Exists', 'DoesNotExist'];

export interface LabelSelectorRequirement {
  key: string;
  operator: LabelSelectorOperator;
  values?: string[];
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: LabelSelectorRequirement[];
}

/** A problem below a selector; `path` are segments relative to where the selector sits. */
export interface SelectorProblem {
  path: (string | number)[];
  message: string;
}

type Segments = (string | number)[];

const QUALIFIED_NAME = /^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$/;
const DNS1123_SUBDOMAIN = /^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$/;

/** Why `key` is not a valid label key (`[prefix/]name`), or undefined when it is. */
export function explainLabelKey(key: string): string | undefined {
  if (key.length === 0) return 'label key must not be empty';
  const slash = key.indexOf('/');
  const prefix = slash >= 0 ? key.slice(0, slash) : undefined;
  const name = slash >= 0 ? key.slice(slash + 1) : key;
  if (prefix !== undefined) {
    if (prefix.length === 0) return `label key ${JSON.stringify(key)} has an empty prefix before '/'`;
    if (prefix.length > 253 || !DNS1123_SUBDOMAIN.test(prefix)) {
      return `label key prefix ${JSON.stringify(prefix)} must be a DNS subdomain (lowercase letters, digits, '-' and '.', at most 253 characters)`;
    }
  }
  if (name.length === 0) return `label key ${JSON.stringify(key)} has an empty name`;
  if (name.length > 63) return `label key name ${JSON.stringify(name)} is ${name.length} characters long; the limit is 63`;
  if (!QUALIFIED_NAME.test(name)) {
    return `label key name ${JSON.stringify(name)} may contain only letters, digits, '-', '_' and '.', and must start and end with a letter or digit`;
  }
  return undefined;
}

/** Why `value` is not a valid label value, or undefined when it is (empty is valid). */
export function explainLabelValue(value: string): string | undefined {
  if (value.length === 0) return undefined;
  if (value.length > 63) return `label value ${JSON.stringify(value)} is ${value.length} characters long; the limit is 63`;
  if (!QUALIFIED_NAME.test(value)) {
    return `label value ${JSON.stringify(value)} may contain only letters, digits, '-', '_' and '.', and must start and end with a letter or digit`;
  }
  return undefined;
}

function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/**
 * Every syntax problem of a selector given as untrusted input, with path segments below `path`
 * (e.g. `['matchExpressions', 0, 'values']`).
 */
export function checkLabelSelector(selector: unknown, path: Segments = []): SelectorProblem[] {
  const problems: SelectorProblem[] = [];
  if (!isRecord(selector)) return [{ path, message: 'must be an object with matchLabels and/or matchExpressions' }];
  for (const field of Object.keys(selector)) {
    if (field !== 'matchLabels' && field !== 'matchExpressions') {
      problems.push({ path: [...path, field], message: 'unknown field; a label selector has only matchLabels and matchExpressions' });
    }
  }
  const { matchLabels, matchExpressions } = selector;
  if (matchLabels !== undefined) {
    if (!isRecord(matchLabels)) {
      problems.push({ path: [...path, 'matchLabels'], message: 'must be an object of label key to value, e.g. {"app": "web"}' });
    } else {
      for (const [key, value] of Object.entries(matchLabels)) {
        const keyProblem = explainLabelKey(key);
        if (keyProblem) problems.push({ path: [...path, 'matchLabels', key], message: keyProblem });
        if (typeof value !== 'string') {
          problems.push({ path: [...path, 'matchLabels', key], message: 'must be a string' });
        } else {
          const valueProblem = explainLabelValue(value);
          if (valueProblem) problems.push({ path: [...path, 'matchLabels', key], message: valueProblem });
        }
      }
    }
  }
  if (matchExpressions !== undefined) {
    if (!Array.isArray(matchExpressions)) {
      problems.push({ path: [...path, 'matchExpressions'], message: 'must be an array of {key, operator, values}' });
    } else {
      matchExpressions.forEach((expression, index) => {
        problems.push(...checkRequirement(expression, [...path, 'matchExpressions', index]));
      });
    }
  }
  return problems;
}

function checkRequirement(expression: unknown, path: Segments): SelectorProblem[] {
  if (!isRecord(expression)) return [{ path, message: 'must be an object {key, operator, values}' }];
  const problems: SelectorProblem[] = [];
  for (const field of Object.keys(expression)) {
    if (field !== 'key' && field !== 'operator' && field !== 'values') {
      problems.push({ path: [...path, field], message: 'unknown field; a match expression has only key, operator and values' });
    }
  }
  const { key, operator, values } = expression;
  if (typeof key !== 'string') {
    problems.push({ path: [...path, 'key'], message: 'is required and must be a string' });
  } else {
    const keyProblem = explainLabelKey(key);
    if (keyProblem) problems.push({ path: [...path, 'key'], message: keyProblem });
  }
  if (typeof operator !== 'string' || !LABEL_SELECTOR_OPERATORS.includes(operator as LabelSelectorOperator)) {
    problems.push({
      path: [...path, 'operator'],
      message: `must be one of ${LABEL_SELECTOR_OPERATORS.join(', ')} (got ${JSON.stringify(operator ?? null)})`,
    });
  }
  if (values !== undefined && (!Array.isArray(values) || values.some((v) => typeof v !== 'string'))) {
    problems.push({ path: [...path, 'values'], message: 'must be an array of strings' });
  } else if (operator === 'In' || operator === 'NotIn') {
    if (!values || values.length === 0) {
      problems.push({ path: [...path, 'values'], message: `must be a non-empty array when operator is ${operator}` });
    } else {
      values.forEach((value: string, index: number) => {
        const valueProblem = explainLabelValue(value);
        if (valueProblem) problems.push({ path: [...path, 'values', index], message: valueProblem });
      });
    }
  } else if ((operator === 'Exists' || operator === 'DoesNotExist') && values && values.length > 0) {
    problems.push({ path: [...path, 'values'], message: `must be empty or absent when operator is ${operator}` });
  }
  return problems;
}

/** True when `labels` satisfy `selector`; an empty selector matches everything (as Kubernetes). */
export function matchesLabelSelector(selector: LabelSelector, labels: Readonly<Record<string, string>> | undefined): boolean {
  const actual = labels ?? {};
  for (const [key, value] of Object.entries(selector.matchLabels ?? {})) {
    if (actual[key] !== value) return false;
  }
  for (const requirement of selector.matchExpressions ?? []) {
    const has = Object.hasOwn(actual, requirement.key);
    const value = actual[requirement.key];
    switch (requirement.operator) {
      case 'In':
        if (!has || value === undefined || !(requirement.values ?? []).includes(value)) return false;
        break;
      case 'NotIn':
        if (has && value !== undefined && (requirement.values ?? []).includes(value)) return false;
        break;
      case 'Exists':
        if (!has) return false;
        break;
      case 'DoesNotExist':
        if (has) return false;
        break;
      default: {
        const unknownOperator: never = requirement.operator;
        throw new Error(`unknown label selector operator ${String(unknownOperator)}`);
      }
    }
  }
  return true;
}
