import { readdirSync, readFileSync } from 'node:fs';
import { createGzip } from 'node:zlib';
import { type RestoreSpec, validateRestoreRequest } from '@stowage/core';
import { type RunningWorkers, startWorkers, submitRestore } from '@stowage/pipeline';
import { backupLayout, type TarEntry, writeTar } from '@stowage/storage';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PipelineErrorCode } from '../src/errors.js';
import type { RestorePlanInput, RestorePlanLogLine } from '../src/restore/restore-plan-compute.js';
import { type RestorePlanStore, runRestorePlanProcess } from '../src/restore/restore-plan-process.js';
import type { PlannedRestoreItem } from '../src/restore/restore-plan-types.js';
import { namespace, node } from './support/fixtures.js';
import { BACKUP_AND_RESTORE_QUEUES, type Harness, startHarness, waitForRestoreEnd } from './support/harness.js';

/*
 * A restore's plan runs in a process of its own (restore-plan-process.ts): real child processes
 * fed real gzipped tarballs. What a user would notice: the plan is the same, a backup too large
 * for the plan's heap fails its restore naming the setting (the process hosting the queue lives
 * on), a corrupt archive fails naming the entry, and the plan's process holds none of the
 * parent's environment (no credentials).
 */

const configMap = (ns: string, i: number) => ({
  apiVersion: 'v1',
  kind: 'ConfigMap',
  metadata: { name: `cm-${i}`, namespace: ns, uid: `uid-${ns}-${i}` },
  data: { payload: `${ns}/${i} `.repeat(40) },
});

function* entries(namespaces: readonly string[], perNamespace: number, extra: TarEntry[] = []): Generator<TarEntry> {
  const json = (o: unknown) => Buffer.from(JSON.stringify(o));
  for (const ns of namespaces) {
    yield { path: `resources/namespaces/cluster/${ns}.json`, data: json(namespace(ns)) };
    for (let i = 0; i < perNamespace; i++)
      yield { path: `resources/configmaps/namespaces/${ns}/cm-${i}.json`, data: json(configMap(ns, i)) };
  }
  yield* extra;
}

async function tarball(source: Iterable<TarEntry>): Promise<Buffer> {
  const gzip = createGzip();
  const chunks: Buffer[] = [];
  gzip.on('data', (c: Buffer) => chunks.push(c));
  const ended = new Promise((resolve) => gzip.on('end', resolve));
  for await (const chunk of writeTar(source, { mtime: new Date('2026-12-01T00:00:00Z') })) gzip.write(chunk);
  gzip.end();
  await ended;
  return Buffer.concat(chunks);
}

function specOf(spec: Record<string, unknown>): RestoreSpec {
  const validation = validateRestoreRequest({ spec: { backupName: 'bk1', ...spec } });
  if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
  return validation.value;
}

function inputOf(spec: RestoreSpec): RestorePlanInput {
  return {
    restoreName: 'r1',
    restoreUid: 'uid-r1',
    spec,
    volumeBackups: [],
    snapshots: [],
    config: {
      restoreBatchSize: 50,
      restoreWaitImage: 'stowage/node-agent:0.1.0',
      restoreWaitCommand: ['/restore-wait'],
      maxHookTimeoutMs: 60_000,
    },
  };
}

function collectingSink(onFirstCall?: () => void) {
  const logs: RestorePlanLogLine[] = [];
  const batches = new Map<string, PlannedRestoreItem[]>();
  let first = true;
  const called = () => {
    if (first) onFirstCall?.();
    first = false;
  };
  const sink: RestorePlanStore = {
    log: async (lines) => {
      called();
      logs.push(...lines);
    },
    problem: async () => called(),
    provideSnapshot: async () => called(),
    batch: async (id, itemsJson) => {
      called();
      batches.set(id, JSON.parse(itemsJson) as PlannedRestoreItem[]);
    },
    pod: async () => called(),
  };
  return { sink, logs, batches };
}

/** The environment of this process's children running the plan (their pids from /proc's children lists). */
function planChildEnvironments(): string[][] {
  const out: string[][] = [];
  for (const task of readdirSync('/proc/self/task')) {
    for (const pid of readFileSync(`/proc/self/task/${task}/children`, 'utf8').split(' ').filter(Boolean)) {
      const cmdline = readFileSync(`/proc/${pid}/cmdline`, 'utf8');
      if (!cmdline.includes('restore-plan-child')) continue;
      out.push(readFileSync(`/proc/${pid}/environ`, 'utf8').split('\0').filter(Boolean));
    }
  }
  return out;
}

describe('the restore plan in its own process', () => {
  it('plans one namespace of three: only its items reach the sink, the rest counted and logged, never the environment', async () => {
    process.env.STOWAGE_TEST_CANARY = 'a-credential';
    let environments: string[][] = [];
    const { sink, logs, batches } = collectingSink(() => {
      // The child waits on the pipe while this call runs: it is alive to be looked at.
      environments = planChildEnvironments();
    });
    const archive = await tarball(entries(['ns-a', 'ns-b', 'ns-c'], 120));
    const plan = await runRestorePlanProcess(inputOf(specOf({ includedNamespaces: ['ns-b'] })), [archive], sink, { heapMb: 128 });
    delete process.env.STOWAGE_TEST_CANARY;

    const items = [...batches.values()].flat();
    expect(items.map((i) => i.namespace ?? i.name).every((ns) => ns === 'ns-b')).toBe(true);
    expect(items.filter((i) => i.resource === 'configmaps')).toHaveLength(120);
    expect(plan.totalItems).toBe(121);
    expect(plan.summary.skipped).toBe(242);
    expect(logs.some((line) => /ns-a/.test(line.msg))).toBe(true);
    expect(plan.peakRssBytes).toBeGreaterThan(0);
    expect(environments).toHaveLength(1);
    // Only Node's own IPC variables: nothing of the parent's (its tokens, keys, Redis and S3 settings).
    expect(environments[0]?.filter((variable) => !variable.startsWith('NODE_CHANNEL_'))).toEqual([]);
  });

  it('a corrupt entry fails the plan with the storage error naming it, as when read in-process', async () => {
    const bad: TarEntry = { path: 'resources/configmaps/namespaces/ns-a/broken.json', data: Buffer.from('{"kind": "ConfigMap", ') };
    const archive = await tarball(entries(['ns-a'], 3, [bad]));
    const { sink } = collectingSink();
    const planning = runRestorePlanProcess(inputOf(specOf({})), [archive], sink, { heapMb: 128 });
    await expect(planning).rejects.toMatchObject({ name: 'StorageError', code: 'STORAGE_CORRUPT_ITEM' });
    await expect(planning).rejects.toThrow(/backup bk1: resources\/configmaps\/namespaces\/ns-a\/broken\.json is not JSON/);
  });
});

describe('a restore whose plan outgrows its heap', () => {
  let redis: { url: string; stop: () => Promise<void> } | undefined;
  let h: Harness;
  let workers: RunningWorkers;
  beforeAll(async () => {
    redis = await useTestRedis();
    h = await startHarness({
      redisUrl: redis.url,
      fixture: { objects: [node('node-a')] },
      agentNodes: ['node-a'],
      config: { restorePlanHeapMb: 16 },
    });
    workers = startWorkers({ deps: h.deps, queues: BACKUP_AND_RESTORE_QUEUES });
  }, 60_000);
  afterAll(async () => {
    await workers?.close();
    await h?.close();
    await redis?.stop();
  });

  it('fails naming STOWAGE_RESTORE_PLAN_HEAP_MB, and the process hosting the queue plans the next restore', async () => {
    // ~60k objects: far more than a 16 MiB heap holds once selected; `small` is 4 objects of them.
    const small = [namespace('small'), ...[0, 1, 2].map((i) => configMap('small', i))].map((o, i) => ({
      path: i === 0 ? 'resources/namespaces/cluster/small.json' : `resources/configmaps/namespaces/small/cm-${i - 1}.json`,
      data: Buffer.from(JSON.stringify(o)),
    }));
    await h.deps.storage.putObject(backupLayout('bk1').tarball, await tarball(entries(['big-a', 'big-b'], 30_000, small)));
    const submit = async (name: string, spec: Record<string, unknown>) => {
      const validation = validateRestoreRequest({ name, spec: { backupName: 'bk1', ...spec } });
      if (!validation.ok) throw new Error(JSON.stringify(validation.problems));
      await submitRestore(
        { restores: h.deps.restores!, connection: h.redis, queuePrefix: h.queuePrefix },
        { name, spec: validation.value },
      );
      return waitForRestoreEnd(h.deps.restores!, h.deps.storage, name, 60_000);
    };
    const full = await submit('too-big', {});
    expect(full.phase).toBe('Failed');
    expect(full.record.failureReason).toMatch(/STOWAGE_RESTORE_PLAN_HEAP_MB/);
    expect(full.record.failureReason).toMatch(/16 MiB/);
    expect(full.record.failureReason).toContain(PipelineErrorCode.restorePlanOutOfMemory);
    expect(full.items).toEqual({});
    // The same heap holds a plan that selects little: only the selected items are ever parsed.
    const one = await submit('small-one', { includedNamespaces: ['small'] });
    expect(one.phase).toBe('Completed');
    expect(Object.keys(one.items).sort()).toEqual([
      'configmaps/small/cm-0',
      'configmaps/small/cm-1',
      'configmaps/small/cm-2',
      'namespaces/-cluster-/small',
    ]);
  }, 120_000);
});
