import type { RunningWorkers } from '@stowage/pipeline';
import { startWorkers, submitBackup } from '@stowage/pipeline';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFinishedBackup } from './support/finished-backup.js';
import { backupSpec, namespace, node, pod } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitForBackupEnd } from './support/harness.js';
import { tarballEntries } from './support/inspect.js';

function secret(ns: string, name: string, labels: Record<string, string> = {}): unknown {
  return { apiVersion: 'v1', kind: 'Secret', metadata: { name, namespace: ns, labels }, type: 'Opaque', data: { key: 'c2VjcmV0' } };
}

// No key beside its ciphertext (issue 44): a whole-cluster backup with Secrets leaves out the
// Secrets the deployment labels stowage.dev/never-backup=true (the repository key, the storage
// credentials, the API tokens), each recorded as a warning, and keeps every other Secret.
describe('a whole-cluster backup with Secrets', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let h: Harness;
  let workers: RunningWorkers | undefined;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    const never = { 'stowage.dev/never-backup': 'true' };
    h = await startHarness({
      redisUrl: redisHandle.url,
      fixture: {
        objects: [
          node('node-a'),
          namespace('shop'),
          namespace('stowage'),
          pod({ name: 'app-0' }),
          secret('shop', 'app-creds'),
          secret('stowage', 'stowage-repo-key', never),
          secret('stowage', 'stowage-storage-credentials', never),
          secret('stowage', 'stowage-api-tokens', never),
        ],
      },
      agentNodes: ['node-a'],
    });
    workers = startWorkers({ deps: h.deps, queues: BACKUP_AND_RESTORE_QUEUES });
  });
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redisHandle?.stop();
  });

  it("holds none of Stowage's key or credentials, and says so", async () => {
    await submitBackup(
      { state: h.deps.state, connection: h.redis, queuePrefix: h.queuePrefix },
      { name: 'everything', spec: backupSpec({ includedNamespaces: ['*'], includeClusterResources: true }) },
    );
    await waitForBackupEnd(h.deps.state, 'everything');
    const entries = tarballEntries(h.storageDir, 'everything');
    const secrets = entries.filter((e) => e.startsWith('resources/secrets/') && !e.includes('-preferredversion/'));
    expect(secrets).toEqual(['resources/secrets/namespaces/shop/app-creds.json']);
    const finished = await readFinishedBackup(h.deps.storage, 'everything');
    const said = finished.logs.map((l) => l.msg);
    for (const name of ['stowage-repo-key', 'stowage-storage-credentials', 'stowage-api-tokens']) {
      expect(
        said.some((m) => m.includes(`secrets/stowage/${name} is left out: it carries stowage.dev/never-backup=true`)),
        `a warning names ${name}`,
      ).toBe(true);
    }
  });
});
