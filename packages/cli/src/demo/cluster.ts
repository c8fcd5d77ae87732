import { readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { startSimulator } from '@stowage/kube-sim';
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
  close(): Promise<void>;
}

interface KubeconfigTarget {
  server: string;
  token: string | undefined;
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
  return { server: cluster.server.replace(/\/+$/, ''), token: typeof user?.token === 'string' ? user.token : undefined };
}

async function getJson(url: string, token: string | undefined): Promise<unknown> {
  const res = await fetch(url, { headers: token ? { authorization: `Bearer ${token}` } : {}, signal: AbortSignal.timeout(5_000) });
  if (!res.ok) throw new Error(`HTTP ${res.status} from ${url}`);
  return res.json();
}

async function describeCluster(target: KubeconfigTarget): Promise<{ nodes: string[]; dataRoot: string }> {
  let info: { dataRoot?: unknown };
  try {
    info = (await getJson(`${target.server}/_sim/info`, target.token)) as { dataRoot?: unknown };
  } catch (err) {
    throw new CliError(
      CliErrorCode.config,
      `KUBECONFIG points at ${target.server}, which is not a running Stowage simulator (${(err as Error).message}); the demo runs node agents on this machine and needs the simulator's volume data: unset KUBECONFIG to use the bundled demo cluster, or deploy Stowage with k8s/ for a real cluster`,
      [],
      { cause: err },
    );
  }
  if (typeof info.dataRoot !== 'string') throw new CliError(CliErrorCode.config, `${target.server}/_sim/info did not name a data root`);
  const list = (await getJson(`${target.server}/api/v1/nodes`, target.token)) as { items?: Array<{ metadata?: { name?: string } }> };
  const nodes = (list.items ?? []).map((n) => n.metadata?.name).filter((n): n is string => typeof n === 'string');
  if (nodes.length === 0) throw new CliError(CliErrorCode.config, `the cluster at ${target.server} has no nodes to run node agents for`);
  return { nodes, dataRoot: info.dataRoot };
}

/** The simulator the user pointed KUBECONFIG at (e.g. `pnpm sim`), or a fresh one with the demo cluster. */
export async function openDemoCluster(env: Readonly<Record<string, string | undefined>>, workDir: string): Promise<DemoCluster> {
  const given = env.KUBECONFIG?.trim();
  if (given) {
    const target = await readKubeconfig(given);
    const { nodes, dataRoot } = await describeCluster(target);
    return {
      kubeconfigPath: given,
      serverUrl: target.server,
      token: target.token,
      nodes,
      dataRoot,
      embedded: false,
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
      close: () => sim.close(),
    };
  } catch (err) {
    await sim.close();
    throw err;
  }
}
