import {
  applyIncludeExcludePolicy,
  type BackupSpec,
  blocksOfAddedItems,
  type ClusterItem,
  clusterScopedListed,
  decideNamespace,
  dispatchOrder,
  groupItemBlocks,
  groupResourceOf,
  type ItemBlock,
  isResourceIncluded,
  type PersistentVolume,
  type PersistentVolumeClaim,
  type Pod,
  pvbName,
  type VolumePolicy,
  validateResourcePolicies,
} from '@stowage/core';
import { type DiscoveredResource, discoverResources, listAll, pvbGroup, pvbPlural } from '@stowage/kube';
import { addBlockFlows, parsePlanJobData } from '@stowage/queue';
import type { Job } from 'bullmq';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import { runBackupHooks } from '../hooks/backup-hooks.js';
import { type BlockPlan, itemKeyOf, needsPostHooksJob, type PlannedItem, type PlannedPod, type PlanSkip } from '../plan/block-plan.js';
import { resolvePodHooks, selectFsBackupVolumes, type VolumeContext } from '../plan/pod-decisions.js';
import { RelatedItemTracker } from '../plan/related-items.js';
import { readPolicyDocument } from '../plan/resource-policy-configmap.js';
import type { PipelineRuntime } from '../runtime.js';
import { ENDED_BACKUP_PHASES } from '../state/backup-state.js';

export type PlanResult = { skipped: string } | { blocks: number; items: number; batches: number };

/** Resources never backed up: Stowage's own in-flight PVBs. */
const NEVER_LISTED = new Set([`${pvbPlural}.${pvbGroup}`]);
/** Blocks in the first batch a backup adds (enough to fill the first slots of a few workers); later batches double. */
const FIRST_BATCH_BLOCKS = 8;
/** The relation graph needs these three listed together before grouping. */
const RELATED = new Set(['pods', 'persistentvolumeclaims', 'persistentvolumes']);

/**
 * plan (a child of the backup's finalize job): New → InProgress, then discovery, paginated
 * lists, ItemBlocks, hooks and fs-backup decisions per pod; each batch of blocks is stored and
 * its sub-flows added under finalize at once, so blocks start while planning goes on. Pods,
 * PVCs and PVs go first (their grouping needs all three), then every other resource, one by one.
 * Safe to run twice: plans are stored per block id once, flows have deterministic ids.
 */
export async function processPlan(rt: PipelineRuntime, job: Job, _token: string | undefined): Promise<PlanResult> {
  const { deps } = rt;
  const { state, clock, config } = deps;
  const data = parsePlanJobData(job.data);
  const { backupName } = data;
  const log = deps.logger.child({ backup: backupName, jobId: job.id, attempt: job.attemptsMade + 1 });
  const record = await state.getBackup(backupName);
  if (!record) throw new UnrecoverablePipelineError(PipelineErrorCode.backupMissing, `backup ${backupName} has no record`);
  if ((ENDED_BACKUP_PHASES as readonly string[]).includes(record.phase)) return { skipped: `backup already ${record.phase}` };
  if (record.planCompletedAt !== undefined) return { skipped: 'plan already completed' };
  if (record.cancelRequestedAt !== undefined) return { skipped: 'backup canceled before planning' };
  const finalizeId = job.parent?.id;
  if (!finalizeId) throw new UnrecoverablePipelineError(PipelineErrorCode.badArgument, `plan job ${job.id} has no finalize parent`);

  const requestedSpec = record.spec as BackupSpec;
  const problems = specProblems(requestedSpec);
  if (problems.length > 0) {
    await state.transitionPhase(backupName, ['New'], 'FailedValidation', { failureReason: problems.join('; ') });
    await state.log(backupName, { level: 'error', msg: `backup spec is invalid: ${problems.join('; ')}` });
    return { skipped: 'spec invalid' };
  }
  const now = clock.now();
  await state.transitionPhase(backupName, ['New'], 'InProgress', { startedAt: now, fsDeadlineAt: now + requestedSpec.fsBackupTimeoutMs });

  const loaded = await loadResourcePolicies(rt, requestedSpec, backupName);
  if (loaded === undefined) return { skipped: 'resource policy invalid' };
  const { policies, spec } = loaded;
  // Backup-level pre hooks (e.g. pause a GitOps controller) run before anything is listed or any
  // block is added: no pod hook and no PVB can start before them. One that fails with onError:
  // Fail fails the backup here; finalize (which still runs) runs the backup post hooks.
  const backupPre = await runBackupHooks(deps, backupName, spec, 'pre');
  if (backupPre.failed !== undefined) {
    await state.log(backupName, { level: 'error', msg: `backup not run: ${backupPre.failed} (onError: Fail)` });
    return { skipped: 'a backup pre hook failed' };
  }
  const [nodesWithAgent, discovery] = await Promise.all([deps.agents.nodesWithAgent(), discoverResources(deps.kube)]);
  for (const failure of discovery.failures) {
    await state.recordProblem(backupName, {
      level: 'warn',
      onceKey: `discovery:${failure.groupVersion}`,
      msg: `discovery of ${failure.groupVersion} failed: ${failure.message}`,
    });
  }
  const resources = discovery.resources.filter((r) => {
    const gr = groupResourceOf(r);
    if (NEVER_LISTED.has(gr)) return false;
    if (r.group === '' && RELATED.has(r.resource)) return true; // listed for the relations; core decides membership
    if (!isResourceIncluded(r, spec)) return false;
    return r.namespaced || clusterScopedListed(r, spec) || (r.group === '' && r.resource === 'namespaces');
  });

  const totals = { blocks: 0, items: 0, batches: 0 };
  let batchSize = Math.min(FIRST_BATCH_BLOCKS, config.blockBatchSize);
  const volumeCtx: VolumeContext = { spec, policies, nodesWithAgent, pvcs: new Map(), pvs: new Map(), takenClaims: new Map() };
  const pulledIn = new RelatedItemTracker(deps.kube, discovery.resources, spec, config.listPageSize);
  const emit = async (blocks: ItemBlock<ClusterItem>[]) => {
    await pulledIn.observe(blocks);
    // Decisions in grouping order (one PVB per PVC: the first pod wins), then the dispatch order:
    // blocks with PVBs interleaved by node so every node agent gets work as early as it can.
    const planned = dispatchOrder(
      blocks.map((block) => buildBlockPlan(block, backupName, volumeCtx)),
      ({ plan }) => pvbNodesOf(plan),
    );
    for (let start = 0; start < planned.length; ) {
      const stored = planned.slice(start, start + batchSize);
      start += stored.length;
      // The first batches are small and each twice the last, up to blockBatchSize: the first
      // blocks reach the workers at once, and each batch is added while the one before runs (one
      // add of a few hundred flows left every slot idle for tens of milliseconds).
      batchSize = Math.min(config.blockBatchSize, batchSize * 2);
      await state.putBlockPlans(
        backupName,
        stored.map(({ plan, manifests }) => ({ id: plan.id, plan, items: manifests })),
      );
      const res = await addBlockFlows(
        { flowProducer: rt.flowProducer, itemBlocks: rt.itemBlocksQueue },
        {
          backupName,
          backupUid: data.backupUid,
          finalizeJobId: finalizeId,
          // Blocks with no fs-backup volume and no post hook need no post-hooks job (one job, not two).
          blocks: stored.map(({ plan }) => ({ id: plan.id, solo: !needsPostHooksJob(plan) })),
          batchSize: config.blockBatchSize,
          requestId: data.requestId,
        },
      );
      // The batch's skips in one write, after its flows are in (blocks need not wait for them).
      await state.logMany(
        backupName,
        stored.flatMap(({ plan }) =>
          plan.skips.map((skip) => ({ level: 'info' as const, msg: `skipped ${skip.what}: ${skip.reason}`, blockId: plan.id, skip: true })),
        ),
      );
      for (const { plan } of stored) {
        for (const error of plan.errors ?? []) {
          await state.recordProblem(backupName, {
            level: 'error',
            onceKey: `volume:${error.what}`,
            msg: `${error.what} not backed up: ${error.reason}`,
            namespace: error.what.split('/')[1],
            blockId: plan.id,
          });
        }
        for (const warning of plan.warnings ?? []) {
          await state.recordProblem(backupName, { level: 'warn', onceKey: `plan:${warning}`, msg: warning, blockId: plan.id });
        }
      }
      totals.blocks += stored.length;
      totals.batches += res.batches;
      totals.items += stored.reduce((n, b) => n + b.plan.items.length, 0);
      await state.setCounter(backupName, 'totalItems', totals.items);
      await state.appendEvent(backupName, 'plan.progress', { blocks: totals.blocks, items: totals.items });
    }
  };

  // 1. Pods, PVCs and PVs: one grouping (pods sharing a PVC share a block). Listed at once.
  const listed = await Promise.all(
    resources
      .filter((r) => r.group === '' && RELATED.has(r.resource))
      .map(async (resource) => {
        const items: ClusterItem[] = [];
        for await (const page of listAll(deps.kube, { resource, pageSize: config.listPageSize })) {
          for (const object of page.items) items.push(toClusterItem(resource, object));
        }
        return items;
      }),
  );
  const related: ClusterItem[] = listed.flat();
  for (const item of related) {
    const meta = item.object.metadata;
    if (item.resource === 'persistentvolumeclaims')
      volumeCtx.pvcs.set(`${meta.namespace}/${meta.name}`, item.object as PersistentVolumeClaim);
    if (item.resource === 'persistentvolumes') volumeCtx.pvs.set(meta.name, item.object as PersistentVolume);
  }
  const grouped = groupItemBlocks(related, spec);
  for (const warning of grouped.warnings) {
    await state.recordProblem(backupName, { level: 'warn', onceKey: `grouping:${warning.code}:${warning.itemKey}`, msg: warning.message });
  }
  await emit(grouped.blocks);

  // 2. Everything else, resource by resource (pod-free blocks, batched); namespaces last.
  const isNamespaces = (r: DiscoveredResource) => r.group === '' && r.resource === 'namespaces';
  for (const resource of resources.filter((r) => !(r.group === '' && RELATED.has(r.resource)) && !isNamespaces(r))) {
    const items: ClusterItem[] = [];
    for await (const page of listAll(deps.kube, { resource, pageSize: config.listPageSize })) {
      for (const object of page.items) items.push(toClusterItem(resource, object));
    }
    const res = groupItemBlocks(items, spec, { unrelatedBatchSize: 50 });
    await emit(res.blocks);
  }

  // 3. What the items pull in (PriorityClasses, ClusterRoleBindings and their ClusterRoles, the
  // CRDs of custom resources), as Velero's item-block actions and backupCRD add them.
  const added = await pulledIn.additionalItems();
  for (const note of added.notes) {
    if (note.level === 'warn') await state.recordProblem(backupName, { level: 'warn', onceKey: `related:${note.msg}`, msg: note.msg });
    else await state.log(backupName, { level: 'info', msg: note.msg });
  }
  await emit(blocksOfAddedItems(added.items));

  // 4. Namespaces, now that it is known which hold items: a label-selected backup keeps the
  // namespaces of its items (Velero's nsTracker).
  const namespaceResource = resources.find(isNamespaces);
  if (namespaceResource) {
    const kept: ClusterItem[] = [];
    for await (const page of listAll(deps.kube, { resource: namespaceResource, pageSize: config.listPageSize })) {
      for (const object of page.items) {
        const item = toClusterItem(namespaceResource, object);
        const meta = item.object.metadata;
        const phase = (item.object as { status?: { phase?: string } }).status?.phase;
        const decision = decideNamespace(
          { name: meta.name, ...(meta.labels ? { labels: meta.labels } : {}), ...(phase ? { phase } : {}) },
          spec,
          pulledIn.namespacesWithItems(),
        );
        if (decision.kept) kept.push(item);
      }
    }
    await emit(blocksOfAddedItems(kept));
  }

  await state.setCounter(backupName, 'totalItems', totals.items);
  await state.setCounter(backupName, 'blocksPlanned', totals.blocks);
  await state.updateBackup(backupName, { planCompletedAt: clock.now(), planSummary: totals });
  await state.appendEvent(backupName, 'plan.done', { ...totals });
  log.info({ ...totals }, 'plan done');
  return totals;
}

function toClusterItem(resource: DiscoveredResource, object: unknown): ClusterItem {
  return { group: resource.group, resource: resource.resource, namespaced: resource.namespaced, object: object as ClusterItem['object'] };
}

function buildBlockPlan(block: ItemBlock<ClusterItem>, backupName: string, ctx: VolumeContext): { plan: BlockPlan; manifests: unknown[] } {
  const items: PlannedItem[] = [];
  const manifests: unknown[] = [];
  const skips: PlanSkip[] = [];
  const errors: PlanSkip[] = [];
  const warnings: string[] = [];
  const pods: PlannedPod[] = [];
  for (const item of block.items) {
    const meta = item.object.metadata;
    const gr = groupResourceOf(item);
    const key = itemKeyOf(gr, item.namespaced ? meta.namespace : undefined, meta.name);
    items.push({
      key,
      apiVersion: item.object.apiVersion ?? '',
      kind: item.object.kind ?? '',
      groupResource: gr,
      namespace: item.namespaced ? meta.namespace : undefined,
      name: meta.name,
    });
    manifests.push(item.object);
  }
  for (const item of block.pods) {
    const pod = item.object as Pod;
    const meta = pod.metadata;
    const hooks = resolvePodHooks(pod, ctx.spec);
    skips.push(...hooks.skips);
    warnings.push(...hooks.warnings);
    const volumes = selectFsBackupVolumes(pod, ctx, (uid, volume) => pvbName(backupName, uid, volume));
    for (const v of volumes) {
      const what = `pods/${meta.namespace}/${meta.name} volume ${v.name}`;
      if (v.action === 'skip') skips.push({ what, reason: v.reason ?? 'skipped' });
      if (v.action === 'error') errors.push({ what, reason: v.reason ?? 'could not be decided' });
    }
    pods.push({
      namespace: meta.namespace ?? '',
      name: meta.name,
      uid: meta.uid ?? '',
      node: pod.spec.nodeName,
      itemKey: itemKeyOf('pods', meta.namespace, meta.name),
      hooks: hooks.hooks,
      volumes,
    });
  }
  return {
    plan: { id: block.id, pods, items, skips, ...(errors.length > 0 ? { errors } : {}), ...(warnings.length > 0 ? { warnings } : {}) },
    manifests,
  };
}

/** The node of every PVB the block will create (fs-backup volumes of pods with a node). */
function pvbNodesOf(plan: BlockPlan): string[] {
  return plan.pods.flatMap((pod) =>
    pod.node ? pod.volumes.filter((v) => v.action === 'fs-backup' && v.pvbName).map(() => pod.node ?? '') : [],
  );
}

function specProblems(spec: BackupSpec | undefined): string[] {
  if (!spec || typeof spec !== 'object') return ['spec is missing'];
  const problems: string[] = [];
  for (const key of ['includedNamespaces', 'excludedNamespaces', 'includedResources', 'excludedResources', 'orLabelSelectors'] as const) {
    if (!Array.isArray(spec[key])) problems.push(`spec.${key} must be an array (store the validated spec)`);
  }
  if (typeof spec.fsBackupTimeoutMs !== 'number') problems.push('spec.fsBackupTimeoutMs must be a number (store the validated spec)');
  if (!spec.hooks || !Array.isArray(spec.hooks.resources)) problems.push('spec.hooks.resources must be an array');
  return problems;
}

/**
 * The backup's volume policies, and its spec with the includeExcludePolicy of a policy ConfigMap
 * merged in (core's applyIncludeExcludePolicy); undefined when the backup failed validation here.
 */
async function loadResourcePolicies(
  rt: PipelineRuntime,
  spec: BackupSpec,
  backupName: string,
): Promise<{ policies: VolumePolicy[]; spec: BackupSpec } | undefined> {
  const ref = spec.resourcePolicy;
  if (!ref) return { policies: [], spec };
  if (ref.kind === 'Inline') return { policies: ref.volumePolicies, spec };
  const { deps } = rt;
  const fail = async (why: string) => {
    await deps.state.transitionPhase(backupName, ['InProgress', 'New'], 'FailedValidation', { failureReason: why });
    await deps.state.log(backupName, { level: 'error', msg: why });
    return undefined;
  };
  let configMap: { data?: Record<string, string> };
  try {
    configMap = await deps.kube.requestJson({
      path: `/api/v1/namespaces/${encodeURIComponent(deps.config.namespace)}/configmaps/${encodeURIComponent(ref.name)}`,
    });
  } catch (err) {
    return fail(`resource policy ConfigMap ${deps.config.namespace}/${ref.name} cannot be read: ${(err as Error).message}`);
  }
  const read = readPolicyDocument(ref.name, configMap.data);
  if (!read.ok) return fail(read.why);
  const res = validateResourcePolicies(read.document);
  if (!res.ok)
    return fail(`resource policy ConfigMap ${ref.name} is invalid: ${res.problems.map((p) => `${p.path}: ${p.message}`).join('; ')}`);
  const { volumePolicies, includeExcludePolicy } = res.value;
  if (!includeExcludePolicy) return { policies: volumePolicies, spec };
  const merged = applyIncludeExcludePolicy(spec, includeExcludePolicy);
  if (!merged.ok) return fail(`resource policy ConfigMap ${ref.name}: ${merged.message}`);
  return { policies: volumePolicies, spec: merged.value };
}
