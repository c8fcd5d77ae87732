import { createHash, randomBytes } from 'node:crypto';
import { chmod, lstat, mkdir, readdir, readFile, readlink, rm, symlink, utimes, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import {
  createKubeClients,
  createPvbClient,
  getPod,
  type KubeClients,
  type PodVolumeBackup,
  type PvbClient,
  pvbLabels,
} from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { createLogger, type Logger } from '@stowage/platform';

export const fixturePath = fileURLToPath(new URL('./fixtures/cluster.yaml', import.meta.url));
export const TEST_REPO_KEY = 'test-key-not-a-secret-0123456789abcdef';

export interface Harness {
  sim: Simulator;
  kube: KubeClients;
  pvbs: PvbClient;
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
  close(): Promise<void>;
}

export async function startHarness(): Promise<Harness> {
  const sim = await startSimulator({ fixture: fixturePath });
  const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  const pvbs = createPvbClient(kube, { namespace: 'stowage' });
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

/** Writes `bytes` of incompressible data to one file (for slow copies under a bandwidth limit). */
export async function writeRandomFile(path: string, bytes: number): Promise<void> {
  await mkdir(dirname(path), { recursive: true });
  await writeFile(path, randomBytes(bytes));
}

/**
 * A tree with what volumes hold: a large random file, a compressible log, small files in nested
 * dirs, empty files and dirs, symlinks (one dangling), unusual names and modes.
 */
export async function writeVolumeTree(root: string): Promise<void> {
  await rm(root, { recursive: true, force: true });
  await mkdir(join(root, 'nested/a/b/c'), { recursive: true });
  await mkdir(join(root, 'empty-dir'));
  await writeFile(join(root, 'big.bin'), randomBytes(5 * 1024 * 1024 + 333));
  await writeFile(join(root, 'app.log'), Array.from({ length: 20_000 }, (_, i) => `${i} GET /api/orders 200 ${i % 97}ms\n`).join(''));
  for (let i = 0; i < 30; i++) {
    const dir = ['nested', 'nested/a', 'nested/a/b', 'nested/a/b/c'][i % 4]!;
    await writeFile(join(root, dir, `small-${i}.dat`), randomBytes(100 + i * 131));
  }
  await writeFile(join(root, 'empty.txt'), '');
  await writeFile(join(root, 'nested/a/b/c/empty-too'), '');
  await writeFile(join(root, 'with space.txt'), 'spaces\n');
  await writeFile(join(root, 'ünïcödé-名前.txt'), 'unicode\n');
  await writeFile(join(root, 'new\nline'), 'newline in the name\n');
  await writeFile(join(root, '-leading-dash'), 'dash\n');
  await writeFile(join(root, 'run.sh'), '#!/bin/sh\necho hi\n');
  await chmod(join(root, 'run.sh'), 0o755);
  await writeFile(join(root, 'secret.key'), 'k');
  await chmod(join(root, 'secret.key'), 0o600);
  await symlink('nested/a/small-1.dat', join(root, 'link-to-file'));
  await symlink('nested', join(root, 'link-to-dir'));
  await symlink('does/not/exist', join(root, 'dangling-link'));
  await utimes(join(root, 'app.log'), new Date('2021-03-04T05:06:07.123Z'), new Date('2021-03-04T05:06:07.123Z'));
  await chmod(join(root, 'nested/a/b'), 0o750);
}

export interface Described {
  type: string;
  mode: number;
  size: number;
  mtimeMs?: number;
  sha256?: string;
  target?: string;
}

/** What a user compares after a restore, keyed by relative path: type, mode, size, bytes, link target, file mtimes. */
export async function describeTree(root: string): Promise<Record<string, Described>> {
  const out: Record<string, Described> = {};
  const visit = async (rel: string) => {
    for (const name of (await readdir(join(root, rel))).sort()) {
      const path = rel ? `${rel}/${name}` : name;
      const abs = join(root, path);
      const st = await lstat(abs);
      const mode = st.mode & 0o7777;
      if (st.isSymbolicLink()) out[path] = { type: 'symlink', mode, size: st.size, target: await readlink(abs) };
      else if (st.isDirectory()) {
        out[path] = { type: 'dir', mode, size: 0 };
        await visit(path);
      } else {
        const sha256 = createHash('sha256')
          .update(await readFile(abs))
          .digest('hex');
        out[path] = { type: 'file', mode, size: st.size, mtimeMs: Math.floor(st.mtimeMs), sha256 };
      }
    }
  };
  await visit('');
  return out;
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
