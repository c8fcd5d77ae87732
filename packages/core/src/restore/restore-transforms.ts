/*
 * What a backed-up object looks like when it is created again (Velero's restore of one item and
 * its built-in restore item actions). Every change here is a "documented transform": restoreDiff
 * treats exactly these as expected.
 *
 * All kinds: metadata reset (generateName, selfLink, uid, resourceVersion, generation,
 * creationTimestamp, deletionTimestamp, deletionGracePeriodSeconds, ownerReferences,
 * managedFields dropped), status dropped, namespace mapped, labels `stowage.dev/backup-name`
 * and `stowage.dev/restore-name` set.
 * Per kind:
 * - Namespace: the mapped name.
 * - Service: clusterIP/clusterIPs cleared unless headless (`None`); nodePorts (and
 *   healthCheckNodePort) cleared unless preserveNodePorts, or the user set them explicitly
 *   (in `kubectl.kubernetes.io/last-applied-configuration` or their managedFields), as Velero.
 * - Pod: nodeName and priority dropped (scheduler and admission set them again); the legacy
 *   service-account token volume (`<sa>-token-…`) and its mounts dropped; init hooks added
 *   before the pod's own init containers and, when volumes are restored, `stowage-restore-wait`
 *   first of all.
 * - Job: the controller-uid selector and template labels dropped (the new Job gets a new uid).
 * - PersistentVolumeClaim: the binding and provisioner annotations dropped (CLAIM_BINDING_ANNOTATIONS);
 *   `volumeName` dropped when the claim is reprovisioned (its data comes back through a PodVolumeRestore).
 * - PersistentVolume (restored statically): claimRef namespace mapped, its uid/resourceVersion and
 *   the bind annotations dropped, so the controller binds it to the restored claim.
 * - ServiceAccount: the legacy auto-created token secret dropped from `secrets`.
 * - Secret of type service-account-token (one the user made; auto-created ones are not
 *   restored): token, ca.crt and the account-uid annotation dropped (the token controller
 *   fills them for the restored account).
 * - RoleBinding/ClusterRoleBinding: subjects' namespaces mapped.
 */

import { fnv1a64Hex } from '../hash.js';
import type { HookWarning } from '../hooks.js';
import { resolveRestoreHooks } from './restore-hooks.js';
import { objectKey, type RestoreVolumePlan } from './restore-selection.js';
import type { RestoreSpec } from './restore-spec.schema.js';
import type { JsonObject, RestoreItem, RestoreObject } from './types.js';

export const RESTORE_WAIT_CONTAINER_NAME = 'stowage-restore-wait';
/** The env var that tells the restore-wait program which done markers to wait for. */
export const RESTORE_UID_ENV = 'STOWAGE_RESTORE_UID';
/** The env var bounding the restore-wait program's wait (ms): the restore's itemOperationTimeout. */
export const RESTORE_WAIT_TIMEOUT_ENV = 'STOWAGE_RESTORE_WAIT_TIMEOUT_MS';
/** Where the restore-wait container mounts each restored volume: `/restores/<volume>`. */
export const RESTORE_WAIT_MOUNT_ROOT = '/restores';
export const RESTORE_BACKUP_NAME_LABEL = 'stowage.dev/backup-name';
export const RESTORE_NAME_LABEL = 'stowage.dev/restore-name';

export const LAST_APPLIED_CONFIG_ANNOTATION = 'kubectl.kubernetes.io/last-applied-configuration';
export const PV_BIND_COMPLETED_ANNOTATION = 'pv.kubernetes.io/bind-completed';
export const PV_BOUND_BY_CONTROLLER_ANNOTATION = 'pv.kubernetes.io/bound-by-controller';
/** Annotations the PV controller and provisioners put on a claim; a restored claim starts without them (Velero's PVCAction). */
export const CLAIM_BINDING_ANNOTATIONS: readonly string[] = [
  PV_BIND_COMPLETED_ANNOTATION,
  PV_BOUND_BY_CONTROLLER_ANNOTATION,
  'volume.kubernetes.io/storage-provisioner',
  'volume.beta.kubernetes.io/storage-provisioner',
  'volume.kubernetes.io/selected-node',
];
export const JOB_CONTROLLER_UID_LABELS: readonly string[] = ['batch.kubernetes.io/controller-uid', 'controller-uid'];

/** Metadata fields a restore drops (Velero's resetMetadata, plus managedFields). */
export const RESET_METADATA_FIELDS: readonly string[] = [
  'generateName',
  'selfLink',
  'uid',
  'resourceVersion',
  'generation',
  'creationTimestamp',
  'deletionTimestamp',
  'deletionGracePeriodSeconds',
  'ownerReferences',
  'managedFields',
];

/** The restore-wait init container's image and command (the node agent's image ships the program). */
export interface RestoreWaitContainerConfig {
  image: string;
  command: string[];
}

export interface RestoreTransformContext {
  backupName: string;
  restoreName: string;
  /** The restore's uid: the done marker's name, `.stowage/<restoreUid>`. */
  restoreUid: string;
  /** The restore spec (itemOperationTimeoutMs, when given, bounds the restore-wait container). */
  spec: Pick<RestoreSpec, 'namespaceMapping' | 'preserveNodePorts' | 'hooks'> & Partial<Pick<RestoreSpec, 'itemOperationTimeoutMs'>>;
  volumes: RestoreVolumePlan;
  restoreWait: RestoreWaitContainerConfig;
}

export interface TransformedItem {
  /** The object to create. */
  object: RestoreObject;
  /** Hook annotation problems (the default was used): warnings of the restore. */
  warnings: HookWarning[];
}

type Json = Record<string, unknown>;

function asRecord(value: unknown): Json | undefined {
  return typeof value === 'object' && value !== null && !Array.isArray(value) ? (value as Json) : undefined;
}

function asArray(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function isKind(item: Pick<RestoreItem, 'group' | 'resource'>, group: string, resource: string): boolean {
  return item.group === group && item.resource === resource;
}

/**
 * A name as a label value: as it is up to 63 characters, else its first 57 and 6 hex digits of
 * a hash (Velero's label.GetValidName does the same with sha256), so it stays unique and valid.
 */
export function labelValueOf(name: string): string {
  if (name.length <= 63) return name;
  return `${name.slice(0, 57)}${fnv1a64Hex(name).slice(0, 6)}`;
}

/** Drops the fields of `metadata` a restore never carries over. */
export function resetMetadata(metadata: Json): void {
  for (const field of RESET_METADATA_FIELDS) delete metadata[field];
}

/** The restore-wait init container's requests and limits. */
export const RESTORE_WAIT_RESOURCES = Object.freeze({
  requests: Object.freeze({ cpu: '10m', memory: '32Mi' }),
  limits: Object.freeze({ cpu: '100m', memory: '128Mi' }),
});

/** The restore-wait init container for `volumes` (contract: first init container, one mount per volume). */
export function buildRestoreWaitContainer(
  context: Pick<RestoreTransformContext, 'restoreUid' | 'restoreWait' | 'spec'>,
  volumes: readonly string[],
): JsonObject {
  const env = [{ name: RESTORE_UID_ENV, value: context.restoreUid }];
  const timeoutMs = context.spec.itemOperationTimeoutMs;
  if (timeoutMs !== undefined) env.push({ name: RESTORE_WAIT_TIMEOUT_ENV, value: String(timeoutMs) });
  return {
    name: RESTORE_WAIT_CONTAINER_NAME,
    image: context.restoreWait.image,
    command: [...context.restoreWait.command],
    env,
    volumeMounts: volumes.map((volume) => ({ name: volume, mountPath: `${RESTORE_WAIT_MOUNT_ROOT}/${volume}` })),
    // Pod Security `restricted` passes it, so a namespace that enforces it restores pods with
    // volume data. Its user is the pod's (runAsUser) or else the image's non-root one (10001).
    securityContext: {
      runAsNonRoot: true,
      allowPrivilegeEscalation: false,
      readOnlyRootFilesystem: true,
      capabilities: { drop: ['ALL'] },
      seccompProfile: { type: 'RuntimeDefault' },
    },
    // It only stats a marker per volume: little, and bounded (a namespace's LimitRange or quota
    // may require requests and limits).
    resources: {
      ...RESTORE_WAIT_RESOURCES,
      requests: { ...RESTORE_WAIT_RESOURCES.requests },
      limits: { ...RESTORE_WAIT_RESOURCES.limits },
    },
  };
}

/** Names of nodePorts the user set explicitly: `name:<port name>` or `port:<nodePort>` for unnamed ones. */
function explicitNodePorts(service: RestoreObject): { keys: Set<string>; fromManagedFields: Set<string> } {
  const keys = new Set<string>();
  const fromManagedFields = new Set<string>();
  const lastApplied = service.metadata.annotations?.[LAST_APPLIED_CONFIG_ANNOTATION];
  if (lastApplied !== undefined) {
    try {
      const applied = asRecord(JSON.parse(lastApplied));
      for (const port of asArray(asRecord(applied?.spec)?.ports)) {
        const record = asRecord(port);
        const nodePort = Number(record?.nodePort ?? 0);
        if (!record || !(nodePort > 0)) continue;
        keys.add(typeof record.name === 'string' && record.name !== '' ? `name:${record.name}` : `port:${nodePort}`);
      }
    } catch {
      // not JSON: nothing was set explicitly that we can tell
    }
    return { keys, fromManagedFields };
  }
  for (const entry of asArray(service.metadata.managedFields)) {
    const ports = asRecord(asRecord(asRecord(asRecord(entry)?.fieldsV1)?.['f:spec'])?.['f:ports']);
    for (const [key, value] of Object.entries(ports ?? {})) if (asRecord(value)?.['f:nodePort'] !== undefined) fromManagedFields.add(key);
  }
  return { keys, fromManagedFields };
}

function transformService(object: RestoreObject, preserveNodePorts: boolean, original: RestoreObject): void {
  const spec = asRecord(object.spec);
  if (!spec) return;
  if (spec.clusterIP !== 'None') {
    delete spec.clusterIP;
    delete spec.clusterIPs;
  }
  if (preserveNodePorts || spec.type === 'ExternalName') return;
  const explicit = explicitNodePorts(original);
  const usesLastApplied = original.metadata.annotations?.[LAST_APPLIED_CONFIG_ANNOTATION] !== undefined;
  for (const port of asArray(spec.ports)) {
    const record = asRecord(port);
    if (!record || record.nodePort === undefined) continue;
    let keep: boolean;
    if (usesLastApplied) {
      keep =
        typeof record.name === 'string' && record.name !== ''
          ? explicit.keys.has(`name:${record.name}`)
          : explicit.keys.has(`port:${Number(record.nodePort)}`);
    } else {
      keep = explicit.fromManagedFields.has(`k:{"port":${Number(record.port)},"protocol":"${String(record.protocol ?? 'TCP')}"}`);
    }
    if (!keep) delete record.nodePort;
  }
  // Velero clears healthCheckNodePort only where the cluster allocates one: LoadBalancer + Local
  const allocated = spec.type === 'LoadBalancer' && spec.externalTrafficPolicy === 'Local';
  if (spec.healthCheckNodePort !== undefined && allocated && !explicitHealthCheckNodePort(original)) delete spec.healthCheckNodePort;
}

function explicitHealthCheckNodePort(service: RestoreObject): boolean {
  const lastApplied = service.metadata.annotations?.[LAST_APPLIED_CONFIG_ANNOTATION];
  if (lastApplied !== undefined) {
    try {
      if (Number(asRecord(asRecord(JSON.parse(lastApplied))?.spec)?.healthCheckNodePort ?? 0) > 0) return true;
    } catch {
      // not JSON: fall through to managedFields
    }
  }
  return asArray(service.metadata.managedFields).some(
    (entry) => asRecord(asRecord(asRecord(entry)?.fieldsV1)?.['f:spec'])?.['f:healthCheckNodePort'] !== undefined,
  );
}

function dropTokenMounts(containers: unknown, tokenPrefix: string): void {
  for (const container of asArray(containers)) {
    const record = asRecord(container);
    if (!record || !Array.isArray(record.volumeMounts)) continue;
    record.volumeMounts = record.volumeMounts.filter((mount) => {
      const name = asRecord(mount)?.name;
      return !(typeof name === 'string' && name.startsWith(tokenPrefix));
    });
  }
}

function transformPod(object: RestoreObject, item: RestoreItem, context: RestoreTransformContext, warnings: HookWarning[]): void {
  const spec = asRecord(object.spec);
  if (!spec) return;
  delete spec.nodeName;
  delete spec.priority;
  const serviceAccount = typeof spec.serviceAccountName === 'string' ? spec.serviceAccountName : '';
  const tokenPrefix = `${serviceAccount}-token-`;
  if (Array.isArray(spec.volumes)) {
    spec.volumes = spec.volumes.filter((volume) => {
      const name = asRecord(volume)?.name;
      return !(typeof name === 'string' && name.startsWith(tokenPrefix));
    });
  }
  dropTokenMounts(spec.containers, tokenPrefix);
  dropTokenMounts(spec.initContainers, tokenPrefix);

  const hooks = resolveRestoreHooks(object, context.spec);
  warnings.push(...hooks.warnings);
  const initContainers: unknown[] = [...hooks.initContainers, ...asArray(spec.initContainers)];
  const restored = item.namespace !== null ? (context.volumes.podVolumes[objectKey(item.namespace, item.name)] ?? []) : [];
  if (restored.length > 0) {
    initContainers.unshift(
      buildRestoreWaitContainer(
        context,
        restored.map((volume) => volume.volume),
      ),
    );
  }
  if (initContainers.length > 0) spec.initContainers = initContainers;
}

function transformJob(object: RestoreObject): void {
  const spec = asRecord(object.spec);
  const matchLabels = asRecord(asRecord(spec?.selector)?.matchLabels);
  const templateLabels = asRecord(asRecord(asRecord(spec?.template)?.metadata)?.labels);
  for (const label of JOB_CONTROLLER_UID_LABELS) {
    if (matchLabels) delete matchLabels[label];
    if (templateLabels) delete templateLabels[label];
  }
}

function dropAnnotations(object: RestoreObject, keys: readonly string[]): void {
  const annotations = object.metadata.annotations;
  if (!annotations) return;
  for (const key of keys) delete annotations[key];
  if (Object.keys(annotations).length === 0) delete object.metadata.annotations;
}

function dropBindAnnotations(object: RestoreObject): void {
  dropAnnotations(object, [PV_BIND_COMPLETED_ANNOTATION, PV_BOUND_BY_CONTROLLER_ANNOTATION]);
}

function transformClaim(object: RestoreObject, item: RestoreItem, context: RestoreTransformContext): void {
  dropAnnotations(object, CLAIM_BINDING_ANNOTATIONS);
  const spec = asRecord(object.spec);
  if (!spec || typeof spec.volumeName !== 'string' || spec.volumeName === '') return;
  if (item.namespace !== null && context.volumes.reprovisionedClaims.includes(objectKey(item.namespace, item.name))) delete spec.volumeName;
}

function transformVolume(object: RestoreObject, mapping: Readonly<Record<string, string>>): void {
  const claimRef = asRecord(asRecord(object.spec)?.claimRef);
  if (claimRef) {
    delete claimRef.uid;
    delete claimRef.resourceVersion;
    if (typeof claimRef.namespace === 'string' && mapping[claimRef.namespace] !== undefined)
      claimRef.namespace = mapping[claimRef.namespace];
  }
  dropBindAnnotations(object);
}

function transformServiceAccount(object: RestoreObject): void {
  if (!Array.isArray(object.secrets)) return;
  const tokenPrefix = `${object.metadata.name}-token-`;
  const index = object.secrets.findIndex((secret) => {
    const name = asRecord(secret)?.name;
    return typeof name === 'string' && name.startsWith(tokenPrefix);
  });
  // Velero drops the first auto-created token secret; the token controller makes a new one
  if (index >= 0) object.secrets = object.secrets.filter((_, i) => i !== index);
}

/** A token Secret the user made: the token controller fills token, ca.crt and the account uid again. */
function transformTokenSecret(object: RestoreObject): void {
  if (object.type !== 'kubernetes.io/service-account-token') return;
  const annotations = object.metadata.annotations;
  if (annotations) {
    delete annotations['kubernetes.io/service-account.uid'];
    if (Object.keys(annotations).length === 0) delete object.metadata.annotations;
  }
  const data = asRecord(object.data);
  if (data) {
    delete data.token;
    delete data['ca.crt'];
  }
}

function transformBinding(object: RestoreObject, mapping: Readonly<Record<string, string>>): void {
  for (const subject of asArray(object.subjects)) {
    const record = asRecord(subject);
    if (record && typeof record.namespace === 'string' && mapping[record.namespace] !== undefined)
      record.namespace = mapping[record.namespace];
  }
}

/**
 * The object to create for `item`: a deep copy with every documented transform applied. Pure;
 * the same input always gives the same object (a re-run job creates the same thing).
 */
export function transformForRestore(item: RestoreItem, context: RestoreTransformContext): TransformedItem {
  const original = item.object;
  const object = structuredClone(original) as RestoreObject;
  const warnings: HookWarning[] = [];
  resetMetadata(object.metadata);
  delete object.status;
  if (item.targetNamespace !== null) object.metadata.namespace = item.targetNamespace;
  else delete object.metadata.namespace;
  object.metadata.name = item.targetName;

  if (isKind(item, '', 'services')) transformService(object, context.spec.preserveNodePorts, original);
  else if (isKind(item, '', 'pods')) transformPod(object, item, context, warnings);
  else if (isKind(item, 'batch', 'jobs')) transformJob(object);
  else if (isKind(item, '', 'persistentvolumeclaims')) transformClaim(object, item, context);
  else if (isKind(item, '', 'persistentvolumes')) transformVolume(object, context.spec.namespaceMapping);
  else if (isKind(item, '', 'serviceaccounts')) transformServiceAccount(object);
  else if (isKind(item, '', 'secrets')) transformTokenSecret(object);
  else if (isKind(item, 'rbac.authorization.k8s.io', 'rolebindings') || isKind(item, 'rbac.authorization.k8s.io', 'clusterrolebindings')) {
    transformBinding(object, context.spec.namespaceMapping);
  }

  object.metadata.labels = {
    ...(object.metadata.labels ?? {}),
    [RESTORE_BACKUP_NAME_LABEL]: labelValueOf(context.backupName),
    [RESTORE_NAME_LABEL]: labelValueOf(context.restoreName),
  };
  return { object, warnings };
}
