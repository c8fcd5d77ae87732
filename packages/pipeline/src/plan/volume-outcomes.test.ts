import { describe, expect, it } from 'vitest';
import type { PlannedPod, PlannedVolume } from './block-plan.js';
import { volumeOutcomes } from './volume-outcomes.js';

const pod = (name: string, volumes: PlannedVolume[]): PlannedPod => ({
  namespace: 'ns',
  name,
  uid: `uid-${name}`,
  node: 'n1',
  itemKey: `pods/ns/${name}`,
  hooks: { pre: [], post: [] },
  volumes,
});
const holder = pod('a', [
  { name: 'data', action: 'fs-backup', claimName: 'db', pvbName: 'pvb-a', reason: 'listed in backup.velero.io/backup-volumes' },
  { name: 'scratch', action: 'fs-backup', pvbName: 'pvb-a2', reason: 'listed' },
]);
const standBy = pod('b', [
  {
    name: 'data',
    action: 'skip',
    claimName: 'db',
    pvbName: 'pvb-b',
    claimedBy: 'ns/a',
    reason: 'PVC db is already backed up through pod ns/a',
  },
]);
const other = pod('c', [
  { name: 'creds', action: 'skip', reason: 'secret volumes are never backed up' },
  { name: 'pending', action: 'error', claimName: 'p', reason: 'PVC ns/p cannot be backed up: it has no PV' },
]);
const plan = { pods: [holder, standBy, other] };
const rows = (block: Parameters<typeof volumeOutcomes>[1]) =>
  volumeOutcomes(plan, block).map(
    (v) => `${v.pod} ${v.volume}: ${v.outcome}${v.pvb ? ` ${v.pvb}` : ''}${v.reason ? ` (${v.reason})` : ''}`,
  );

describe('volumeOutcomes: every volume of every pod, with what became of it', () => {
  it('before the block runs: planned, skipped and errors with their reasons', () => {
    expect(rows(undefined)).toEqual([
      'ns/a data: planned (listed in backup.velero.io/backup-volumes)',
      'ns/a scratch: planned (listed)',
      'ns/b data: skipped (PVC db is already backed up through pod ns/a)',
      'ns/c creds: skipped (secret volumes are never backed up)',
      'ns/c pending: error (PVC ns/p cannot be backed up: it has no PV)',
    ]);
  });

  it("the claiming pod failed its pre hook: the stand-by backs the PVC up; the pod's other volume is an error", () => {
    expect(rows({ state: 'WaitingForPvbs', failedPods: ['ns/a'], pvbs: ['pvb-b'] })).toEqual([
      'ns/a data: skipped (the pod failed a pre hook with onError: Fail; PVC db is backed up through pod ns/b)',
      'ns/a scratch: error (not backed up: a pre hook of the pod failed with onError: Fail)',
      'ns/b data: backed-up pvb-b (took over PVC db from pod ns/a, which was not backed up)',
      'ns/c creds: skipped (secret volumes are never backed up)',
      'ns/c pending: error (PVC ns/p cannot be backed up: it has no PV)',
    ]);
  });

  it('a block that ended without creating a planned PVB says so', () => {
    expect(rows({ state: 'Canceled', pvbs: ['pvb-a'] }).slice(0, 2)).toEqual([
      'ns/a data: backed-up pvb-a (listed in backup.velero.io/backup-volumes)',
      'ns/a scratch: error (no PVB was created: the block ended Canceled)',
    ]);
  });
});
