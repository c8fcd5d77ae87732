import { specForDisplay } from '@stowage/core';
import {
  type BackupRecord,
  type BackupState,
  type BlockStateRecord,
  type HookRunRecord,
  interruptedRun,
  type PvbStateRecord,
} from '@stowage/pipeline';
import type { z } from 'zod';
import { type backupSchema, type backupSummarySchema, type blockSchema, PVB_PHASES, type pvbCountsSchema } from './api.schema.js';

/*
 * Maps the backup state (pipeline's BackupState) to what the API returns. Reads only; the
 * pipeline owns every write.
 */

export type BackupView = z.output<typeof backupSchema>;
export type BackupSummaryView = z.output<typeof backupSummarySchema>;
export type BlockView = z.output<typeof blockSchema>;
type PvbCounts = z.output<typeof pvbCountsSchema>;

const iso = (ms: number | undefined): string | undefined =>
  ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString();

export function toBackupSummary(rec: BackupRecord): BackupSummaryView {
  return {
    name: rec.name,
    uid: rec.uid,
    phase: rec.phase,
    createdAt: iso(rec.createdAt) ?? new Date(0).toISOString(),
    startedAt: iso(rec.startedAt),
    completedAt: iso(rec.completedAt),
  };
}

/** Counter fields of the backup's `cnt` hash (written once per key by the pipeline). */
export const COUNTER = {
  totalItems: 'totalItems',
  itemsBackedUp: 'itemsBackedUp',
  hooksAttempted: 'hooksAttempted',
  hooksFailed: 'hooksFailed',
  errors: 'errors',
  warnings: 'warnings',
  /** `pvb<Phase>` e.g. `pvbCompleted`: PVBs that reached the phase (terminal ones counted once). */
  pvbPhasePrefix: 'pvb',
} as const;

export async function readBackupView(state: BackupState, rec: BackupRecord): Promise<BackupView> {
  const [counters, pvbCounts] = await Promise.all([state.counters(rec.name), countPvbsByPhase(state, rec.name)]);
  const n = (field: string): number => {
    const v = counters[field];
    return v !== undefined && Number.isFinite(v) ? v : 0;
  };
  return {
    ...toBackupSummary(rec),
    spec: specForDisplay(rec.spec),
    requestId: rec.requestId,
    progress: { totalItems: n(COUNTER.totalItems), itemsBackedUp: n(COUNTER.itemsBackedUp) },
    hookStatus: { hooksAttempted: n(COUNTER.hooksAttempted), hooksFailed: n(COUNTER.hooksFailed) },
    podVolumeBackups: pvbCounts,
    errors: n(COUNTER.errors),
    warnings: n(COUNTER.warnings),
    failureReason: rec.failureReason,
    cancelRequestedAt: iso(rec.cancelRequestedAt),
    expiration: iso(expirationOf(rec)),
  };
}

/** PVBs by their current phase, from the PVB records themselves (the truth, not a guess from flags). */
export async function countPvbsByPhase(state: BackupState, name: string): Promise<PvbCounts> {
  const counts: PvbCounts = { total: 0, New: 0, InProgress: 0, Completed: 0, Failed: 0, Canceling: 0, Canceled: 0 };
  const names = await state.allPvbNames(name);
  for (let i = 0; i < names.length; i += 500) {
    const pvbs = await state.getPvbs(name, names.slice(i, i + 500));
    for (const p of pvbs) {
      if (!p) continue;
      counts.total++;
      const phase = (PVB_PHASES as readonly string[]).includes(p.phase) ? (p.phase as (typeof PVB_PHASES)[number]) : 'New';
      counts[phase]++;
    }
  }
  return counts;
}

/** A page of blocks in plan order, each with its pods, items, PVBs and hook runs. */
export async function readBlockPage(
  state: BackupState,
  name: string,
  offset: number,
  limit: number,
): Promise<{ items: BlockView[]; total: number; nextCursor?: string }> {
  const [total, ids, runs] = await Promise.all([
    state.blockCount(name),
    state.blockIds(name, offset, offset + limit - 1),
    state.hookRuns(name),
  ]);
  const runsByBlock = new Map<string, HookRunRecord[]>();
  for (const r of runs) {
    const list = runsByBlock.get(r.blockId) ?? [];
    list.push(r);
    runsByBlock.set(r.blockId, list);
  }
  const [blocks, plans] = await Promise.all([state.getBlocks(name, ids), Promise.all(ids.map((id) => state.getBlockPlan(name, id)))]);
  const items: BlockView[] = [];
  for (let i = 0; i < ids.length; i++) {
    const id = ids[i] as string;
    const block = blocks[i];
    const plan = plans[i];
    const pvbNames = block?.pvbs ?? [];
    const pvbs = (await state.getPvbs(name, pvbNames)).filter((p): p is PvbStateRecord => p !== undefined);
    let blockRuns = runsByBlock.get(id) ?? [];
    // A hook still `running` in a block that has ended will never report: its job was cut off.
    if (block?.state !== undefined && ENDED_BLOCK_STATES.has(block.state)) {
      blockRuns = blockRuns.map((r) => (r.outcome === 'running' ? interruptedRun(r, 'its block ended without it') : r));
    }
    items.push(toBlockView(id, block, plan, pvbs, blockRuns));
  }
  const next = offset + ids.length;
  return next < total ? { items, total, nextCursor: String(next) } : { items, total };
}

const ENDED_BLOCK_STATES: ReadonlySet<string> = new Set(['Completed', 'PartiallyFailed', 'Failed', 'Canceled']);

function toBlockView(
  id: string,
  block: BlockStateRecord | undefined,
  plan: unknown,
  pvbs: PvbStateRecord[],
  runs: HookRunRecord[],
): BlockView {
  const planInfo = describePlan(plan);
  return {
    id,
    state: block?.state ?? 'Pending',
    pods: planInfo.pods,
    itemCount: planInfo.itemCount,
    itemsWritten: numberOrUndefined(block?.itemsWritten),
    failedPods: block?.failedPods,
    error: typeof block?.error === 'string' ? block.error : undefined,
    startedAt: iso(numberOrUndefined(block?.startedAt)),
    itemsDoneAt: iso(numberOrUndefined(block?.itemsDoneAt)),
    completedAt: iso(numberOrUndefined(block?.completedAt)),
    podVolumeBackups: pvbs.map((p) => ({
      name: p.name,
      pod: `${p.podNamespace}/${p.podName}`,
      node: p.node,
      volume: p.volume,
      phase: p.phase,
      totalBytes: numberOrUndefined(p.totalBytes),
      bytesDone: numberOrUndefined(p.bytesDone),
      message: typeof p.message === 'string' ? p.message : undefined,
      startTimestamp: typeof p.startTimestamp === 'string' ? p.startTimestamp : undefined,
      completionTimestamp: typeof p.completionTimestamp === 'string' ? p.completionTimestamp : undefined,
    })),
    hookRuns: runs.map((r) => {
      const startedAt = numberOrUndefined(r.startedAt);
      const endedAt = numberOrUndefined(r.endedAt);
      return {
        pod: `${r.podNamespace}/${r.podName}`,
        container: r.container,
        phase: r.phase,
        source: r.source,
        command: r.command,
        outcome: r.outcome,
        exitCode: numberOrUndefined(r.exitCode),
        startedAt: iso(startedAt),
        endedAt: iso(endedAt),
        durationMs: startedAt !== undefined && endedAt !== undefined ? endedAt - startedAt : undefined,
        stdoutTail: typeof r.stdoutTail === 'string' && r.stdoutTail !== '' ? r.stdoutTail : undefined,
        stderrTail: typeof r.stderrTail === 'string' && r.stderrTail !== '' ? r.stderrTail : undefined,
        message: r.message,
      };
    }),
  };
}

const numberOrUndefined = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);

/** Pods and item count from a stored block plan; tolerant, since the plan's shape belongs to the pipeline. */
function describePlan(plan: unknown): { pods: string[]; itemCount: number } {
  if (typeof plan !== 'object' || plan === null) return { pods: [], itemCount: 0 };
  const p = plan as Record<string, unknown>;
  const pods = Array.isArray(p.pods)
    ? p.pods.map((pod) => {
        if (typeof pod === 'string') return pod;
        const o = (pod ?? {}) as Record<string, unknown>;
        return `${String(o.namespace ?? '')}/${String(o.name ?? '')}`;
      })
    : [];
  const itemCount = typeof p.itemCount === 'number' ? p.itemCount : Array.isArray(p.items) ? p.items.length : 0;
  return { pods, itemCount };
}

/** When the backup's delete-backup job deletes it: created + ttl (Velero: start + ttl). */
function expirationOf(rec: BackupRecord): number | undefined {
  const ttlMs = (rec.spec as { ttlMs?: unknown } | undefined)?.ttlMs;
  return typeof ttlMs === 'number' && ttlMs > 0 ? rec.createdAt + ttlMs : undefined;
}
