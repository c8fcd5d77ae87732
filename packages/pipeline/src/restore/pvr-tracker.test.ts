import type { PodVolumeRestore } from '@stowage/kube';
import { describe, expect, it } from 'vitest';
import { DEFAULT_PIPELINE_CONFIG } from '../deps.js';
import { pvrTracker } from './pvr-tracker.js';
import type { PvrStateRecord, RestoreState } from './restore-state.js';

/** A restore state that only keeps the events appended (what recordSeen and recordMissing say). */
function eventsOnly(): { state: RestoreState; events: Array<{ type: string; data: Record<string, unknown> }> } {
  const events: Array<{ type: string; data: Record<string, unknown> }> = [];
  const state = {
    updatePvr: async () => undefined,
    appendEvent: async (_name: string, type: string, data: Record<string, unknown>) => {
      events.push({ type, data });
      return '';
    },
    countOnce: async () => true,
    countOnceMany: async () => undefined,
    recordProblem: async () => undefined,
  } as unknown as RestoreState;
  return { state, events };
}

const previous = { phase: 'InProgress', podNamespace: 'shop', podName: 'reporter', volume: 'reports' } as PvrStateRecord;
const pvr = (status: PodVolumeRestore['status']): PodVolumeRestore =>
  ({ metadata: { name: 'pvr-1' }, status }) as unknown as PodVolumeRestore;

describe('pvrTracker: the pvr.phase event of a PVR that ended', () => {
  it('Failed: carries the status message, so a progress line says why', async () => {
    const { state, events } = eventsOnly();
    const t = pvrTracker({ config: DEFAULT_PIPELINE_CONFIG, restores: state, pvrs: {} as never });
    await t.recordSeen('rs1', pvr({ phase: 'Failed', message: 'the disk is full' }), previous);
    expect(events).toEqual([
      {
        type: 'pvr.phase',
        data: {
          pvr: 'pvr-1',
          pod: 'shop/reporter',
          volume: 'reports',
          namespace: 'shop',
          from: 'InProgress',
          to: 'Failed',
          message: 'the disk is full',
        },
      },
    ]);
  });

  it('Completed, or still running: no message', async () => {
    const { state, events } = eventsOnly();
    const t = pvrTracker({ config: DEFAULT_PIPELINE_CONFIG, restores: state, pvrs: {} as never });
    await t.recordSeen('rs1', pvr({ phase: 'Completed', message: 'resumed after the node agent restarted' }), previous);
    await t.recordSeen('rs1', pvr({ phase: 'InProgress', message: 'waiting' }), { ...previous, phase: 'New' });
    expect(events.map((e) => e.data.message)).toEqual([undefined, undefined]);
  });

  it('gone before it ended (recorded Failed): carries why', async () => {
    const { state, events } = eventsOnly();
    const t = pvrTracker({ config: DEFAULT_PIPELINE_CONFIG, restores: state, pvrs: {} as never });
    await t.recordMissing('rs1', 'pvr-1', previous, 'the PVR was deleted');
    expect(events).toEqual([
      expect.objectContaining({ type: 'pvr.phase', data: expect.objectContaining({ to: 'Failed', message: 'the PVR was deleted' }) }),
    ]);
  });
});
