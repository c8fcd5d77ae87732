import protobuf from 'protobufjs';
import { describe, expect, it } from 'vitest';
import { ApiError } from './api-status.js';
import { canEncode, decodeProtobuf, encodeProtobuf, prefersProtobuf } from './protobuf.js';

const meta = {
  name: 'x',
  namespace: 'team-a',
  uid: '0a5f6a3e-1111-4222-8333-944455556666',
  resourceVersion: '42',
  generation: 3,
  creationTimestamp: '2026-01-02T03:04:05Z',
  labels: { app: 'web', 'app.kubernetes.io/part-of': 'shop' },
  annotations: { note: 'hello' },
  ownerReferences: [{ apiVersion: 'apps/v1', kind: 'ReplicaSet', name: 'web-1', uid: 'u-1', controller: true, blockOwnerDeletion: true }],
  finalizers: ['kubernetes'],
  managedFields: [
    {
      manager: 'kubectl-create',
      operation: 'Update',
      apiVersion: 'v1',
      time: '2026-01-02T03:04:05Z',
      fieldsType: 'FieldsV1',
      fieldsV1: { 'f:data': { '.': {}, 'f:a': {} } },
    },
  ],
};

describe('Kubernetes protobuf (k8s\\0 + runtime.Unknown)', () => {
  const samples: Record<string, unknown>[] = [
    {
      apiVersion: 'v1',
      kind: 'Namespace',
      metadata: { name: 'team-a', labels: { team: 'a' } },
      spec: { finalizers: ['kubernetes'] },
      status: { phase: 'Active' },
    },
    {
      apiVersion: 'v1',
      kind: 'ConfigMap',
      metadata: meta,
      data: { mode: 'fast' },
      binaryData: { blob: Buffer.from([0, 1, 2, 255]).toString('base64') },
      immutable: true,
    },
    { apiVersion: 'v1', kind: 'Secret', metadata: meta, type: 'Opaque', data: { password: Buffer.from('s3cr3t').toString('base64') } },
    {
      apiVersion: 'v1',
      kind: 'ServiceAccount',
      metadata: meta,
      secrets: [{ name: 'token', namespace: 'team-a' }],
      imagePullSecrets: [{ name: 'registry' }],
      automountServiceAccountToken: false,
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRole',
      metadata: { name: 'mixed' },
      rules: [
        { apiGroups: [''], resources: ['pods', 'pods/log'], resourceNames: ['a'], verbs: ['get'] },
        { nonResourceURLs: ['/healthz'], verbs: ['get'] },
      ],
      aggregationRule: {
        clusterRoleSelectors: [{ matchLabels: { a: 'b' }, matchExpressions: [{ key: 'tier', operator: 'In', values: ['x', 'y'] }] }],
      },
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'Role',
      metadata: meta,
      rules: [{ apiGroups: ['apps'], resources: ['deployments'], verbs: ['*'] }],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'RoleBinding',
      metadata: meta,
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'edit' },
      subjects: [
        { kind: 'ServiceAccount', name: 'builder', namespace: 'team-a' },
        { kind: 'Group', apiGroup: 'rbac.authorization.k8s.io', name: 'ops' },
      ],
    },
    {
      apiVersion: 'rbac.authorization.k8s.io/v1',
      kind: 'ClusterRoleBinding',
      metadata: { name: 'b' },
      roleRef: { apiGroup: 'rbac.authorization.k8s.io', kind: 'ClusterRole', name: 'view' },
      subjects: [{ kind: 'User', apiGroup: 'rbac.authorization.k8s.io', name: 'hana' }],
    },
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SubjectAccessReview',
      metadata: {},
      spec: {
        resourceAttributes: {
          namespace: 'shop',
          verb: 'create',
          group: 'apps',
          version: 'v1',
          resource: 'deployments',
          subresource: 'scale',
          name: 'web',
        },
        user: 'system:serviceaccount:stowage:stowage-worker',
        groups: ['system:serviceaccounts'],
        extra: { 'authentication.kubernetes.io/credential-id': ['JTI=1'] },
        uid: 'u',
      },
      status: { allowed: false, denied: true, reason: 'no', evaluationError: 'oops' },
    },
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectAccessReview',
      metadata: {},
      spec: { nonResourceAttributes: { path: '/healthz', verb: 'get' } },
      status: { allowed: true },
    },
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'LocalSubjectAccessReview',
      metadata: { namespace: 'a' },
      spec: { user: 'x', resourceAttributes: { verb: 'get' } },
    },
    {
      apiVersion: 'authorization.k8s.io/v1',
      kind: 'SelfSubjectRulesReview',
      metadata: {},
      spec: { namespace: 'shop' },
      status: {
        resourceRules: [{ verbs: ['get'], apiGroups: [''], resources: ['pods'] }],
        nonResourceRules: [{ verbs: ['get'], nonResourceURLs: ['/api'] }],
        incomplete: true,
        evaluationError: 'e',
      },
    },
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenRequest',
      metadata: { name: 'robot', namespace: 'shop' },
      spec: { audiences: ['vault'], expirationSeconds: 4294967296, boundObjectRef: { kind: 'Pod', apiVersion: 'v1', name: 'p', uid: 'u' } },
      status: { token: 'a.b.c', expirationTimestamp: '2026-01-02T03:04:05Z' },
    },
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'TokenReview',
      metadata: {},
      spec: { token: 't', audiences: ['a'] },
      status: {
        authenticated: true,
        user: { username: 'u', uid: 'i', groups: ['g'], extra: { k: ['v1', 'v2'] } },
        audiences: ['a'],
        error: 'e',
      },
    },
    {
      apiVersion: 'authentication.k8s.io/v1',
      kind: 'SelfSubjectReview',
      metadata: {},
      status: { userInfo: { username: 'admin', groups: ['system:masters'] } },
    },
  ];

  for (const sample of samples)
    it(`round-trips a ${sample.kind} through the wire format unchanged`, () => {
      expect(canEncode(String(sample.apiVersion), String(sample.kind))).toBe(true);
      const bytes = encodeProtobuf(sample);
      expect(bytes.subarray(0, 4)).toEqual(Buffer.from('k8s\0', 'latin1'));
      expect(decodeProtobuf(bytes)).toEqual(sample);
    });

  it('refuses a kind it has no message for with 415 naming it, and a body without the magic with 400', () => {
    // An envelope of a kind the simulator does not decode, built with protobufjs directly.
    const root = protobuf.Root.fromJSON({
      nested: {
        TypeMeta: { fields: { apiVersion: { type: 'string', id: 1 }, kind: { type: 'string', id: 2 } } },
        Unknown: { fields: { typeMeta: { type: 'TypeMeta', id: 1 }, raw: { type: 'bytes', id: 2 } } },
      },
    });
    const unknown = root.lookupType('Unknown');
    const envelope = unknown
      .encode(unknown.fromObject({ typeMeta: { apiVersion: 'apps/v1', kind: 'Deployment' }, raw: Buffer.from([10, 0]) }))
      .finish();
    const body = Buffer.concat([Buffer.from('k8s\0', 'latin1'), envelope]);
    const refused = (() => {
      try {
        decodeProtobuf(body);
      } catch (error) {
        return error;
      }
    })() as ApiError;
    expect(refused).toBeInstanceOf(ApiError);
    expect(refused.status.code).toBe(415);
    expect(refused.status.message).toContain('apps/v1, Kind=Deployment');
    expect(() => decodeProtobuf(Buffer.from('{"kind":"Namespace"}'))).toThrow(/magic number/);
    expect(() => decodeProtobuf(Buffer.concat([Buffer.from('k8s\0', 'latin1'), Buffer.from([0xff, 0xff, 0xff])]))).toThrow(ApiError);
  });

  it('answers in protobuf only when the client lists it before JSON', () => {
    expect(prefersProtobuf('application/vnd.kubernetes.protobuf,application/json')).toBe(true);
    expect(prefersProtobuf('application/json, application/vnd.kubernetes.protobuf')).toBe(false);
    expect(prefersProtobuf('application/json;as=Table;v=v1;g=meta.k8s.io,application/json')).toBe(false);
    expect(prefersProtobuf(undefined)).toBe(false);
  });
});
