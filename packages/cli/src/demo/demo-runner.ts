import { randomBytes } from 'node:crypto';
import { mkdir, mkdtemp, rm, stat } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { tmpdir } from 'node:os';
import { join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { type EmbeddedRedis, PlatformError, PlatformErrorCode, startEmbeddedRedis } from '@stowage/platform';
import { ObjectStoreBackend, Repository } from '@stowage/repository';
import { S3Storage } from '@stowage/storage';
import { type S3Server, startS3Server } from '@stowage/testing';
import { StowageApiClient } from '../api-client.js';
import { type BackupReport, buildBackupReport } from '../backup-report.js';
import { CliError, CliErrorCode } from '../errors.js';
import { followBackup } from '../follow.js';
import { formatBytes, formatDuration } from '../format.js';
import { type DemoCluster, openDemoCluster, whoIs } from './cluster.js';
import type { DemoOptions } from './demo-options.js';
import { type DemoRestoreSummary, formatDemoRestore, restoreShop } from './demo-restore.js';
import { ManagedProcess } from './managed-process.js';

export const REPO_ROOT = fileURLToPath(new URL('../../../../', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

export interface DemoIo {
  stdout: { write(text: string): void; isTTY?: boolean };
  stderr: { write(text: string): void; isTTY?: boolean };
}

/** Everything the demo reports (printed as text, or as JSON with --json). */
export interface DemoSummary extends BackupReport {
  ok: boolean;
  backup: string;
  api: { url: string; token: string };
  dashboard: { url: string; note: string };
  console: { url: string };
  storage: { dir: string; backupDir: string; repositoryDir: string; kept: boolean };
  repositoryVerify: { ok: boolean; chunksChecked: number; snapshotsChecked: number } | null;
  logs: { dir: string; kept: boolean };
  redis: { url: string; embedded: boolean };
  cluster: { server: string; kubeconfig: string; embedded: boolean; nodes: string[] };
  /** Each service process, and who it is to the cluster (its kubeconfig's user, as the API server says). */
  processes: Array<{ name: string; pid: number; identity: string }>;
  /** The restore of shop after the backup (null with --no-restore or when the backup failed). */
  restore: DemoRestoreSummary | null;
  /** Filled after cleanup (not with --keep until Ctrl-C). */
  cleanup: { processesStopped: boolean; tempRemoved: boolean } | null;
}

const SERVICE_MAIN = {
  api: 'services/api/src/main.ts',
  worker: 'services/worker/src/main.ts',
  'node-agent': 'services/node-agent/src/main.ts',
} as const;

const stamp = (d: Date): string => d.toISOString().replace(/[-:]/g, '').replace('T', '-').slice(0, 15);

/** Clean-up steps, run last-added-first, each on its own so one failure does not skip the rest. */
class Cleanup {
  private readonly steps: Array<{ name: string; run: () => Promise<void> }> = [];
  add(name: string, run: () => Promise<void>): void {
    this.steps.push({ name, run });
  }
  async runAll(): Promise<string[]> {
    const failures: string[] = [];
    while (this.steps.length > 0) {
      const step = this.steps.pop()!;
      try {
        await step.run();
      } catch (err) {
        failures.push(`${step.name}: ${(err as Error).message}`);
      }
    }
    return failures;
  }
}

/**
 * The one-command demo: Redis, the simulator, three node agents, workers and the API as real
 * separate processes; one backup through the REST API with live progress; a summary; then every
 * process it started is stopped and every temp dir removed (unless --keep/--out say otherwise).
 * `signal` aborts it (Ctrl-C): clean-up still runs.
 */
export async function runDemo(
  opts: DemoOptions,
  io: DemoIo,
  env: Readonly<Record<string, string | undefined>>,
  signal: AbortSignal,
  registerProcess: (p: ManagedProcess) => void = () => {},
  registerTempDir: (dir: string) => void = () => {},
): Promise<{ exitCode: number; summary: DemoSummary | undefined }> {
  const info = opts.json ? io.stderr : io.stdout;
  const say = (line: string) => info.write(`${line}\n`);
  const started = new Date();
  const runId = stamp(started).toLowerCase();
  const cleanup = new Cleanup();
  const processes: ManagedProcess[] = [];
  let summary: DemoSummary | undefined;
  let exitCode = 1;

  const workDir = await mkdtemp(join(tmpdir(), 'stowage-demo-'));
  registerTempDir(workDir);
  cleanup.add('temp dir', () => rm(workDir, { recursive: true, force: true }));
  const outDir = opts.out ? resolve(opts.out) : opts.keep ? join(REPO_ROOT, '.stowage', `demo-${runId}`) : undefined;
  const storageDir = outDir ? join(outDir, 'storage') : join(workDir, 'storage');
  const logDir = outDir ? join(outDir, 'logs') : join(workDir, 'logs');
  await mkdir(storageDir, { recursive: true });
  await mkdir(logDir, { recursive: true });

  try {
    say('Stowage demo');
    // 1. Redis
    let redisUrl = env.REDIS_URL?.trim();
    let redis: EmbeddedRedis | undefined;
    if (redisUrl) say(`• redis: using REDIS_URL ${redisUrl.replace(/\/\/[^@/]*@/, '//***@')} (keys under a fresh prefix)`);
    else {
      try {
        redis = await startEmbeddedRedis();
      } catch (err) {
        if (err instanceof PlatformError && err.code === PlatformErrorCode.redisNotFound)
          throw new CliError(CliErrorCode.demoFailed, err.message);
        throw err;
      }
      const r = redis;
      cleanup.add('redis-server', () => r.stop());
      redisUrl = redis.url;
      say(`• redis: no REDIS_URL, so started a private redis-server at ${redis.url} (stopped at exit)`);
    }

    // 2. Kubernetes
    const cluster: DemoCluster = await openDemoCluster(env, workDir);
    cleanup.add('simulator', () => cluster.close());
    say(
      cluster.embedded
        ? `• kubernetes: no KUBECONFIG, so started the simulator with the demo cluster at ${cluster.serverUrl} (nodes ${cluster.nodes.join(', ')})`
        : `• kubernetes: the simulator at ${cluster.serverUrl} from KUBECONFIG (nodes ${cluster.nodes.join(', ')})`,
    );

    // Backup storage: a directory, or a private S3 server (the one the tests use).
    let s3: S3Server | undefined;
    if (opts.storage === 's3') {
      s3 = await startS3Server({ bucket: 'stowage-demo', ...(outDir ? { dir: join(outDir, 's3') } : {}) });
      const server = s3;
      cleanup.add('s3 server', () => server.stop());
      say(`• storage: started a private S3 server at ${s3.endpoint} (bucket stowage-demo, files in ${s3.dir}; stopped at exit)`);
    }

    // 3. The services, as separate processes
    const token = randomBytes(24).toString('base64url');
    const repoKey = randomBytes(32).toString('base64');
    const base: Record<string, string | undefined> = {};
    for (const [k, v] of Object.entries(env)) if (!k.startsWith('STOWAGE_') && k !== 'PORT' && k !== 'HOST') base[k] = v;
    Object.assign(base, {
      REDIS_URL: redisUrl,
      STOWAGE_STORAGE: storageDir,
      STOWAGE_QUEUE_PREFIX: `{stowage-demo-${runId}}`,
      STOWAGE_NAMESPACE: 'stowage',
      // At least info: each service's "listening" line is how the demo learns its port.
      LOG_LEVEL: env.LOG_LEVEL === 'debug' || env.LOG_LEVEL === 'trace' ? env.LOG_LEVEL : 'info',
      STOWAGE_SHUTDOWN_TIMEOUT_MS: '10000',
      // With S3: STOWAGE_STORAGE=s3://stowage-demo, the endpoint and its credentials (AWS_*).
      ...(s3 ? s3.env : {}),
    });
    const verboseLine = opts.verbose ? (name: string, line: string) => io.stderr.write(`[${name}] ${line}\n`) : undefined;
    /** The bearer token each process's kubeconfig sends, by process name. */
    const tokenOf = new Map<string, string | undefined>();
    const startService = async (name: string, main: string, extra: Record<string, string>, kubeToken: string | undefined) => {
      tokenOf.set(name, kubeToken);
      // PORT=0: each service binds a port of its own and names it in its "listening" line. A port
      // picked free here and handed over would be free only until the service (tens of seconds
      // of startup on a loaded machine later) binds it: another process could take it meanwhile,
      // answer the readiness check in its place, and the service would stop on EADDRINUSE.
      const listening = new ListeningPort();
      const p = new ManagedProcess({
        name,
        command: process.execPath,
        args: ['--conditions=@stowage/source', '--import', TSX_LOADER, join(REPO_ROOT, main)],
        // The demo's services answer on this machine only (its token is printed on screen).
        env: { ...base, ...extra, PORT: '0', HOST: '127.0.0.1' },
        cwd: REPO_ROOT,
        logFile: join(logDir, `${name}.log`),
        onLine: (from, line) => {
          listening.look(line);
          verboseLine?.(from, line);
        },
      });
      processes.push(p);
      registerProcess(p);
      return { p, listening };
    };
    cleanup.add('services', async () => {
      // Stop them all at once (each shuts down gracefully), API and workers first in spirit.
      await Promise.all(processes.map((p) => p.stop()));
      const alive = processes.filter((p) => p.groupAlive());
      if (alive.length > 0) throw new Error(`still running: ${alive.map((p) => `${p.name} (pid ${p.pid})`).join(', ')}`);
    });

    // With S3, the repository is created here, once, before the agents start: the embedded S3 test
    // server ignores create-only puts, so agents creating it at the same moment could each write a
    // config of their own (a real S3 or MinIO refuses all but the first).
    const repositoryDir = s3 ? `${s3.storageUrl}/repository` : join(storageDir, 'repository');
    const demoS3Store = () =>
      s3
        ? new S3Storage({
            bucket: s3.bucket,
            endpoint: s3.endpoint,
            forcePathStyle: true,
            credentials: { accessKeyId: s3.accessKeyId, secretAccessKey: s3.secretAccessKey },
          })
        : undefined;
    const initStore = demoS3Store();
    if (initStore) {
      try {
        await Repository.init({ dir: repositoryDir, key: repoKey, backend: new ObjectStoreBackend(initStore) });
      } finally {
        initStore.close();
      }
    }

    const ids = cluster.identities;
    say(
      `• identities: k8s/overlays/dev's ServiceAccounts and RBAC applied (${ids.applied.length} objects); each service runs as its own account`,
    );
    say(`• starting ${cluster.nodes.length} node agents, ${opts.workers} workers, a restore worker and the API (logs in ${logDir})`);
    const started: Array<{ p: ManagedProcess; listening: ListeningPort }> = [];
    for (const node of cluster.nodes) {
      started.push(
        await startService(
          `agent-${node}`,
          SERVICE_MAIN['node-agent'],
          {
            KUBECONFIG: ids.nodeAgent,
            STOWAGE_NODE_NAME: node,
            STOWAGE_REPO_KEY: repoKey,
            STOWAGE_KUBELET_ROOT: join(cluster.dataRoot, node),
          },
          ids.tokens.get('stowage-node-agent'),
        ),
      );
    }
    // Backup workers and a restore worker, as the overlay's two worker Deployments: each its own
    // account, on the queues its Deployment sets (STOWAGE_WORKER_QUEUES).
    const queuesOf = (account: string): Record<string, string> => {
      const queues = ids.workerQueues.get(account);
      return queues ? { STOWAGE_WORKER_QUEUES: queues } : {};
    };
    for (let i = 1; i <= opts.workers; i++)
      started.push(
        await startService(
          `worker-${i}`,
          SERVICE_MAIN.worker,
          { KUBECONFIG: ids.worker, ...queuesOf('stowage-worker') },
          ids.tokens.get('stowage-worker'),
        ),
      );
    started.push(
      await startService(
        'restorer-1',
        SERVICE_MAIN.worker,
        { KUBECONFIG: ids.restorer, ...queuesOf('stowage-restorer') },
        ids.tokens.get('stowage-restorer'),
      ),
    );
    const api = await startService(
      'api',
      SERVICE_MAIN.api,
      { KUBECONFIG: ids.api, STOWAGE_API_TOKENS: token },
      ids.tokens.get('stowage-api'),
    );
    started.push(api);
    const readyFrom = Date.now();
    const ports = await Promise.all(started.map(({ p, listening }) => waitReady(p, listening, 120_000, signal)));
    const apiUrl = `http://127.0.0.1:${ports[started.indexOf(api)]}`;
    say(`• ${started.length} processes ready in ${formatDuration(Date.now() - readyFrom)}; API at ${apiUrl}`);
    const identityOf = new Map<string, string>();
    for (const p of processes) identityOf.set(p.name, await whoIs(cluster, tokenOf.get(p.name)));

    // 4. The backup, through the REST API
    const client = new StowageApiClient({ baseUrl: apiUrl, token });
    const name = `demo-${runId}`;
    await client.createBackup({ name, spec: { includedNamespaces: ['shop', 'media'], defaultVolumesToFsBackup: true } });
    say(`• submitted backup ${name} (POST /v1/backups: namespaces shop and media, defaultVolumesToFsBackup)`);

    const progressOut = opts.json ? io.stderr : io.stdout;
    const bounded = AbortSignal.any([signal, AbortSignal.timeout(opts.timeoutMs)]);
    let result: Awaited<ReturnType<typeof followBackup>>;
    try {
      result = await followBackup(client, name, {
        output: { isTTY: progressOut.isTTY === true, write: (t) => progressOut.write(t) },
        signal: bounded,
      });
    } catch (err) {
      if (signal.aborted) throw new CliError(CliErrorCode.demoFailed, 'interrupted; stopping everything', [], { cause: err });
      if (bounded.aborted)
        throw new CliError(
          CliErrorCode.demoFailed,
          `the backup did not end within ${opts.timeoutMs / 1000} s; the service logs are in ${logDir}`,
          [],
          {
            cause: err,
          },
        );
      throw err;
    }

    // 5. Summary
    const report = buildBackupReport(result.backup, result.blocks);
    // With --storage s3 the node agents keep the repository in the bucket, beside the backups.
    let repositoryVerify: DemoSummary['repositoryVerify'] = null;
    const store = demoS3Store();
    if (store) {
      try {
        const v = await (await Repository.open({ dir: repositoryDir, key: repoKey, backend: new ObjectStoreBackend(store) })).verify();
        repositoryVerify = { ok: v.ok, chunksChecked: v.chunksChecked, snapshotsChecked: v.snapshotsChecked };
      } finally {
        store.close();
      }
    } else if (await exists(repositoryDir)) {
      const v = await (await Repository.open({ dir: repositoryDir, key: repoKey })).verify();
      repositoryVerify = { ok: v.ok, chunksChecked: v.chunksChecked, snapshotsChecked: v.snapshotsChecked };
    }
    summary = {
      ok: report.phase === 'Completed',
      backup: name,
      ...report,
      api: { url: apiUrl, token },
      dashboard: {
        url: `${apiUrl}/admin/queues`,
        note: opts.keep
          ? 'sign in at the console (/ui) with the token first, or send "Authorization: Bearer <token>"'
          : 'run with --keep to explore it',
      },
      console: { url: `${apiUrl}/ui` },
      storage: {
        dir: s3 ? `${s3.storageUrl} at ${s3.endpoint} (files in ${s3.dir})` : storageDir,
        backupDir: s3 ? `${s3.storageUrl}/backups/${name}/` : join(storageDir, 'backups', name),
        repositoryDir,
        kept: outDir !== undefined,
      },
      repositoryVerify,
      logs: { dir: logDir, kept: outDir !== undefined },
      redis: { url: redisUrl, embedded: redis !== undefined },
      cluster: { server: cluster.serverUrl, kubeconfig: cluster.kubeconfigPath, embedded: cluster.embedded, nodes: cluster.nodes },
      processes: processes.map((p) => ({ name: p.name, pid: p.pid, identity: identityOf.get(p.name) ?? 'unknown' })),
      restore: null,
      cleanup: null,
    };
    if (!opts.json) for (const line of formatDemoSummary(summary)) io.stdout.write(`${line}\n`);

    // 6. The restore: shop deleted (or kept, with --restore-into) and brought back
    if (summary.ok && !opts.noRestore) {
      summary.restore = await restoreShop({
        client,
        kube: { server: cluster.serverUrl, token: cluster.token },
        backup: name,
        name: `${name}-restore`,
        into: opts.restoreInto,
        say,
        progress: (line) => progressOut.write(`${line}\n`),
        signal: bounded,
      });
      const r = summary.restore;
      summary.ok = r.phase === 'Completed' && r.volumes.every((v) => v.equal);
      if (!opts.json) for (const line of formatDemoRestore(r)) io.stdout.write(`${line}\n`);
    }
    exitCode = summary.ok && (repositoryVerify?.ok ?? true) ? 0 : 1;

    if (opts.keep) {
      if (opts.json) io.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
      say('');
      say('Everything keeps running. In another terminal:');
      say(`  export STOWAGE_API_URL=${apiUrl} STOWAGE_API_TOKEN=${token}`);
      say(`  pnpm stowage backup describe ${name}`);
      const s3Env = s3
        ? `STOWAGE_S3_ENDPOINT=${s3.endpoint} AWS_ACCESS_KEY_ID=${s3.accessKeyId} AWS_SECRET_ACCESS_KEY=${s3.secretAccessKey} `
        : '';
      say(`  ${s3Env}STOWAGE_REPO_KEY='${repoKey}' pnpm stowage repo verify --repo ${repositoryDir}`);
      say(`  curl -H "Authorization: Bearer ${token}" ${apiUrl}/v1/backups`);
      say('Press Ctrl-C to stop everything (the storage stays).');
      await new Promise<void>((r) => (signal.aborted ? r() : signal.addEventListener('abort', () => r(), { once: true })));
      say('stopping…');
    }
  } catch (err) {
    if (err instanceof CliError) {
      io.stderr.write(`demo: ${err.message}\n`);
      for (const p of processes) {
        if (p.hasExited) io.stderr.write(`--- ${p.name} exited; its last lines (${p.logFile}):\n${p.lastLines().join('\n')}\n`);
      }
    } else throw err;
  } finally {
    const failures = await cleanup.runAll();
    for (const f of failures) io.stderr.write(`demo: clean-up problem: ${f}\n`);
    if (summary) {
      summary.cleanup = { processesStopped: processes.every((p) => !p.groupAlive()), tempRemoved: !(await exists(workDir)) };
      if (failures.length > 0) exitCode = 1;
    }
  }
  if (summary && opts.json && !opts.keep) io.stdout.write(`${JSON.stringify(summary, null, 2)}\n`);
  if (summary && !opts.json) {
    say(
      summary.storage.kept
        ? `Stopped every process; the backup storage stays in ${summary.storage.dir}.`
        : 'Stopped every process and removed the temp dirs (use --out DIR to keep the backup storage).',
    );
  }
  return { exitCode, summary };
}

async function exists(path: string): Promise<boolean> {
  try {
    await stat(path);
    return true;
  } catch {
    return false;
  }
}

/** The log lines in which a service names the port it listens on (pino JSON with `port`). */
const LISTENING_MESSAGES: ReadonlySet<string> = new Set(['api started', 'worker started', 'node agent listening']);

/** The port a service started with PORT=0 says it listens on, from its own log line. */
export class ListeningPort {
  port: number | undefined;

  look(line: string): void {
    if (this.port !== undefined || !line.startsWith('{') || !line.includes('"port"')) return;
    try {
      const entry = JSON.parse(line) as { msg?: unknown; port?: unknown };
      if (typeof entry.msg === 'string' && LISTENING_MESSAGES.has(entry.msg) && typeof entry.port === 'number' && entry.port > 0)
        this.port = entry.port;
    } catch {
      // not a log line of the service's own
    }
  }
}

/** Waits until the service named its port and answers GET /readyz there with 200; returns the port. */
async function waitReady(p: ManagedProcess, listening: ListeningPort, timeoutMs: number, signal: AbortSignal): Promise<number> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    if (signal.aborted) throw new CliError(CliErrorCode.demoFailed, 'interrupted while the services were starting');
    if (p.hasExited) throw new CliError(CliErrorCode.demoFailed, `${p.name} stopped while starting; see ${p.logFile}`);
    const port = listening.port;
    const ok =
      port !== undefined &&
      (await fetch(`http://127.0.0.1:${port}/readyz`, { signal: AbortSignal.timeout(2_000) })
        .then(async (r) => {
          await r.body?.cancel();
          return r.status === 200;
        })
        .catch(() => false));
    if (ok) return port;
    if (Date.now() > deadline)
      throw new CliError(
        CliErrorCode.demoFailed,
        port === undefined
          ? `${p.name} did not say which port it listens on within ${timeoutMs / 1000} s; see ${p.logFile}`
          : `${p.name} was not ready within ${timeoutMs / 1000} s (GET /readyz on port ${port}); see ${p.logFile}`,
      );
    await new Promise((r) => setTimeout(r, 200));
  }
}

export function formatDemoSummary(s: DemoSummary): string[] {
  const byPhase = Object.entries(s.pvbs.byPhase)
    .map(([phase, n]) => `${n} ${phase}`)
    .join(', ');
  const lines = [
    '',
    `Backup ${s.backup}: ${s.phase}${s.failureReason ? ` (${s.failureReason})` : ''} in ${formatDuration(s.durationMs ?? undefined)}`,
    `  items       ${s.items.backedUp}/${s.items.total} backed up in ${s.blocks} blocks`,
    `  PVBs        ${s.pvbs.total}${byPhase ? ` (${byPhase})` : ''}, ${formatBytes(s.pvbs.bytes)} of volume data`,
    `  hook runs   ${s.hooks.runs.length} (${s.hooks.failed} failed)`,
  ];
  for (const r of s.hooks.runs)
    lines.push(
      `              ${r.phase.padEnd(4)} ${r.pod}/${r.container}: ${r.outcome === 'exited' ? `exit ${r.exitCode ?? '?'}` : r.outcome} in ${formatDuration(r.durationMs ?? undefined)}`,
    );
  if (s.postHookLags.length > 0) {
    lines.push("  post hooks started after their block's last PVB completed:");
    for (const l of s.postHookLags)
      lines.push(
        `              ${l.pod}/${l.container}: ${l.lagMs === null ? (l.blockPvbs === 0 ? 'no PVBs to wait for' : 'unknown') : `+${formatDuration(l.lagMs)}`} (block ${l.blockId}, ${l.blockPvbs} PVB${l.blockPvbs === 1 ? '' : 's'})`,
      );
  }
  if (s.errors || s.warnings) lines.push(`  problems    ${s.errors} errors, ${s.warnings} warnings (pnpm stowage backup logs ${s.backup})`);
  lines.push(
    `  stored in   ${s.storage.backupDir}${s.storage.kept ? '' : ' (a temp dir, removed at exit; --out DIR keeps it)'}`,
    `  volumes     ${s.storage.repositoryDir}${s.repositoryVerify ? ` (verified: ${s.repositoryVerify.chunksChecked} chunks, ${s.repositoryVerify.ok ? 'no damage' : 'DAMAGE FOUND'})` : ''}`,
    `  console     ${s.console.url}`,
    `  dashboard   ${s.dashboard.url} (${s.dashboard.note})`,
    `  API token   ${s.api.token}`,
  );
  return lines;
}
