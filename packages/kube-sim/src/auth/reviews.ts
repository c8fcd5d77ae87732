/**
 * The create-only review APIs (SubjectAccessReview and its self/local variants, SelfSubjectRulesReview,
 * TokenReview, SelfSubjectReview) and TokenRequest (`serviceaccounts/NAME/token`). Nothing is stored:
 * each answers the request it was given with a status, as kube-apiserver does.
 */
import { ApiError, apiError, invalid, notFound, type StatusCause } from '../api-status.js';
import { isPlainObject, type KubeObject } from '../kube-object.js';
import type { UserInfo } from './identity.js';
import { nonResourceAttributes, type RequestAttributes, resourceAttributes } from './rbac-rules.js';
import type { Decision } from './security.js';
import { apiServerAudience, type BoundObject, type TokenAuthority, tokenFailureMessage } from './tokens.js';

export interface ReviewContext {
  /** The requester (after impersonation). */
  user: UserInfo;
  authorize(user: UserInfo, request: RequestAttributes): Decision;
  rulesFor(user: UserInfo, namespace: string): { rules: import('./rbac-rules.js').PolicyRule[]; errors: string[] };
  tokens: TokenAuthority;
  /** The uid of a live object, for TokenRequest (its account and bound object). */
  uidOf(resource: 'serviceaccounts' | 'pods' | 'secrets' | 'nodes', namespace: string, name: string): string | undefined;
  now(): Date;
}

const stringOf = (value: unknown): string => (typeof value === 'string' ? value : '');

function bodyObject(body: unknown, kind: string, apiVersion: string): Record<string, unknown> {
  if (!isPlainObject(body)) throw apiError('BadRequest', `the request body must be a ${kind} object`);
  if (body.kind !== undefined && body.kind !== kind)
    throw apiError('BadRequest', `the kind in the data (${String(body.kind)}) does not match the expected kind (${kind})`);
  if (body.apiVersion !== undefined && body.apiVersion !== apiVersion)
    throw apiError(
      'BadRequest',
      `the API version in the data (${String(body.apiVersion)}) does not match the expected API version (${apiVersion})`,
    );
  return body;
}

function answer(kind: string, apiVersion: string, body: Record<string, unknown>, spec: unknown, status: unknown): KubeObject {
  const metadata = isPlainObject(body.metadata) ? { ...body.metadata } : {};
  return { kind, apiVersion, metadata: { ...metadata, creationTimestamp: null } as never, spec, status };
}

/** The attributes of an access review's spec; validation errors name the field as kube-apiserver does. */
function reviewAttributes(kind: string, spec: Record<string, unknown>, namespaceOverride?: string): RequestAttributes {
  const resource = isPlainObject(spec.resourceAttributes) ? spec.resourceAttributes : undefined;
  const nonResource = isPlainObject(spec.nonResourceAttributes) ? spec.nonResourceAttributes : undefined;
  const causes: StatusCause[] = [];
  if (resource && nonResource)
    causes.push({
      reason: 'FieldValueInvalid',
      field: 'spec.nonResourceAttributes',
      message: 'Invalid value: "object": cannot be specified in combination with resourceAttributes',
    });
  if (!resource && !nonResource)
    causes.push({
      reason: 'FieldValueInvalid',
      field: 'spec.resourceAttributes',
      message: 'Invalid value: "null": exactly one of nonResourceAttributes or resourceAttributes must be specified',
    });
  if (causes.length > 0) throw invalid(kind, 'authorization.k8s.io', '', causes);
  if (nonResource) return nonResourceAttributes(stringOf(nonResource.verb), stringOf(nonResource.path));
  return resourceAttributes(stringOf(resource!.verb), {
    apiGroup: stringOf(resource!.group),
    apiVersion: stringOf(resource!.version),
    resource: stringOf(resource!.resource),
    subresource: stringOf(resource!.subresource),
    namespace: namespaceOverride ?? stringOf(resource!.namespace),
    name: stringOf(resource!.name),
  });
}

function accessStatus(decision: Decision): Record<string, unknown> {
  const status: Record<string, unknown> = { allowed: decision.allowed };
  if (decision.reason) status.reason = decision.reason;
  return status;
}

const authorizationV1 = 'authorization.k8s.io/v1';
const authenticationV1 = 'authentication.k8s.io/v1';

export function selfSubjectAccessReview(ctx: ReviewContext, body: unknown): KubeObject {
  const review = bodyObject(body, 'SelfSubjectAccessReview', authorizationV1);
  const spec = isPlainObject(review.spec) ? review.spec : {};
  const request = reviewAttributes('SelfSubjectAccessReview', spec);
  return answer('SelfSubjectAccessReview', authorizationV1, review, spec, accessStatus(ctx.authorize(ctx.user, request)));
}

function subjectOf(kind: string, spec: Record<string, unknown>): UserInfo {
  const user = stringOf(spec.user);
  const groups = Array.isArray(spec.groups) ? spec.groups.filter((g): g is string => typeof g === 'string') : [];
  if (user === '' && groups.length === 0)
    throw invalid(kind, 'authorization.k8s.io', '', [
      { reason: 'FieldValueInvalid', field: 'spec.user', message: 'Invalid value: "": at least one of user or group must be specified' },
    ]);
  const subject: UserInfo = { name: user, groups };
  if (typeof spec.uid === 'string' && spec.uid !== '') subject.uid = spec.uid;
  return subject;
}

export function subjectAccessReview(ctx: ReviewContext, body: unknown): KubeObject {
  const review = bodyObject(body, 'SubjectAccessReview', authorizationV1);
  const spec = isPlainObject(review.spec) ? review.spec : {};
  const request = reviewAttributes('SubjectAccessReview', spec);
  return answer(
    'SubjectAccessReview',
    authorizationV1,
    review,
    spec,
    accessStatus(ctx.authorize(subjectOf('SubjectAccessReview', spec), request)),
  );
}

export function localSubjectAccessReview(ctx: ReviewContext, namespace: string, body: unknown): KubeObject {
  const review = bodyObject(body, 'LocalSubjectAccessReview', authorizationV1);
  const spec = isPlainObject(review.spec) ? review.spec : {};
  const attributes = isPlainObject(spec.resourceAttributes) ? spec.resourceAttributes : undefined;
  const causes: StatusCause[] = [];
  if (isPlainObject(spec.nonResourceAttributes))
    causes.push({
      reason: 'FieldValueInvalid',
      field: 'spec.nonResourceAttributes',
      message: 'Invalid value: "object": disallowed on this kind of request',
    });
  const specNamespace = stringOf(attributes?.namespace);
  if (specNamespace !== '' && specNamespace !== namespace)
    causes.push({
      reason: 'FieldValueInvalid',
      field: 'spec.resourceAttributes.namespace',
      message: `Invalid value: ${JSON.stringify(specNamespace)}: must match metadata.namespace`,
    });
  if (causes.length > 0) throw invalid('LocalSubjectAccessReview', 'authorization.k8s.io', '', causes);
  const request = reviewAttributes('LocalSubjectAccessReview', spec, namespace);
  const answered = answer(
    'LocalSubjectAccessReview',
    authorizationV1,
    review,
    spec,
    accessStatus(ctx.authorize(subjectOf('LocalSubjectAccessReview', spec), request)),
  );
  answered.metadata.namespace = namespace;
  return answered;
}

export function selfSubjectRulesReview(ctx: ReviewContext, body: unknown): KubeObject {
  const review = bodyObject(body, 'SelfSubjectRulesReview', authorizationV1);
  const spec = isPlainObject(review.spec) ? review.spec : {};
  const { rules, errors } = ctx.rulesFor(ctx.user, stringOf(spec.namespace));
  const resourceRules: Record<string, unknown>[] = [];
  const nonResourceRules: Record<string, unknown>[] = [];
  for (const rule of rules) {
    if ((rule.resources ?? []).length > 0) {
      const entry: Record<string, unknown> = { verbs: rule.verbs };
      if (rule.apiGroups) entry.apiGroups = rule.apiGroups;
      entry.resources = rule.resources;
      if (rule.resourceNames) entry.resourceNames = rule.resourceNames;
      resourceRules.push(entry);
    }
    if ((rule.nonResourceURLs ?? []).length > 0) nonResourceRules.push({ verbs: rule.verbs, nonResourceURLs: rule.nonResourceURLs });
  }
  const status: Record<string, unknown> = { resourceRules, nonResourceRules, incomplete: errors.length > 0 };
  if (errors.length > 0) status.evaluationError = errors.length === 1 ? errors[0] : `[${errors.join(', ')}]`;
  return answer('SelfSubjectRulesReview', authorizationV1, review, spec, status);
}

function userInfoObject(user: UserInfo): Record<string, unknown> {
  const info: Record<string, unknown> = { username: user.name };
  if (user.uid) info.uid = user.uid;
  info.groups = user.groups;
  if (user.extra && Object.keys(user.extra).length > 0) info.extra = user.extra;
  return info;
}

export function tokenReview(ctx: ReviewContext, body: unknown): KubeObject {
  const review = bodyObject(body, 'TokenReview', authenticationV1);
  const spec = isPlainObject(review.spec) ? review.spec : {};
  const token = stringOf(spec.token);
  if (token === '') throw apiError('BadRequest', 'token is required for TokenReview in authentication');
  const wanted = Array.isArray(spec.audiences) ? spec.audiences.filter((a): a is string => typeof a === 'string') : [];
  const checked = ctx.tokens.check(token, wanted.length > 0 ? wanted : [apiServerAudience]);
  const status: Record<string, unknown> = checked.ok
    ? { authenticated: true, user: userInfoObject(checked.user), audiences: checked.audiences }
    : { user: {}, error: tokenFailureMessage(checked.why) };
  return answer('TokenReview', authenticationV1, review, spec, status);
}

export function selfSubjectReview(ctx: ReviewContext, body: unknown): KubeObject {
  const review = bodyObject(body, 'SelfSubjectReview', authenticationV1);
  return answer('SelfSubjectReview', authenticationV1, review, undefined, { userInfo: userInfoObject(ctx.user) });
}

const minTokenSeconds = 600;
const maxTokenSeconds = 2 ** 32;

/** TokenRequest: a token for the service account `name` in `namespace` (404 when it does not exist). */
export function tokenRequest(ctx: ReviewContext, namespace: string, name: string, body: unknown): KubeObject {
  const request = bodyObject(body, 'TokenRequest', authenticationV1);
  const meta = isPlainObject(request.metadata) ? request.metadata : {};
  if (typeof meta.name === 'string' && meta.name !== '' && meta.name !== name)
    throw apiError('BadRequest', `the name of the TokenRequest (${meta.name}) does not match the name of the service account (${name})`);
  const uid = ctx.uidOf('serviceaccounts', namespace, name);
  if (!uid) throw notFound('serviceaccounts', '', name);
  const spec = isPlainObject(request.spec) ? request.spec : {};
  const expirationSeconds = spec.expirationSeconds === undefined || spec.expirationSeconds === null ? 3600 : spec.expirationSeconds;
  const causes: StatusCause[] = [];
  if (typeof expirationSeconds !== 'number' || !Number.isInteger(expirationSeconds))
    causes.push({
      reason: 'FieldValueInvalid',
      field: 'spec.expirationSeconds',
      message: `Invalid value: ${JSON.stringify(expirationSeconds)}: must be an integer`,
    });
  else if (expirationSeconds < minTokenSeconds)
    causes.push({
      reason: 'FieldValueInvalid',
      field: 'spec.expirationSeconds',
      message: `Invalid value: ${expirationSeconds}: may not specify a duration less than 10 minutes`,
    });
  else if (expirationSeconds > maxTokenSeconds)
    causes.push({
      reason: 'FieldValueTooLong',
      field: 'spec.expirationSeconds',
      message: `Invalid value: ${expirationSeconds}: may not specify a duration larger than 2^32 seconds`,
    });
  const audiences = Array.isArray(spec.audiences) ? spec.audiences.filter((a): a is string => typeof a === 'string' && a !== '') : [];
  const boundObject = boundObjectOf(ctx, namespace, spec.boundObjectRef, causes);
  if (causes.length > 0) throw invalid('TokenRequest', 'authentication.k8s.io', name, causes);
  const { token, claims } = ctx.tokens.mintServiceAccountToken({
    namespace,
    name,
    uid,
    expirationSeconds: expirationSeconds as number,
    audiences: audiences.length > 0 ? audiences : [apiServerAudience],
    ...(boundObject ? { boundObject } : {}),
  });
  const answeredSpec: Record<string, unknown> = {
    audiences: claims.audiences,
    expirationSeconds,
    boundObjectRef: spec.boundObjectRef ?? null,
  };
  return {
    kind: 'TokenRequest',
    apiVersion: authenticationV1,
    metadata: {
      name,
      namespace,
      creationTimestamp: ctx
        .now()
        .toISOString()
        .replace(/\.\d{3}Z$/, 'Z'),
    },
    spec: answeredSpec,
    status: { token, expirationTimestamp: new Date(claims.expiresAt * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z') },
  };
}

function boundObjectOf(ctx: ReviewContext, namespace: string, ref: unknown, causes: StatusCause[]): BoundObject | undefined {
  if (ref === undefined || ref === null) return undefined;
  if (!isPlainObject(ref)) {
    causes.push({ reason: 'FieldValueInvalid', field: 'spec.boundObjectRef', message: 'Invalid value: must be an object' });
    return undefined;
  }
  const kind = stringOf(ref.kind);
  const name = stringOf(ref.name);
  const resource = ({ Pod: 'pods', Secret: 'secrets', Node: 'nodes' } as const)[kind as 'Pod' | 'Secret' | 'Node'];
  if (!resource) {
    causes.push({
      reason: 'FieldValueNotSupported',
      field: 'spec.boundObjectRef.kind',
      message: `Unsupported value: ${JSON.stringify(kind)}: supported values: "Node", "Pod", "Secret"`,
    });
    return undefined;
  }
  if (name === '') {
    causes.push({ reason: 'FieldValueRequired', field: 'spec.boundObjectRef.name', message: 'Required value' });
    return undefined;
  }
  const uid = ctx.uidOf(resource, kind === 'Node' ? '' : namespace, name);
  if (!uid) throw notFound(resource, '', name);
  const givenUid = stringOf(ref.uid);
  if (givenUid !== '' && givenUid !== uid)
    throw new ApiError({
      kind: 'Status',
      apiVersion: 'v1',
      metadata: {},
      status: 'Failure',
      message: `the UID in the bound object reference (${givenUid}) does not match the UID in record. The object might have been deleted and then recreated`,
      reason: 'Conflict',
      code: 409,
    });
  return { kind: kind as BoundObject['kind'], name, uid };
}
