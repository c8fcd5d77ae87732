import { isKubeError, type KubeClients, KubeErrorCodes } from '@stowage/kube';
import { addRestoreTier, cappedBackoffMs, parseRestoreTierJobData, repark } from '@stowage/queue';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { itemKeyOf } from '../plan/block-plan.js';
import type { RestoreTierPlan } from '../restore/restore-plan-types.js';
import { restoreDepsOf } from '../restore/restore-runtime.js';
import type { PipelineRuntime } from '../runtime.js';

export type RestoreTierResult = { tier: number; next: number | null; notReady: string[] };

/**
 * restore-tier(k): released when every batch of tier k is done. Items of a batch whose job
 * failed for good are recorded failed (nothing is dropped silently). A CRD tier waits until its
 * CRDs are Established, a namespace tier until its namespaces are Active — re-parked without a
 * slot, at most `restoreTierWaitMs` (then a warning, and on). Then tier k+1 is added under
 * finalize (not after a cancel).
 */
export async function processRestoreTier(rt: PipelineRuntime, job: Job, token: string | undefined): Promise<RestoreTierResult> {
  const { deps } = rt;
  const { restores } = restoreDepsOf(deps);
  const data = parseRestoreTierJobData(job.data);
  const name = data.restoreName;
  const [record, tier] = await Promise.all([restores.getRestore(name), restores.getTier(name, data.tier)]);
  if (!record || !tier) throw new UnrecoverablePipelineError(PipelineErrorCode.blockMissing, `restore ${name} has no tier ${data.tier}`);

  const failures = await job.getIgnoredChildrenFailures();
  for (const [childKey, reason] of Object.entries(failures)) {
    const batch = Number(childKey.split('.').at(-1));
    const items = (await restores.getBatch(name, data.tier, batch)) ?? [];
    const known = await restores.itemResultsOf(
      name,
      items.map((i) => i.key),
    );
    const missing = items.filter((_, i) => known[i] === undefined);
    const at = deps.clock.now();
    await restores.recordItemResults(
      name,
      missing.map((i) => ({ key: i.key, result: { outcome: 'failed' as const, reason: `its restore-items job failed: ${reason}`, at } })),
    );
    await restores.recordProblem(name, {
      level: 'error',
      onceKey: `batch-failed:${data.tier}.${batch}`,
      msg: `restore-items job of tier ${data.tier} batch ${batch} failed (${missing.length} items not restored): ${reason}`,
    });
  }

  const canceled = record.cancelRequestedAt !== undefined;
  let notReady: string[] = [];
  if (!canceled && tier.waitUntil && tier.waitFor.length > 0) {
    // A CRD or namespace whose create failed will never be ready: its failure is recorded already.
    const results = await restores.itemResultsOf(
      name,
      tier.waitFor.map((n) =>
        itemKeyOf(tier.waitUntil === 'crds-established' ? 'customresourcedefinitions.apiextensions.k8s.io' : 'namespaces', undefined, n),
      ),
    );
    const waitFor = tier.waitFor.filter((_, i) => results[i]?.outcome !== 'failed');
    notReady = await notReadyYet(deps.kube, { ...tier, waitFor });
    const waitState = (job.data as { wait?: { startedAt: number; polls: number } }).wait ?? { startedAt: deps.clock.now(), polls: 0 };
    if (notReady.length > 0 && deps.clock.now() - waitState.startedAt < deps.config.restoreTierWaitMs) {
      await job.updateData({ ...(job.data as object), wait: { ...waitState, polls: waitState.polls + 1 } });
      return repark(job, token, cappedBackoffMs(waitState.polls, { baseMs: 100, maxMs: 2_000 }));
    }
    if (notReady.length > 0) {
      await restores.recordProblem(name, {
        level: 'warn',
        onceKey: `tier-wait:${data.tier}`,
        msg: `tier ${data.tier}: ${notReady.join(', ')} not ${tier.waitUntil === 'crds-established' ? 'Established' : 'Active'} after ${deps.config.restoreTierWaitMs} ms; going on`,
      });
    }
  }
  await restores.appendEvent(name, 'tier.done', {
    tier: data.tier,
    groupResources: tier.groupResources,
    items: tier.items,
    failedBatches: Object.keys(failures).length,
  });
  const next = data.tier + 1;
  if (canceled || next >= (record.tiers ?? 0)) return { tier: data.tier, next: null, notReady };
  const nextTier = await restores.getTier(name, next);
  if (!nextTier) throw new UnrecoverablePipelineError(PipelineErrorCode.blockMissing, `restore ${name} has no tier ${next}`);
  await addRestoreTier(
    rt.flowProducer,
    { restoreName: name, restoreUid: data.restoreUid, ...(data.requestId ? { requestId: data.requestId } : {}) },
    next,
    nextTier.batches,
  );
  await restores.appendEvent(name, 'tier.started', { tier: next, groupResources: nextTier.groupResources, items: nextTier.items });
  return { tier: data.tier, next, notReady };
}

/** The CRDs not Established / namespaces not Active yet, of the tier's `waitFor`. */
async function notReadyYet(kube: KubeClients, tier: RestoreTierPlan): Promise<string[]> {
  const out: string[] = [];
  for (const name of tier.waitFor) {
    const path =
      tier.waitUntil === 'crds-established'
        ? `/apis/apiextensions.k8s.io/v1/customresourcedefinitions/${encodeURIComponent(name)}`
        : `/api/v1/namespaces/${encodeURIComponent(name)}`;
    try {
      const object = await kube.requestJson<{ status?: { phase?: string; conditions?: Array<{ type?: string; status?: string }> } }>({
        path,
        description: `read ${name}`,
      });
      const ready =
        tier.waitUntil === 'crds-established'
          ? (object.status?.conditions ?? []).some((c) => c.type === 'Established' && c.status === 'True')
          : object.status?.phase === 'Active';
      if (!ready) out.push(name);
    } catch (err) {
      if (!isKubeError(err, KubeErrorCodes.notFound)) throw err;
      out.push(name);
    }
  }
  return out;
}
