import { mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { createKubeClients, createPvbClient, getPod, pvbLabels } from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { createLogger } from '@stowage/platform';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { type NodeAgent, startNodeAgent } from '../src/index.js';
import { TEST_REPO_KEY, waitForPhase } from './support.js';

// A cluster where only the PVB CRD is installed (an upgrade that has not applied the PVR CRD yet):
// the agent still starts and backs up; restores wait until PVRs can be listed.
const pvbCrd = fileURLToPath(new URL('../../../k8s/base/crd-podvolumebackups.yaml', import.meta.url));

let sim: Simulator;
let storage: string;
let agent: NodeAgent | undefined;

beforeAll(async () => {
  storage = await mkdtemp(join(tmpdir(), 'stowage-node-agent-no-pvr-'));
  sim = await startSimulator({
    fixture: {
      objects: [
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } },
        { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'app' } },
        { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a' } },
        {
          apiVersion: 'v1',
          kind: 'Pod',
          metadata: { name: 'web', namespace: 'app' },
          spec: { nodeName: 'node-a', containers: [{ name: 'web', image: 'nginx' }], volumes: [{ name: 'cache', emptyDir: {} }] },
          status: { phase: 'Running' },
        },
      ],
    },
    extraManifests: [pvbCrd],
  });
});

afterAll(async () => {
  await agent?.stop();
  await sim?.close();
  if (storage) await rm(storage, { recursive: true, force: true });
});

describe('node agent on a cluster without the PodVolumeRestore CRD', () => {
  it('starts, becomes ready and completes a PVB', async () => {
    const kube = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
    agent = await startNodeAgent({
      nodeName: 'node-a',
      kube,
      repoDir: join(storage, 'repository'),
      repoKey: TEST_REPO_KEY,
      kubeletRoot: join(sim.dataRoot, 'node-a'),
      loadConcurrency: {},
      logger: createLogger({ level: 'silent', name: 'no-pvr-crd-test' }),
      restoreSyncGraceMs: 300,
    });
    expect(agent.isReady()).toBe(true);
    const dir = sim.podVolumes('app', 'web').find((v) => v.volume === 'cache')!.path;
    await writeFile(join(dir, 'index.html'), '<h1>hi</h1>\n');
    const uid = (await getPod(kube, 'app', 'web'))!.metadata!.uid!;
    const pvbs = createPvbClient(kube);
    await pvbs.createPvb({
      metadata: { name: 'pvb-no-pvr-crd', labels: { [pvbLabels.node]: 'node-a' } },
      spec: { node: 'node-a', pod: { namespace: 'app', name: 'web', uid }, volume: 'cache', backupStorageLocation: 'default' },
    });
    const done = await waitForPhase(pvbs, 'pvb-no-pvr-crd', ['Completed', 'Failed']);
    expect(done?.status?.phase, done?.status?.message).toBe('Completed');
  }, 60_000);
});
