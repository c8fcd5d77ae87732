/*
 * A CSI volume whose data directory (`<pv>/mount`) is missing on the node — the kubelet's
 * `<pv>/vol_data.json` is there, the data is not: through the real api, worker and node-agent
 * processes the PVB fails naming the path (never an empty snapshot called Completed), the post
 * hook still runs after it, and the backup is PartiallyFailed, in the REST view too.
 */
import { rm, writeFile } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { execsOf, FREEZE, namespace, node, pod, pvbsOf, UNFREEZE } from './support/fixtures.js';
import { type ServiceProcess, type Stack, startStack, waitFor, waitForBackupEnd } from './support/stack.js';

const db = pod({
  name: 'db-0',
  node: 'node-a',
  volumes: [{ name: 'cache', mib: 1 }],
  otherVolumes: [{ name: 'data', persistentVolumeClaim: { claimName: 'db-data' } }],
  pre: FREEZE,
  post: UNFREEZE,
});
db.metadata.annotations['backup.velero.io/backup-volumes'] = 'cache,data';

const fixture = {
  objects: [
    namespace('shop'),
    namespace('stowage'),
    node('node-a'),
    {
      apiVersion: 'v1',
      kind: 'PersistentVolumeClaim',
      metadata: { name: 'db-data', namespace: 'shop' },
      spec: { accessModes: ['ReadWriteOnce'], resources: { requests: { storage: '1Gi' } }, storageClassName: 'standard' },
    },
    db,
  ],
};

let stack: Stack;
let api: ServiceProcess;

beforeAll(async () => {
  stack = await startStack({ fixture });
  [api] = await Promise.all([
    stack.spawn('api', 'api'),
    stack.spawn('node-agent', 'agent-1', stack.agentEnv('node-a')),
    stack.spawn('worker', 'worker'),
  ]);
  await waitFor('node-a heartbeat', async () => ((await stack.agents.nodesWithAgent()).has('node-a') ? true : undefined), 20_000);
}, 180_000);

afterAll(async () => {
  await stack?.close();
});

describe('a CSI volume whose mount directory is missing on the node', () => {
  it('fails its PVB naming the path; the post hook runs after it; the backup is PartiallyFailed', async () => {
    const mount = stack.sim.podVolumes('shop', 'db-0').find((v) => v.volume === 'data')?.path ?? '';
    expect(mount).toMatch(/kubernetes\.io~csi\/[^/]+\/mount$/);
    await rm(mount, { recursive: true, force: true });
    await writeFile(join(dirname(mount), 'vol_data.json'), '{"driverName":"sim.csi.stowage.dev"}');

    const since = Date.now();
    const headers = { authorization: `Bearer ${stack.token}`, 'content-type': 'application/json' };
    const res = await fetch(`http://127.0.0.1:${api.port}/v1/backups`, {
      method: 'POST',
      headers,
      body: JSON.stringify({ name: 'no-mount', spec: { includedNamespaces: ['shop'] } }),
    });
    expect(res.status, await res.clone().text()).toBe(201);
    const rec = await waitForBackupEnd(stack.state, 'no-mount', 120_000);
    expect(rec.phase).toBe('PartiallyFailed');

    const pvbs = await pvbsOf(stack, 'no-mount');
    const data = pvbs.find((p) => p.spec.volume === 'data');
    const cache = pvbs.find((p) => p.spec.volume === 'cache');
    expect(data?.status?.phase).toBe('Failed');
    expect(data?.status?.message).toContain(mount);
    expect(data?.status?.snapshotID).toBeUndefined();
    expect(cache?.status?.phase).toBe('Completed');

    const posts = execsOf(stack, 'shop', 'db-0', UNFREEZE, since);
    expect(posts).toHaveLength(1);
    expect(Date.parse(posts[0]?.startedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(data?.status?.completionTimestamp ?? 'x'));

    const view = (await (await fetch(`http://127.0.0.1:${api.port}/v1/backups/no-mount`, { headers })).json()) as {
      phase: string;
      errors: number;
      podVolumeBackups: { Failed: number; Completed: number };
    };
    expect(view).toMatchObject({ phase: 'PartiallyFailed', podVolumeBackups: { Failed: 1, Completed: 1 } });
    expect(view.errors).toBeGreaterThanOrEqual(1);
  }, 240_000);
});
