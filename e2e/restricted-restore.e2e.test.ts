import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { RestoreObject } from '../packages/core/src/index.js';
import { type DescribedEntry, describeTree } from '../packages/testing/src/index.js';
import { apiClient, type ServiceProcess, type Stack, startStack, waitFor } from './reliability/support/stack.js';

/*
 * A namespace that enforces Pod Security `restricted` restores a pod with volume data: the
 * restore-wait init container Stowage adds passes `restricted` (non-root, no privilege escalation,
 * every capability dropped, RuntimeDefault seccomp), so the simulator's admission lets the pod in,
 * the node agent restores the volume, and the files are back byte for byte.
 */

const NS = 'vault';
const RESTRICTED = {
  runAsNonRoot: true,
  allowPrivilegeEscalation: false,
  capabilities: { drop: ['ALL'] },
  seccompProfile: { type: 'RuntimeDefault' },
};
const objects: unknown[] = [
  {
    apiVersion: 'v1',
    kind: 'Node',
    metadata: { name: 'node-a', labels: { 'kubernetes.io/hostname': 'node-a' } },
    status: { conditions: [{ type: 'Ready', status: 'True' }] },
  },
  { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } },
  {
    apiVersion: 'v1',
    kind: 'Namespace',
    metadata: {
      name: NS,
      labels: { 'pod-security.kubernetes.io/enforce': 'restricted', 'pod-security.kubernetes.io/enforce-version': 'latest' },
    },
  },
  {
    apiVersion: 'v1',
    kind: 'Pod',
    metadata: {
      name: 'keeper',
      namespace: NS,
      labels: { app: 'keeper' },
      annotations: {
        'sim.stowage.dev/files': JSON.stringify({
          secrets: [
            { path: 'vault.db', size: 65536, seed: 'vault-db' },
            { path: 'keys/master.txt', content: 'not really a key\n' },
          ],
        }),
      },
    },
    spec: {
      nodeName: 'node-a',
      securityContext: { runAsNonRoot: true, runAsUser: 1000, seccompProfile: { type: 'RuntimeDefault' } },
      containers: [
        {
          name: 'keeper',
          image: 'registry.example.com/keeper:1.0',
          securityContext: { allowPrivilegeEscalation: false, capabilities: { drop: ['ALL'] } },
          volumeMounts: [{ name: 'secrets', mountPath: '/data' }],
        },
      ],
      volumes: [{ name: 'secrets', emptyDir: {} }],
    },
  },
];

type Tree = Record<string, DescribedEntry>;
const withoutMarkers = (tree: Tree): Tree =>
  Object.fromEntries(Object.entries(tree).filter(([p]) => p !== '.stowage' && !p.startsWith('.stowage/')));

describe('restore into a namespace that enforces Pod Security restricted', () => {
  let stack: Stack;
  let api: ServiceProcess;
  let client: ReturnType<typeof apiClient>;

  beforeAll(async () => {
    stack = await startStack({ fixture: { objects }, materializeVolumes: 'with-files' });
    stack.sim.setNodeAgents(['node-a']);
    api = await stack.spawn('api', 'api');
    await stack.spawnWorkers('worker-1');
    await stack.spawn('node-agent', 'agent-node-a', stack.agentEnv('node-a'));
    await stack.agents.registerNodeAgent('node-a', 30 * 60_000);
    client = apiClient(stack, () => api);
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
  });

  it('back up, delete the namespace, restore: the pod is admitted and its volume bytes are back', async () => {
    const [volume] = stack.sim.podVolumes(NS, 'keeper');
    if (!volume) throw new Error('the fixture pod has no materialized volume');
    const original = withoutMarkers(await describeTree(volume.path));
    expect(Object.keys(original)).toEqual(expect.arrayContaining(['vault.db', 'keys/master.txt']));

    await client.submit('bk-vault', { includedNamespaces: [NS], defaultVolumesToFsBackup: true });
    const backup = await waitFor(
      'backup bk-vault to end',
      async () => {
        const b = await client.get('bk-vault');
        return ['Completed', 'PartiallyFailed', 'Failed'].includes(String(b.phase)) ? b : undefined;
      },
      180_000,
      250,
    );
    expect(backup.phase).toBe('Completed');

    await stack.kube.core.deleteNamespace({ name: NS });
    await waitFor(
      `${NS} gone`,
      async () => ((await stack.kube.core.readNamespace({ name: NS }).catch(() => undefined)) ? undefined : true),
      30_000,
      100,
    );

    const created = await client.call('POST', '/v1/restores', { name: 'rs-vault', spec: { backupName: 'bk-vault' } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const restore = await waitFor(
      'restore rs-vault to end',
      async () => {
        const r = (await client.call('GET', '/v1/restores/rs-vault')).body;
        return ['Completed', 'PartiallyFailed', 'Failed', 'Canceled'].includes(String(r.phase)) ? r : undefined;
      },
      240_000,
      250,
    );
    if (restore.phase !== 'Completed') {
      const logs = await fetch(`http://127.0.0.1:${api.port}/v1/restores/rs-vault/logs`, {
        headers: { authorization: `Bearer ${stack.token}` },
      });
      throw new Error(`restore ended ${restore.phase}:\n${await logs.text()}`);
    }

    // The namespace came back enforcing restricted, and admission let the pod in with its init container.
    const ns = await stack.kube.core.readNamespace({ name: NS });
    expect(ns.metadata?.labels?.['pod-security.kubernetes.io/enforce']).toBe('restricted');
    const pod = await stack.kube.requestJson<RestoreObject & { spec: { initContainers?: Array<Record<string, unknown>> } }>({
      path: `/api/v1/namespaces/${NS}/pods/keeper`,
    });
    const wait = pod.spec.initContainers?.find((c) => c.name === 'stowage-restore-wait');
    expect(wait?.securityContext).toMatchObject(RESTRICTED);
    expect(String(wait?.image)).not.toMatch(/:latest$/);
    await waitFor(
      'the restored pod to run',
      async () => {
        const p = await stack.kube.requestJson<{ status?: { phase?: string } }>({ path: `/api/v1/namespaces/${NS}/pods/keeper` });
        return p.status?.phase === 'Running' ? true : undefined;
      },
      60_000,
      100,
    );
    const [restored] = stack.sim.podVolumes(NS, 'keeper');
    if (!restored) throw new Error('the restored pod has no volume');
    expect(withoutMarkers(await describeTree(restored.path))).toEqual(original);
  });
});
