/** Starts the simulator: loads a fixture, writes volume data and a kubeconfig, serves HTTP on 127.0.0.1. */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type Server } from 'node:http';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeApi } from './api-server.js';
import { type ClusterSnapshot, ClusterState, restoreCluster, snapshotCluster } from './cluster-state.js';
import { type ControlTarget, handleControl } from './control-api.js';
import { SimControllers } from './controllers.js';
import { ExecLog, type ExecRecord, type PodExecBehaviour } from './exec-sim.js';
import { type FaultConfig, FaultInjector, type RequestCounts, RequestStats } from './faults.js';
import {
  type Fixture,
  loadManifests,
  type MaterializeMode,
  materializePodVolumes,
  podVolumeDirs,
  resolveFixture,
} from './fixture-loader.js';
import { isPlainObject, type KubeObject } from './kube-object.js';
import { writeKubeconfig } from './kubeconfig.js';
import type { PodVolumeDir } from './volume-data.js';

export const demoFixturePath = fileURLToPath(new URL('../fixtures/demo.yaml', import.meta.url));

export interface SimulatorOptions {
  /** A fixture file path or a Fixture object; default: the bundled demo cluster. */
  fixture?: string | Fixture;
  /** 0 (default) picks a free port. */
  port?: number;
  host?: string;
  /** Where pod volume data goes; default a temp dir removed on close. */
  dataRoot?: string;
  /** Where to write the kubeconfig; default inside the simulator's temp dir. */
  kubeconfigPath?: string;
  /** More manifest files loaded before the fixture (e.g. CRDs). */
  extraManifests?: string[];
  /** Interval of BOOKMARK events on watches that allow them; default 1000 ms. */
  bookmarkIntervalMs?: number;
  /** How many change events are kept for watch resumption; default 10 000. */
  historyLimit?: number;
  /**
   * Volume directories and files to write: `all` (default; a generated fixture without data defaults to
   * `with-files`), `with-files` (only volumes that have file specs), `none`. `podVolumeDirs` still reports paths.
   */
  materializeVolumes?: MaterializeMode;
  /** Receives warnings (fixture problems that are not fatal, bad annotations). Default: collected only. */
  onWarning?: (message: string) => void;
  /**
   * How long after an API create a CRD becomes Established (its custom resources served before
   * that are 404); default 0 = at once, as the fixture's CRDs are.
   */
  crdEstablishDelayMs?: number;
  /**
   * How often `stowage-restore-wait` looks for its markers between wakes (a PVR of its pod made
   * terminal wakes it at once); default RESTORE_WAIT_POLL_MS, the real program's fallback poll.
   */
  restoreWaitPollMs?: number;
  /** Nodes that run a node agent, preferred by the scheduler (also: `setNodeAgents`, `PUT /_sim/node-agents`). */
  nodeAgents?: string[];
}

export interface Simulator {
  url: string;
  port: number;
  host: string;
  kubeconfigPath: string;
  kubeconfigYaml: string;
  dataRoot: string;
  /** Non-fatal problems found while loading (e.g. a pod whose PVC is missing). */
  warnings: string[];
  /** The in-process cluster state (for tests that need to look behind the API). */
  state: ClusterState;
  execLog(filter?: { namespace?: string; pod?: string }): ExecRecord[];
  requests(): RequestCounts;
  resetRequests(): void;
  setFaults(config: FaultConfig): void;
  clearFaults(): void;
  setPodPhase(namespace: string, name: string, phase: string): KubeObject | undefined;
  setExecBehaviour(namespace: string, pod: string, behaviour: PodExecBehaviour | undefined): void;
  /** Volume directories of a pod (emptyDir and PVC-backed), as laid out on disk. */
  podVolumes(namespace: string, pod: string): PodVolumeDir[];
  /** Nodes that run a node agent: the scheduler puts new pods there when their nodeSelector allows. */
  setNodeAgents(nodes: string[]): void;
  /** Back to the loaded fixture: objects (same uids), no faults, empty exec log and counts; open watches end. */
  reset(): void;
  /** Stops serving and removes the temp dir it created; safe to call twice. */
  close(): Promise<void>;
}

export async function startSimulator(options: SimulatorOptions = {}): Promise<Simulator> {
  const host = options.host ?? '127.0.0.1';
  const ownTempDir = mkdtempSync(join(tmpdir(), 'stowage-sim-'));
  const dataRoot = options.dataRoot ?? join(ownTempDir, 'data');
  const warnings: string[] = [];
  const warn = (message: string) => {
    warnings.push(message);
    options.onWarning?.(message);
  };
  const state = new ClusterState({ historyLimit: options.historyLimit ?? 10_000 });
  const materialize: MaterializeMode =
    options.materializeVolumes ?? (typeof options.fixture === 'object' ? options.fixture.materializeVolumes : undefined) ?? 'all';
  let snapshot: ClusterSnapshot;
  try {
    const manifests = resolveFixture(options.fixture ?? demoFixturePath, options.extraManifests ?? []);
    const loaded = loadManifests(state, manifests);
    for (const warning of loaded.warnings) warn(warning);
    if (materialize !== 'none') {
      const pods = [...state.store.list('pods', undefined)];
      const written = await materializePodVolumes(state, dataRoot, pods, materialize);
      for (const warning of written.warnings) warn(warning);
    }
    snapshot = snapshotCluster(state);
  } catch (error) {
    rmSync(ownTempDir, { recursive: true, force: true });
    throw error;
  }

  const faults = new FaultInjector();
  const stats = new RequestStats();
  const execLog = new ExecLog();
  const execOverrides = new Map<string, PodExecBehaviour>();
  const api = new KubeApi({ state, faults, stats, execLog, execOverrides, bookmarkIntervalMs: options.bookmarkIntervalMs ?? 1000, warn });
  // scheduler, kubelet, provisioner and CRD establishment for objects created through the API
  const controllers = new SimControllers({
    state,
    dataRoot,
    materialize,
    execOverrides,
    warn,
    ...(options.crdEstablishDelayMs !== undefined ? { crdEstablishDelayMs: options.crdEstablishDelayMs } : {}),
    ...(options.restoreWaitPollMs !== undefined ? { restoreWaitPollMs: options.restoreWaitPollMs } : {}),
  });
  controllers.install();
  controllers.setNodeAgents(options.nodeAgents ?? []);
  let dropTimer: NodeJS.Timeout | undefined;

  const podType = state.registry.get('', 'v1', 'pods')!;
  const control: ControlTarget = {
    info: () => ({
      url: sim.url,
      dataRoot,
      kubeconfigPath: sim.kubeconfigPath,
      warnings,
      resourceVersion: String(state.store.resourceVersion),
    }),
    execLog: (filter) => execLog.list(filter),
    requests: () => stats.snapshot(),
    resetRequests: () => stats.reset(),
    faults: () => faults.config,
    setFaults: (config) => {
      faults.config = { ...config };
      if (dropTimer) clearInterval(dropTimer);
      dropTimer = undefined;
      if (config.dropWatchesEveryMs && config.dropWatchesEveryMs > 0) {
        dropTimer = setInterval(() => api.dropWatches(faults.config.dropWatchesMode ?? 'reset'), config.dropWatchesEveryMs);
      }
    },
    clearFaults: () => control.setFaults({}),
    setPodPhase: (namespace, name, phase) => {
      const pod = state.tryGet(podType, namespace, name);
      if (!pod) return undefined;
      const status = isPlainObject(pod.status) ? pod.status : {};
      return state.update(podType, namespace, name, { ...pod, status: { ...status, phase } }, 'status');
    },
    setExecBehaviour: (namespace, name, behaviour) => {
      if (behaviour) execOverrides.set(`${namespace}/${name}`, behaviour);
      else execOverrides.delete(`${namespace}/${name}`);
    },
    volumes: (namespace, name) => {
      const pod = state.tryGet(podType, namespace, name);
      return pod ? podVolumeDirs(state, dataRoot, pod) : [];
    },
    setNodeAgents: (nodes) => controllers.setNodeAgents(nodes),
    reset: () => {
      api.dropWatches('end');
      controllers.clear();
      restoreCluster(state, snapshot);
      control.clearFaults();
      execOverrides.clear();
      execLog.clear();
      stats.reset();
    },
  };

  const server: Server = createServer((req, res) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://sim.invalid');
    } catch {
      res.writeHead(400, { 'Content-Type': 'application/json' });
      res.end(
        JSON.stringify({
          kind: 'Status',
          apiVersion: 'v1',
          metadata: {},
          status: 'Failure',
          message: 'malformed request URL',
          reason: 'BadRequest',
          code: 400,
        }),
      );
      return;
    }
    const isControl = url.pathname === '/_sim' || url.pathname.startsWith('/_sim/');
    const watch = url.searchParams.get('watch');
    const isWatch = watch === 'true' || watch === '1' || /^\/(api\/v1|apis\/[^/]+\/[^/]+)\/watch(\/|$)/.test(url.pathname);
    if (!isControl && !isWatch) res.once('close', stats.requestStarted());
    const handled = isControl ? handleControl(control, req, res, url) : api.handle(req, res, url);
    handled.catch((error: unknown) => {
      warn(`request handling failed: ${String(error)}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  });
  server.on('connection', () => stats.connectionOpened());
  server.on('upgrade', (req, socket, head) => {
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://sim.invalid');
    } catch {
      socket.destroy();
      return;
    }
    api.handleUpgrade(req, socket, head, url).catch(() => socket.destroy());
  });
  server.on('clientError', (_error, socket) => {
    if (socket.writable) socket.end('HTTP/1.1 400 Bad Request\r\nConnection: close\r\n\r\n');
    else socket.destroy();
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(options.port ?? 0, host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const address = server.address();
  const port = typeof address === 'object' && address ? address.port : (options.port ?? 0);
  const url = `http://${host.includes(':') ? `[${host}]` : host}:${port}`;
  const kubeconfigPath = options.kubeconfigPath ?? join(ownTempDir, 'kubeconfig');
  const kubeconfigYaml = writeKubeconfig(kubeconfigPath, url);

  let closing: Promise<void> | undefined;
  const sim: Simulator = {
    url,
    port,
    host,
    kubeconfigPath,
    kubeconfigYaml,
    dataRoot,
    warnings,
    state,
    execLog: (filter = {}) => execLog.list(filter),
    requests: () => stats.snapshot(),
    resetRequests: () => stats.reset(),
    setFaults: (config) => control.setFaults(config),
    clearFaults: () => control.clearFaults(),
    setPodPhase: (namespace, name, phase) => control.setPodPhase(namespace, name, phase) as KubeObject | undefined,
    setExecBehaviour: (namespace, pod, behaviour) => control.setExecBehaviour(namespace, pod, behaviour),
    podVolumes: (namespace, pod) => control.volumes(namespace, pod),
    setNodeAgents: (nodes) => control.setNodeAgents(nodes),
    reset: () => control.reset(),
    close: () => {
      closing ??= (async () => {
        if (dropTimer) clearInterval(dropTimer);
        api.closeAll();
        await new Promise<void>((resolve) => {
          server.close(() => resolve());
          server.closeAllConnections();
        });
        await controllers.close();
        rmSync(ownTempDir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
  return sim;
}
