import { QUEUE_PREFIX, QueueName } from '@stowage/queue';
import { beforeAll, describe, expect, it } from 'vitest';
import {
  type Container,
  containersOf,
  describe as describeObject,
  type EnvVar,
  findGenerated,
  findObject,
  type KubeObject,
  renderOverlay,
  type Workload,
  workloadsOf,
} from './manifests.js';
import { type JsonSchema, schemaAt, schemaProblems, structuralSchemaProblems } from './schema-validation.js';

const NAMESPACE = 'stowage';
const NODE_AGENT = 'stowage-node-agent';
const EXTERNAL_SECRETS = ['stowage-api-tokens', 'stowage-repo-key'];
/** Prod keeps backups in S3; the bucket's credentials are a Secret created out of band too. */
const PROD_EXTERNAL_SECRETS = [...EXTERNAL_SECRETS, 'stowage-s3-credentials'].sort();
/** The api, worker and node agent answer these (services/*); Redis is probed with redis-cli. */
const STOWAGE_WORKLOADS = ['stowage-api', 'stowage-worker', 'stowage-restorer', NODE_AGENT];

const rendered: Record<'dev' | 's3' | 'prod', KubeObject[]> = { dev: [], s3: [], prod: [] };

beforeAll(async () => {
  rendered.dev = await renderOverlay('dev');
  // The base with S3 storage: what `stowage install --storage s3://…` applies.
  rendered.s3 = await renderOverlay('s3');
  rendered.prod = await renderOverlay('prod');
});

function envOf(container: Container, name: string): EnvVar | undefined {
  return container.env?.find((variable) => variable.name === name);
}

function shutdownTimeoutMs(objects: readonly KubeObject[]): number {
  const config = findGenerated(objects, 'ConfigMap', 'stowage-config');
  const value = (config?.data as Record<string, string> | undefined)?.STOWAGE_SHUTDOWN_TIMEOUT_MS;
  if (value === undefined) throw new Error('stowage-config has no STOWAGE_SHUTDOWN_TIMEOUT_MS');
  return Number(value);
}

function workload(objects: readonly KubeObject[], name: string): Workload {
  const found = workloadsOf(objects).find((candidate) => candidate.object.metadata.name === name);
  if (!found) throw new Error(`no workload ${name}`);
  return found;
}

function matches(selector: Record<string, string>, labels: Record<string, string>): boolean {
  return Object.entries(selector).every(([key, value]) => labels[key] === value);
}

describe.each(['dev', 's3', 'prod'] as const)('k8s/overlays/%s', (overlay) => {
  const objects = () => rendered[overlay];

  it('renders and every object passes its Kubernetes schema', () => {
    expect(objects().length).toBeGreaterThan(20);
    expect(objects().flatMap(schemaProblems)).toEqual([]);
  });

  it('puts every namespaced object in the stowage namespace', () => {
    const clusterScoped = new Set(['Namespace', 'CustomResourceDefinition', 'ClusterRole', 'ClusterRoleBinding']);
    const misplaced = objects()
      .filter((object) => !clusterScoped.has(object.kind) && object.metadata.namespace !== NAMESPACE)
      .map(describeObject);
    expect(misplaced).toEqual([]);
  });

  const volumeOperationPhases = { enum: ['New', 'InProgress', 'Completed', 'Failed', 'Canceling', 'Canceled'] };
  it.each([
    {
      kind: 'PodVolumeBackup',
      plural: 'podvolumebackups',
      version: 'v1alpha1',
      scope: 'Namespaced',
      columns: ['Phase', 'Node', 'Bytes Done'],
      phase: volumeOperationPhases,
    },
    {
      kind: 'PodVolumeRestore',
      plural: 'podvolumerestores',
      version: 'v1alpha1',
      scope: 'Namespaced',
      columns: ['Phase', 'Pod', 'Volume', 'Node', 'Bytes Done'],
      phase: volumeOperationPhases,
    },
    {
      kind: 'Backup',
      plural: 'backups',
      version: 'v1',
      scope: 'Namespaced',
      columns: ['Phase', 'Progress', 'Errors', 'Warnings', 'Expires', 'Age'],
      phase: { type: 'string' },
    },
    {
      kind: 'ClusterBackup',
      plural: 'clusterbackups',
      version: 'v1',
      scope: 'Cluster',
      columns: ['Phase', 'Progress', 'Errors', 'Warnings', 'Expires', 'Age'],
      phase: { type: 'string' },
    },
    {
      kind: 'Restore',
      plural: 'restores',
      version: 'v1',
      scope: 'Namespaced',
      columns: ['Phase', 'Backup', 'Progress', 'Errors', 'Warnings', 'Age'],
      phase: { type: 'string' },
    },
    {
      kind: 'ClusterRestore',
      plural: 'clusterrestores',
      version: 'v1',
      scope: 'Cluster',
      columns: ['Phase', 'Backup', 'Progress', 'Errors', 'Warnings', 'Age'],
      phase: { type: 'string' },
    },
    {
      kind: 'Schedule',
      plural: 'schedules',
      version: 'v1',
      scope: 'Namespaced',
      columns: ['Phase', 'Schedule', 'Paused', 'Last-Backup', 'Next-Run', 'Age'],
      phase: { type: 'string' },
    },
    {
      kind: 'ClusterSchedule',
      plural: 'clusterschedules',
      version: 'v1',
      scope: 'Cluster',
      columns: ['Phase', 'Schedule', 'Paused', 'Last-Backup', 'Next-Run', 'Age'],
      phase: { type: 'string' },
    },
  ])(
    'ships the $kind CRD with a structural schema, status subresource and printer columns',
    ({ kind, plural, version: versionName, scope, columns: expectedColumns, phase }) => {
      const crd = findObject(objects(), 'CustomResourceDefinition', `${plural}.stowage.dev`);
      const spec = crd.spec as {
        group: string;
        scope: string;
        names: { kind: string; plural: string };
        versions: {
          name: string;
          served: boolean;
          storage: boolean;
          subresources?: { status?: object };
          schema: { openAPIV3Schema: JsonSchema };
          additionalPrinterColumns: { name: string; jsonPath: string }[];
        }[];
      };
      expect({ group: spec.group, scope: spec.scope, kind: spec.names.kind, plural: spec.names.plural }).toEqual({
        group: 'stowage.dev',
        scope,
        kind,
        plural,
      });
      const [version] = spec.versions;
      expect(version).toMatchObject({ name: versionName, served: true, storage: true, subresources: { status: {} } });
      const schema = version!.schema.openAPIV3Schema;
      expect(structuralSchemaProblems(schema)).toEqual([]);
      const columns = version!.additionalPrinterColumns.map((column) => column.name);
      expect(columns).toEqual(expect.arrayContaining(expectedColumns));
      // every column reads a field the schema declares (metadata is the server's)
      const dangling = version!.additionalPrinterColumns
        .filter((column) => !column.jsonPath.startsWith('.metadata.') && schemaAt(schema, column.jsonPath) === undefined)
        .map((column) => column.jsonPath);
      expect(dangling).toEqual([]);
      expect(schemaAt(schema, '.status.phase')).toMatchObject(phase);
    },
  );

  it('gives every container resource requests and a memory limit, and liveness and readiness probes', () => {
    const problems: string[] = [];
    for (const { object, pod } of workloadsOf(objects())) {
      for (const container of containersOf(pod)) {
        const where = `${describeObject(object)} ${container.name}`;
        if (!container.resources?.requests?.cpu || !container.resources.requests.memory) problems.push(`${where}: no cpu/memory request`);
        if (!container.resources?.limits?.memory) problems.push(`${where}: no memory limit`);
        if (!container.livenessProbe) problems.push(`${where}: no liveness probe`);
        if (!container.readinessProbe) problems.push(`${where}: no readiness probe`);
      }
    }
    expect(problems).toEqual([]);
    for (const name of STOWAGE_WORKLOADS) {
      const [container] = workload(objects(), name).pod.containers;
      expect(container?.livenessProbe?.httpGet?.path, name).toBe('/livez');
      expect(container?.readinessProbe?.httpGet?.path, name).toBe('/readyz');
    }
  });

  it('runs every pod except the node agent non-root with a read-only root, no capabilities and RuntimeDefault seccomp', () => {
    const problems: string[] = [];
    for (const { object, pod } of workloadsOf(objects())) {
      if (object.metadata.name === NODE_AGENT) continue;
      for (const container of containersOf(pod)) {
        const where = `${describeObject(object)} ${container.name}`;
        const context = { ...pod.securityContext, ...container.securityContext };
        if (context.runAsNonRoot !== true) problems.push(`${where}: runAsNonRoot is not true`);
        if (context.runAsUser === 0) problems.push(`${where}: runs as uid 0`);
        if (context.privileged) problems.push(`${where}: privileged`);
        if (context.allowPrivilegeEscalation !== false) problems.push(`${where}: allowPrivilegeEscalation is not false`);
        if (context.readOnlyRootFilesystem !== true) problems.push(`${where}: root filesystem is writable`);
        if (!context.capabilities?.drop?.includes('ALL')) problems.push(`${where}: capabilities not dropped`);
        if ((context.capabilities?.add ?? []).length > 0) problems.push(`${where}: adds capabilities`);
        if (context.seccompProfile?.type !== 'RuntimeDefault') problems.push(`${where}: seccomp is not RuntimeDefault`);
      }
    }
    expect(problems).toEqual([]);
  });

  it('gives the node agent only the capabilities backups and restores need, the kubelet pods directory with HostToContainer, and its node name', () => {
    const agent = workload(objects(), NODE_AGENT);
    expect(agent.object.kind).toBe('DaemonSet');
    const [container] = agent.pod.containers;
    const context = { ...agent.pod.securityContext, ...container!.securityContext };
    expect(context).toMatchObject({
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'], add: ['DAC_READ_SEARCH', 'DAC_OVERRIDE', 'CHOWN', 'FOWNER'] },
      seccompProfile: { type: 'RuntimeDefault' },
    });
    expect(context.privileged).not.toBe(true);

    const hostVolume = agent.pod.volumes?.find((volume) => volume.hostPath?.path === '/var/lib/kubelet/pods');
    expect(hostVolume, 'a hostPath volume of /var/lib/kubelet/pods').toBeDefined();
    const hostPathVolumes = agent.pod.volumes?.filter((volume) => volume.hostPath) ?? [];
    expect(hostPathVolumes).toHaveLength(1);
    const mount = container!.volumeMounts?.find((candidate) => candidate.name === hostVolume!.name);
    // writable: PodVolumeRestores are restored into the pods' volume directories
    expect(mount).toMatchObject({ mountPropagation: 'HostToContainer' });
    expect(mount?.readOnly).not.toBe(true);

    expect(envOf(container!, 'STOWAGE_NODE_NAME')?.valueFrom?.fieldRef?.fieldPath).toBe('spec.nodeName');
    expect(agent.pod.tolerations).toContainEqual({ operator: 'Exists' });
    // the load concurrency config is Velero-shaped and parses
    const loadRef = envOf(container!, 'STOWAGE_LOAD_CONCURRENCY')?.valueFrom?.configMapKeyRef;
    const loadConfigMap = findObject(objects(), 'ConfigMap', loadRef!.name);
    const loadConcurrency = JSON.parse((loadConfigMap.data as Record<string, string>)[loadRef!.key]!) as unknown;
    expect(loadConcurrency).toMatchObject({
      globalConfig: expect.any(Number),
      perNodeConfig: [{ nodeSelector: { matchLabels: expect.any(Object) }, number: expect.any(Number) }],
    });
  });

  it('gives every pod more termination grace than the shutdown timeout', () => {
    const timeoutMs = shutdownTimeoutMs(objects());
    expect(timeoutMs).toBe(20_000);
    for (const { object, pod } of workloadsOf(objects())) {
      expect(pod.terminationGracePeriodSeconds ?? 30, describeObject(object)).toBeGreaterThan(timeoutMs / 1000);
    }
  });

  it('resolves every reference: ConfigMaps, Secrets, claims and service accounts', () => {
    const has = (kind: string, name: string) => objects().some((object) => object.kind === kind && object.metadata.name === name);
    // dev generates its placeholders; s3 (install makes them) and prod reference them.
    const external = overlay === 'dev' ? new Set<string>() : new Set(PROD_EXTERNAL_SECRETS);
    const missing: string[] = [];
    for (const { object, pod } of workloadsOf(objects())) {
      const where = describeObject(object);
      if (pod.serviceAccountName && !has('ServiceAccount', pod.serviceAccountName)) missing.push(`${where}: ${pod.serviceAccountName}`);
      for (const volume of pod.volumes ?? []) {
        if (volume.persistentVolumeClaim && !has('PersistentVolumeClaim', volume.persistentVolumeClaim.claimName)) {
          missing.push(`${where}: claim ${volume.persistentVolumeClaim.claimName}`);
        }
        if (volume.configMap && !has('ConfigMap', volume.configMap.name)) missing.push(`${where}: ConfigMap ${volume.configMap.name}`);
      }
      for (const container of containersOf(pod)) {
        for (const source of container.envFrom ?? []) {
          if (source.configMapRef && !has('ConfigMap', source.configMapRef.name)) missing.push(`${where}: ${source.configMapRef.name}`);
        }
        for (const variable of container.env ?? []) {
          const secret = variable.valueFrom?.secretKeyRef?.name;
          if (secret && !has('Secret', secret) && !external.has(secret)) missing.push(`${where}: Secret ${secret}`);
          const configMap = variable.valueFrom?.configMapKeyRef?.name;
          if (configMap && !has('ConfigMap', configMap)) missing.push(`${where}: ConfigMap ${configMap}`);
        }
      }
    }
    expect(missing).toEqual([]);
  });

  it('never puts a key or token into a container as a literal value', () => {
    const literal = workloadsOf(objects()).flatMap(({ object, pod }) =>
      containersOf(pod).flatMap((container) =>
        (container.env ?? [])
          .filter((variable) => /KEY|TOKEN|PASSWORD|SECRET/.test(variable.name) && variable.value !== undefined)
          .map((variable) => `${describeObject(object)} ${container.name}: ${variable.name}`),
      ),
    );
    expect(literal).toEqual([]);
    const secretRef = (container: Container, name: string) => envOf(container, name)?.valueFrom?.secretKeyRef?.name;
    expect(secretRef(workload(objects(), 'stowage-api').pod.containers[0]!, 'STOWAGE_API_TOKENS')).toMatch(/^stowage-api-tokens/);
    expect(secretRef(workload(objects(), NODE_AGENT).pod.containers[0]!, 'STOWAGE_REPO_KEY')).toMatch(/^stowage-repo-key/);
  });

  it('runs Redis as a StatefulSet with AOF and noeviction on a claim, behind a headless Service', () => {
    const redis = workload(objects(), 'stowage-redis');
    expect(redis.object.kind).toBe('StatefulSet');
    const templates = (redis.object.spec as { volumeClaimTemplates?: { metadata: { name: string } }[] }).volumeClaimTemplates ?? [];
    const [container] = redis.pod.containers;
    const dataMount = container!.volumeMounts?.find((mount) => mount.mountPath === '/data');
    expect(templates.map((template) => template.metadata.name)).toContain(dataMount?.name);
    const configVolume = redis.pod.volumes?.find((volume) => volume.configMap);
    const redisConf = (findObject(objects(), 'ConfigMap', configVolume!.configMap!.name).data as Record<string, string>)['redis.conf'];
    expect(redisConf).toMatch(/^appendonly yes$/m);
    expect(redisConf).toMatch(/^maxmemory-policy noeviction$/m);
    expect(container!.args?.join(' ') ?? '').toContain('/etc/redis/redis.conf');
    const service = findObject(objects(), 'Service', 'stowage-redis');
    expect((service.spec as { clusterIP?: string }).clusterIP).toBe('None');
    const redisUrl = (findGenerated(objects(), 'ConfigMap', 'stowage-config')?.data as Record<string, string> | undefined)?.REDIS_URL;
    expect(redisUrl).toBe('redis://stowage-redis:6379');
  });
  it('gives restored pods the node agent image as deployed for their restore-wait init container, never :latest', () => {
    const config = findGenerated(objects(), 'ConfigMap', 'stowage-config')?.data as Record<string, string> | undefined;
    const agentImage = workload(objects(), NODE_AGENT).pod.containers[0]?.image;
    expect(agentImage).toMatch(/^stowage\/node-agent:(dev|0\.1\.0)$/);
    expect(config?.STOWAGE_RESTORE_WAIT_IMAGE).toBe(agentImage);
  });

  it('gives the repository key to the backup workers and node agents only, never to the api or the restorer', () => {
    const holders = workloadsOf(objects())
      .filter(({ pod }) => containersOf(pod).some((container) => envOf(container, 'STOWAGE_REPO_KEY') !== undefined))
      .map(({ object }) => object.metadata.name)
      .sort();
    expect(holders).toEqual(['stowage-node-agent', 'stowage-worker']);
    const queues = envOf(workload(objects(), 'stowage-worker').pod.containers[0]!, 'STOWAGE_WORKER_QUEUES')?.value;
    expect(queues?.split(',')).toContain('repository');
    expect(envOf(workload(objects(), 'stowage-restorer').pod.containers[0]!, 'STOWAGE_WORKER_QUEUES')?.value).toBe('restore-items');
  });

  it("runs the api with users' Kubernetes tokens and the resource controller on (docs/tenancy.md), no other workload", () => {
    const api = workload(objects(), 'stowage-api').pod.containers[0]!;
    expect(envOf(api, 'STOWAGE_KUBE_AUTH')?.value).toBe('enabled');
    expect(envOf(api, 'STOWAGE_CONTROLLER')?.value).toBe('enabled');
    const elsewhere = workloadsOf(objects())
      .filter(({ object }) => object.metadata.name !== 'stowage-api')
      .flatMap(({ object, pod }) =>
        containersOf(pod)
          .filter((c) => envOf(c, 'STOWAGE_KUBE_AUTH') !== undefined || envOf(c, 'STOWAGE_CONTROLLER') !== undefined)
          .map((c) => `${describeObject(object)} ${c.name}`),
      );
    expect(elsewhere).toEqual([]);
  });

  // What each identity may and must not do is asked of an API server: identities.int.test.ts.
});

describe('k8s/overlays/dev', () => {
  it('runs one replica of each, scales workers on CPU, and generates placeholder Secrets', () => {
    const objects = rendered.dev;
    expect((findObject(objects, 'Deployment', 'stowage-api').spec as { replicas?: number }).replicas).toBe(1);
    const hpa = findObject(objects, 'HorizontalPodAutoscaler', 'stowage-worker');
    expect(hpa.spec).toMatchObject({
      scaleTargetRef: { kind: 'Deployment', name: 'stowage-worker' },
      metrics: [{ type: 'Resource', resource: { name: 'cpu' } }],
    });
    for (const name of EXTERNAL_SECRETS) expect(findGenerated(objects, 'Secret', name), name).toBeDefined();
    expect(objects.some((object) => object.kind === 'ScaledObject')).toBe(false);
  });
});

describe('k8s/overlays/prod', () => {
  it('contains no Secret: the api tokens and repository key are created out of band and referenced', () => {
    const secrets = rendered.prod.filter((object) => object.kind === 'Secret');
    expect(secrets.map(describeObject)).toEqual([]);
    const referenced = workloadsOf(rendered.prod).flatMap(({ pod }) =>
      containersOf(pod).flatMap((container) => (container.env ?? []).flatMap((variable) => variable.valueFrom?.secretKeyRef?.name ?? [])),
    );
    expect([...new Set(referenced)].sort()).toEqual(PROD_EXTERNAL_SECRETS);
  });

  it('names the bucket with a prefix and its region', () => {
    const config = findGenerated(rendered.prod, 'ConfigMap', 'stowage-config')?.data as Record<string, string>;
    expect(config.STOWAGE_STORAGE).toMatch(/^s3:\/\/[a-z0-9.-]+\/[a-z0-9/-]+$/);
    expect(config.STOWAGE_S3_REGION).toBeDefined();
  });
});

describe.each(['s3', 'prod'] as const)('k8s/overlays/%s (k8s/components/s3-storage)', (overlay) => {
  it('keeps backups and the repository in S3: s3:// storage, credentials from a Secret, no ReadWriteMany claim, no backup volume', () => {
    const objects = rendered[overlay];
    const config = findGenerated(objects, 'ConfigMap', 'stowage-config')?.data as Record<string, string>;
    expect(config.STOWAGE_STORAGE).toMatch(/^s3:\/\/[a-z0-9.-]+(\/[a-z0-9/-]+)?$/);
    const claims = objects.filter((object) => object.kind === 'PersistentVolumeClaim');
    expect(claims.map(describeObject)).toEqual([]);
    expect(JSON.stringify(objects)).not.toContain('ReadWriteMany');
    for (const name of STOWAGE_WORKLOADS) {
      const { pod } = workload(objects, name);
      const container = pod.containers[0]!;
      for (const variable of ['AWS_ACCESS_KEY_ID', 'AWS_SECRET_ACCESS_KEY']) {
        expect(envOf(container, variable)?.valueFrom?.secretKeyRef, `${name} ${variable}`).toEqual({
          name: 'stowage-s3-credentials',
          key: variable,
        });
      }
      expect(
        container.envFrom?.some((source) => source.configMapRef?.name.startsWith('stowage-config')),
        name,
      ).toBe(true);
      expect(
        (pod.volumes ?? []).filter((volume) => volume.persistentVolumeClaim).map((volume) => volume.name),
        name,
      ).toEqual([]);
      expect(JSON.stringify(container.volumeMounts ?? []), name).not.toContain('/var/lib/stowage/backups');
    }
  });
});

describe('k8s/overlays/prod: scaling', () => {
  it('runs two or more api replicas and workers, each protected by a PodDisruptionBudget', () => {
    const objects = rendered.prod;
    expect((findObject(objects, 'Deployment', 'stowage-api').spec as { replicas?: number }).replicas).toBeGreaterThanOrEqual(2);
    for (const name of ['stowage-api', 'stowage-worker']) {
      const pdb = objects.find(
        (object) =>
          object.kind === 'PodDisruptionBudget' &&
          matches(
            (object.spec as { selector: { matchLabels: Record<string, string> } }).selector.matchLabels,
            workload(objects, name).podLabels,
          ),
      );
      expect(pdb, `a PodDisruptionBudget selecting ${name}`).toBeDefined();
    }
  });

  it('lets KEDA alone scale the workers, on the BullMQ wait list of the item-blocks queue', () => {
    const objects = rendered.prod;
    expect(objects.filter((object) => object.kind === 'HorizontalPodAutoscaler').map(describeObject)).toEqual([]);
    const scaledObject = findObject(objects, 'ScaledObject', 'stowage-worker');
    const spec = scaledObject.spec as {
      scaleTargetRef: { name: string };
      minReplicaCount: number;
      maxReplicaCount: number;
      triggers: { type: string; metadata: Record<string, string> }[];
      advanced?: { horizontalPodAutoscalerConfig?: { behavior?: object } };
    };
    expect(findObject(objects, 'Deployment', spec.scaleTargetRef.name)).toBeDefined();
    expect(spec.minReplicaCount).toBeGreaterThanOrEqual(2);
    expect(spec.maxReplicaCount).toBeGreaterThan(spec.minReplicaCount);
    expect(spec.advanced?.horizontalPodAutoscalerConfig?.behavior).toBeDefined();
    const redisTrigger = spec.triggers.find((trigger) => trigger.type === 'redis');
    // the same key BullMQ 6 writes for Stowage's queue: <prefix>:<queue>:wait
    expect(redisTrigger?.metadata.listName).toBe(`${QUEUE_PREFIX}:${QueueName.itemBlocks}:wait`);
    expect(redisTrigger?.metadata.address).toBe(`stowage-redis.${NAMESPACE}.svc.cluster.local:6379`);
    expect(Number(redisTrigger?.metadata.listLength)).toBeGreaterThan(0);
    // the worker Deployment leaves the replica count to the autoscaler
    expect((findObject(objects, 'Deployment', 'stowage-worker').spec as { replicas?: number }).replicas).toBeUndefined();
  });
});

describe('schema validation', () => {
  it('rejects an object that breaks its schema, so a clean run means something', () => {
    const broken: KubeObject = {
      apiVersion: 'apps/v1',
      kind: 'Deployment',
      metadata: { name: 'broken' },
      spec: { replicas: 'two', template: { spec: { containers: [{ image: 'x' }] } } },
    };
    const [problem] = schemaProblems(broken);
    expect(problem).toMatch(/replicas must be integer|must have required property/);
    expect(schemaProblems({ apiVersion: 'example.com/v1', kind: 'Unknown', metadata: { name: 'x' } })).toEqual([
      'example.com/v1/Unknown x: no schema validator for this kind (add one to schema-validation.ts)',
    ]);
    expect(structuralSchemaProblems({ type: 'object', properties: { spec: { properties: {} } } })).toEqual([
      'openAPIV3Schema.properties.spec: no type',
      'openAPIV3Schema.properties.spec: properties on a non-object',
    ]);
  });
});
