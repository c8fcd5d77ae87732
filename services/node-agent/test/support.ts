import { type ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdir, readdir, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createKubeClients,
  createPvbClient,
  createPvrClient,
  getPod,
  type KubeClients,
  type PodVolumeBackup,
  type PodVolumeRestore,
  type PvbClient,
  type PvrClient,
  pvbLabels,
  pvrLabels,
} from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { createLogger, type Logger } from '@stowage/platform';
import { type NodeAgent, type NodeAgentOptions, startNodeAgent } from '../src/index.js';

const repoRoot = fileURLToPath(new URL('../../../', import.meta.url));
const tsx = join(repoRoot, 'node_modules/.bin/tsx');
const mainTs = 'services/node-agent/src/main.ts';

export interface AgentProcess {
  child: ChildProcess;
  stdout: string[];
  stderr: string[];
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  port(): Promise<number>;
  /** SIGKILL to the whole process group (tsx and the node process running the agent); nothing once it has exited. */
  killHard(): void;
}

/** The agent as a real process, the way a DaemonSet pod runs it (or another program of its image). */
export function spawnAgent(env: Record<string, string>, script = mainTs): AgentProcess {
  const child = spawn(tsx, ['--conditions=@stowage/source', script], {
    cwd: repoRoot,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: tsx runs the agent in a child node process, and a SIGKILL of tsx
    // alone would leave that child copying.
    detached: true,
  });
  const stdout: string[] = [];
  const stderr: string[] = [];
  child.stdout?.on('data', (d: Buffer) => stdout.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => stderr.push(d.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return {
    child,
    stdout,
    stderr,
    exited,
    killHard: () => {
      // Only while it is alive: once reaped, its pid (the group's id) may be another process's.
      if (child.pid !== undefined && child.exitCode === null && child.signalCode === null) process.kill(-child.pid, 'SIGKILL');
    },
    port: () =>
      waitFor(
        async () => /"port":(\d+)[^\n]*node agent listening/.exec(stdout.join(''))?.[1],
        (port) => port !== undefined,
        // generous: on a shared 2-core machine tsx alone can take 20 s to start
        90_000,
        `the agent to listen (stderr: ${stderr.join('')})`,
      ).then(Number),
  };
}

export const fixturePath = fileURLToPath(new URL('./fixtures/cluster.yaml', import.meta.url));
export { describeTree, writeVolumeTree } from '@stowage/testing';
export const TEST_REPO_KEY = 'test-key-not-a-secret-0123456789abcdef';

export interface Harness {
  sim: Simulator;
  kube: KubeClients;
  pvbs: PvbClient;
  pvrs: PvrClient;
  logger: Logger;
  /** The kubelet root of a simulated node: `<dataRoot>/<node>`. */
  kubeletRoot(node: string): string;
  /** The on-disk directory of a pod volume, as the simulator laid it out. */
  volumeDir(namespace: string, pod: string, volume: string): string;
  podUid(namespace: string, pod: string): Promise<string>;
  /** Creates a PVB like the pipeline's item-block processor does (labels, spec, no status). */
  createPvb(
    name: string,
    input: { node: string; namespace: string; pod: string; volume: string; cancel?: boolean },
  ): Promise<PodVolumeBackup>;
  /**
   * Creates a pod the way a restore does (nodeName set; emptyDir volumes, or PVC-backed ones from
   * `claims` volume → claim name) and returns its uid. The simulator makes its volume directories.
   */
  createPod(namespace: string, name: string, input: { node: string; volumes: string[]; claims?: Record<string, string> }): Promise<string>;
  /** `<dataRoot>/<node>/pods/<uid>/volumes/kubernetes.io~empty-dir/<volume>`, the layout the agent resolves. */
  emptyDirOf(node: string, podUid: string, volume: string): string;
  /** Creates a PVR like the restore pipeline does (labels, spec, no status). */
  createPvr(
    name: string,
    input: { restoreUid: string; namespace: string; pod: string; podUid: string; volume: string; snapshotID: string; cancel?: boolean },
  ): Promise<PodVolumeRestore>;
  close(): Promise<void>;
}

export async function startHarness(): Promise<Harness> {
  const sim = await startSimulator({ fixture: fixturePath });
  const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  const pvbs = createPvbClient(kube, { namespace: 'stowage' });
  const pvrs = createPvrClient(kube, { namespace: 'stowage' });
  const logger = createLogger({ level: process.env.TEST_LOG_LEVEL === 'debug' ? 'debug' : 'silent', name: 'node-agent-test' });
  const podUid = async (namespace: string, pod: string) => {
    const found = await getPod(kube, namespace, pod);
    if (!found?.metadata?.uid) throw new Error(`pod ${namespace}/${pod} not in the simulator`);
    return found.metadata.uid;
  };
  return {
    sim,
    kube,
    pvbs,
    pvrs,
    logger,
    kubeletRoot: (node) => join(sim.dataRoot, node),
    volumeDir: (namespace, pod, volume) => {
      const dir = sim.podVolumes(namespace, pod).find((v) => v.volume === volume);
      if (!dir) throw new Error(`no volume ${volume} on ${namespace}/${pod}`);
      return dir.path;
    },
    podUid,
    createPvb: async (name, input) => {
      const uid = await podUid(input.namespace, input.pod);
      const result = await pvbs.createPvb({
        metadata: {
          name,
          labels: { [pvbLabels.backupName]: 'b1', [pvbLabels.backupUid]: 'uid-b1', [pvbLabels.node]: input.node },
        },
        spec: {
          node: input.node,
          pod: { namespace: input.namespace, name: input.pod, uid },
          volume: input.volume,
          backupStorageLocation: 'default',
          tags: { backup: 'b1', 'backup-uid': 'uid-b1', pod: input.pod, 'pod-uid': uid, ns: input.namespace, volume: input.volume },
          ...(input.cancel ? { cancel: true } : {}),
        },
      });
      return result.pvb;
    },
    createPod: async (namespace, name, input) => {
      const pod = await kube.core.createNamespacedPod({
        namespace,
        body: {
          metadata: { name, namespace },
          spec: {
            nodeName: input.node,
            containers: [{ name: 'app', image: 'busybox' }],
            volumes: [
              ...input.volumes.map((volume) => ({ name: volume, emptyDir: {} })),
              ...Object.entries(input.claims ?? {}).map(([volume, claimName]) => ({ name: volume, persistentVolumeClaim: { claimName } })),
            ],
          },
        },
      });
      return pod.metadata!.uid!;
    },
    emptyDirOf: (node, podUid, volume) => join(sim.dataRoot, node, 'pods', podUid, 'volumes', 'kubernetes.io~empty-dir', volume),
    createPvr: async (name, input) => {
      const result = await pvrs.create({
        metadata: {
          name,
          labels: { [pvrLabels.restoreName]: 'r1', [pvrLabels.restoreUid]: input.restoreUid, [pvrLabels.podUid]: input.podUid },
        },
        spec: {
          pod: { namespace: input.namespace, name: input.pod, uid: input.podUid },
          volume: input.volume,
          snapshotID: input.snapshotID,
          backupStorageLocation: 'default',
          repoIdentifier: 'repository',
          sourceNamespace: input.namespace,
          uploaderType: 'stowage',
          ...(input.cancel ? { cancel: true } : {}),
        },
      });
      return result.object;
    },
    close: () => sim.close(),
  };
}

/** Polls `read` until `done` holds, at most `timeoutMs`; returns the last value. */
export async function waitFor<T>(read: () => Promise<T>, done: (value: T) => boolean, timeoutMs: number, what: string): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  let last: T = await read();
  while (!done(last)) {
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}; last: ${JSON.stringify(last)}`);
    await new Promise((r) => setTimeout(r, 50));
    last = await read();
  }
  return last;
}

export function waitForPhase(pvbs: PvbClient, name: string, phases: string[], timeoutMs = 20_000): Promise<PodVolumeBackup | undefined> {
  return waitFor(
    () => pvbs.getPvb(name),
    (pvb) => phases.includes(pvb?.status?.phase ?? 'New'),
    timeoutMs,
    `PVB ${name} to reach ${phases.join('|')}`,
  );
}

export function waitForPvrPhase(
  pvrs: PvrClient,
  name: string,
  phases: string[],
  timeoutMs = 60_000,
): Promise<PodVolumeRestore | undefined> {
  return waitFor(
    () => pvrs.get(name),
    (pvr) => phases.includes(pvr?.status?.phase ?? 'New'),
    timeoutMs,
    `PVR ${name} to reach ${phases.join('|')}`,
  );
}

/**
 * An in-process node agent for `node` as these tests run one (one operation at a time, a short
 * takeover grace), added to `started` so the test's teardown closes it.
 */
export async function startTestAgent(
  h: Harness,
  started: NodeAgent[],
  input: { node: string; repoDir: string } & Partial<NodeAgentOptions>,
): Promise<NodeAgent> {
  const { node, repoDir, ...extra } = input;
  const agent = await startNodeAgent({
    nodeName: node,
    kube: h.kube,
    repoDir,
    repoKey: TEST_REPO_KEY,
    kubeletRoot: h.kubeletRoot(node),
    loadConcurrency: { globalConfig: 1 },
    logger: h.logger,
    takeoverGraceMs: 300,
    ...extra,
  });
  started.push(agent);
  return agent;
}

/** Writes `bytes` of incompressible data to one file (for slow copies under a bandwidth limit). */
export async function writeRandomFile(path: string, bytes: number): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, randomBytes(bytes));
}

/** Chunk-holding files of a repository (loose chunks and packs), to see whether a backup added any. */
export async function chunkFiles(repoDir: string): Promise<string[]> {
  const files: string[] = [];
  for (const top of ['data', 'packs']) {
    const base = join(repoDir, top);
    for (const fan of await readdir(base).catch(() => [] as string[])) {
      for (const name of await readdir(join(base, fan))) files.push(`${top}/${fan}/${name}`);
    }
  }
  return files.sort();
}
