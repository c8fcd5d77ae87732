import { parseAllDocuments } from 'yaml';
import { KUBECTL_HINT, runTool } from './run-tool.js';

/** The fields every rendered object has; the rest is read per kind in the tests. */
export interface KubeObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string> };
  [field: string]: unknown;
}

/** Renders an overlay with `kubectl kustomize` and parses every document. */
export async function renderOverlay(overlay: 'dev' | 's3' | 'prod'): Promise<KubeObject[]> {
  const result = await runTool('kubectl', ['kustomize', `k8s/overlays/${overlay}`], KUBECTL_HINT);
  if (result.exitCode !== 0) {
    throw new Error(`kubectl kustomize k8s/overlays/${overlay} failed (exit ${result.exitCode}):\n${result.stderr}`);
  }
  return parseManifests(result.stdout, `k8s/overlays/${overlay}`);
}

export function parseManifests(text: string, source: string): KubeObject[] {
  const objects: KubeObject[] = [];
  for (const document of parseAllDocuments(text)) {
    if (document.errors.length > 0) throw new Error(`${source}: ${document.errors.map((e) => e.message).join('; ')}`);
    const value: unknown = document.toJS();
    if (value === null || value === undefined) continue;
    if (!isKubeObject(value)) throw new Error(`${source}: a document without apiVersion, kind or metadata.name`);
    objects.push(value);
  }
  return objects;
}

function isKubeObject(value: unknown): value is KubeObject {
  if (typeof value !== 'object' || value === null) return false;
  const candidate = value as Record<string, unknown>;
  const metadata = candidate.metadata as Record<string, unknown> | undefined;
  return typeof candidate.apiVersion === 'string' && typeof candidate.kind === 'string' && typeof metadata?.name === 'string';
}

export function describe(object: KubeObject): string {
  return `${object.kind}/${object.metadata.name}`;
}

export function findObject(objects: readonly KubeObject[], kind: string, name: string): KubeObject {
  const found = objects.find((object) => object.kind === kind && object.metadata.name === name);
  if (!found) throw new Error(`no ${kind}/${name} in the render (has: ${objects.map(describe).join(', ')})`);
  return found;
}

/** Names are matched ignoring kustomize's generator hash suffix (`stowage-config-dt85h676bc`). */
export function findGenerated(objects: readonly KubeObject[], kind: string, baseName: string): KubeObject | undefined {
  return objects.find((object) => object.kind === kind && new RegExp(`^${baseName}(-[a-z0-9]{10})?$`).test(object.metadata.name));
}

// Pod-spec shapes, only the fields the assertions read.
export interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    fieldRef?: { fieldPath: string };
    secretKeyRef?: { name: string; key: string };
    configMapKeyRef?: { name: string; key: string };
  };
}
export interface SecurityContext {
  runAsNonRoot?: boolean;
  runAsUser?: number;
  privileged?: boolean;
  allowPrivilegeEscalation?: boolean;
  readOnlyRootFilesystem?: boolean;
  capabilities?: { add?: string[]; drop?: string[] };
  seccompProfile?: { type: string };
}
export interface Probe {
  httpGet?: { path: string; port: string | number };
  exec?: { command: string[] };
}
export interface Container {
  name: string;
  image: string;
  args?: string[];
  env?: EnvVar[];
  envFrom?: { configMapRef?: { name: string }; secretRef?: { name: string } }[];
  resources?: { requests?: Record<string, string>; limits?: Record<string, string> };
  livenessProbe?: Probe;
  readinessProbe?: Probe;
  securityContext?: SecurityContext;
  volumeMounts?: { name: string; mountPath: string; readOnly?: boolean; mountPropagation?: string }[];
}
export interface PodSpec {
  serviceAccountName?: string;
  terminationGracePeriodSeconds?: number;
  securityContext?: SecurityContext & { fsGroup?: number };
  containers: Container[];
  initContainers?: Container[];
  tolerations?: { operator?: string; key?: string }[];
  volumes?: {
    name: string;
    hostPath?: { path: string };
    persistentVolumeClaim?: { claimName: string };
    configMap?: { name: string };
    secret?: { secretName: string };
  }[];
}

export const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet']);

export interface Workload {
  object: KubeObject;
  podLabels: Record<string, string>;
  pod: PodSpec;
}

export function workloadsOf(objects: readonly KubeObject[]): Workload[] {
  return objects
    .filter((object) => WORKLOAD_KINDS.has(object.kind))
    .map((object) => {
      const spec = object.spec as { template: { metadata?: { labels?: Record<string, string> }; spec: PodSpec } };
      return { object, podLabels: spec.template.metadata?.labels ?? {}, pod: spec.template.spec };
    });
}

export function containersOf(pod: PodSpec): Container[] {
  return [...(pod.initContainers ?? []), ...pod.containers];
}
