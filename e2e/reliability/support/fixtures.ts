import { execFileSync } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import type { PodVolumeBackup } from '../../../packages/kube/src/index.js';
import { pvbLabels } from '../../../packages/kube/src/index.js';
import type { Stack } from './stack.js';

/* Small simulator fixture builders and the checks every reliability test makes of a finished backup. */

export const namespace = (name: string) => ({ apiVersion: 'v1', kind: 'Namespace', metadata: { name } });
export const node = (name: string) => ({ apiVersion: 'v1', kind: 'Node', metadata: { name, labels: { 'kubernetes.io/hostname': name } } });
export const configMap = (name: string, ns: string, bytes = 16) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name, namespace: ns },
  data: { payload: 'x'.repeat(bytes) },
});

export interface PodInput {
  name: string;
  namespace?: string;
  node: string;
  /** Pod volumes backed up by fs-backup: an emptyDir each, `mib` MiB of files. */
  volumes?: Array<{ name: string; mib: number }>;
  /** Extra volumes that are not emptyDirs (e.g. a missing PVC). */
  otherVolumes?: Array<Record<string, unknown>>;
  pre?: string[];
  post?: string[];
}

export function pod(input: PodInput) {
  const volumes = input.volumes ?? [];
  const annotations: Record<string, string> = {};
  if (volumes.length > 0) {
    annotations['backup.velero.io/backup-volumes'] = volumes.map((v) => v.name).join(',');
    annotations['sim.stowage.dev/files'] = JSON.stringify(
      Object.fromEntries(volumes.map((v) => [v.name, [{ path: 'chunk-{i}.bin', size: 256 * 1024, count: v.mib * 4 }]])),
    );
  }
  if (input.pre) annotations['pre.hook.backup.velero.io/command'] = JSON.stringify(input.pre);
  if (input.post) annotations['post.hook.backup.velero.io/command'] = JSON.stringify(input.post);
  const allVolumes = [...volumes.map((v) => ({ name: v.name, emptyDir: {} })), ...(input.otherVolumes ?? [])];
  return {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: { name: input.name, namespace: input.namespace ?? 'shop', uid: randomUUID(), annotations, labels: { app: input.name } },
    spec: {
      nodeName: input.node,
      containers: [
        { name: 'app', image: 'busybox', volumeMounts: allVolumes.map((v) => ({ name: v.name, mountPath: `/data/${String(v.name)}` })) },
      ],
      volumes: allVolumes,
    },
    status: { phase: 'Running' },
  };
}

/** The freeze/unfreeze hook commands every reliability fixture's pods run. */
export const FREEZE = ['/bin/freeze'];
export const UNFREEZE = ['/bin/unfreeze'];

/**
 * Namespace `shop` of `pods` database pods `db-<i>` spread over `nodes`, each with one fs-backup
 * volume of `mib` MiB and freeze/unfreeze hooks, plus `configMaps` small ConfigMaps.
 */
export function shopOfDatabases(opts: { nodes: readonly string[]; pods: number; mib: number; configMaps: number }) {
  return {
    objects: [
      namespace('shop'),
      namespace('stowage'),
      ...opts.nodes.map(node),
      ...Array.from({ length: opts.pods }, (_, i) =>
        pod({
          name: `db-${i}`,
          node: opts.nodes[i % opts.nodes.length] ?? 'node-a',
          volumes: [{ name: 'data', mib: opts.mib }],
          pre: FREEZE,
          post: UNFREEZE,
        }),
      ),
      ...Array.from({ length: opts.configMaps }, (_, i) => configMap(`settings-${i}`, 'shop')),
    ],
  };
}

/** PVBs of a backup, by name. */
export async function pvbsOf(stack: Stack, backup: string): Promise<PodVolumeBackup[]> {
  return stack.pvbs.listPvbs({ labelSelector: `${pvbLabels.backupName}=${backup}` });
}

/** Item manifests in the backup's tarball (`resources/…/*.json`, without Velero's `-preferredversion` copies), via tar. */
export async function tarballItems(stack: Stack, backup: string): Promise<string[]> {
  // Read through the backup storage (a directory or S3) and listed by the system tar.
  const bytes = await stack.backupStorage.getObject(`backups/${backup}/${backup}.tar.gz`);
  if (!bytes) return [];
  const stdout = execFileSync('tar', ['tzf', '-'], { input: bytes, maxBuffer: 64 * 1024 * 1024, encoding: 'utf8' });
  return stdout.split('\n').filter((l) => l.startsWith('resources/') && l.endsWith('.json') && !l.includes('-preferredversion/'));
}

/** Exec records of one command in one pod, started at or after `since` (ms). */
export function execsOf(stack: Stack, ns: string, podName: string, command: string[], since: number) {
  return stack.sim
    .execLog({ namespace: ns, pod: podName })
    .filter((e) => e.command.join(' ') === command.join(' ') && Date.parse(e.startedAt) >= since);
}

export interface WholeBackupFacts {
  phase: string;
  totalItems: number;
  itemsBackedUp: number;
  tarballItems: number;
  pvbs: number;
  pvbsCompleted: number;
  hooksAttempted: number;
  hooksFailed: number;
}

/** What a user would check of a finished backup: items, PVBs, hook counters, the tarball. */
export async function backupFacts(stack: Stack, backup: string): Promise<WholeBackupFacts> {
  const rec = await stack.state.getBackup(backup);
  const counters = await stack.state.counters(backup);
  const pvbs = await pvbsOf(stack, backup);
  return {
    phase: rec?.phase ?? 'missing',
    totalItems: counters.totalItems ?? 0,
    itemsBackedUp: counters.itemsBackedUp ?? 0,
    tarballItems: (await tarballItems(stack, backup)).length,
    pvbs: pvbs.length,
    pvbsCompleted: pvbs.filter((p) => p.status?.phase === 'Completed').length,
    hooksAttempted: counters.hooksAttempted ?? 0,
    hooksFailed: counters.hooksFailed ?? 0,
  };
}
