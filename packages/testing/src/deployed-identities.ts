import { execFile } from 'node:child_process';
import { parseAllDocuments } from 'yaml';
import { REPO_ROOT } from './service-process.js';

/*
 * The deployment's identities in the simulator: what `kubectl kustomize k8s/overlays/dev` renders
 * (the Namespace, CRDs, ServiceAccounts, Roles, ClusterRoles and their bindings) is applied as the
 * admin, and each ServiceAccount gets a kubeconfig of its own token. The e2e suite, the demo, the
 * reliability stack and the benchmark start every service with the kubeconfig of the account its
 * Deployment/DaemonSet names, so the shipped manifests are what is tested: nothing is added here.
 */

/** The namespace the overlay deploys into. */
export const STOWAGE_NAMESPACE = 'stowage';
export const DEV_OVERLAY = 'k8s/overlays/dev';

/** What is taken from the render, in the order it is applied (kinds a later one refers to come first). */
const APPLIED_KINDS: ReadonlyArray<{ kind: string; path: (ns: string | undefined, name: string) => string }> = [
  { kind: 'Namespace', path: (_ns, name) => `/api/v1/namespaces/${name}` },
  { kind: 'CustomResourceDefinition', path: (_ns, name) => `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${name}` },
  { kind: 'ServiceAccount', path: (ns, name) => `/api/v1/namespaces/${ns}/serviceaccounts/${name}` },
  { kind: 'ClusterRole', path: (_ns, name) => `/apis/rbac.authorization.k8s.io/v1/clusterroles/${name}` },
  { kind: 'Role', path: (ns, name) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/roles/${name}` },
  { kind: 'ClusterRoleBinding', path: (_ns, name) => `/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/${name}` },
  { kind: 'RoleBinding', path: (ns, name) => `/apis/rbac.authorization.k8s.io/v1/namespaces/${ns}/rolebindings/${name}` },
];

export interface RenderedObject {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; [field: string]: unknown };
  [field: string]: unknown;
}

/**
 * The simulator as this needs it: a `Simulator` from @stowage/kube-sim is one; a simulator in
 * another process is one through `kubeconfigViaTokenRequest`.
 */
export interface IdentityCluster {
  /** Plain-HTTP base URL; the admin token goes there. */
  url: string;
  adminToken: string;
  /** A kubeconfig file of the account's token (`sim.kubeconfigFor`). */
  kubeconfigFor(subject: {
    serviceAccount: { namespace: string; name: string };
  }): { path: string; token: string } | Promise<{ path: string; token: string }>;
}

export interface DeployedIdentities {
  /** A kubeconfig file per ServiceAccount the overlay ships in `stowage`, by account name. */
  kubeconfigs: ReadonlyMap<string, string>;
  /** The bearer token each of those kubeconfigs sends, by account name. */
  tokens: ReadonlyMap<string, string>;
  /** The api Deployment's account (`stowage-api`). */
  api: string;
  /** The backup workers' account (`stowage-worker`). */
  worker: string;
  /** The node agents' account (`stowage-node-agent`). */
  nodeAgent: string;
  /** The restore workers' account (`stowage-restorer`). */
  restorer: string;
  /**
   * `STOWAGE_WORKER_QUEUES` of the workload that runs as each account, as the overlay sets it (the
   * backup workers' and the restore workers' queues), by account name; absent where it sets none.
   */
  workerQueues: ReadonlyMap<string, string>;
  /** `Kind/namespace/name` of every object applied, in order. */
  applied: string[];
}

const WORKLOAD_KINDS = new Set(['Deployment', 'StatefulSet', 'DaemonSet']);

interface RenderedPodSpec {
  serviceAccountName?: string;
  containers?: Array<{ env?: Array<{ name: string; value?: string }> }>;
}

/** The literal value of `variable` in the containers of the rendered workloads that run as each account. */
function workloadEnv(objects: readonly RenderedObject[], variable: string): Map<string, string> {
  const found = new Map<string, string>();
  for (const object of objects.filter((o) => WORKLOAD_KINDS.has(o.kind))) {
    const pod = (object.spec as { template?: { spec?: RenderedPodSpec } } | undefined)?.template?.spec;
    const account = pod?.serviceAccountName;
    if (!account) continue;
    for (const container of pod.containers ?? []) {
      const value = container.env?.find((e) => e.name === variable)?.value;
      if (value !== undefined) found.set(account, value);
    }
  }
  return found;
}

let rendered: Promise<RenderedObject[]> | undefined;

/** `kubectl kustomize k8s/overlays/dev`, parsed (rendered once per process: the files do not change under a run). */
export function renderDevOverlay(): Promise<RenderedObject[]> {
  rendered ??= new Promise<RenderedObject[]>((resolve, reject) => {
    execFile(
      'kubectl',
      ['kustomize', DEV_OVERLAY],
      { cwd: REPO_ROOT, timeout: 120_000, maxBuffer: 32 * 1024 * 1024 },
      (err, stdout, stderr) => {
        if (err) {
          const missing = (err as NodeJS.ErrnoException).code === 'ENOENT';
          reject(
            new Error(
              missing
                ? 'kubectl is not installed or not on PATH: the deployment identities are rendered with `kubectl kustomize` (Debian: apt-get install -y kubernetes-client)'
                : `kubectl kustomize ${DEV_OVERLAY} failed: ${stderr.trim() || err.message}`,
              { cause: err },
            ),
          );
          return;
        }
        try {
          resolve(parseRender(stdout));
        } catch (parseErr) {
          reject(parseErr);
        }
      },
    );
  });
  rendered.catch(() => {
    rendered = undefined;
  });
  return rendered;
}

function parseRender(text: string): RenderedObject[] {
  const objects: RenderedObject[] = [];
  for (const document of parseAllDocuments(text)) {
    if (document.errors.length > 0) throw new Error(`${DEV_OVERLAY}: ${document.errors.map((e) => e.message).join('; ')}`);
    const value = document.toJS() as RenderedObject | null;
    if (value === null) continue;
    if (typeof value.kind !== 'string' || typeof value.metadata?.name !== 'string') {
      throw new Error(`${DEV_OVERLAY}: a rendered document without kind or metadata.name`);
    }
    objects.push(value);
  }
  return objects;
}

/**
 * Applies the dev overlay's identities to the simulator as the admin (server-side apply: created,
 * or changed to what the overlay says) and mints a kubeconfig for each ServiceAccount.
 */
export async function deployIdentities(cluster: IdentityCluster): Promise<DeployedIdentities> {
  const objects = await renderDevOverlay();
  const applied: string[] = [];
  for (const { kind, path } of APPLIED_KINDS) {
    for (const object of objects.filter((o) => o.kind === kind)) {
      const { name, namespace } = object.metadata;
      const res = await fetch(`${cluster.url}${path(namespace, name)}?fieldManager=stowage-tests&force=true`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${cluster.adminToken}`, 'content-type': 'application/apply-patch+yaml' },
        body: JSON.stringify(object),
      });
      if (!res.ok) throw new Error(`applying ${kind}/${namespace ? `${namespace}/` : ''}${name}: ${res.status} ${await res.text()}`);
      await res.body?.cancel();
      applied.push(`${kind}/${namespace ?? ''}/${name}`);
    }
  }
  const kubeconfigs = new Map<string, string>();
  const tokens = new Map<string, string>();
  for (const account of objects.filter((o) => o.kind === 'ServiceAccount' && o.metadata.namespace === STOWAGE_NAMESPACE)) {
    const name = account.metadata.name;
    const { path, token } = await cluster.kubeconfigFor({ serviceAccount: { namespace: STOWAGE_NAMESPACE, name } });
    kubeconfigs.set(name, path);
    tokens.set(name, token);
  }
  const required = (name: string): string => {
    const path = kubeconfigs.get(name);
    if (!path)
      throw new Error(`${DEV_OVERLAY} renders no ServiceAccount ${STOWAGE_NAMESPACE}/${name} (has: ${[...kubeconfigs.keys()].join(', ')})`);
    return path;
  };
  return {
    kubeconfigs,
    tokens,
    api: required('stowage-api'),
    worker: required('stowage-worker'),
    nodeAgent: required('stowage-node-agent'),
    restorer: required('stowage-restorer'),
    workerQueues: workloadEnv(objects, 'STOWAGE_WORKER_QUEUES'),
    applied,
  };
}

/**
 * A service-account token from the API server's TokenRequest (what `kubectl create token` does),
 * for a simulator this process did not start: `POST …/serviceaccounts/NAME/token` as the admin.
 */
export async function requestServiceAccountToken(
  cluster: Pick<IdentityCluster, 'url' | 'adminToken'>,
  account: { namespace: string; name: string },
  expirationSeconds = 24 * 3600,
): Promise<string> {
  const res = await fetch(`${cluster.url}/api/v1/namespaces/${account.namespace}/serviceaccounts/${account.name}/token`, {
    method: 'POST',
    headers: { authorization: `Bearer ${cluster.adminToken}`, 'content-type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'TokenRequest', spec: { expirationSeconds } }),
  });
  const text = await res.text();
  const token = res.ok ? (JSON.parse(text) as { status?: { token?: unknown } }).status?.token : undefined;
  if (typeof token !== 'string')
    throw new Error(`TokenRequest for ${account.namespace}/${account.name}: ${res.status} ${text.slice(0, 500)}`);
  return token;
}
