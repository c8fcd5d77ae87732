import { createHash } from 'node:crypto';
import { readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import type { StowageApiClient } from '../api-client.js';
import { restoreProgressLine } from '../restore-command.js';

/** What the demo's restore step reports. */
export interface DemoRestoreSummary {
  restore: string;
  phase: string;
  namespace: string;
  mappedFrom: string | null;
  objects: { total: number; created: number; updated: number; existed: number; failed: number };
  /** Every restored volume, its files checked against the backed-up ones by sha256. */
  volumes: Array<{ pod: string; volume: string; files: number; equal: boolean; differing: string[] }>;
  hooks: Array<{ pod: string; container: string; outcome: string; exitCode: number | null; stdout: string }>;
}

interface Kube {
  server: string;
  token: string | undefined;
}

async function kubeJson<T>(kube: Kube, method: string, path: string): Promise<{ status: number; body: T | undefined }> {
  const res = await fetch(`${kube.server}${path}`, {
    method,
    headers: kube.token ? { authorization: `Bearer ${kube.token}` } : {},
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? (JSON.parse(text) as T) : undefined };
}

/** sha256 of every file below `root`, by relative path (the restore's `.stowage` marker dir left out). */
async function checksums(root: string): Promise<Map<string, string>> {
  const out = new Map<string, string>();
  const visit = async (rel: string): Promise<void> => {
    for (const entry of await readdir(join(root, rel), { withFileTypes: true })) {
      const path = rel ? `${rel}/${entry.name}` : entry.name;
      if (path === '.stowage') continue;
      if (entry.isDirectory()) await visit(path);
      else if (entry.isFile())
        out.set(
          path,
          createHash('sha256')
            .update(await readFile(join(root, path)))
            .digest('hex'),
        );
    }
  };
  await visit('');
  return out;
}

async function podVolumes(kube: Kube, namespace: string, pod: string): Promise<Array<{ volume: string; path: string }>> {
  return (
    (await kubeJson<{ items: Array<{ volume: string; path: string }> }>(kube, 'GET', `/_sim/pods/${namespace}/${pod}/volumes`)).body
      ?.items ?? []
  );
}

/**
 * The demo's restore: checksums of the shop namespace's volume files, then (unless restoring
 * into another namespace) shop deleted with the volumes its claims held, then a restore of shop
 * from the backup through the REST API with live progress, with a post-restore hook on every pod;
 * then every restored volume's files compared with the backed-up ones.
 */
export async function restoreShop(opts: {
  client: StowageApiClient;
  kube: Kube;
  backup: string;
  name: string;
  into: string | undefined;
  say: (line: string) => void;
  progress: (line: string) => void;
  signal: AbortSignal;
}): Promise<DemoRestoreSummary> {
  const { client, kube, say } = opts;
  const source = 'shop';
  const target = opts.into ?? source;
  const pods =
    (await kubeJson<{ items: Array<{ metadata: { name: string } }> }>(kube, 'GET', `/api/v1/namespaces/${source}/pods`)).body?.items ?? [];
  const before = new Map<string, Map<string, string>>();
  for (const pod of pods) {
    for (const v of await podVolumes(kube, source, pod.metadata.name))
      before.set(`${pod.metadata.name}/${v.volume}`, await checksums(v.path));
  }
  if (opts.into === undefined) {
    const claims =
      (
        await kubeJson<{ items: Array<{ spec: { volumeName?: string } }> }>(
          kube,
          'GET',
          `/api/v1/namespaces/${source}/persistentvolumeclaims`,
        )
      ).body?.items ?? [];
    await kubeJson(kube, 'DELETE', `/api/v1/namespaces/${source}`);
    for (const claim of claims)
      if (claim.spec.volumeName) await kubeJson(kube, 'DELETE', `/api/v1/persistentvolumes/${claim.spec.volumeName}`);
    for (let i = 0; (await kubeJson(kube, 'GET', `/api/v1/namespaces/${source}`)).status !== 404; i++) {
      if (i > 300) throw new Error(`namespace ${source} was not deleted within 30 s`);
      await new Promise((r) => setTimeout(r, 100));
    }
    say(`• deleted namespace ${source} (and the volumes its claims held)`);
  }
  await client.createRestore({
    name: opts.name,
    spec: {
      backupName: opts.backup,
      includedNamespaces: [source],
      ...(opts.into ? { namespaceMapping: { [source]: opts.into } } : {}),
      hooks: {
        resources: [
          {
            name: 'restored-marker',
            // Hook specs select pods by the namespace they are restored into (core's resolveRestoreHooks).
            includedNamespaces: [target],
            postHooks: [{ exec: { command: ['/bin/sh', '-c', 'echo restored; ls /'], onError: 'Continue' } }],
          },
        ],
      },
    },
  });
  say(
    `• submitted restore ${opts.name} (POST /v1/restores: ${source}${opts.into ? ` into ${opts.into}` : ''}, with a post-restore hook on every pod)`,
  );
  const totals = { items: 0, done: 0 };
  for await (const ev of client.events(opts.name, { resource: 'restores', signal: opts.signal })) {
    const line = restoreProgressLine(ev, totals);
    if (line) opts.progress(`  restore: ${line}`);
  }
  const restore = await client.getRestore(opts.name);
  const volumes: DemoRestoreSummary['volumes'] = [];
  for (const pvr of restore.pvrs) {
    const [ns, podName] = pvr.pod.split('/') as [string, string];
    const dir = (await podVolumes(kube, ns, podName)).find((v) => v.volume === pvr.volume)?.path;
    const original = before.get(`${podName}/${pvr.volume}`) ?? new Map<string, string>();
    const restored = dir ? await checksums(dir) : new Map<string, string>();
    const differing = [...new Set([...original.keys(), ...restored.keys()])].filter((p) => original.get(p) !== restored.get(p)).sort();
    volumes.push({ pod: pvr.pod, volume: pvr.volume, files: restored.size, equal: differing.length === 0 && original.size > 0, differing });
  }
  return {
    restore: restore.name,
    phase: restore.phase,
    namespace: target,
    mappedFrom: opts.into ? source : null,
    objects: {
      total: restore.progress.totalItems,
      created: restore.itemResults.created,
      updated: restore.itemResults.updated,
      existed: restore.itemResults.existsSkipped,
      failed: restore.itemResults.failed,
    },
    volumes,
    hooks: restore.hookRuns.map((h) => ({
      pod: h.pod,
      container: h.container,
      outcome: h.outcome,
      exitCode: h.exitCode ?? null,
      stdout: (h.stdoutTail ?? '').trim(),
    })),
  };
}

export function formatDemoRestore(r: DemoRestoreSummary): string[] {
  return [
    '',
    `Restore ${r.restore}: ${r.phase}${r.mappedFrom ? ` (${r.mappedFrom} → ${r.namespace})` : ''}`,
    `  objects: ${r.objects.total} (${r.objects.created} created, ${r.objects.updated} updated, ${r.objects.existed} existed, ${r.objects.failed} failed)`,
    ...r.volumes.map(
      (v) =>
        `  volume ${v.pod} ${v.volume}: ${v.files} files, ${v.equal ? 'every file equal to the backed-up one (sha256)' : `DIFFERS: ${v.differing.slice(0, 5).join(', ')}`}`,
    ),
    ...r.hooks.map(
      (h) =>
        `  post-restore hook ${h.pod}/${h.container}: ${h.outcome} exit ${h.exitCode ?? '-'}${h.stdout ? ` — ${h.stdout.split('\n')[0]}` : ''}`,
    ),
  ];
}
