import { createHash } from 'node:crypto';
import { NEVER_BACKUP_LABEL } from '@stowage/core';
import type { KubeManifest } from './manifests.js';

/*
 * What `stowage install` applies: the rendered k8s/ deployment with the user's choices written in
 * (storage, S3 endpoint and credentials, images, an external Redis, replicas) and the Secrets the
 * base leaves to the installer. Data to data: the caller renders, generates the random values and
 * applies.
 */

export const NAMESPACE = 'stowage';

/** Secrets the installer makes once and never replaces: a new repository key would orphan every backup's volume data. */
export const API_TOKENS_SECRET = 'stowage-api-tokens';
export const REPO_KEY_SECRET = 'stowage-repo-key';
export const S3_CREDENTIALS_SECRET = 'stowage-s3-credentials';
export const REDIS_URL_SECRET = 'stowage-redis-url';
/** The claim of the filesystem layout: uninstall keeps it (it holds the backups). */
export const BACKUPS_CLAIM = 'stowage-backups';

/** The annotation that rolls the pods when the configuration they read changes. */
export const CONFIG_HASH_ANNOTATION = 'stowage.dev/config-sha256';

export interface InstallOptions {
  /** `s3://bucket[/prefix]`, or undefined: the stowage-backups claim. */
  storage?: string | undefined;
  s3Endpoint?: string | undefined;
  s3Region?: string | undefined;
  s3Credentials?: { accessKeyId: string; secretAccessKey: string } | undefined;
  /** `registry/stowage`: images become `<image>/api`, `<image>/worker`, … */
  image?: string | undefined;
  tag?: string | undefined;
  /** An external Redis instead of the bundled StatefulSet. */
  redisUrl?: string | undefined;
  /** Replicas per component (`app.kubernetes.io/component` of a Deployment: api, worker, …). */
  replicas?: Readonly<Record<string, number>> | undefined;
}

export interface PlannedObject {
  object: KubeManifest;
  /** Created when absent, never changed when present (generated secrets). */
  createOnly: boolean;
}

const clone = <T>(value: T): T => structuredClone(value);

interface Container {
  name: string;
  image?: string;
  env?: Array<{ name: string; value?: string; valueFrom?: unknown }>;
  envFrom?: Array<{ configMapRef?: { name: string } }>;
}
interface PodTemplate {
  metadata?: { annotations?: Record<string, string> };
  spec: { containers: Container[]; initContainers?: Container[] };
}

const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet']);

function templateOf(object: KubeManifest): PodTemplate | undefined {
  if (!WORKLOAD_KINDS.has(object.kind)) return undefined;
  return (object.spec as { template?: PodTemplate } | undefined)?.template;
}

const isRedisObject = (object: KubeManifest): boolean =>
  object.metadata.labels?.['app.kubernetes.io/name'] === 'stowage-redis' ||
  object.metadata.name === 'stowage-redis' ||
  /^stowage-redis-conf(-[a-z0-9]+)?$/.test(object.metadata.name);

/** The generated stowage-config ConfigMap (kustomize adds a hash suffix to its name). */
const isStowageConfig = (object: KubeManifest): boolean =>
  object.kind === 'ConfigMap' && /^stowage-config(-[a-z0-9]+)?$/.test(object.metadata.name);

/** The components whose replicas can be set: Deployments by `app.kubernetes.io/component`. */
export function replicaComponents(objects: readonly KubeManifest[]): string[] {
  return objects
    .filter((o) => o.kind === 'Deployment' && o.metadata.labels?.['app.kubernetes.io/component'])
    .map((o) => o.metadata.labels?.['app.kubernetes.io/component'] as string)
    .sort();
}

/** Stowage's key, credentials and tokens: left out of every backup (no key beside its ciphertext, SECURITY.md). */
function secret(name: string, data: Record<string, string>): KubeManifest {
  return {
    apiVersion: 'v1',
    kind: 'Secret',
    metadata: { name, namespace: NAMESPACE, labels: { 'app.kubernetes.io/part-of': 'stowage', [NEVER_BACKUP_LABEL]: 'true' } },
    type: 'Opaque',
    // data, not stringData: what the API server stores, so a second apply finds nothing to change.
    data: Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'utf8').toString('base64')])),
  };
}

/** `stowage/api:0.1.0` → `<image>/api:<tag>`; other images (Redis) stay. */
function retag(image: string, options: InstallOptions): string {
  const m = /^stowage\/([^:@]+)(?::([^@]+))?$/.exec(image);
  if (!m) return image;
  const repository = options.image ? `${options.image.replace(/\/+$/, '')}/${m[1]}` : `stowage/${m[1]}`;
  const tag = options.tag ?? m[2];
  return tag ? `${repository}:${tag}` : repository;
}

/**
 * The objects to apply, in order: the rendering's (namespace and CRDs first), the secrets before
 * the first workload. `random()` gives a fresh secret value (hex) for the generated secrets.
 */
export function planInstall(rendered: readonly KubeManifest[], options: InstallOptions, random: () => string): PlannedObject[] {
  const objects = rendered.filter((o) => !(options.redisUrl && isRedisObject(o))).map(clone);
  // An aggregated ClusterRole's rules are the control plane's to fill: applying the manifest's
  // `rules: []` would empty them on every install until the aggregation refills them.
  for (const object of objects) if (object.kind === 'ClusterRole' && object.aggregationRule) delete object.rules;
  const config = objects.find(isStowageConfig);
  if (!config) throw new Error('the rendered deployment has no stowage-config ConfigMap');
  const data = (config.data ?? {}) as Record<string, string>;
  config.data = data;
  if (options.storage) data.STOWAGE_STORAGE = options.storage;
  if (options.s3Endpoint) data.STOWAGE_S3_ENDPOINT = options.s3Endpoint;
  if (options.s3Region) data.STOWAGE_S3_REGION = options.s3Region;
  if (options.redisUrl) delete data.REDIS_URL;
  // Restored pods wait for their volumes in an init container of the node agent's image as
  // deployed (the overlays' kustomize replacement does the same): with --image/--tag it moves too.
  const agentImage = objects
    .filter((o) => o.kind === 'DaemonSet')
    .flatMap((o) => templateOf(o)?.spec.containers ?? [])
    .find((c) => c.name === 'node-agent')?.image;
  if (agentImage) data.STOWAGE_RESTORE_WAIT_IMAGE = retag(agentImage, options);

  const secrets: PlannedObject[] = [
    { object: secret(API_TOKENS_SECRET, { tokens: random() }), createOnly: true },
    { object: secret(REPO_KEY_SECRET, { key: random() }), createOnly: true },
  ];
  if (options.s3Credentials)
    secrets.push({
      object: secret(S3_CREDENTIALS_SECRET, {
        AWS_ACCESS_KEY_ID: options.s3Credentials.accessKeyId,
        AWS_SECRET_ACCESS_KEY: options.s3Credentials.secretAccessKey,
      }),
      createOnly: false,
    });
  // A Redis URL may carry a password: a Secret, read as REDIS_URL (env wins over envFrom).
  if (options.redisUrl) secrets.push({ object: secret(REDIS_URL_SECRET, { url: options.redisUrl }), createOnly: false });

  // What the pods read, hashed into their template: a changed setting rolls them.
  const configHash = createHash('sha256')
    .update(JSON.stringify([data, options.s3Credentials ?? null, options.redisUrl ?? null]))
    .digest('hex');
  for (const object of objects) {
    const template = templateOf(object);
    if (!template) continue;
    const readsConfig = template.spec.containers.some((c) => c.envFrom?.some((e) => e.configMapRef?.name === config.metadata.name));
    for (const container of [...template.spec.containers, ...(template.spec.initContainers ?? [])]) {
      if (container.image) container.image = retag(container.image, options);
      if (options.redisUrl && container.envFrom?.some((e) => e.configMapRef?.name === config.metadata.name)) {
        container.env = [
          ...(container.env ?? []).filter((e) => e.name !== 'REDIS_URL'),
          { name: 'REDIS_URL', valueFrom: { secretKeyRef: { name: REDIS_URL_SECRET, key: 'url' } } },
        ];
      }
    }
    if (readsConfig) {
      template.metadata ??= {};
      template.metadata.annotations = { ...template.metadata.annotations, [CONFIG_HASH_ANNOTATION]: configHash };
    }
  }

  for (const [component, count] of Object.entries(options.replicas ?? {})) {
    const deployment = objects.find((o) => o.kind === 'Deployment' && o.metadata.labels?.['app.kubernetes.io/component'] === component);
    if (!deployment) throw new Error(`no Deployment of component ${component}`);
    // A Deployment an autoscaler owns has no replicas of its own: the autoscaler's floor is set instead.
    const hpa = objects.find(
      (o) =>
        o.kind === 'HorizontalPodAutoscaler' &&
        (o.spec as { scaleTargetRef?: { kind?: string; name?: string } }).scaleTargetRef?.name === deployment.metadata.name,
    );
    if (hpa) {
      const spec = hpa.spec as { minReplicas?: number; maxReplicas: number };
      spec.minReplicas = count;
      spec.maxReplicas = Math.max(spec.maxReplicas, count);
    } else {
      (deployment.spec as { replicas?: number }).replicas = count;
    }
  }

  const firstWorkload = objects.findIndex((o) => WORKLOAD_KINDS.has(o.kind) || o.kind === 'Service' || o.kind === 'PersistentVolumeClaim');
  const planned = objects.map((object) => ({ object, createOnly: false }));
  planned.splice(firstWorkload < 0 ? planned.length : firstWorkload, 0, ...secrets);
  return planned;
}

/** `kind/name` as kubectl prints it (`deployment.apps/stowage-api`). */
export function objectRef(object: Pick<KubeManifest, 'apiVersion' | 'kind' | 'metadata'>): string {
  const group = object.apiVersion.includes('/') ? object.apiVersion.slice(0, object.apiVersion.indexOf('/')) : '';
  return `${object.kind.toLowerCase()}${group ? `.${group}` : ''}/${object.metadata.name}`;
}

/** Objects uninstall leaves: the namespace holding the repository key (a reinstall reads the kept backups with it) and the backups claim. */
export function keptOnUninstall(object: Pick<KubeManifest, 'kind' | 'metadata'>): boolean {
  return (
    object.kind === 'Namespace' ||
    (object.kind === 'Secret' && object.metadata.name === REPO_KEY_SECRET) ||
    (object.kind === 'PersistentVolumeClaim' && object.metadata.name === BACKUPS_CLAIM)
  );
}
