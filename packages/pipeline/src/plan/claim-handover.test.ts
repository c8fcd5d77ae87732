import { describe, expect, it } from 'vitest';
import type { PlannedPod, PlannedVolume } from './block-plan.js';
import { handOverClaims } from './claim-handover.js';

const holder = (name: string): PlannedPod => planned(name, { name: 'data', action: 'fs-backup', claimName: 'db', pvbName: `pvb-${name}` });
const standBy = (name: string, claimedBy: string): PlannedPod =>
  planned(name, { name: 'data', action: 'skip', claimName: 'db', pvbName: `pvb-${name}`, claimedBy });
const notSelected = (name: string): PlannedPod => planned(name, { name: 'data', action: 'skip', claimName: 'db', reason: 'not opted in' });
function planned(name: string, volume: PlannedVolume): PlannedPod {
  return {
    namespace: 'ns',
    name,
    uid: `uid-${name}`,
    node: 'n1',
    itemKey: `pods/ns/${name}`,
    hooks: { pre: [], post: [] },
    volumes: [volume],
  };
}

describe('handOverClaims', () => {
  const cases: { name: string; pods: PlannedPod[]; failed: string[]; to?: string; lostWhy?: string[] }[] = [
    { name: 'holder survives: nothing changes', pods: [holder('a'), standBy('b', 'ns/a')], failed: [] },
    { name: 'holder fails: the stand-by takes over', pods: [holder('a'), standBy('b', 'ns/a')], failed: ['ns/a'], to: 'b' },
    {
      name: 'holder and first stand-by fail: the next in plan order takes over',
      pods: [holder('a'), standBy('b', 'ns/a'), standBy('c', 'ns/a')],
      failed: ['ns/a', 'ns/b'],
      to: 'c',
    },
    {
      name: 'two survivors: the first in plan order',
      pods: [holder('a'), standBy('b', 'ns/a'), standBy('c', 'ns/a')],
      failed: ['ns/a'],
      to: 'b',
    },
    {
      name: 'every mounter fails: lost, naming each',
      pods: [holder('a'), standBy('b', 'ns/a')],
      failed: ['ns/a', 'ns/b'],
      lostWhy: ['pod ns/a, which took it', 'ns/b failed its pre hook too'],
    },
    {
      name: 'the survivor does not back the volume up: lost, saying so',
      pods: [holder('a'), notSelected('b')],
      failed: ['ns/a'],
      lostWhy: ['ns/b does not back this volume up'],
    },
    { name: 'the only mounter fails: lost', pods: [holder('a')], failed: ['ns/a'], lostWhy: ['no other pod of the backup mounts it'] },
  ];
  it.each(cases)('$name', ({ pods, failed, to, lostWhy }) => {
    const res = handOverClaims(pods, new Set(failed));
    expect(res.handovers.map((h) => [h.pvc, h.from, h.to.name, h.volume.pvbName])).toEqual(to ? [['ns/db', 'ns/a', to, `pvb-${to}`]] : []);
    expect(res.lost.map((l) => l.pvc)).toEqual(lostWhy ? ['ns/db'] : []);
    for (const part of lostWhy ?? []) expect(res.lost[0]?.why).toContain(part);
  });
});
