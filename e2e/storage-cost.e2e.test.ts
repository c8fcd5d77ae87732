/*
 * What a backup and a restore cost in object storage, counted twice: by Stowage (each job's and
 * each node agent's request meter, added up in the run's status) and on the server's side of the
 * wire (a counting proxy in front of the S3 server, classifying each request on its own). The api,
 * worker and node agent run as separate processes with backups and the repository on S3; the
 * status the API and `stowage backup describe` show must equal what reached the server.
 */
import { execFile } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { RestoreState, statePrefixFor } from '../packages/pipeline/src/index.js';
import type { S3FaultProxy } from '../packages/testing/src/index.js';
import { configMap, namespace, node, pod } from './reliability/support/fixtures.js';
import { waitForRestoreEnd } from './reliability/support/restore-end.js';
import { REPO_ROOT, type ServiceProcess, type Stack, startStack, waitFor, waitForBackupEnd } from './reliability/support/stack.js';

const fixture = {
  objects: [
    namespace('shop'),
    namespace('stowage'),
    node('node-a'),
    pod({ name: 'db-0', node: 'node-a', volumes: [{ name: 'data', mib: 2 }] }),
    ...Array.from({ length: 20 }, (_, i) => configMap(`settings-${i}`, 'shop', 1_000)),
  ],
};

interface StorageCost {
  requests: { put: number; get: number; head: number; list: number; delete: number };
  bytesWritten: number;
  bytesRead: number;
}

/** What reached the server since `before`, as the proxy classified it. */
function serverSaw(proxy: S3FaultProxy, before: S3FaultProxy['stats']): StorageCost {
  const requests = { ...proxy.stats.byOperation };
  for (const op of Object.keys(requests) as Array<keyof typeof requests>) requests[op] -= before.byOperation[op];
  return { requests, bytesWritten: proxy.stats.bytesWritten - before.bytesWritten, bytesRead: proxy.stats.bytesRead - before.bytesRead };
}

describe('storage cost of a backup and a restore, against what the S3 server saw', () => {
  let stack: Stack;
  let api: ServiceProcess;
  let services: ServiceProcess[];
  let proxy: S3FaultProxy;

  beforeAll(async () => {
    // No faults: the proxy only counts. Every service request goes through it; the test's own reads do not.
    stack = await startStack({ fixture, storage: 's3', s3Faults: {} });
    proxy = stack.s3FaultProxy!;
    // The catalogue sync reads storage on its own schedule, for no backup: only at start here.
    // A backup worker and a restore worker, as the dev overlay's two worker Deployments.
    const [apiProcess, agent, workers] = await Promise.all([
      stack.spawn('api', 'api', { STOWAGE_BACKUP_SYNC_INTERVAL_MS: '0' }),
      stack.spawn('node-agent', 'agent', stack.agentEnv('node-a')),
      stack.spawnWorkers('worker'),
    ]);
    services = [apiProcess, agent, workers.backup, workers.restore];
    api = apiProcess;
    await waitFor('node-a heartbeat', async () => ((await stack.agents.nodesWithAgent()).has('node-a') ? true : undefined), 20_000);
  }, 180_000);

  afterAll(async () => {
    await stack?.close();
  });

  const call = async (method: string, path: string, body?: unknown) => {
    const res = await fetch(`http://127.0.0.1:${api.port}${path}`, {
      method,
      headers: { authorization: `Bearer ${stack.token}`, ...(body !== undefined ? { 'content-type': 'application/json' } : {}) },
      ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
    });
    return { status: res.status, body: (await res.json()) as Record<string, unknown> };
  };

  const describeWithCli = (kind: 'backup' | 'restore', name: string) =>
    new Promise<string>((resolve, reject) =>
      execFile(
        process.execPath,
        [`${REPO_ROOT}/packages/cli/bin/stowage.js`, kind, 'describe', name],
        {
          env: {
            PATH: process.env.PATH ?? '',
            HOME: process.env.HOME ?? '/tmp',
            STOWAGE_API_URL: `http://127.0.0.1:${api.port}`,
            STOWAGE_API_TOKEN: stack.token,
          },
        },
        (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)),
      ),
    );

  const storageLine = (cost: StorageCost) => {
    const r = cost.requests;
    return `${r.put + r.get + r.head + r.list + r.delete} requests (put ${r.put}, get ${r.get}, list ${r.list}, head ${r.head}, delete ${r.delete})`;
  };

  it('a backup: its status, the API and describe say what the server saw', async () => {
    await waitFor('the api to settle after its start-up sync', async () => {
      const a = structuredClone(proxy.stats);
      await new Promise((r) => setTimeout(r, 1_000));
      return proxy.stats.requests === a.requests ? true : undefined;
    });
    const before = structuredClone(proxy.stats);
    const created = await call('POST', '/v1/backups', { name: 'cost', spec: { includedNamespaces: ['shop'] } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const rec = await waitForBackupEnd(stack.state, 'cost', 150_000);
    expect(rec.phase).toBe('Completed');
    const seen = serverSaw(proxy, before);

    const backup = (await call('GET', '/v1/backups/cost')).body;
    expect(backup.storage).toEqual(seen);
    // It did copy a volume and write the backup: the numbers are not trivially equal.
    expect(seen.requests.put).toBeGreaterThan(5);
    expect(seen.bytesWritten).toBeGreaterThan(2 * 1024 * 1024);
    expect(await describeWithCli('backup', 'cost')).toContain(`Storage:      ${storageLine(seen)}`);

    // The Prometheus counters of the three processes, work="backup", add up to the same.
    const counted = { put: 0, get: 0, head: 0, list: 0, delete: 0 };
    let written = 0;
    for (const service of services) {
      const text = await (await fetch(`http://127.0.0.1:${service.port}/metrics`)).text();
      for (const op of Object.keys(counted) as Array<keyof typeof counted>) {
        const line = text.split('\n').find((l) => l.startsWith(`stowage_storage_requests_total{operation="${op}",work="backup"}`));
        counted[op] += Number(line?.split(' ').at(-1) ?? 0);
      }
      const bytes = text.split('\n').find((l) => l.startsWith('stowage_storage_bytes_total{direction="written",work="backup"}'));
      written += Number(bytes?.split(' ').at(-1) ?? 0);
    }
    expect(counted).toEqual(seen.requests);
    expect(written).toBe(seen.bytesWritten);
  }, 200_000);

  it('a restore: its status, the API and describe say what the server saw', async () => {
    await stack.kube.core.deleteNamespace({ name: 'shop' });
    await waitFor(
      'shop gone',
      async () => ((await stack.kube.core.readNamespace({ name: 'shop' }).catch(() => undefined)) ? undefined : true),
      30_000,
      100,
    );
    const before = structuredClone(proxy.stats);
    const created = await call('POST', '/v1/restores', { name: 'cost-back', spec: { backupName: 'cost' } });
    expect(created.status, JSON.stringify(created.body)).toBe(201);
    const restores = new RestoreState({ redis: stack.redis, prefix: statePrefixFor(stack.queuePrefix) });
    const ended = await waitForRestoreEnd(stack, restores, 'cost-back');
    expect(ended.phase).toBe('Completed');
    const seen = serverSaw(proxy, before);

    const restore = (await call('GET', '/v1/restores/cost-back')).body;
    expect(restore.podVolumeRestores).toMatchObject({ Completed: 1 });
    expect(restore.storage).toEqual(seen);
    // The volume's 2 MiB came back out of the bucket.
    expect(seen.bytesRead).toBeGreaterThan(2 * 1024 * 1024);
    expect(await describeWithCli('restore', 'cost-back')).toContain(`Storage:    ${storageLine(seen)}`);
  }, 200_000);
});
