/** Starts the simulator: loads a fixture, writes volume data and a kubeconfig, serves HTTP on 127.0.0.1. */
import { mkdtempSync, rmSync } from 'node:fs';
import { createServer, type RequestListener, type Server } from 'node:http';
import { createServer as createHttpsServer } from 'node:https';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { KubeApi } from './api-server.js';
import { ClusterRoleAggregator } from './auth/aggregation.js';
import { bootstrapClusterRoleBindings, bootstrapClusterRoles } from './auth/bootstrap-policy.js';
import { systemMasters, withAuthenticatedGroup } from './auth/identity.js';
import { Security } from './auth/security.js';
import { apiServerAudience } from './auth/tokens.js';
import { type ClusterSnapshot, ClusterState, restoreCluster, snapshotCluster } from './cluster-state.js';
import { type ControlTarget, handleControl } from './control-api.js';
import { SimControllers } from './controllers.js';
import { ExecLog, type ExecRecord, HeldExecs, type PodExecBehaviour } from './exec-sim.js';
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
import { kubeconfigYaml as kubeconfigText, writeKubeconfig } from './kubeconfig.js';
import { serverCertificate } from './tls.js';
import type { PodVolumeDir } from './volume-data.js';
import { probeReflinks } from './volume-disks.js';

export const demoFixturePath = fileURLToPath(new URL('../fixtures/demo.yaml', import.meta.url));

export interface SimulatorOptions {
  /** A fixture file path or a Fixture object; default: the bundled demo cluster. */
  fixture?: string | Fixture;
  /** Port of plain HTTP (control API, clients sending tokens over HTTP); 0 (default) picks a free port. */
  port?: number;
  /** Port of HTTPS, which the kubeconfigs name (kubectl authenticates only over TLS); 0 (default) picks a free port. */
  httpsPort?: number;
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
  /**
   * Milliseconds from a VolumeSnapshot's cut to `readyToUse` when its class has no
   * `sim.stowage.dev/ready-delay-ms` parameter; default 0 (see snapshot-controller.ts).
   */
  snapshotReadyDelayMs?: number;
  /**
   * The server the kubeconfig files name (the admin's and `kubeconfigFor`'s): `https` (default;
   * kubectl sends credentials only over TLS) or `http` (for processes that are client-node only,
   * which sends tokens over plain HTTP too: TLS costs the simulator ~0.1 ms of CPU per small
   * request, see BENCHMARKS.md). Kubeconfig texts (`kubeconfigYaml`, `kubeconfigFor().yaml`) always
   * name plain HTTP: they are for client-node in the test's own process.
   */
  kubeconfigServer?: 'https' | 'http';
  /**
   * Authentication, RBAC authorization and admission as a real API server (default true). False lets
   * every request through, with or without a token, as before the simulator checked anything.
   */
  authz?: boolean;
}

/** Who a kubeconfig from `kubeconfigFor` authenticates as. */
export type SimSubject = { serviceAccount: { namespace: string; name: string } } | { user: string; groups?: string[] };

export interface Simulator {
  /** `http://host:port`: the control API (`/_sim/`), and clients that send their token over plain HTTP (client-node does). */
  url: string;
  /** `https://host:httpsPort`: what the kubeconfig files name, as kubectl sends credentials only over TLS. */
  httpsUrl: string;
  httpsPort: number;
  /** PEM of the self-signed certificate the simulator serves (its own CA), in every kubeconfig it writes. */
  caCertificate: string;
  port: number;
  host: string;
  /** The admin's kubeconfig file (names HTTPS, for kubectl and other processes). */
  kubeconfigPath: string;
  /** The admin's kubeconfig text (names plain HTTP, for client-node in this process). */
  kubeconfigYaml: string;
  /** The admin's bearer token (user `admin`, groups `system:masters`, `system:authenticated`): what the kubeconfig sends. */
  adminToken: string;
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
  /** Lets every exec of the pod held by a `hold` outcome finish (after its durationMs); returns how many. */
  releaseExecs(namespace: string, pod: string): number;
  /** Volume directories of a pod (emptyDir and PVC-backed), as laid out on disk. */
  podVolumes(namespace: string, pod: string): PodVolumeDir[];
  /** Marks ready every snapshot cut under a class with `sim.stowage.dev/hold-ready`; returns how many. */
  releaseSnapshots(): number;
  /** Where a snapshot's point-in-time copy is (`status.snapshotHandle` of its VolumeSnapshotContent). */
  snapshotDataPath(handle: string): string;
  /** Whether a snapshot's cut clones files (reflinks on this filesystem) or copies every byte. */
  cutMode(): Promise<'reflink' | 'copy'>;
  /** Nodes that run a node agent: the scheduler puts new pods there when their nodeSelector allows. */
  setNodeAgents(nodes: string[]): void;
  /**
   * A token of the ServiceAccount, as TokenRequest mints one (default 3600 s; any positive lifetime,
   * for tests of expiry). Throws when the account does not exist. Deleting the account revokes it.
   */
  serviceAccountToken(namespace: string, name: string, options?: { expirationSeconds?: number }): string;
  /** A static token for a user (like a token-auth file): `name` in `groups` and `system:authenticated`. */
  addUser(name: string, groups?: string[]): string;
  /**
   * A kubeconfig for the identity, written to `path` (default: a new file in the simulator's temp dir;
   * it names HTTPS, for kubectl and other processes); `yaml` is the same identity over plain HTTP,
   * for client-node in this process, as `kubeconfigYaml`. A service account's token lasts
   * `expirationSeconds` (default 24 h: a process keeps its kubeconfig, nothing refreshes it).
   */
  kubeconfigFor(
    subject: SimSubject,
    path?: string,
    options?: { expirationSeconds?: number },
  ): { yaml: string; path: string; token: string };
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
  const authz = options.authz ?? true;
  const security = new Security(state);
  const adminToken = security.tokens.addStatic({ name: 'admin', groups: [systemMasters, 'system:authenticated'] });
  const aggregator = new ClusterRoleAggregator(state);
  const materialize: MaterializeMode =
    options.materializeVolumes ?? (typeof options.fixture === 'object' ? options.fixture.materializeVolumes : undefined) ?? 'all';
  let snapshot: ClusterSnapshot;
  try {
    const manifests = resolveFixture(options.fixture ?? demoFixturePath, options.extraManifests ?? []);
    const loaded = loadManifests(state, manifests);
    for (const warning of loaded.warnings) warn(warning);
    if (authz) loadBootstrapPolicy(state);
    aggregator.install();
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
  const heldExecs = new HeldExecs();
  const api = new KubeApi({
    state,
    faults,
    stats,
    execLog,
    execOverrides,
    heldExecs,
    bookmarkIntervalMs: options.bookmarkIntervalMs ?? 1000,
    warn,
    security,
    authz,
  });
  // scheduler, kubelet, provisioner and CRD establishment for objects created through the API
  const controllers = new SimControllers({
    state,
    dataRoot,
    materialize,
    execOverrides,
    warn,
    ...(options.crdEstablishDelayMs !== undefined ? { crdEstablishDelayMs: options.crdEstablishDelayMs } : {}),
    ...(options.restoreWaitPollMs !== undefined ? { restoreWaitPollMs: options.restoreWaitPollMs } : {}),
    ...(options.snapshotReadyDelayMs !== undefined ? { snapshotReadyDelayMs: options.snapshotReadyDelayMs } : {}),
  });
  let reflinks: Promise<boolean> | undefined;
  const cutMode = async (): Promise<'reflink' | 'copy'> => {
    reflinks ??= probeReflinks(join(dataRoot, '_snapshots'));
    return (await reflinks) ? 'reflink' : 'copy';
  };
  controllers.install();
  controllers.setNodeAgents(options.nodeAgents ?? []);
  let dropTimer: NodeJS.Timeout | undefined;

  const podType = state.registry.get('', 'v1', 'pods')!;
  const control: ControlTarget = {
    info: () => ({
      url: sim.url,
      httpsUrl: sim.httpsUrl,
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
    releaseExecs: (namespace, name) => heldExecs.release(namespace, name),
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
      heldExecs.releaseAll();
      execLog.clear();
      stats.reset();
    },
  };

  const handler: RequestListener = (req, res) => {
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
    if (!isControl && !isWatch) {
      // Served once the handler ends the response (or the client went away): the write's own
      // completion events can come after the client has already read the answer and sent its
      // next request, which would count one client's two requests as in flight at once.
      const served = stats.requestStarted();
      const end = res.end.bind(res);
      res.end = ((...args: Parameters<typeof res.end>) => {
        served();
        return end(...args);
      }) as typeof res.end;
      res.once('close', served);
    }
    const handled = isControl ? handleControl(control, req, res, url) : api.handle(req, res, url);
    handled.catch((error: unknown) => {
      warn(`request handling failed: ${String(error)}`);
      if (!res.headersSent) res.writeHead(500);
      res.end();
    });
  };
  let certificate: Awaited<ReturnType<typeof serverCertificate>>;
  try {
    certificate = await serverCertificate(host);
  } catch (error) {
    await controllers.close();
    rmSync(ownTempDir, { recursive: true, force: true });
    throw error;
  }
  // The API server reads request heads of up to 1 MiB (Go's http.Server default, MaxHeaderBytes); Node's
  // default is 16 KiB. An exec's argv travels in the URL (`command=` per element): a hook's 64 KiB argv needs it.
  const maxHeaderSize = 1024 * 1024;
  const plain = createServer({ maxHeaderSize }, handler);
  const secure = createHttpsServer({ cert: certificate.cert, key: certificate.key, maxHeaderSize }, handler);
  for (const server of [plain, secure]) {
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
  }
  const listen = (server: Server, port: number) =>
    new Promise<number>((resolve, reject) => {
      server.once('error', reject);
      server.listen(port, host, () => {
        server.off('error', reject);
        const address = server.address();
        resolve(typeof address === 'object' && address ? address.port : port);
      });
    });
  const port = await listen(plain, options.port ?? 0);
  const httpsPort = await listen(secure, options.httpsPort ?? 0);
  const hostInUrl = host.includes(':') ? `[${host}]` : host;
  const url = `http://${hostInUrl}:${port}`;
  const httpsUrl = `https://${hostInUrl}:${httpsPort}`;
  const kubeconfigPath = options.kubeconfigPath ?? join(ownTempDir, 'kubeconfig');
  // Files (kubectl, other processes) name HTTPS; texts (client-node in this process) plain HTTP,
  // where client-node 1.4, which opens a connection per request, does not pay a TLS handshake each.
  const fileServer = options.kubeconfigServer === 'http' ? url : httpsUrl;
  const fileCa = options.kubeconfigServer === 'http' ? undefined : certificate.cert;
  writeKubeconfig(kubeconfigPath, fileServer, adminToken, 'default', fileCa);
  const kubeconfigYaml = kubeconfigText(url, adminToken, 'default');
  let kubeconfigs = 0;
  const serviceAccountToken = (namespace: string, name: string, tokenOptions: { expirationSeconds?: number } = {}) => {
    const uid = security.serviceAccountUid(namespace, name);
    if (!uid) throw new Error(`serviceaccount ${namespace}/${name} does not exist`);
    const expirationSeconds = tokenOptions.expirationSeconds ?? 3600;
    if (!(expirationSeconds > 0)) throw new Error(`expirationSeconds must be > 0, got ${expirationSeconds}`);
    return security.tokens.mintServiceAccountToken({ namespace, name, uid, expirationSeconds, audiences: [apiServerAudience] }).token;
  };
  const addUser = (name: string, groups: string[] = []) => security.tokens.addStatic({ name, groups: withAuthenticatedGroup(groups) });

  let closing: Promise<void> | undefined;
  const sim: Simulator = {
    url,
    httpsUrl,
    caCertificate: certificate.cert,
    port,
    httpsPort,
    host,
    kubeconfigPath,
    kubeconfigYaml,
    adminToken,
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
    releaseExecs: (namespace, pod) => control.releaseExecs(namespace, pod),
    podVolumes: (namespace, pod) => control.volumes(namespace, pod),
    releaseSnapshots: () => controllers.snapshots.releaseHeld(),
    snapshotDataPath: (handle) => controllers.disks.snapshotPath(handle),
    cutMode,
    setNodeAgents: (nodes) => control.setNodeAgents(nodes),
    serviceAccountToken,
    addUser,
    kubeconfigFor: (subject, path, kubeconfigOptions = {}) => {
      const [token, namespace, label] =
        'serviceAccount' in subject
          ? [
              serviceAccountToken(subject.serviceAccount.namespace, subject.serviceAccount.name, {
                expirationSeconds: kubeconfigOptions.expirationSeconds ?? 24 * 3600,
              }),
              subject.serviceAccount.namespace,
              subject.serviceAccount.name,
            ]
          : [addUser(subject.user, subject.groups), 'default', subject.user];
      const file = path ?? join(ownTempDir, `kubeconfig-${++kubeconfigs}-${label.replace(/[^A-Za-z0-9_.-]/g, '_')}`);
      writeKubeconfig(file, fileServer, token, namespace, fileCa);
      return { yaml: kubeconfigText(url, token, namespace), path: file, token };
    },
    reset: () => control.reset(),
    close: () => {
      closing ??= (async () => {
        if (dropTimer) clearInterval(dropTimer);
        api.closeAll();
        await Promise.all(
          [plain, secure].map(
            (server) =>
              new Promise<void>((resolve) => {
                server.close(() => resolve());
                server.closeAllConnections();
              }),
          ),
        );
        await controllers.close();
        aggregator.close();
        rmSync(ownTempDir, { recursive: true, force: true });
      })();
      return closing;
    },
  };
  return sim;
}

/** The default RBAC objects of a Kubernetes API server (those the fixture does not define itself). */
function loadBootstrapPolicy(state: ClusterState): void {
  const roles = state.registry.get('rbac.authorization.k8s.io', 'v1', 'clusterroles')!;
  const bindings = state.registry.get('rbac.authorization.k8s.io', 'v1', 'clusterrolebindings')!;
  for (const [type, objects] of [
    [roles, bootstrapClusterRoles()],
    [bindings, bootstrapClusterRoleBindings()],
  ] as const)
    for (const object of objects) if (!state.tryGet(type, '', object.metadata.name!)) state.create(type, '', object, { keepStatus: true });
}
