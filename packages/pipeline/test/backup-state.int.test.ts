import { BackupState } from '@stowage/pipeline';
import { uniquePrefix, useTestRedis } from '@stowage/testing';
import { Redis } from 'ioredis';
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest';

describe('BackupState', () => {
  let redisHandle: { url: string; stop: () => Promise<void> };
  let redis: Redis;
  let state: BackupState;
  let clock = 1_000;

  beforeAll(async () => {
    redisHandle = await useTestRedis();
    redis = new Redis(redisHandle.url, { maxRetriesPerRequest: null });
  });
  afterAll(async () => {
    redis.disconnect();
    await redisHandle.stop();
  });
  beforeEach(() => {
    state = new BackupState({ redis, prefix: uniquePrefix(), now: () => clock++ });
  });

  const record = (name: string, createdAt = 1) => ({
    name,
    uid: `uid-${name}`,
    spec: { includedNamespaces: ['shop'] },
    phase: 'New',
    createdAt,
  });

  it('records a backup once; a repeated create changes nothing', async () => {
    expect(await state.createBackup(record('b1'))).toEqual({ created: true });
    expect(await state.createBackup({ ...record('b1'), phase: 'Completed' })).toEqual({ created: false });
    const got = await state.getBackup('b1');
    expect(got).toMatchObject({ name: 'b1', uid: 'uid-b1', phase: 'New', spec: { includedNamespaces: ['shop'] }, createdAt: 1 });
    expect(await state.getBackup('missing')).toBeUndefined();
  });

  it('moves the phase only from an allowed phase, once', async () => {
    await state.createBackup(record('b1'));
    expect(await state.transitionPhase('b1', ['New'], 'InProgress', { startedAt: 5 })).toEqual({ moved: true, phase: 'InProgress' });
    expect(await state.transitionPhase('b1', ['New'], 'InProgress')).toEqual({ moved: false, phase: 'InProgress' });
    expect(await state.transitionPhase('b1', ['Finalizing'], 'Completed')).toEqual({ moved: false, phase: 'InProgress' });
    expect((await state.getBackup('b1'))?.startedAt).toBe(5);
    const events = await state.readEvents('b1', '0');
    expect(events.map((e) => e.type)).toEqual(['backup.created', 'backup.phase']);
    expect(events[1]?.data).toEqual({ from: 'New', to: 'InProgress' });
  });

  it('counts each key once however often it is reported', async () => {
    await state.createBackup(record('b1'));
    expect(await state.countOnce('b1', 'item:pods/shop/db-0', 'itemsBackedUp')).toBe(true);
    expect(await state.countOnce('b1', 'item:pods/shop/db-0', 'itemsBackedUp')).toBe(false);
    expect(await state.countOnce('b1', 'item:pods/shop/web-1', 'itemsBackedUp')).toBe(true);
    expect(await state.counters('b1')).toEqual({ itemsBackedUp: 2 });
  });

  it('lists backups newest first with a phase filter and a cursor', async () => {
    for (let i = 0; i < 5; i++) {
      await state.createBackup(record(`b${i}`, 100 + i));
      if (i % 2 === 0) await state.transitionPhase(`b${i}`, ['New'], 'Completed');
    }
    const page1 = await state.listBackups({ limit: 2 });
    expect(page1.items.map((b) => b.name)).toEqual(['b4', 'b3']);
    const page2 = await state.listBackups({ limit: 2, cursor: page1.nextCursor });
    expect(page2.items.map((b) => b.name)).toEqual(['b2', 'b1']);
    const page3 = await state.listBackups({ limit: 2, cursor: page2.nextCursor });
    expect(page3).toEqual({ items: [expect.objectContaining({ name: 'b0' })] });
    const completed = await state.listBackups({ limit: 10, phase: 'Completed' });
    expect(completed.items.map((b) => b.name)).toEqual(['b4', 'b2', 'b0']);
  });

  it('pages from the last run listed: runs added or removed between pages are not listed twice nor make one skipped', async () => {
    for (let i = 0; i < 5; i++) await state.createBackup(record(`b${i}`, 100 + i));
    const page1 = await state.listBackups({ limit: 2 });
    expect(page1.items.map((b) => b.name)).toEqual(['b4', 'b3']);
    // An offset cursor (2) would now point at b3 again, then past b1 after b2 goes.
    await state.createBackup(record('b5', 200));
    await state.createBackup(record('b6', 201));
    await state.deleteBackup('b4');
    const page2 = await state.listBackups({ limit: 2, cursor: page1.nextCursor });
    expect(page2.items.map((b) => b.name)).toEqual(['b2', 'b1']);
    const page3 = await state.listBackups({ limit: 2, cursor: page2.nextCursor });
    expect(page3.items.map((b) => b.name)).toEqual(['b0']);
    expect(page3.nextCursor).toBeUndefined();
  });

  it('orders runs created in the same millisecond by name, each listed once across pages', async () => {
    for (const name of ['t-c', 't-a', 't-e', 't-b', 't-d']) await state.createBackup(record(name, 500));
    await state.createBackup(record('older', 499));
    const seen: string[] = [];
    let cursor: string | undefined;
    do {
      const page = await state.listBackups({ limit: 2, ...(cursor ? { cursor } : {}) });
      seen.push(...page.items.map((b) => b.name));
      cursor = page.nextCursor;
    } while (cursor);
    expect(seen).toEqual(['t-e', 't-d', 't-c', 't-b', 't-a', 'older']);
  });

  it('lists each run once when one is added while a filtered listing reads on', async () => {
    // 60 runs (more than one read of the index), a few Completed: a Completed page reads on.
    for (let i = 0; i < 60; i++) {
      const name = `r${String(i).padStart(2, '0')}`;
      await state.createBackup(record(name, 1_000 + i));
      if (i < 5 || i === 10) await state.transitionPhase(name, ['New'], 'Completed');
    }
    // A run added between the listing's reads (after its first read of the index, as a scheduled
    // backup is): listing by offset read the first read's oldest run (r10) again.
    const writer = new BackupState({ redis, prefix: state.prefix });
    let added = false;
    const racing = new Proxy(redis, {
      get(target, prop) {
        const value = Reflect.get(target, prop, target) as unknown;
        if (prop === 'hgetall' && !added) {
          return async (...args: unknown[]) => {
            if (!added) {
              added = true;
              await writer.createBackup(record('newest', 5_000));
              await writer.transitionPhase('newest', ['New'], 'Completed');
            }
            return (value as (...a: unknown[]) => unknown).apply(target, args);
          };
        }
        return typeof value === 'function' ? value.bind(target) : value;
      },
    });
    const listing = new BackupState({ redis: racing, prefix: state.prefix });
    const { items } = await listing.listBackups({ limit: 10, phase: 'Completed' });
    expect(added).toBe(true);
    expect(items.map((b) => b.name)).toEqual(['r10', 'r04', 'r03', 'r02', 'r01', 'r00']);
  });

  it('keeps block plans in order and idempotent, with live block and PVB state', async () => {
    await state.createBackup(record('b1'));
    await state.putBlockPlans('b1', [
      { id: 'blk-2', plan: { pods: ['shop/db-0'] }, items: [{ kind: 'Pod' }] },
      { id: 'blk-1', plan: { pods: [] }, items: [] },
    ]);
    // A re-run of plan keeps what was stored first: plan and manifests always match.
    await state.putBlockPlans('b1', [{ id: 'blk-2', plan: { pods: ['changed'] }, items: [{ kind: 'Changed' }] }]);
    expect(await state.blockIds('b1')).toEqual(['blk-2', 'blk-1']);
    expect(await state.getBlockPlan('b1', 'blk-2')).toEqual({ pods: ['shop/db-0'] });
    expect(await state.getBlockItems('b1', 'blk-2')).toEqual([{ kind: 'Pod' }]);

    await state.updateBlock('b1', 'blk-2', { state: 'InProgress', startedAt: 7 });
    await state.updateBlock('b1', 'blk-2', { pvbs: ['pvb-a'], failedPods: [] });
    expect(await state.getBlock('b1', 'blk-2')).toEqual({
      id: 'blk-2',
      state: 'InProgress',
      startedAt: 7,
      pvbs: ['pvb-a'],
      failedPods: [],
    });

    await state.updatePvb('b1', 'pvb-a', { blockId: 'blk-2', phase: 'New', node: 'node-a' });
    await state.updatePvb('b1', 'pvb-a', { phase: 'Completed', bytesDone: 10 });
    expect(await state.getPvb('b1', 'pvb-a')).toMatchObject({
      name: 'pvb-a',
      blockId: 'blk-2',
      phase: 'Completed',
      bytesDone: 10,
      node: 'node-a',
    });
    expect(await state.allPvbNames('b1')).toEqual(['pvb-a']);
  });

  it('streams events resumably and waits for new ones', async () => {
    await state.createBackup(record('b1'));
    const first = await state.readEvents('b1', '0');
    const lastId = first.at(-1)?.id ?? '0';
    const reader = redis.duplicate();
    const waiting = state.readEvents('b1', lastId, { blockMs: 5_000, client: reader });
    await state.appendEvent('b1', 'block.started', { blockId: 'blk-1' });
    const got = await waiting;
    reader.disconnect();
    expect(got).toEqual([expect.objectContaining({ type: 'block.started', data: { blockId: 'blk-1' } })]);
  });

  it('deletes every key of a backup', async () => {
    await state.createBackup(record('b1'));
    await state.putBlockPlans('b1', [{ id: 'blk-1', plan: {}, items: [] }]);
    await state.updateBlock('b1', 'blk-1', { state: 'Completed' });
    await state.updatePvb('b1', 'p1', { phase: 'Completed' });
    await state.recordHookRun('b1', {
      blockId: 'blk-1',
      podNamespace: 'ns',
      podName: 'p',
      container: 'c',
      phase: 'post',
      source: 'annotation',
      index: 0,
      command: ['true'],
      outcome: 'exited',
      exitCode: 0,
    });
    await state.log('b1', { level: 'info', msg: 'hello' });
    await state.deleteBackup('b1');
    expect(await redis.keys(`${state.prefix}:*`)).toEqual([]);
  });

  it('registers a PVB once: a re-run block cannot reset a finished PVB', async () => {
    await state.createBackup(record('b1'));
    expect(await state.registerPvb('b1', 'pvb-a', { blockId: 'blk-1', phase: 'Pending', node: 'n1' })).toEqual({ registered: true });
    await state.updatePvb('b1', 'pvb-a', { phase: 'Completed' });
    expect(await state.registerPvb('b1', 'pvb-a', { blockId: 'blk-1', phase: 'Pending', node: 'n1' })).toEqual({ registered: false });
    expect(await state.getPvb('b1', 'pvb-a')).toMatchObject({ phase: 'Completed', node: 'n1' });
    expect(await state.allPvbNames('b1')).toEqual(['pvb-a']);
  });

  it("reads a block's tail in one call: its plan, its state and its PVBs' state in the block's order", async () => {
    await state.createBackup(record('b1'));
    await state.putBlockPlans('b1', [
      { id: 'blk-1', plan: { id: 'blk-1', pods: [] }, items: [] },
      { id: 'blk-2', plan: { id: 'blk-2', pods: [] }, items: [] },
    ]);
    const pending = { blockId: 'blk-1', podNamespace: 'shop', podName: 'db-0', podUid: 'u', volume: 'data', node: 'n1', phase: 'Pending' };
    await state.registerPvbs(
      'b1',
      'blk-1',
      [
        { pvbName: 'pvb-b', record: pending },
        { pvbName: 'pvb-a', record: { ...pending, volume: 'logs' } },
      ],
      { pvbs: ['pvb-b', 'pvb-a', 'pvb-gone'], state: 'WaitingForPvbs' },
    );
    await state.updatePvb('b1', 'pvb-a', { phase: 'Completed', bytesDone: 7 });
    const tail = await state.readBlockTail('b1', 'blk-1');
    expect(tail.plan).toEqual({ id: 'blk-1', pods: [] });
    expect(tail.block).toMatchObject({ id: 'blk-1', state: 'WaitingForPvbs', pvbs: ['pvb-b', 'pvb-a', 'pvb-gone'] });
    expect(tail.pvbs.map((p) => p && { name: p.name, phase: p.phase, bytesDone: p.bytesDone })).toEqual([
      { name: 'pvb-b', phase: 'Pending', bytesDone: undefined },
      { name: 'pvb-a', phase: 'Completed', bytesDone: 7 },
      undefined,
    ]);
    // A block that names no PVB, and one with no state yet.
    await state.updateBlock('b1', 'blk-2', { state: 'ItemsDone' });
    expect(await state.readBlockTail('b1', 'blk-2')).toEqual({
      plan: { id: 'blk-2', pods: [] },
      block: { id: 'blk-2', state: 'ItemsDone' },
      pvbs: [],
    });
    expect(await state.readBlockTail('b1', 'blk-none')).toEqual({ plan: undefined, block: undefined, pvbs: [] });
  });

  it('counts a key once and logs its line with it, once, keeping the log bounded', async () => {
    const small = new BackupState({ redis, prefix: uniquePrefix(), now: () => clock++, maxLogLines: 3 });
    await small.createBackup(record('b1'));
    for (let i = 0; i < 3; i++) await small.log('b1', { level: 'info', msg: `line ${i}` });
    expect(
      await small.countOnceAndLog('b1', 'pvb:p1', 'pvbsCompleted', { level: 'info', msg: 'pod volume backup completed', pvb: 'p1' }),
    ).toBe(true);
    expect(
      await small.countOnceAndLog('b1', 'pvb:p1', 'pvbsCompleted', { level: 'info', msg: 'pod volume backup completed', pvb: 'p1' }),
    ).toBe(false);
    expect(await small.counters('b1')).toEqual({ pvbsCompleted: 1 });
    const logs = await small.readLogs('b1');
    expect(logs.map((l) => l.msg)).toEqual(['line 1', 'line 2', 'pod volume backup completed']);
    expect(logs.at(-1)).toMatchObject({ level: 'info', pvb: 'p1' });
    expect(typeof logs.at(-1)?.at).toBe('number');
  });

  it('counts many keys once each in one call, and records problems once', async () => {
    await state.createBackup(record('b1'));
    const entries = [
      { onceKey: 'item:a', field: 'itemsBackedUp' },
      { onceKey: 'item:b', field: 'itemsBackedUp' },
    ];
    expect(await state.countOnceMany('b1', entries)).toBe(2);
    expect(await state.countOnceMany('b1', [...entries, { onceKey: 'item:c', field: 'itemsBackedUp' }])).toBe(1);
    expect(await state.recordProblem('b1', { level: 'error', onceKey: 'hook:x', msg: 'hook failed', namespace: 'shop' })).toBe(true);
    expect(await state.recordProblem('b1', { level: 'error', onceKey: 'hook:x', msg: 'hook failed', namespace: 'shop' })).toBe(false);
    expect(await state.recordProblem('b1', { level: 'warn', onceKey: 'w', msg: 'careful' })).toBe(true);
    expect(await state.counters('b1')).toEqual({ itemsBackedUp: 3, errors: 1, warnings: 1 });
    expect((await state.readLogs('b1')).map((l) => [l.level, l.msg, l.namespace])).toEqual([
      ['error', 'hook failed', 'shop'],
      ['warn', 'careful', undefined],
    ]);
  });

  it("a block step counts each key once — a namespace block's thousands of items too — and writes its event only when its key counted now", async () => {
    await state.createBackup(record('b1'));
    const items = Array.from({ length: 2_500 }, (_, i) => ({ onceKey: `item:${i}`, field: 'itemsBackedUp' }));
    const step = (once: ReadonlyArray<{ onceKey: string; field: string; by?: number }>) =>
      state.blockStep('b1', 'blk', {
        set: { state: 'Completed' },
        once: [{ onceKey: 'block-done:blk', field: 'blocksDone' }, ...once],
        event: { type: 'block.done', data: { blockId: 'blk' }, ifCounted: 0 },
      });
    expect(await step([...items, { onceKey: 'bytes:blk', field: 'bytes', by: 7 }])).toBe(2_502);
    // Redelivered, with one item more: only the new key counts, and no second event.
    expect(await step([...items, { onceKey: 'item:new', field: 'itemsBackedUp' }, { onceKey: 'bytes:blk', field: 'bytes', by: 7 }])).toBe(
      1,
    );
    expect(await state.counters('b1')).toEqual({ blocksDone: 1, itemsBackedUp: 2_501, bytes: 7 });
    const events = await state.readEvents('b1', '0');
    expect(events.filter((e) => e.type === 'block.done')).toHaveLength(1);
    // The event follows its own key, not the others: a step whose event key counted before writes none.
    expect(await step([{ onceKey: 'item:newer', field: 'itemsBackedUp' }])).toBe(1);
    expect((await state.readEvents('b1', '0')).filter((e) => e.type === 'block.done')).toHaveLength(1);
  });

  it('hook runs: one entry per run; a run cut off by a crash and started again reads as interrupted, both shown', async () => {
    await state.createBackup(record('hooks-1'));
    const base = {
      blockId: 'b1',
      podNamespace: 'shop',
      podName: 'db-0',
      container: 'db',
      phase: 'pre' as const,
      source: 'annotation',
      command: ['/bin/pre'],
    };
    // Attempt 1 started the hook and died; attempt 2 ran it through; another hook ran through once.
    await state.recordHookRun('hooks-1', { ...base, index: 0, runId: 'r1', outcome: 'running', startedAt: 1, attempt: 1 });
    await state.recordHookRun('hooks-1', { ...base, index: 0, runId: 'r2', outcome: 'running', startedAt: 5, attempt: 2 });
    await state.recordHookRun('hooks-1', { ...base, index: 1, runId: 'r3', outcome: 'running', startedAt: 6, attempt: 2 });
    await state.recordHookRun('hooks-1', {
      ...base,
      index: 0,
      runId: 'r2',
      outcome: 'exited',
      exitCode: 0,
      startedAt: 5,
      endedAt: 7,
      attempt: 2,
    });
    const runs = await state.hookRuns('hooks-1');
    expect(runs.map((r) => [r.runId, r.outcome])).toEqual([
      ['r1', 'interrupted'],
      ['r2', 'exited'],
      ['r3', 'running'],
    ]);
    expect(runs[0]?.message).toContain('cut off before it finished');
  });

  it('records a cancel request once and never after the backup ended', async () => {
    await state.createBackup(record('b1'));
    await state.createBackup(record('b2'));
    await state.transitionPhase('b2', ['New'], 'Completed');
    expect(await state.requestCancel('b1')).toEqual({ requested: true, phase: 'New' });
    expect(await state.requestCancel('b1')).toEqual({ requested: false, phase: 'New' });
    expect(await state.requestCancel('b2')).toEqual({ requested: false, phase: 'Completed' });
    expect((await state.getBackup('b1'))?.cancelRequestedAt).toBeGreaterThan(0);
    expect((await state.getBackup('b2'))?.cancelRequestedAt).toBeUndefined();
    expect(await state.requestCancel('missing')).toEqual({ requested: false, phase: undefined });
  });
});
