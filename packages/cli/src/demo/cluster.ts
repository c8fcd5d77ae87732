import { readFile } from 'node:fs/promises';
import http from 'node:http';
import https from 'node:https';
import { join } from 'node:path';
import { startSimulator, writeKubeconfig } from '@stowage/kube-sim';
import { type DeployedIdentities, deployIdentities, requestServiceAccountToken } from '@stowage/testing';
import { parse as parseYaml } from 'yaml';
import { CliError, CliErrorCode } from '../errors.js';

/** The Kubernetes side of the demo: where the API is, its nodes, and where each node's volumes live. */
export interface DemoCluster {
  kubeconfigPath: string;
  serverUrl: string;
  nodes: string[];
  /** Simulator data root: `<dataRoot>/<node>` is a node's kubelet root (`pods/<uid>/volumes/...`). */
  dataRoot: string;
  /** The kubeconfig user's bearer token, if any (the demo's own requests to the cluster). */
  token: string | undefined;
  /** True when the demo started the simulator (and stops it). */
  embedded: boolean;
  /** The dev overlay's ServiceAccounts and RBAC, applied; a kubeconfig per account for the services. */
  identities: DeployedIdentities;
  close(): Promise<void>;
}

interface KubeconfigTarget {
  server: string;
  token: string | undefined;
  /** PEM of `certificate-authority-data`, when the kubeconfig names one (the simulator's HTTPS port). */
  ca?: string;
  insecure?: boolean;
}

async function readKubeconfig(path: string): Promise<KubeconfigTarget> {
  let doc: Record<string, unknown>;
  try {
    doc = parseYaml(await readFile(path, 'utf8')) as Record<string, unknown>;
  } catch (err) {
    throw new CliError(CliErrorCode.config, `KUBECONFIG ${path} cannot be read: ${(err as Error).message.split('\n')[0]}`, [], {
      cause: err,
    });
  }
  const byName = <T>(list: unknown, name: unknown, field: string): T | undefined =>
    Array.isArray(list) ? ((list as Array<Record<string, unknown>>).find((e) => e.name === name)?.[field] as T | undefined) : undefined;
  const context = byName<Record<string, unknown>>(doc.contexts, doc['current-context'], 'context');
  const cluster = byName<Record<string, unknown>>(doc.clusters, context?.cluster, 'cluster');
  const user = byName<Record<string, unknown>>(doc.users, context?.user, 'user');
  if (typeof cluster?.server !== 'string')
    throw new CliError(CliErrorCode.config, `KUBECONFIG ${path}: its current context names no cluster server`);
  const target: KubeconfigTarget = {
    server: cluster.server.replace(/\/+$/, ''),
    token: typeof user?.token === 'string' ? user.token : undefined,
  };
  if (typeof cluster['certificate-authority-data'] === 'string')
    target.ca = Buffer.from(cluster['certificate-authority-data'], 'base64').toString('utf8');
  if (cluster['insecure-skip-tls-verify'] === true) target.insecure = true;
  return target;
}

/** GET of JSON with the kubeconfig's token, over HTTPS with its CA (the simulator's kubeconfig names HTTPS) or HTTP. */
function getJson(url: string, target: KubeconfigTarget): Promise<unknown> {
  const options: https.RequestOptions = { headers: target.token ? { authorization: `Bearer ${target.token}` } : {}, timeout: 5_000 };
  if (target.ca) options.ca = target.ca;
  if (target.insecure) options.rejectUnauthorized = false;
  return new Promise((resolve, reject) => {
    const req = (url.startsWith('https:') ? https : http).get(url, options, (res) => {
      let body = '';
      res.setEncoding('utf8');
      res.on('data', (chunk: string) => (body += chunk));
      res.on('end', () => {
        if ((res.statusCode ?? 0) < 200 || (res.statusCode ?? 0) >= 300) return reject(new Error(`HTTP ${res.statusCode} from ${url}`));
        try {
          resolve(JSON.parse(body));
        } catch (err) {
          reject(err);
        }
      });
    });
    req.on('timeout', () => req.destroy(new Error(`no answer from ${url} in 5 s`)));
    req.on('error', reject);
  });
}

/** The simulator's nodes and data root, and its plain-HTTP URL (where the demo's own requests go, with the token). */
async function describeCluster(target: KubeconfigTarget): Promise<{ nodes: string[]; dataRoot: string; plainUrl: string }> {
  let info: { dataRoot?: unknown; url?: unknown };
  try {
    info = (await getJson(`${target.server}/_sim/info`, target)) as { dataRoot?: unknown; url?: unknown };
  } catch (err) {
    throw new CliError(
      CliErrorCode.config,
      `KUBECONFIG points at ${target.server}, which is not a running Stowage simulator (${(err as Error).message}); the demo runs node agents on this machine and needs the simulator's volume data: unset KUBECONFIG to use the bundled demo cluster, or deploy Stowage with k8s/ for a real cluster`,
      [],
      { cause: err },
    );
  }
  if (typeof info.dataRoot !== 'string') throw new CliError(CliErrorCode.config, `${target.server}/_sim/info did not name a data root`);
  const list = (await getJson(`${target.server}/api/v1/nodes`, target)) as { items?: Array<{ metadata?: { name?: string } }> };
  const nodes = (list.items ?? []).map((n) => n.metadata?.name).filter((n): n is string => typeof n === 'string');
  if (nodes.length === 0) throw new CliError(CliErrorCode.config, `the cluster at ${target.server} has no nodes to run node agents for`);
  return { nodes, dataRoot: info.dataRoot, plainUrl: typeof info.url === 'string' ? info.url : target.server };
}

/**
 * Who a token authenticates as, asked of the API server (SelfSubjectReview, `kubectl auth whoami`):
 * the demo reports the identity each service ran as from the cluster, not from its own belief.
 */
export async function whoIs(cluster: Pick<DemoCluster, 'serverUrl'>, token: string | undefined): Promise<string> {
  const res = await fetch(`${cluster.serverUrl}/apis/authentication.k8s.io/v1/selfsubjectreviews`, {
    method: 'POST',
    headers: { ...(token ? { authorization: `Bearer ${token}` } : {}), 'content-type': 'application/json' },
    body: JSON.stringify({ apiVersion: 'authentication.k8s.io/v1', kind: 'SelfSubjectReview' }),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  const name = res.ok ? (JSON.parse(text) as { status?: { userInfo?: { username?: unknown } } }).status?.userInfo?.username : undefined;
  if (typeof name !== 'string')
    throw new CliError(CliErrorCode.demoFailed, `who a service runs as: SelfSubjectReview answered ${res.status} ${text.slice(0, 300)}`);
  return name;
}

/** The simulator the user pointed KUBECONFIG at (e.g. `pnpm sim`), or a fresh one with the demo cluster. */
export async function openDemoCluster(env: Readonly<Record<string, string | undefined>>, workDir: string): Promise<DemoCluster> {
  const given = env.KUBECONFIG?.trim();
  if (given) {
    const target = await readKubeconfig(given);
    const { nodes, dataRoot, plainUrl } = await describeCluster(target);
    // The services run as the overlay's accounts there too: applied with the kubeconfig's identity,
    // tokens from TokenRequest, kubeconfig files naming the server (and CA) the given one names.
    const admin = { url: plainUrl, adminToken: target.token ?? '' };
    const identities = await deployIdentities({
      ...admin,
      kubeconfigFor: async ({ serviceAccount }) => {
        const path = join(workDir, `kubeconfig-${serviceAccount.name}`);
        const token = await requestServiceAccountToken(admin, serviceAccount);
        writeKubeconfig(path, target.server, token, serviceAccount.namespace, target.ca);
        return { path, token };
      },
    }).catch((err: unknown) => {
      throw new CliError(
        CliErrorCode.config,
        `the identities of k8s/overlays/dev cannot be set up on ${target.server} as the KUBECONFIG user: ${(err as Error).message}`,
        [],
        { cause: err },
      );
    });
    return {
      kubeconfigPath: given,
      serverUrl: plainUrl,
      token: target.token,
      nodes,
      dataRoot,
      embedded: false,
      identities,
      close: async () => {},
    };
  }
  const sim = await startSimulator({ dataRoot: join(workDir, 'cluster-data'), kubeconfigPath: join(workDir, 'kubeconfig') });
  try {
    const target = await readKubeconfig(sim.kubeconfigPath);
    const { nodes } = await describeCluster(target);
    return {
      kubeconfigPath: sim.kubeconfigPath,
      serverUrl: sim.url,
      token: target.token,
      nodes,
      dataRoot: sim.dataRoot,
      embedded: true,
      identities: await deployIdentities(sim),
      close: () => sim.close(),
    };
  } catch (err) {
    await sim.close();
    throw err;
  }
}
