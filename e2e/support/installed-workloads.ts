/*
 * Runs what `stowage install` put in the simulator as a kubelet would: for each Deployment (one
 * process per replica is not needed here: one each) and for the DaemonSet on each node, the
 * container's environment is read from the stored pod template — `value`, `valueFrom` (Secret and
 * ConfigMap keys, the pod's namespace and node) and `envFrom` ConfigMaps, resolved against the
 * objects the installer applied — and the service is started as an OS process under the token of
 * the ServiceAccount the template names. Nothing of the configuration comes from the test: what
 * runs is what was installed. The one translation is the kubelet's hostPath: STOWAGE_KUBELET_ROOT
 * becomes the simulator's data root of that node.
 */
import { join } from 'node:path';
import type { Simulator } from '../../packages/kube-sim/src/index.js';
import { type ServiceKind, type ServiceProcess, spawnService } from '../reliability/support/stack.js';

interface EnvVar {
  name: string;
  value?: string;
  valueFrom?: {
    secretKeyRef?: { name: string; key: string; optional?: boolean };
    configMapKeyRef?: { name: string; key: string; optional?: boolean };
    fieldRef?: { fieldPath: string };
  };
}
interface Container {
  name: string;
  image: string;
  env?: EnvVar[];
  envFrom?: Array<{ configMapRef?: { name: string }; secretRef?: { name: string } }>;
}
export interface Workload {
  kind: 'Deployment' | 'DaemonSet';
  metadata: { name: string; namespace: string };
  spec: { template: { spec: { serviceAccountName: string; containers: Container[] } } };
}

/** The service an image runs (`registry/stowage/worker:tag` → worker). */
export function serviceOfImage(image: string): ServiceKind {
  const m = /(?:^|\/)(api|worker|node-agent)(?::[^/]*)?$/.exec(image);
  if (!m) throw new Error(`no Stowage service for image ${image}`);
  return m[1] as ServiceKind;
}

async function read<T>(sim: Simulator, path: string): Promise<T> {
  const res = await fetch(`${sim.url}${path}`, { headers: { authorization: `Bearer ${sim.adminToken}` } });
  if (!res.ok) throw new Error(`GET ${path}: ${res.status} ${await res.text()}`);
  return (await res.json()) as T;
}

export async function installedWorkload(sim: Simulator, kind: Workload['kind'], namespace: string, name: string): Promise<Workload> {
  const plural = kind === 'Deployment' ? 'deployments' : 'daemonsets';
  return read<Workload>(sim, `/apis/apps/v1/namespaces/${namespace}/${plural}/${name}`);
}

/** The container's environment as the kubelet would make it, on `node`. */
export async function containerEnv(
  sim: Simulator,
  workload: Workload,
  container: Container,
  node: string,
): Promise<Record<string, string>> {
  const ns = workload.metadata.namespace;
  const configMap = (name: string) => read<{ data?: Record<string, string> }>(sim, `/api/v1/namespaces/${ns}/configmaps/${name}`);
  const secret = async (name: string) => {
    const data = (await read<{ data?: Record<string, string> }>(sim, `/api/v1/namespaces/${ns}/secrets/${name}`)).data ?? {};
    return Object.fromEntries(Object.entries(data).map(([k, v]) => [k, Buffer.from(v, 'base64').toString('utf8')]));
  };
  const env: Record<string, string> = {};
  for (const from of container.envFrom ?? []) {
    if (from.configMapRef) Object.assign(env, (await configMap(from.configMapRef.name)).data);
    if (from.secretRef) Object.assign(env, await secret(from.secretRef.name));
  }
  for (const variable of container.env ?? []) {
    const { valueFrom } = variable;
    if (variable.value !== undefined) env[variable.name] = variable.value;
    else if (valueFrom?.secretKeyRef) {
      const value = (await secret(valueFrom.secretKeyRef.name))[valueFrom.secretKeyRef.key];
      if (value === undefined)
        throw new Error(`${variable.name}: secret ${valueFrom.secretKeyRef.name} has no key ${valueFrom.secretKeyRef.key}`);
      env[variable.name] = value;
    } else if (valueFrom?.configMapKeyRef) {
      const value = (await configMap(valueFrom.configMapKeyRef.name)).data?.[valueFrom.configMapKeyRef.key];
      if (value === undefined)
        throw new Error(`${variable.name}: configmap ${valueFrom.configMapKeyRef.name} has no key ${valueFrom.configMapKeyRef.key}`);
      env[variable.name] = value;
    } else if (valueFrom?.fieldRef) {
      const field = valueFrom.fieldRef.fieldPath;
      if (field === 'metadata.namespace') env[variable.name] = ns;
      else if (field === 'spec.nodeName') env[variable.name] = node;
      else throw new Error(`${variable.name}: fieldRef ${field} is not modelled`);
    }
  }
  return env;
}

/**
 * Starts the workload's first container on `node` under its ServiceAccount's token (a kubeconfig
 * the simulator mints, as a projected token would be). `extra` is for what a test, not the
 * deployment, decides: log level, lock timings.
 */
export async function runWorkload(
  sim: Simulator,
  workload: Workload,
  node: string,
  extra: Record<string, string> = {},
): Promise<{ process: ServiceProcess; env: Record<string, string> }> {
  const container = workload.spec.template.spec.containers[0];
  if (!container) throw new Error(`${workload.metadata.name} has no container`);
  const env = await containerEnv(sim, workload, container, node);
  if (env.STOWAGE_KUBELET_ROOT !== undefined) env.STOWAGE_KUBELET_ROOT = join(sim.dataRoot, node);
  const account = workload.spec.template.spec.serviceAccountName;
  const { path } = sim.kubeconfigFor({ serviceAccount: { namespace: workload.metadata.namespace, name: account } });
  const name = workload.kind === 'DaemonSet' ? `${workload.metadata.name}-${node}` : workload.metadata.name;
  const process = await spawnService(serviceOfImage(container.image), name, { ...env, KUBECONFIG: path, ...extra });
  return { process, env };
}
