import { createKubeClients, type KubeClients } from '@stowage/kube';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { deployIdentities } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EventRecorder } from '../src/resources/event-recorder.js';

/*
 * The controller's Events are correlated as kube's recorder does: the same reason about the same
 * object again bumps the Event recorded before (count, lastTimestamp) instead of adding one. The
 * recorder writes as the api's deployed account (the dev overlay's RBAC), so the test also shows
 * that account may create and patch Events and nothing more is needed.
 */

interface EventJson {
  metadata: { name: string };
  involvedObject: { kind: string; name: string; uid: string; namespace?: string };
  reason: string;
  message: string;
  type: string;
  count: number;
  firstTimestamp: string;
  lastTimestamp: string;
  source?: { component?: string };
}

describe('EventRecorder', () => {
  let sim: Simulator;
  let kube: KubeClients;
  let admin: KubeClients;
  let clock = Date.parse('2026-01-01T00:00:00Z');
  const warnings: unknown[] = [];

  beforeAll(async () => {
    sim = await startSimulator({
      fixture: { objects: [{ apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'a' } }] },
      port: 0,
      materializeVolumes: 'none',
    });
    const ids = await deployIdentities(sim);
    kube = createKubeClients({ kubeconfigPath: ids.api });
    admin = createKubeClients({ kubeconfigPath: sim.kubeconfigPath });
  }, 60_000);

  afterAll(async () => {
    await sim?.close();
  });

  const eventsIn = async (namespace: string) =>
    (await admin.requestJson<{ items: EventJson[] }>({ path: `/api/v1/namespaces/${namespace}/events` })).items;

  const recorder = () =>
    new EventRecorder({
      kube,
      logger: { warn: (obj) => warnings.push(obj) },
      component: 'stowage-controller',
      now: () => clock,
    });

  const backup = { apiVersion: 'stowage.dev/v1', kind: 'Backup', name: 'nightly', uid: 'uid-nightly', namespace: 'a' };

  it('the same reason about the same object bumps one Event: count and lastTimestamp, the latest message', async () => {
    const events = recorder();
    const first = new Date(clock).toISOString();
    await events.record('a', backup, 'Warning', 'PartiallyFailed', 'phase PartiallyFailed: 1 error');
    clock += 60_000;
    await events.record('a', backup, 'Warning', 'PartiallyFailed', 'phase PartiallyFailed: 2 errors');
    clock += 60_000;
    await events.record('a', backup, 'Warning', 'PartiallyFailed', 'phase PartiallyFailed: 3 errors');
    const last = new Date(clock).toISOString();

    const listed = (await eventsIn('a')).filter((e) => e.involvedObject.uid === backup.uid);
    expect(listed).toHaveLength(1);
    expect(listed[0]).toMatchObject({
      reason: 'PartiallyFailed',
      type: 'Warning',
      count: 3,
      firstTimestamp: first,
      lastTimestamp: last,
      message: 'phase PartiallyFailed: 3 errors',
      involvedObject: { kind: 'Backup', name: 'nightly', namespace: 'a' },
      source: { component: 'stowage-controller' },
    });
    expect(warnings).toEqual([]);
  });

  it('another reason, another object or another type is an Event of its own', async () => {
    const events = recorder();
    const other = { ...backup, name: 'weekly', uid: 'uid-weekly' };
    await events.record('a', other, 'Normal', 'InProgress', 'phase InProgress');
    await events.record('a', other, 'Normal', 'Completed', 'phase Completed');
    await events.record('a', other, 'Warning', 'Completed', 'phase Completed');
    await events.record('a', { ...other, uid: 'uid-weekly-recreated' }, 'Normal', 'Completed', 'phase Completed');
    const listed = (await eventsIn('a')).filter((e) => e.involvedObject.name === 'weekly');
    expect(listed.map((e) => [e.involvedObject.uid, e.type, e.reason, e.count]).sort()).toEqual([
      ['uid-weekly', 'Normal', 'Completed', 1],
      ['uid-weekly', 'Normal', 'InProgress', 1],
      ['uid-weekly', 'Warning', 'Completed', 1],
      ['uid-weekly-recreated', 'Normal', 'Completed', 1],
    ]);
  });

  it('an Event gone from the API server (expired, deleted) is recorded anew', async () => {
    const events = recorder();
    const monthly = { ...backup, name: 'monthly', uid: 'uid-monthly' };
    await events.record('a', monthly, 'Normal', 'Deleted', 'backup deleted');
    const [made] = (await eventsIn('a')).filter((e) => e.involvedObject.uid === monthly.uid);
    if (!made) throw new Error('no Event recorded');
    await admin.requestJson({ method: 'DELETE', path: `/api/v1/namespaces/a/events/${made.metadata.name}` });
    await events.record('a', monthly, 'Normal', 'Deleted', 'backup deleted');
    const listed = (await eventsIn('a')).filter((e) => e.involvedObject.uid === monthly.uid);
    expect(listed.map((e) => e.count)).toEqual([1]);
    expect(listed[0]?.metadata.name).not.toBe(made.metadata.name);
    expect(warnings).toEqual([]);
  });
});
