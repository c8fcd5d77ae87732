import { finalizeJobId, planJobId } from '@stowage/core';
import { useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { auth, type Harness, startHarness, validBody } from './api-harness.js';

let redis: { url: string; stop: () => Promise<void> };
let h: Harness;

beforeAll(async () => {
  redis = await useTestRedis();
  h = await startHarness(redis.url);
});
afterAll(async () => {
  await h?.close();
  await redis?.stop();
});

const post = (payload: unknown, headers: Record<string, string> = {}) =>
  h.app.inject({ method: 'POST', url: '/v1/backups', headers: { ...auth, ...headers }, payload: payload as object });

describe('POST /v1/backups', () => {
  it('records the backup in phase New and queues finalize ← plan with the request id', async () => {
    const res = await post(validBody('nightly-1'), { 'x-request-id': 'req-abc-123' });
    expect(res.statusCode).toBe(201);
    expect(res.headers.location).toBe('/v1/backups/nightly-1');
    expect(res.headers['x-request-id']).toBe('req-abc-123');
    const body = res.json();
    expect(body).toMatchObject({
      name: 'nightly-1',
      phase: 'New',
      requestId: 'req-abc-123',
      spec: { includedNamespaces: ['app'], fsBackupTimeout: '4h0m0s' },
      progress: { totalItems: 0, itemsBackedUp: 0 },
      hookStatus: { hooksAttempted: 0, hooksFailed: 0 },
      podVolumeBackups: { total: 0 },
    });
    expect(Date.parse(body.createdAt)).toBeGreaterThan(0);

    const backups = h.queues.find((q) => q.name === 'backups')!;
    const finalize = await backups.getJob(finalizeJobId('nightly-1'));
    const plan = await backups.getJob(planJobId('nightly-1'));
    expect(finalize?.name).toBe('finalize');
    expect(plan?.name).toBe('plan');
    expect(plan?.data).toMatchObject({ backupName: 'nightly-1', backupUid: body.uid, requestId: 'req-abc-123' });
    expect(plan?.parentKey).toContain(finalizeJobId('nightly-1'));
    expect(await backups.getJobState(finalizeJobId('nightly-1'))).toBe('waiting-children');
  });

  it('generates a DNS-1123 name when none is given', async () => {
    const res = await post({ spec: {} });
    expect(res.statusCode).toBe(201);
    expect(res.json().name).toMatch(/^backup-[a-z0-9]+$/);
  });

  it('answers 409 when the name exists and leaves the first backup alone', async () => {
    expect((await post(validBody('dup'))).statusCode).toBe(201);
    const res = await post({ name: 'dup', spec: { includedNamespaces: ['other'] } });
    expect(res.statusCode).toBe(409);
    expect(res.json().error).toMatchObject({ code: 'API_CONFLICT', message: expect.stringContaining('dup') });
    expect((await h.state.getBackup('dup'))?.spec).toMatchObject({ includedNamespaces: ['app'] });
  });

  it('a retried request (same X-Request-ID) gets the backup it created, not a 409', async () => {
    const headers = { 'x-request-id': 'retry-me-1' };
    expect((await post(validBody('retried'), headers)).statusCode).toBe(201);
    const again = await post(validBody('retried'), headers);
    expect(again.statusCode).toBe(200);
    expect(again.json()).toMatchObject({ name: 'retried', requestId: 'retry-me-1' });
    expect((await post(validBody('retried'), { 'x-request-id': 'someone-else' })).statusCode).toBe(409);
  });

  it('lists every validation problem with its path (400)', async () => {
    const res = await post({
      name: 'Bad_Name',
      spec: { includedNamespaces: 'app', hooks: { resources: [{ name: 'h', pre: [{ exec: { command: 'echo hi' } }] }] }, bogus: 1 },
    });
    expect(res.statusCode).toBe(400);
    const { error } = res.json();
    expect(error.code).toBe('API_VALIDATION');
    expect(error.requestId).toBe(res.headers['x-request-id']);
    const paths = error.problems.map((p: { path: string }) => p.path);
    expect(paths).toEqual(
      expect.arrayContaining(['name', 'spec.includedNamespaces', 'spec.hooks.resources[0].pre[0].exec.command', 'spec.bogus']),
    );
  });

  it('answers 400 for a missing body, 413 above 1 MiB and 415 for non-JSON', async () => {
    const empty = await h.app.inject({
      method: 'POST',
      url: '/v1/backups',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '',
    });
    expect(empty.statusCode).toBe(400);
    expect(empty.json().error).toMatchObject({ code: 'API_VALIDATION', message: expect.stringContaining('body is empty') });
    const none = await h.app.inject({ method: 'POST', url: '/v1/backups', headers: auth });
    expect(none.statusCode).toBe(400);
    expect(none.json().error.code).toBe('API_VALIDATION');

    const big = JSON.stringify({ spec: { includedNamespaces: ['x'.repeat(1024 * 1024)] } });
    const tooLarge = await h.app.inject({
      method: 'POST',
      url: '/v1/backups',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: big,
    });
    expect(tooLarge.statusCode).toBe(413);
    expect(tooLarge.json().error.code).toBe('API_PAYLOAD_TOO_LARGE');

    const text = await h.app.inject({
      method: 'POST',
      url: '/v1/backups',
      headers: { ...auth, 'content-type': 'text/plain' },
      payload: 'name=x',
    });
    expect(text.statusCode).toBe(415);
    expect(text.json().error.code).toBe('API_UNSUPPORTED_MEDIA_TYPE');
  });
});

describe('GET /v1/backups', () => {
  it('pages newest first with a cursor and filters by phase', async () => {
    for (const n of ['page-a', 'page-b', 'page-c']) expect((await post(validBody(n))).statusCode).toBe(201);
    await h.state.transitionPhase('page-b', ['New'], 'InProgress');

    const first = await h.app.inject({ method: 'GET', url: '/v1/backups?limit=2', headers: auth });
    expect(first.statusCode).toBe(200);
    const p1 = first.json();
    expect(p1.items.map((b: { name: string }) => b.name)).toEqual(['page-c', 'page-b']);
    expect(p1.nextCursor).toBeDefined();
    const second = await h.app.inject({ method: 'GET', url: `/v1/backups?limit=2&cursor=${p1.nextCursor}`, headers: auth });
    expect(second.json().items[0].name).toBe('page-a');

    const inProgress = await h.app.inject({ method: 'GET', url: '/v1/backups?phase=InProgress', headers: auth });
    expect(inProgress.json().items.map((b: { name: string }) => b.name)).toEqual(['page-b']);
  });

  it('rejects a bad limit, cursor or phase with 400 naming the parameter', async () => {
    for (const [q, path] of [
      ['limit=0', 'query.limit'],
      ['limit=abc', 'query.limit'],
      ['cursor=../x', 'query.cursor'],
      ['phase=Sleeping', 'query.phase'],
    ] as const) {
      const res = await h.app.inject({ method: 'GET', url: `/v1/backups?${q}`, headers: auth });
      expect(res.statusCode, q).toBe(400);
      expect(res.json().error.code).toBe('API_VALIDATION');
      expect(res.json().error.problems[0].path).toBe(path);
    }
  });
});

describe('GET /v1/backups/:name and its blocks and logs', () => {
  it('shows progress, hook status, PVB counts by phase, errors and timestamps', async () => {
    expect((await post(validBody('detail'))).statusCode).toBe(201);
    await h.state.transitionPhase('detail', ['New'], 'InProgress', { startedAt: Date.now() });
    await h.state.setCounter('detail', 'totalItems', 7);
    await h.state.countOnce('detail', 'item:1', 'itemsBackedUp', 3);
    await h.state.countOnce('detail', 'hook:1', 'hooksAttempted');
    await h.state.countOnce('detail', 'hook:1:f', 'hooksFailed');
    await h.state.putBlockPlans('detail', [{ id: 'blk-1', plan: { pods: [{ namespace: 'app', name: 'db-0' }], itemCount: 3 }, items: [] }]);
    await h.state.updateBlock('detail', 'blk-1', {
      state: 'WaitingForVolumes',
      startedAt: 1_700_000_000_000,
      pvbs: ['detail-aaa', 'detail-bbb'],
    });
    const pvbBase = { blockId: 'blk-1', podNamespace: 'app', podName: 'db-0', podUid: 'u1', node: 'node-a' };
    await h.state.updatePvb('detail', 'detail-aaa', { ...pvbBase, volume: 'data', phase: 'Completed', totalBytes: 100, bytesDone: 100 });
    await h.state.updatePvb('detail', 'detail-bbb', { ...pvbBase, volume: 'logs', phase: 'InProgress', totalBytes: 50, bytesDone: 10 });
    await h.state.recordHookRun('detail', {
      blockId: 'blk-1',
      podNamespace: 'app',
      podName: 'db-0',
      container: 'db',
      phase: 'pre',
      source: 'annotation',
      index: 0,
      command: ['/bin/freeze'],
      outcome: 'exited',
      exitCode: 0,
      startedAt: 1_700_000_000_000,
      endedAt: 1_700_000_001_000,
    });
    await h.state.log('detail', { level: 'info', msg: 'planning started' });
    await h.state.log('detail', { level: 'warn', msg: 'pod skipped', pod: 'app/x' });

    const res = await h.app.inject({ method: 'GET', url: '/v1/backups/detail', headers: auth });
    expect(res.statusCode).toBe(200);
    expect(res.json()).toMatchObject({
      name: 'detail',
      phase: 'InProgress',
      progress: { totalItems: 7, itemsBackedUp: 3 },
      hookStatus: { hooksAttempted: 1, hooksFailed: 1 },
      podVolumeBackups: { total: 2, Completed: 1, InProgress: 1, Failed: 0 },
      errors: 0,
      warnings: 0,
    });
    expect(res.json().startedAt).toMatch(/^\d{4}-\d\d-\d\dT/);

    const blocks = await h.app.inject({ method: 'GET', url: '/v1/backups/detail/blocks?limit=10', headers: auth });
    expect(blocks.statusCode).toBe(200);
    expect(blocks.json()).toMatchObject({
      total: 1,
      items: [
        {
          id: 'blk-1',
          state: 'WaitingForVolumes',
          pods: ['app/db-0'],
          itemCount: 3,
          podVolumeBackups: [
            { name: 'detail-aaa', node: 'node-a', volume: 'data', phase: 'Completed', bytesDone: 100 },
            { name: 'detail-bbb', node: 'node-a', volume: 'logs', phase: 'InProgress', bytesDone: 10 },
          ],
          hookRuns: [
            { pod: 'app/db-0', container: 'db', exitCode: 0, startedAt: '2023-11-14T22:13:20.000Z', endedAt: '2023-11-14T22:13:21.000Z' },
          ],
        },
      ],
    });
    expect(blocks.json().nextCursor).toBeUndefined();

    const logs = await h.app.inject({ method: 'GET', url: '/v1/backups/detail/logs', headers: auth });
    expect(logs.statusCode).toBe(200);
    expect(logs.headers['content-type']).toContain('application/x-ndjson');
    const lines = logs.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l));
    expect(lines.map((l) => l.msg)).toEqual(['planning started', 'pod skipped']);
    expect(lines[1]).toMatchObject({ level: 'warn', pod: 'app/x' });
  });

  it('pages blocks with a cursor', async () => {
    expect((await post(validBody('many-blocks'))).statusCode).toBe(201);
    await h.state.putBlockPlans(
      'many-blocks',
      Array.from({ length: 5 }, (_, i) => ({ id: `blk-${i}`, plan: { pods: [], itemCount: 1 }, items: [] })),
    );
    const p1 = (await h.app.inject({ method: 'GET', url: '/v1/backups/many-blocks/blocks?limit=3', headers: auth })).json();
    expect(p1.items.map((b: { id: string }) => b.id)).toEqual(['blk-0', 'blk-1', 'blk-2']);
    expect(p1.items[0].state).toBe('Pending');
    const p2 = (
      await h.app.inject({ method: 'GET', url: `/v1/backups/many-blocks/blocks?limit=3&cursor=${p1.nextCursor}`, headers: auth })
    ).json();
    expect(p2.items.map((b: { id: string }) => b.id)).toEqual(['blk-3', 'blk-4']);
    expect(p2.nextCursor).toBeUndefined();
  });

  it('answers 404 for an unknown backup on every per-backup route and 400 for an impossible name', async () => {
    for (const [method, url] of [
      ['GET', '/v1/backups/nope'],
      ['GET', '/v1/backups/nope/blocks'],
      ['GET', '/v1/backups/nope/logs'],
      ['GET', '/v1/backups/nope/events'],
      ['POST', '/v1/backups/nope/cancel'],
      ['DELETE', '/v1/backups/nope'],
    ] as const) {
      const res = await h.app.inject({ method, url, headers: auth });
      expect(res.statusCode, `${method} ${url}`).toBe(404);
      expect(res.json().error.code).toBe('API_NOT_FOUND');
    }
    const bad = await h.app.inject({ method: 'GET', url: `/v1/backups/${'a'.repeat(300)}`, headers: auth });
    expect(bad.statusCode).toBe(400);
    expect(bad.json().error.problems[0].path).toBe('params.name');
  });
});

describe('cancel and delete', () => {
  it('cancel answers 202 for a running backup and 409 once it has ended', async () => {
    expect((await post(validBody('to-cancel'))).statusCode).toBe(201);
    const res = await h.app.inject({ method: 'POST', url: '/v1/backups/to-cancel/cancel', headers: auth });
    expect(res.statusCode).toBe(202);
    expect(res.json()).toMatchObject({ name: 'to-cancel', cancelRequested: true });
    expect((await h.state.getBackup('to-cancel'))?.cancelRequestedAt).toBeGreaterThan(0);

    await h.state.transitionPhase('to-cancel', ['New'], 'Canceled', { completedAt: Date.now() });
    const again = await h.app.inject({ method: 'POST', url: '/v1/backups/to-cancel/cancel', headers: auth });
    expect(again.statusCode).toBe(409);
    expect(again.json().error.code).toBe('API_CONFLICT');
  });

  it('delete cancels a running backup and queues its deletion job (202); asking again changes nothing', async () => {
    expect((await post(validBody('to-delete'))).statusCode).toBe(201);
    const uid = (await h.state.getBackup('to-delete'))?.uid;

    // An empty JSON body on a body-less route is no body, not a 400.
    const running = await h.app.inject({
      method: 'DELETE',
      url: '/v1/backups/to-delete',
      headers: { ...auth, 'content-type': 'application/json' },
      payload: '',
    });
    expect(running.statusCode).toBe(202);
    expect(running.json()).toEqual({ name: 'to-delete', phase: 'New', deleting: true });
    expect((await h.state.getBackup('to-delete'))?.cancelRequestedAt).toBeGreaterThan(0);
    // No backup worker runs in this harness: the job waits for one on the repository queue (the api never runs it).
    const backups = h.queues.find((q) => q.name === 'repository')!;
    const job = await backups.getJob(`delete-to-delete-${uid}`);
    expect(job?.data).toEqual({ backupName: 'to-delete', backupUid: uid, reason: 'requested' });
    expect((await h.app.inject({ method: 'DELETE', url: '/v1/backups/to-delete', headers: auth })).statusCode).toBe(202);
    const deletions = (await backups.getJobs(['waiting', 'delayed', 'prioritized'])).filter(
      (j) => j.name === 'delete-backup' && j.data.backupName === 'to-delete' && j.data.reason === 'requested',
    );
    expect(deletions).toHaveLength(1);
    expect((await h.app.inject({ method: 'DELETE', url: '/v1/backups/never-was', headers: auth })).statusCode).toBe(404);
  });
});
