import { describe, expect, it } from 'vitest';
import type { RestoreResourceHookSpec } from './restore-spec.schema.js';
import { type RestoreTransformContext, transformForRestore } from './restore-transforms.js';
import { item, pod } from './test-objects.js';
import type { BackedUpItem, JsonObject, RestoreItem } from './types.js';

function context(overrides: Partial<RestoreTransformContext> & { hooks?: RestoreResourceHookSpec[] } = {}): RestoreTransformContext {
  const { hooks, ...rest } = overrides;
  return {
    backupName: 'nightly',
    restoreName: 'r1',
    restoreUid: 'uid-r1',
    spec: { namespaceMapping: {}, preserveNodePorts: false, hooks: { resources: hooks ?? [] } },
    volumes: { podVolumes: {}, reprovisionedClaims: [] },
    restoreWait: { image: 'stowage/node-agent:dev', command: ['node', '/app/restore-wait.js'] },
    ...rest,
  };
}

function asItem(backedUp: BackedUpItem, mapping: Record<string, string> = {}): RestoreItem {
  const targetNamespace = backedUp.namespace === null ? null : (mapping[backedUp.namespace] ?? backedUp.namespace);
  const targetName = backedUp.resource === 'namespaces' ? (mapping[backedUp.name] ?? backedUp.name) : backedUp.name;
  return { ...backedUp, targetNamespace, targetName, origin: 'selected' };
}

function transform(backedUp: BackedUpItem, ctx = context()) {
  return transformForRestore(asItem(backedUp, ctx.spec.namespaceMapping), ctx).object;
}

const LAST_APPLIED = 'kubectl.kubernetes.io/last-applied-configuration';

describe('transformForRestore: every kind', () => {
  const original = item(
    'configmaps',
    'shop',
    'settings',
    { data: { a: '1' }, status: { whatever: true } },
    {
      uid: 'u1',
      resourceVersion: '42',
      generation: 3,
      creationTimestamp: '2026-01-01T00:00:00Z',
      deletionTimestamp: '2026-01-02T00:00:00Z',
      deletionGracePeriodSeconds: 30,
      generateName: 'settings-',
      selfLink: '/api/v1/namespaces/shop/configmaps/settings',
      ownerReferences: [{ kind: 'Deployment', name: 'web', uid: 'u0' }],
      managedFields: [{ manager: 'kubectl' }],
      finalizers: ['example.com/keep'],
      labels: { app: 'web' },
      annotations: { note: 'x' },
    },
  );

  it('resets server metadata, drops status, keeps name/labels/annotations/finalizers, adds restore labels', () => {
    expect(transform(original)).toEqual({
      apiVersion: 'v1',
      kind: 'configmaps',
      metadata: {
        name: 'settings',
        namespace: 'shop',
        finalizers: ['example.com/keep'],
        labels: { app: 'web', 'stowage.dev/backup-name': 'nightly', 'stowage.dev/restore-name': 'r1' },
        annotations: { note: 'x' },
      },
      data: { a: '1' },
    });
  });

  it.each([
    ['a 63-character name is used as it is', 'n'.repeat(63), 'n'.repeat(63)],
    ['a longer name is cut to 57 characters plus 6 hex of its hash', 'n'.repeat(70), expect.stringMatching(/^n{57}[0-9a-f]{6}$/)],
  ])('labels with the backup and restore names: %s (Velero restore_test)', (_name, name, expected) => {
    const labels = transform(original, context({ backupName: name, restoreName: name })).metadata.labels;
    expect(labels?.['stowage.dev/backup-name']).toEqual(expected);
    expect(labels?.['stowage.dev/restore-name']).toEqual(expected);
  });

  it('maps the namespace and never changes its input', () => {
    const snapshot = structuredClone(original);
    expect(
      transform(original, context({ spec: { namespaceMapping: { shop: 'copy' }, preserveNodePorts: false, hooks: { resources: [] } } }))
        .metadata.namespace,
    ).toBe('copy');
    expect(original).toEqual(snapshot);
  });

  it('gives a mapped namespace object its new name', () => {
    const ns = item('namespaces', null, 'shop', { kind: 'Namespace', spec: { finalizers: ['kubernetes'] }, status: { phase: 'Active' } });
    const object = transform(
      ns,
      context({ spec: { namespaceMapping: { shop: 'copy' }, preserveNodePorts: false, hooks: { resources: [] } } }),
    );
    expect(object.metadata.name).toBe('copy');
    expect(object.metadata.namespace).toBeUndefined();
    expect(object.status).toBeUndefined();
  });
});

// Cases from Velero's service_action_test.go (facts, rewritten as data).
describe('transformForRestore: Service', () => {
  const svc = (spec: JsonObject, annotations?: Record<string, string>, managedFields?: unknown[]) =>
    item(
      'services',
      'shop',
      'svc-1',
      { kind: 'Service', spec },
      { ...(annotations ? { annotations } : {}), ...(managedFields ? { managedFields } : {}) },
    );
  const lastApplied = (ports: JsonObject[], extra: JsonObject = {}) => JSON.stringify({ spec: { ports, ...extra } });

  it.each<
    [string, JsonObject, JsonObject, { annotations?: Record<string, string>; managedFields?: unknown[]; preserveNodePorts?: boolean }]
  >([
    ['clusterIP/clusterIPs are deleted', { clusterIP: '10.0.0.7', clusterIPs: ['10.0.0.7'] }, {}, {}],
    ['a headless clusterIP is kept', { clusterIP: 'None', clusterIPs: ['None'] }, { clusterIP: 'None', clusterIPs: ['None'] }, {}],
    [
      'nodePorts (only) are deleted from every port',
      {
        ports: [
          { name: 'http', port: 80, nodePort: 30080 },
          { name: 'https', port: 443, nodePort: 30443 },
        ],
      },
      {
        ports: [
          { name: 'http', port: 80 },
          { name: 'https', port: 443 },
        ],
      },
      {},
    ],
    [
      'an unnamed nodePort missing from last-applied is deleted',
      { ports: [{ nodePort: 8080 }] },
      { ports: [{}] },
      { annotations: { [LAST_APPLIED]: lastApplied([]) } },
    ],
    [
      'an unnamed nodePort in last-applied is kept',
      { ports: [{ nodePort: 8080 }, { nodePort: 9090 }] },
      { ports: [{ nodePort: 8080 }, {}] },
      { annotations: { [LAST_APPLIED]: lastApplied([{ nodePort: 8080 }]) } },
    ],
    [
      'an unnamed nodePort is deleted when only a named one is in last-applied',
      { ports: [{ nodePort: 8080 }] },
      { ports: [{}] },
      { annotations: { [LAST_APPLIED]: lastApplied([{ name: 'http', nodePort: 8080 }]) } },
    ],
    [
      'a nodePort given as a string in last-applied counts',
      { ports: [{ name: 'http', nodePort: 8080 }] },
      { ports: [{ name: 'http', nodePort: 8080 }] },
      { annotations: { [LAST_APPLIED]: lastApplied([{ name: 'http', nodePort: '8080' }]) } },
    ],
    [
      'a named nodePort in last-applied is kept, the others deleted',
      {
        ports: [
          { name: 'http', nodePort: 8080 },
          { name: 'admin', nodePort: 9090 },
        ],
      },
      { ports: [{ name: 'http', nodePort: 8080 }, { name: 'admin' }] },
      { annotations: { [LAST_APPLIED]: lastApplied([{ name: 'http', nodePort: 8080 }]) } },
    ],
    [
      'preserveNodePorts keeps every nodePort',
      { ports: [{ name: 'http', nodePort: 8080 }], healthCheckNodePort: 32000, type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { ports: [{ name: 'http', nodePort: 8080 }], healthCheckNodePort: 32000, type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { preserveNodePorts: true },
    ],
    [
      'a nodePort not in managedFields is deleted',
      { ports: [{ port: 80, protocol: 'TCP', nodePort: 30080 }] },
      { ports: [{ port: 80, protocol: 'TCP' }] },
      { managedFields: [{ fieldsV1: { 'f:spec': { 'f:ports': { 'k:{"port":80,"protocol":"TCP"}': { 'f:port': {} } } } } }] },
    ],
    [
      'a nodePort in managedFields is kept',
      { ports: [{ port: 80, protocol: 'TCP', nodePort: 30080 }] },
      { ports: [{ port: 80, protocol: 'TCP', nodePort: 30080 }] },
      { managedFields: [{ fieldsV1: { 'f:spec': { 'f:ports': { 'k:{"port":80,"protocol":"TCP"}': { 'f:nodePort': {} } } } } }] },
    ],
    [
      'healthCheckNodePort of a LoadBalancer with Local traffic is deleted',
      { healthCheckNodePort: 8080, type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      {},
    ],
    [
      'healthCheckNodePort is kept where the cluster does not allocate one (Cluster traffic)',
      { healthCheckNodePort: 8080, type: 'LoadBalancer', externalTrafficPolicy: 'Cluster' },
      { healthCheckNodePort: 8080, type: 'LoadBalancer', externalTrafficPolicy: 'Cluster' },
      {},
    ],
    [
      'healthCheckNodePort in last-applied is kept',
      { healthCheckNodePort: 8080, type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { healthCheckNodePort: 8080, type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { annotations: { [LAST_APPLIED]: lastApplied([], { healthCheckNodePort: 8080 }) } },
    ],
    [
      'healthCheckNodePort in managedFields is kept',
      { healthCheckNodePort: 8080, type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { healthCheckNodePort: 8080, type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { managedFields: [{ fieldsV1: { 'f:spec': { 'f:healthCheckNodePort': {} } } }] },
    ],
    [
      'healthCheckNodePort null in last-applied is cleared without error',
      { healthCheckNodePort: 8080, type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { type: 'LoadBalancer', externalTrafficPolicy: 'Local' },
      { annotations: { [LAST_APPLIED]: lastApplied([], { healthCheckNodePort: null }) } },
    ],
    [
      'an ExternalName service keeps its ports',
      { type: 'ExternalName', ports: [{ nodePort: 1 }] },
      { type: 'ExternalName', ports: [{ nodePort: 1 }] },
      {},
    ],
  ])('%s', (_name, spec, expected, options) => {
    const ctx = context();
    ctx.spec = { ...ctx.spec, preserveNodePorts: options.preserveNodePorts ?? false };
    expect(transform(svc(spec, options.annotations, options.managedFields), ctx).spec).toEqual(expected);
  });
});

// Cases from Velero's pod_action_test.go plus the restore-wait contract.
describe('transformForRestore: Pod', () => {
  it.each<[string, JsonObject, JsonObject]>([
    ['nodeName (only) is deleted', { nodeName: 'node-a', containers: [{ name: 'app' }] }, { containers: [{ name: 'app' }] }],
    [
      'priority (only) is deleted',
      { priority: 7, priorityClassName: 'high', containers: [{ name: 'app' }] },
      { priorityClassName: 'high', containers: [{ name: 'app' }] },
    ],
    [
      'volumes named <service account>-token-… are deleted',
      { serviceAccountName: 'foo', volumes: [{ name: 'foo' }, { name: 'foo-token-foo' }], containers: [] },
      { serviceAccountName: 'foo', volumes: [{ name: 'foo' }], containers: [] },
    ],
    [
      'container and init container mounts of the token volume are deleted',
      {
        serviceAccountName: 'foo',
        volumes: [{ name: 'foo-token-abc' }],
        containers: [{ name: 'a', volumeMounts: [{ name: 'foo' }, { name: 'foo-token-abc' }] }],
        initContainers: [{ name: 'i', volumeMounts: [{ name: 'foo-token-abc' }] }],
      },
      {
        serviceAccountName: 'foo',
        volumes: [],
        containers: [{ name: 'a', volumeMounts: [{ name: 'foo' }] }],
        initContainers: [{ name: 'i', volumeMounts: [] }],
      },
    ],
    [
      'containers without mounts are fine',
      { containers: [{ name: 'a' }], initContainers: [{ name: 'b' }] },
      { containers: [{ name: 'a' }], initContainers: [{ name: 'b' }] },
    ],
  ])('%s', (_name, spec, expected) => {
    expect(transform(pod('shop', 'web', spec)).spec).toEqual(expected);
  });

  const dataPod = pod('shop', 'postgres-0', {
    nodeName: 'node-a',
    volumes: [
      { name: 'data', persistentVolumeClaim: { claimName: 'data-postgres-0' } },
      { name: 'cache', emptyDir: {} },
    ],
    initContainers: [{ name: 'chown', image: 'busybox' }],
  });

  it('adds stowage-restore-wait first, with one mount per restored volume and the restore uid', () => {
    const ctx = context({
      volumes: {
        podVolumes: {
          'shop/postgres-0': [
            { volume: 'data', snapshotID: 's1' },
            { volume: 'cache', snapshotID: 's2' },
          ],
        },
        reprovisionedClaims: [],
      },
    });
    const spec = transform(dataPod, ctx).spec as JsonObject;
    expect(spec.initContainers).toEqual([
      {
        name: 'stowage-restore-wait',
        image: 'stowage/node-agent:dev',
        command: ['node', '/app/restore-wait.js'],
        env: [{ name: 'STOWAGE_RESTORE_UID', value: 'uid-r1' }],
        volumeMounts: [
          { name: 'data', mountPath: '/restores/data' },
          { name: 'cache', mountPath: '/restores/cache' },
        ],
        // what Pod Security `restricted` asks of every container
        securityContext: {
          runAsNonRoot: true,
          allowPrivilegeEscalation: false,
          readOnlyRootFilesystem: true,
          capabilities: { drop: ['ALL'] },
          seccompProfile: { type: 'RuntimeDefault' },
        },
        resources: { requests: { cpu: '10m', memory: '32Mi' }, limits: { cpu: '100m', memory: '128Mi' } },
      },
      { name: 'chown', image: 'busybox' },
    ]);
  });

  it('bounds the restore-wait container by itemOperationTimeout when the spec gives it', () => {
    const ctx = context({
      volumes: { podVolumes: { 'shop/postgres-0': [{ volume: 'data', snapshotID: 's1' }] }, reprovisionedClaims: [] },
    });
    ctx.spec = { ...ctx.spec, itemOperationTimeoutMs: 3_600_000 };
    const [wait] = (transform(dataPod, ctx).spec as JsonObject).initContainers as JsonObject[];
    expect(wait?.env).toEqual([
      { name: 'STOWAGE_RESTORE_UID', value: 'uid-r1' },
      { name: 'STOWAGE_RESTORE_WAIT_TIMEOUT_MS', value: '3600000' },
    ]);
  });

  it('adds no restore-wait container to a pod without restored volumes', () => {
    const spec = transform(dataPod).spec as JsonObject;
    expect(spec.initContainers).toEqual([{ name: 'chown', image: 'busybox' }]);
  });

  it('finds the pod in the volume plan by its backed-up namespace when namespaces are mapped', () => {
    const ctx = context({
      volumes: { podVolumes: { 'shop/postgres-0': [{ volume: 'data', snapshotID: 's1' }] }, reprovisionedClaims: [] },
    });
    ctx.spec = { ...ctx.spec, namespaceMapping: { shop: 'copy' } };
    const object = transform(dataPod, ctx);
    expect(object.metadata.namespace).toBe('copy');
    expect(((object.spec as JsonObject).initContainers as JsonObject[])[0]?.name).toBe('stowage-restore-wait');
  });

  it('puts init hooks after restore-wait and before the pod’s own init containers (Velero order)', () => {
    const ctx = context({
      volumes: { podVolumes: { 'shop/postgres-0': [{ volume: 'data', snapshotID: 's1' }] }, reprovisionedClaims: [] },
      hooks: [
        {
          name: 'prep',
          includedNamespaces: [],
          excludedNamespaces: [],
          includedResources: [],
          excludedResources: [],
          labelSelector: null,
          postHooks: [{ init: { initContainers: [{ name: 'hook-init', image: 'alpine' }] } }],
        },
      ],
    });
    const names = ((transform(dataPod, ctx).spec as JsonObject).initContainers as JsonObject[]).map((c) => c.name);
    expect(names).toEqual(['stowage-restore-wait', 'hook-init', 'chown']);
  });
});

describe('transformForRestore: Job, PVC, PV, ServiceAccount, bindings', () => {
  it('drops the controller-uid selector and template labels of a Job (Velero job_action_test)', () => {
    const job = item('jobs.batch', 'shop', 'migrate', {
      spec: {
        selector: { matchLabels: { 'controller-uid': 'a', 'batch.kubernetes.io/controller-uid': 'a', app: 'm' } },
        template: { metadata: { labels: { 'controller-uid': 'a', 'batch.kubernetes.io/controller-uid': 'a', 'job-name': 'migrate' } } },
      },
    });
    expect(transform(job).spec).toEqual({
      selector: { matchLabels: { app: 'm' } },
      template: { metadata: { labels: { 'job-name': 'migrate' } } },
    });
  });

  const claim = item(
    'persistentvolumeclaims',
    'shop',
    'data',
    { spec: { volumeName: 'pvc-1', storageClassName: 'standard' } },
    {
      annotations: {
        'pv.kubernetes.io/bind-completed': 'yes',
        'pv.kubernetes.io/bound-by-controller': 'yes',
        'volume.kubernetes.io/storage-provisioner': 'csi.example',
        'volume.beta.kubernetes.io/storage-provisioner': 'csi.example',
        'volume.kubernetes.io/selected-node': 'node-a',
        keep: 'me',
      },
    },
  );

  it.each<[string, string[], JsonObject, Record<string, string> | undefined]>([
    [
      'a reprovisioned claim loses volumeName and the binding/provisioner annotations (Velero PVCAction)',
      ['shop/data'],
      { storageClassName: 'standard' },
      { keep: 'me' },
    ],
    [
      'a claim of a statically restored PV keeps volumeName, loses the bind annotations',
      [],
      { volumeName: 'pvc-1', storageClassName: 'standard' },
      { keep: 'me' },
    ],
  ])('%s', (_name, reprovisionedClaims, spec, annotations) => {
    const object = transform(claim, context({ volumes: { podVolumes: {}, reprovisionedClaims } }));
    expect(object.spec).toEqual(spec);
    expect(object.metadata.annotations).toEqual(annotations);
  });

  it('maps a PV’s claimRef namespace and drops its uid/resourceVersion and bind annotations', () => {
    const pv = item(
      'persistentvolumes',
      null,
      'pv-archive',
      {
        spec: { claimRef: { namespace: 'shop', name: 'archive', uid: 'u', resourceVersion: '9' }, persistentVolumeReclaimPolicy: 'Retain' },
      },
      { annotations: { 'pv.kubernetes.io/bound-by-controller': 'yes' } },
    );
    const ctx = context();
    ctx.spec = { ...ctx.spec, namespaceMapping: { shop: 'copy' } };
    const object = transform(pv, ctx);
    expect(object.spec).toEqual({ claimRef: { namespace: 'copy', name: 'archive' }, persistentVolumeReclaimPolicy: 'Retain' });
    expect(object.metadata.annotations).toBeUndefined();
    expect(object.metadata.namespace).toBeUndefined();
  });

  it('drops the first auto-created token secret of a ServiceAccount (Velero service_account_action)', () => {
    const sa = item('serviceaccounts', 'shop', 'builder', {
      secrets: [{ name: 'builder-token-abcde' }, { name: 'registry' }],
      imagePullSecrets: [{ name: 'registry' }],
    });
    const object = transform(sa);
    expect(object.secrets).toEqual([{ name: 'registry' }]);
    expect(object.imagePullSecrets).toEqual([{ name: 'registry' }]);
  });

  it('drops token, ca.crt and the account uid of a token Secret the user made; other Secrets keep their data', () => {
    const token = item(
      'secrets',
      'shop',
      'ci-token',
      { type: 'kubernetes.io/service-account-token', data: { token: 'dG9r', 'ca.crt': 'Y2E=', namespace: 'c2hvcA==' } },
      { annotations: { 'kubernetes.io/service-account.name': 'ci', 'kubernetes.io/service-account.uid': 'u1' } },
    );
    const object = transform(token);
    expect(object.data).toEqual({ namespace: 'c2hvcA==' });
    expect(object.metadata.annotations).toEqual({ 'kubernetes.io/service-account.name': 'ci' });
    const opaque = item('secrets', 'shop', 'db', { type: 'Opaque', data: { token: 'dG9r' } });
    expect(transform(opaque).data).toEqual({ token: 'dG9r' });
  });

  it.each([
    ['rolebindings.rbac.authorization.k8s.io', 'shop'],
    ['clusterrolebindings.rbac.authorization.k8s.io', null],
  ])('maps the subjects’ namespaces of %s (only mapped ones)', (groupResource, namespace) => {
    const binding = item(groupResource, namespace, 'rb', {
      subjects: [
        { kind: 'ServiceAccount', name: 'a', namespace: 'shop' },
        { kind: 'ServiceAccount', name: 'b', namespace: 'other' },
        { kind: 'User', name: 'alice' },
      ],
    });
    const ctx = context();
    ctx.spec = { ...ctx.spec, namespaceMapping: { shop: 'copy' } };
    expect(transform(binding, ctx).subjects).toEqual([
      { kind: 'ServiceAccount', name: 'a', namespace: 'copy' },
      { kind: 'ServiceAccount', name: 'b', namespace: 'other' },
      { kind: 'User', name: 'alice' },
    ]);
  });
});
