/**
 * Kubernetes' protobuf encoding (`application/vnd.kubernetes.protobuf`) for the kinds kubectl's typed
 * commands send: `create namespace|configmap|secret|serviceaccount|role|rolebinding|clusterrole|
 * clusterrolebinding`, `create token`, `auth can-i` (also `--list`), `auth whoami`, and the other
 * review APIs. A body is the 4-byte magic `k8s\0` and a runtime.Unknown message whose `raw` is the
 * object's message.
 *
 * The message definitions below are ours, written from the Kubernetes API reference: field names
 * are the JSON names (the wire only carries the numbers), numbers are the API's. protobufjs does
 * the wire format; this file converts between its objects and the JSON shapes the rest of the
 * simulator stores (Time as RFC 3339, bytes as base64, ExtraValue as a string list, FieldsV1 as JSON).
 */
import protobuf from 'protobufjs';
import { apiError } from './api-status.js';
import { isPlainObject } from './kube-object.js';

export const protobufMediaType = 'application/vnd.kubernetes.protobuf';
const magic = Buffer.from([0x6b, 0x38, 0x73, 0x00]);

/** [field number, type, 'repeated' | 'map' (string keys)]; a type is a scalar or another message here. */
type Field = [number, string] | [number, string, 'repeated' | 'map'];

const s = 'string';
const messages: Record<string, Record<string, Field>> = {
  // meta/v1 and runtime
  Time: { seconds: [1, 'int64'], nanos: [2, 'int32'] },
  FieldsV1: { raw: [1, 'bytes'] },
  OwnerReference: {
    kind: [1, s],
    name: [3, s],
    uid: [4, s],
    apiVersion: [5, s],
    controller: [6, 'bool'],
    blockOwnerDeletion: [7, 'bool'],
  },
  ManagedFieldsEntry: {
    manager: [1, s],
    operation: [2, s],
    apiVersion: [3, s],
    time: [4, 'Time'],
    fieldsType: [6, s],
    fieldsV1: [7, 'FieldsV1'],
    subresource: [8, s],
  },
  ObjectMeta: {
    name: [1, s],
    generateName: [2, s],
    namespace: [3, s],
    selfLink: [4, s],
    uid: [5, s],
    resourceVersion: [6, s],
    generation: [7, 'int64'],
    creationTimestamp: [8, 'Time'],
    deletionTimestamp: [9, 'Time'],
    deletionGracePeriodSeconds: [10, 'int64'],
    labels: [11, s, 'map'],
    annotations: [12, s, 'map'],
    ownerReferences: [13, 'OwnerReference', 'repeated'],
    finalizers: [14, s, 'repeated'],
    managedFields: [17, 'ManagedFieldsEntry', 'repeated'],
  },
  LabelSelectorRequirement: { key: [1, s], operator: [2, s], values: [3, s, 'repeated'] },
  LabelSelector: { matchLabels: [1, s, 'map'], matchExpressions: [2, 'LabelSelectorRequirement', 'repeated'] },
  FieldSelectorRequirement: { key: [1, s], operator: [2, s], values: [3, s, 'repeated'] },
  TypeMeta: { apiVersion: [1, s], kind: [2, s] },
  Unknown: { typeMeta: [1, 'TypeMeta'], raw: [2, 'bytes'], contentEncoding: [3, s], contentType: [4, s] },
  // core/v1
  NamespaceCondition: { type: [1, s], status: [2, s], lastTransitionTime: [4, 'Time'], reason: [5, s], message: [6, s] },
  NamespaceSpec: { finalizers: [1, s, 'repeated'] },
  NamespaceStatus: { phase: [1, s], conditions: [2, 'NamespaceCondition', 'repeated'] },
  Namespace: { metadata: [1, 'ObjectMeta'], spec: [2, 'NamespaceSpec'], status: [3, 'NamespaceStatus'] },
  ConfigMap: { metadata: [1, 'ObjectMeta'], data: [2, s, 'map'], binaryData: [3, 'bytes', 'map'], immutable: [4, 'bool'] },
  Secret: { metadata: [1, 'ObjectMeta'], data: [2, 'bytes', 'map'], type: [3, s], stringData: [4, s, 'map'], immutable: [5, 'bool'] },
  ObjectReference: {
    kind: [1, s],
    namespace: [2, s],
    name: [3, s],
    uid: [4, s],
    apiVersion: [5, s],
    resourceVersion: [6, s],
    fieldPath: [7, s],
  },
  LocalObjectReference: { name: [1, s] },
  ServiceAccount: {
    metadata: [1, 'ObjectMeta'],
    secrets: [2, 'ObjectReference', 'repeated'],
    imagePullSecrets: [3, 'LocalObjectReference', 'repeated'],
    automountServiceAccountToken: [4, 'bool'],
  },
  // rbac.authorization.k8s.io/v1
  PolicyRule: {
    verbs: [1, s, 'repeated'],
    apiGroups: [2, s, 'repeated'],
    resources: [3, s, 'repeated'],
    resourceNames: [4, s, 'repeated'],
    nonResourceURLs: [5, s, 'repeated'],
  },
  AggregationRule: { clusterRoleSelectors: [1, 'LabelSelector', 'repeated'] },
  Role: { metadata: [1, 'ObjectMeta'], rules: [2, 'PolicyRule', 'repeated'] },
  ClusterRole: { metadata: [1, 'ObjectMeta'], rules: [2, 'PolicyRule', 'repeated'], aggregationRule: [3, 'AggregationRule'] },
  RoleRef: { apiGroup: [1, s], kind: [2, s], name: [3, s] },
  Subject: { kind: [1, s], apiGroup: [2, s], name: [3, s], namespace: [4, s] },
  RoleBinding: { metadata: [1, 'ObjectMeta'], subjects: [2, 'Subject', 'repeated'], roleRef: [3, 'RoleRef'] },
  ClusterRoleBinding: { metadata: [1, 'ObjectMeta'], subjects: [2, 'Subject', 'repeated'], roleRef: [3, 'RoleRef'] },
  // authorization.k8s.io/v1
  ExtraValue: { items: [1, s, 'repeated'] },
  FieldSelectorAttributes: { rawSelector: [1, s], requirements: [2, 'FieldSelectorRequirement', 'repeated'] },
  LabelSelectorAttributes: { rawSelector: [1, s], requirements: [2, 'LabelSelectorRequirement', 'repeated'] },
  ResourceAttributes: {
    namespace: [1, s],
    verb: [2, s],
    group: [3, s],
    version: [4, s],
    resource: [5, s],
    subresource: [6, s],
    name: [7, s],
    fieldSelector: [8, 'FieldSelectorAttributes'],
    labelSelector: [9, 'LabelSelectorAttributes'],
  },
  NonResourceAttributes: { path: [1, s], verb: [2, s] },
  SubjectAccessReviewSpec: {
    resourceAttributes: [1, 'ResourceAttributes'],
    nonResourceAttributes: [2, 'NonResourceAttributes'],
    user: [3, s],
    groups: [4, s, 'repeated'],
    extra: [5, 'ExtraValue', 'map'],
    uid: [6, s],
  },
  SelfSubjectAccessReviewSpec: { resourceAttributes: [1, 'ResourceAttributes'], nonResourceAttributes: [2, 'NonResourceAttributes'] },
  SubjectAccessReviewStatus: { allowed: [1, 'bool'], reason: [2, s], evaluationError: [3, s], denied: [4, 'bool'] },
  SubjectAccessReview: { metadata: [1, 'ObjectMeta'], spec: [2, 'SubjectAccessReviewSpec'], status: [3, 'SubjectAccessReviewStatus'] },
  LocalSubjectAccessReview: { metadata: [1, 'ObjectMeta'], spec: [2, 'SubjectAccessReviewSpec'], status: [3, 'SubjectAccessReviewStatus'] },
  SelfSubjectAccessReview: {
    metadata: [1, 'ObjectMeta'],
    spec: [2, 'SelfSubjectAccessReviewSpec'],
    status: [3, 'SubjectAccessReviewStatus'],
  },
  ResourceRule: {
    verbs: [1, s, 'repeated'],
    apiGroups: [2, s, 'repeated'],
    resources: [3, s, 'repeated'],
    resourceNames: [4, s, 'repeated'],
  },
  NonResourceRule: { verbs: [1, s, 'repeated'], nonResourceURLs: [2, s, 'repeated'] },
  SelfSubjectRulesReviewSpec: { namespace: [1, s] },
  SubjectRulesReviewStatus: {
    resourceRules: [1, 'ResourceRule', 'repeated'],
    nonResourceRules: [2, 'NonResourceRule', 'repeated'],
    incomplete: [3, 'bool'],
    evaluationError: [4, s],
  },
  SelfSubjectRulesReview: { metadata: [1, 'ObjectMeta'], spec: [2, 'SelfSubjectRulesReviewSpec'], status: [3, 'SubjectRulesReviewStatus'] },
  // authentication.k8s.io/v1
  UserInfo: { username: [1, s], uid: [2, s], groups: [3, s, 'repeated'], extra: [4, 'ExtraValue', 'map'] },
  BoundObjectReference: { kind: [1, s], apiVersion: [2, s], name: [3, s], uid: [4, s] },
  TokenRequestSpec: {
    audiences: [1, s, 'repeated'],
    boundObjectRef: [3, 'BoundObjectReference'],
    expirationSeconds: [4, 'int64'],
  },
  TokenRequestStatus: { token: [1, s], expirationTimestamp: [2, 'Time'] },
  TokenRequest: { metadata: [1, 'ObjectMeta'], spec: [2, 'TokenRequestSpec'], status: [3, 'TokenRequestStatus'] },
  TokenReviewSpec: { token: [1, s], audiences: [2, s, 'repeated'] },
  TokenReviewStatus: { authenticated: [1, 'bool'], user: [2, 'UserInfo'], error: [3, s], audiences: [4, s, 'repeated'] },
  TokenReview: { metadata: [1, 'ObjectMeta'], spec: [2, 'TokenReviewSpec'], status: [3, 'TokenReviewStatus'] },
  SelfSubjectReviewStatus: { userInfo: [1, 'UserInfo'] },
  SelfSubjectReview: { metadata: [1, 'ObjectMeta'], status: [2, 'SelfSubjectReviewStatus'] },
};

/** The top-level kinds, by `apiVersion/Kind`, with their message. */
const kinds: Record<string, string> = {
  'v1/Namespace': 'Namespace',
  'v1/ConfigMap': 'ConfigMap',
  'v1/Secret': 'Secret',
  'v1/ServiceAccount': 'ServiceAccount',
  'rbac.authorization.k8s.io/v1/Role': 'Role',
  'rbac.authorization.k8s.io/v1/ClusterRole': 'ClusterRole',
  'rbac.authorization.k8s.io/v1/RoleBinding': 'RoleBinding',
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': 'ClusterRoleBinding',
  'authorization.k8s.io/v1/SubjectAccessReview': 'SubjectAccessReview',
  'authorization.k8s.io/v1/SelfSubjectAccessReview': 'SelfSubjectAccessReview',
  'authorization.k8s.io/v1/LocalSubjectAccessReview': 'LocalSubjectAccessReview',
  'authorization.k8s.io/v1/SelfSubjectRulesReview': 'SelfSubjectRulesReview',
  'authentication.k8s.io/v1/TokenRequest': 'TokenRequest',
  'authentication.k8s.io/v1/TokenReview': 'TokenReview',
  'authentication.k8s.io/v1/SelfSubjectReview': 'SelfSubjectReview',
};

const scalars = new Set(['string', 'bool', 'bytes', 'int32', 'int64']);

// proto2, as Kubernetes' messages: a field set to its zero value (false, 0) is still on the wire.
const root = protobuf.Root.fromJSON({
  nested: Object.fromEntries(
    Object.entries(messages).map(([name, fields]) => [
      name,
      {
        edition: 'proto2',
        fields: Object.fromEntries(
          Object.entries(fields).map(([field, [id, type, rule]]) => [
            field,
            rule === 'map' ? { keyType: 'string', type, id } : rule === 'repeated' ? { rule: 'repeated', type, id } : { type, id },
          ]),
        ),
      },
    ]),
  ),
});
const types = new Map(Object.keys(messages).map((name) => [name, root.lookupType(name)]));

/** True for a protobuf media type (parameters aside). */
export function isProtobuf(contentType: string | undefined): boolean {
  return (contentType ?? '').split(';')[0]!.trim().toLowerCase() === protobufMediaType;
}

/** Whether a response of `apiVersion`/`kind` can be given in protobuf. */
export function canEncode(apiVersion: string, kind: string): boolean {
  return Object.hasOwn(kinds, `${apiVersion}/${kind}`);
}

function timeToJson(value: { seconds?: number; nanos?: number }): string {
  return new Date((value.seconds ?? 0) * 1000).toISOString().replace(/\.\d{3}Z$/, 'Z');
}

/** protobufjs object (toObject: longs as numbers, bytes as base64) → the JSON shape of `message`. */
function toJson(message: string, value: Record<string, unknown>): Record<string, unknown> {
  const fields = messages[message]!;
  const out: Record<string, unknown> = {};
  for (const [name, [, type, rule]] of Object.entries(fields)) {
    const v = value[name];
    if (v === undefined || v === null) continue;
    // Go writes every non-pointer field: an empty string or a zero Time is "not set" in the JSON form.
    if (rule === undefined && (v === '' || (type === 'Time' && !(v as { seconds?: number }).seconds && !(v as { nanos?: number }).nanos)))
      continue;
    const one = (item: unknown): unknown => {
      if (type === 'Time') return timeToJson(item as { seconds?: number });
      if (type === 'FieldsV1') {
        const raw = (item as { raw?: string }).raw;
        return raw ? JSON.parse(Buffer.from(raw, 'base64').toString('utf8')) : {};
      }
      if (type === 'ExtraValue') return (item as { items?: string[] }).items ?? [];
      if (scalars.has(type)) return item;
      return toJson(type, item as Record<string, unknown>);
    };
    if (rule === 'repeated') out[name] = (v as unknown[]).map(one);
    else if (rule === 'map')
      out[name] = Object.fromEntries(Object.entries(v as Record<string, unknown>).map(([k, item]) => [k, one(item)]));
    else out[name] = one(v);
  }
  return out;
}

/** The JSON shape of `message` → a plain object protobufjs' fromObject takes. */
function fromJson(message: string, value: Record<string, unknown>): Record<string, unknown> {
  const fields = messages[message]!;
  const out: Record<string, unknown> = {};
  for (const [name, [, type, rule]] of Object.entries(fields)) {
    const v = value[name];
    if (v === undefined || v === null) continue;
    const one = (item: unknown): unknown => {
      if (type === 'Time') {
        const ms = Date.parse(String(item));
        return Number.isNaN(ms) ? undefined : { seconds: Math.floor(ms / 1000) };
      }
      if (type === 'FieldsV1') return { raw: Buffer.from(JSON.stringify(item)) };
      if (type === 'ExtraValue') return { items: Array.isArray(item) ? item : [] };
      if (scalars.has(type)) return item;
      return isPlainObject(item) ? fromJson(type, item) : undefined;
    };
    if (rule === 'repeated' && Array.isArray(v)) out[name] = v.map(one);
    else if (rule === 'map' && isPlainObject(v)) out[name] = Object.fromEntries(Object.entries(v).map(([k, item]) => [k, one(item)]));
    else if (rule === undefined) {
      const converted = one(v);
      if (converted !== undefined) out[name] = converted;
    }
  }
  return out;
}

const toObjectOptions: protobuf.IConversionOptions = { longs: Number, bytes: String, defaults: false, arrays: false, objects: false };

/** A protobuf request body → the object as JSON (with apiVersion and kind); 400 if malformed, 415 for a kind we do not decode. */
export function decodeProtobuf(body: Buffer): Record<string, unknown> {
  if (body.length < magic.length || !body.subarray(0, magic.length).equals(magic))
    throw apiError('BadRequest', 'the protobuf body does not start with the Kubernetes magic number "k8s\\x00"');
  let unknown: Record<string, unknown>;
  try {
    unknown = types.get('Unknown')!.toObject(types.get('Unknown')!.decode(body.subarray(magic.length)), toObjectOptions);
  } catch (error) {
    throw apiError('BadRequest', `the protobuf body is not a valid runtime.Unknown message: ${(error as Error).message}`);
  }
  const typeMeta = (unknown.typeMeta ?? {}) as { apiVersion?: string; kind?: string };
  const apiVersion = typeMeta.apiVersion ?? '';
  const kind = typeMeta.kind ?? '';
  const message = kinds[`${apiVersion}/${kind}`];
  if (!message)
    throw apiError(
      'UnsupportedMediaType',
      `the simulator does not decode ${apiVersion}, Kind=${kind} from ${protobufMediaType}; it decodes protobuf only for ${Object.keys(kinds).join(', ')}: send it as application/json`,
    );
  if (unknown.contentEncoding)
    throw apiError('UnsupportedMediaType', `protobuf content encoding ${String(unknown.contentEncoding)} is not supported`);
  try {
    const raw = Buffer.from(String(unknown.raw ?? ''), 'base64');
    const decoded = types.get(message)!.toObject(types.get(message)!.decode(raw), toObjectOptions);
    return { apiVersion, kind, ...toJson(message, decoded) };
  } catch (error) {
    throw apiError('BadRequest', `the protobuf body is not a valid ${apiVersion}, Kind=${kind}: ${(error as Error).message}`);
  }
}

/** The object (JSON shape, with apiVersion and kind that `canEncode`) as a protobuf body. */
export function encodeProtobuf(object: Record<string, unknown>): Buffer {
  const apiVersion = String(object.apiVersion ?? '');
  const kind = String(object.kind ?? '');
  const message = kinds[`${apiVersion}/${kind}`];
  if (!message) throw new Error(`no protobuf message for ${apiVersion}, Kind=${kind}`);
  const type = types.get(message)!;
  const raw = type.encode(type.fromObject(fromJson(message, object))).finish();
  const unknownType = types.get('Unknown')!;
  const envelope = unknownType.encode(unknownType.fromObject({ typeMeta: { apiVersion, kind }, raw })).finish();
  return Buffer.concat([magic, envelope]);
}

/** True when the request's Accept header puts protobuf before JSON. */
export function prefersProtobuf(accept: string | undefined): boolean {
  if (!accept) return false;
  for (const part of accept.split(',')) {
    const media = part.split(';')[0]!.trim().toLowerCase();
    if (media === protobufMediaType) return true;
    if (media === 'application/json' || media === '*/*' || media === 'application/*') return false;
  }
  return false;
}
