/**
 * Validation of RBAC objects (kube-apiserver's rbac validation, the part a user meets): rules need
 * verbs and what they apply to, Roles take no non-resource URLs, bindings need a roleRef of the
 * right kind that never changes, and subjects of a known kind.
 */
import type { StatusCause } from '../api-status.js';
import { isPlainObject, type KubeObject } from '../kube-object.js';
import { labelSelectorFromObject } from '../selectors.js';

const rbacGroup = 'rbac.authorization.k8s.io';
const strings = (value: unknown): string[] => (Array.isArray(value) ? value.filter((v): v is string => typeof v === 'string') : []);

function validateRules(rules: unknown, namespaced: boolean, causes: StatusCause[]): void {
  if (rules === undefined || rules === null) return;
  if (!Array.isArray(rules)) {
    causes.push({ reason: 'FieldValueTypeInvalid', field: 'rules', message: 'Invalid value: must be a list of rules' });
    return;
  }
  rules.forEach((rule, i) => {
    const field = `rules[${i}]`;
    if (!isPlainObject(rule)) {
      causes.push({ reason: 'FieldValueTypeInvalid', field, message: 'Invalid value: must be an object' });
      return;
    }
    if (strings(rule.verbs).length === 0)
      causes.push({
        reason: 'FieldValueRequired',
        field: `${field}.verbs`,
        message: 'Required value: verbs must contain at least one value',
      });
    const urls = strings(rule.nonResourceURLs);
    // Go prints a []string field value as []string{"a", "b"}.
    const shown = `[]string{${urls.map((u) => JSON.stringify(u)).join(', ')}}`;
    if (urls.length > 0) {
      if (namespaced)
        causes.push({
          reason: 'FieldValueInvalid',
          field: `${field}.nonResourceURLs`,
          message: `Invalid value: ${shown}: namespaced rules cannot apply to non-resource URLs`,
        });
      if (strings(rule.apiGroups).length > 0 || strings(rule.resources).length > 0)
        causes.push({
          reason: 'FieldValueInvalid',
          field: `${field}.nonResourceURLs`,
          message: `Invalid value: ${shown}: rules cannot apply to both regular resources and non-resource URLs`,
        });
      return;
    }
    if (strings(rule.apiGroups).length === 0)
      causes.push({
        reason: 'FieldValueRequired',
        field: `${field}.apiGroups`,
        message: 'Required value: resource rules must supply at least one api group',
      });
    if (strings(rule.resources).length === 0)
      causes.push({
        reason: 'FieldValueRequired',
        field: `${field}.resources`,
        message: 'Required value: resource rules must supply at least one resource',
      });
  });
}

function validateBinding(object: KubeObject, clusterBinding: boolean, previous: KubeObject | undefined, causes: StatusCause[]): void {
  const ref = isPlainObject(object.roleRef) ? object.roleRef : undefined;
  if (!ref) causes.push({ reason: 'FieldValueRequired', field: 'roleRef', message: 'Required value' });
  else {
    if (ref.apiGroup !== rbacGroup)
      causes.push({
        reason: 'FieldValueNotSupported',
        field: 'roleRef.apiGroup',
        message: `Unsupported value: ${JSON.stringify(ref.apiGroup ?? '')}: supported values: "${rbacGroup}"`,
      });
    const kinds = clusterBinding ? ['ClusterRole'] : ['ClusterRole', 'Role'];
    if (!kinds.includes(String(ref.kind)))
      causes.push({
        reason: 'FieldValueNotSupported',
        field: 'roleRef.kind',
        message: `Unsupported value: ${JSON.stringify(ref.kind ?? '')}: supported values: ${kinds.map((k) => JSON.stringify(k)).join(', ')}`,
      });
    if (typeof ref.name !== 'string' || ref.name === '')
      causes.push({ reason: 'FieldValueRequired', field: 'roleRef.name', message: 'Required value' });
  }
  if (previous && isPlainObject(previous.roleRef) && ref && JSON.stringify(sortedRef(ref)) !== JSON.stringify(sortedRef(previous.roleRef)))
    causes.push({ reason: 'FieldValueInvalid', field: 'roleRef', message: 'Invalid value: cannot change roleRef' });
  const subjects = object.subjects;
  if (subjects === undefined || subjects === null) return;
  if (!Array.isArray(subjects)) {
    causes.push({ reason: 'FieldValueTypeInvalid', field: 'subjects', message: 'Invalid value: must be a list' });
    return;
  }
  subjects.forEach((subject, i) => {
    const field = `subjects[${i}]`;
    if (!isPlainObject(subject)) {
      causes.push({ reason: 'FieldValueTypeInvalid', field, message: 'Invalid value: must be an object' });
      return;
    }
    if (typeof subject.name !== 'string' || subject.name === '')
      causes.push({ reason: 'FieldValueRequired', field: `${field}.name`, message: 'Required value' });
    switch (subject.kind) {
      case 'ServiceAccount':
        if (subject.apiGroup !== undefined && subject.apiGroup !== '')
          causes.push({
            reason: 'FieldValueNotSupported',
            field: `${field}.apiGroup`,
            message: `Unsupported value: ${JSON.stringify(subject.apiGroup)}: supported values: ""`,
          });
        if (clusterBinding && (typeof subject.namespace !== 'string' || subject.namespace === ''))
          causes.push({ reason: 'FieldValueRequired', field: `${field}.namespace`, message: 'Required value' });
        break;
      case 'User':
      case 'Group':
        if (subject.apiGroup !== rbacGroup)
          causes.push({
            reason: 'FieldValueNotSupported',
            field: `${field}.apiGroup`,
            message: `Unsupported value: ${JSON.stringify(subject.apiGroup ?? '')}: supported values: "${rbacGroup}"`,
          });
        break;
      default:
        causes.push({
          reason: 'FieldValueNotSupported',
          field: `${field}.kind`,
          message: `Unsupported value: ${JSON.stringify(subject.kind ?? '')}: supported values: "ServiceAccount", "User", "Group"`,
        });
    }
  });
}

function sortedRef(ref: Record<string, unknown>) {
  return { apiGroup: ref.apiGroup, kind: ref.kind, name: ref.name };
}

/**
 * The API server's defaults of a binding: `roleRef.apiGroup` and a User's or Group's `apiGroup` are
 * rbac.authorization.k8s.io when left out, a ServiceAccount's is "" (so absent in JSON).
 */
export function defaultRbacObject(kind: string, object: KubeObject): KubeObject {
  if (kind !== 'RoleBinding' && kind !== 'ClusterRoleBinding') return object;
  const out: KubeObject = { ...object };
  if (isPlainObject(object.roleRef) && (object.roleRef.apiGroup === undefined || object.roleRef.apiGroup === ''))
    out.roleRef = { ...object.roleRef, apiGroup: rbacGroup };
  if (Array.isArray(object.subjects))
    out.subjects = object.subjects.map((subject) => {
      if (!isPlainObject(subject) || (subject.apiGroup !== undefined && subject.apiGroup !== '')) return subject;
      if (subject.kind === 'User' || subject.kind === 'Group') return { ...subject, apiGroup: rbacGroup };
      // A ServiceAccount's is "", which the API server's JSON leaves out (omitempty).
      if (subject.kind === 'ServiceAccount' && subject.apiGroup === '') {
        const { apiGroup: _empty, ...rest } = subject;
        return rest;
      }
      return subject;
    });
  return out;
}

/** Problems with an RBAC object of `kind` (none for other kinds). */
export function validateRbacObject(kind: string, object: KubeObject, previous: KubeObject | undefined): StatusCause[] {
  const causes: StatusCause[] = [];
  switch (kind) {
    case 'Role':
      validateRules(object.rules, true, causes);
      break;
    case 'ClusterRole': {
      validateRules(object.rules, false, causes);
      const aggregation = object.aggregationRule;
      if (aggregation !== undefined && aggregation !== null) {
        const selectors = isPlainObject(aggregation) ? aggregation.clusterRoleSelectors : undefined;
        if (!Array.isArray(selectors) || selectors.some((s) => labelSelectorFromObject(s) === undefined))
          causes.push({
            reason: 'FieldValueInvalid',
            field: 'aggregationRule.clusterRoleSelectors',
            message: 'Invalid value: must be a list of label selectors',
          });
      }
      break;
    }
    case 'RoleBinding':
      validateBinding(object, false, previous, causes);
      break;
    case 'ClusterRoleBinding':
      validateBinding(object, true, previous, causes);
      break;
  }
  return causes;
}
