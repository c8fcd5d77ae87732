/*
 * One PVB per PVC: at plan time the first pod of a block that would back a PVC up takes the claim,
 * and the block's other pods that mount it stand by (`claimedBy`). A pod whose pre hook fails with
 * `onError: Fail` is not backed up, so its claims pass to the first pod of the block (plan order,
 * hence deterministic) that stands by for it and survived. A claim nobody survives to take is
 * lost: the caller records it as an error naming the PVC — never a silent gap.
 */
import { type PlannedPod, type PlannedVolume, podKey } from './block-plan.js';

export interface ClaimHandover {
  /** `<ns>/<claim>` */
  pvc: string;
  /** The pod that took the claim at plan time and is not backed up. */
  from: string;
  /** The pod that backs the PVC up instead, and its volume (with the PVB name it gets). */
  to: PlannedPod;
  volume: PlannedVolume & { pvbName: string };
}

export interface LostClaim {
  /** `<ns>/<claim>` */
  pvc: string;
  namespace: string;
  /** A sentence: why no pod backs it up. */
  why: string;
}

/** Hands the claims of `failedPods` over to surviving stand-by pods of the block. */
export function handOverClaims(
  pods: readonly PlannedPod[],
  failedPods: ReadonlySet<string>,
): { handovers: ClaimHandover[]; lost: LostClaim[] } {
  const handovers: ClaimHandover[] = [];
  const lost: LostClaim[] = [];
  for (const holder of pods) {
    const from = podKey(holder);
    if (!failedPods.has(from)) continue;
    for (const held of holder.volumes) {
      if (held.action !== 'fs-backup' || !held.claimName) continue;
      const pvc = `${holder.namespace}/${held.claimName}`;
      const standBy = pods.flatMap((pod) =>
        pod.volumes
          .filter((v) => v.claimedBy === from && v.claimName === held.claimName && v.pvbName !== undefined)
          .map((v) => ({ pod, volume: { ...v, pvbName: v.pvbName as string } })),
      );
      const taker = standBy.find(({ pod }) => !failedPods.has(podKey(pod)));
      if (taker) {
        handovers.push({ pvc, from, to: taker.pod, volume: taker.volume });
        continue;
      }
      const others = pods
        .filter((pod) => pod !== holder && pod.volumes.some((v) => v.claimName === held.claimName))
        .map((pod) =>
          failedPods.has(podKey(pod)) ? `${podKey(pod)} failed its pre hook too` : `${podKey(pod)} does not back this volume up`,
        );
      const why =
        `pod ${from}, which took it, failed a pre hook with onError: Fail, and ` +
        (others.length === 0
          ? 'no other pod of the backup mounts it'
          : `no other pod that mounts it can take it over (${others.join('; ')})`);
      lost.push({ pvc, namespace: holder.namespace, why });
    }
  }
  return { handovers, lost };
}
