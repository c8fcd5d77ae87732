/*
 * What became of every volume of every pod of a block, for the REST view: backed up (it has a
 * PVB), planned (its PVB is not created yet), skipped (with the plan's reason) or an error (with
 * why). Read from the stored plan and the block's state only, so no volume is ever missing from
 * the answer: a volume the plan decided to back up but that got no PVB says why.
 */
import { blockSnapshots } from '../snapshots/block-snapshots.js';
import { type BlockPlan, podKey } from './block-plan.js';

export interface VolumeOutcome {
  /** `namespace/name` */
  pod: string;
  volume: string;
  outcome: 'backed-up' | 'snapshotted' | 'planned' | 'skipped' | 'error';
  reason?: string;
  /** The PVB that backs it up (its phase is in the block's podVolumeBackups). */
  pvb?: string;
  claimName?: string;
  /** A snapshotted volume's CSI snapshot: kept in the cluster, or its data moved into the repository. */
  snapshot?: VolumeSnapshotOutcome;
}

export interface VolumeSnapshotOutcome {
  name: string;
  method: 'kept' | 'moved';
  className: string;
  /** Pending, Cut, Moving, Completed, Failed, Canceled. */
  phase: string;
  /** When the cut was taken (epoch ms): the point in time the snapshot holds. */
  cutAt?: number;
  completedAt?: number;
  /** A moved snapshot's repository snapshot and bytes. */
  repositorySnapshotId?: string;
  bytes?: number;
  message?: string;
}

const ENDED = new Set(['Completed', 'PartiallyFailed', 'Failed', 'Canceled']);

export function volumeOutcomes(
  plan: Pick<BlockPlan, 'pods'>,
  block: { state?: string; failedPods?: readonly string[]; pvbs?: readonly string[]; [field: string]: unknown } | undefined,
): VolumeOutcome[] {
  const created = new Set(block?.pvbs ?? []);
  const snapshots = new Map(blockSnapshots(block).map((r) => [r.name, r]));
  const failed = new Set(block?.failedPods ?? []);
  const ended = block?.state !== undefined && ENDED.has(block.state);
  const out: VolumeOutcome[] = [];
  for (const pod of plan.pods ?? []) {
    if (typeof pod !== 'object' || pod === null) continue; // a plan from another version: nothing to read
    const key = podKey(pod);
    for (const v of pod.volumes ?? []) {
      const base = { pod: key, volume: v.name, ...(v.claimName ? { claimName: v.claimName } : {}) };
      if (v.pvbName && created.has(v.pvbName)) {
        const reason = v.claimedBy ? `took over PVC ${v.claimName} from pod ${v.claimedBy}, which was not backed up` : v.reason;
        out.push({ ...base, outcome: 'backed-up', pvb: v.pvbName, ...(reason ? { reason } : {}) });
      } else if (v.action === 'snapshot' && v.snapshot && snapshots.has(v.snapshot.name)) {
        const r = snapshots.get(v.snapshot.name)!;
        const snapshot: VolumeSnapshotOutcome = {
          name: r.name,
          method: r.moveData ? 'moved' : 'kept',
          className: r.className,
          phase: r.phase,
          ...(r.cutAt !== undefined ? { cutAt: r.cutAt } : {}),
          ...(r.completedAt !== undefined ? { completedAt: r.completedAt } : {}),
          ...(r.repositorySnapshotId ? { repositorySnapshotId: r.repositorySnapshotId } : {}),
          ...(r.bytes !== undefined ? { bytes: r.bytes } : {}),
          ...(r.message ? { message: r.message } : {}),
        };
        const outcome = r.phase === 'Completed' ? 'snapshotted' : r.phase === 'Failed' || r.phase === 'Canceled' ? 'error' : 'planned';
        const reason = outcome === 'error' ? (r.message ?? `snapshot ${r.phase}`) : v.reason;
        out.push({ ...base, outcome, snapshot, ...(reason ? { reason } : {}) });
      } else if (v.action === 'snapshot' && v.snapshot && !failed.has(key) && !ended) {
        const s = v.snapshot;
        const snapshot: VolumeSnapshotOutcome = {
          name: s.name,
          method: s.moveData ? 'moved' : 'kept',
          className: s.className,
          phase: 'Planned',
        };
        out.push({ ...base, outcome: 'planned', snapshot, ...(v.reason ? { reason: v.reason } : {}) });
      } else if (v.action === 'error') {
        out.push({ ...base, outcome: 'error', reason: v.reason ?? 'could not be decided' });
      } else if (v.action === 'skip') {
        out.push({ ...base, outcome: 'skipped', reason: v.reason ?? 'skipped' });
      } else if (failed.has(key)) {
        const taker = (plan.pods ?? []).find((other) =>
          other.volumes.some(
            (o) => o.claimedBy === key && o.claimName === v.claimName && o.pvbName !== undefined && created.has(o.pvbName),
          ),
        );
        out.push(
          taker
            ? {
                ...base,
                outcome: 'skipped',
                reason: `the pod failed a pre hook with onError: Fail; PVC ${v.claimName} is backed up through pod ${podKey(taker)}`,
              }
            : { ...base, outcome: 'error', reason: 'not backed up: a pre hook of the pod failed with onError: Fail' },
        );
      } else if (ended) {
        out.push({ ...base, outcome: 'error', reason: `no PVB was created: the block ended ${block?.state}` });
      } else {
        out.push({ ...base, outcome: 'planned', ...(v.reason ? { reason: v.reason } : {}) });
      }
    }
  }
  return out;
}
