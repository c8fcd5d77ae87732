import { interruptedRun, type RestoreRecord, type RestoreState, type RestoreTierPlan } from '@stowage/pipeline';
import type { z } from 'zod';
import type { restoreItemListSchema, restoreSchema, restoreSummarySchema } from './restore.schema.js';

/* Maps pipeline's RestoreState to what the API returns. Reads only. */

export type RestoreView = z.output<typeof restoreSchema>;
type RestoreSummaryView = z.output<typeof restoreSummarySchema>;

const iso = (ms: number | undefined): string | undefined =>
  ms === undefined || !Number.isFinite(ms) ? undefined : new Date(ms).toISOString();

export function toRestoreSummary(rec: RestoreRecord): RestoreSummaryView {
  return {
    name: rec.name,
    uid: rec.uid,
    backupName: rec.backupName,
    phase: rec.phase,
    createdAt: iso(rec.createdAt) ?? new Date(0).toISOString(),
    startedAt: iso(rec.startedAt),
    completedAt: iso(rec.completedAt),
  };
}

const PVR_PHASES = ['New', 'InProgress', 'Completed', 'Failed', 'Canceling', 'Canceled'] as const;

export async function readRestoreView(state: RestoreState, rec: RestoreRecord): Promise<RestoreView> {
  const [counters, tiers, pvrNames, hookRuns] = await Promise.all([
    state.counters(rec.name),
    state.getTiers(rec.name),
    state.allPvrNames(rec.name),
    state.hookRuns(rec.name),
  ]);
  const n = (field: string) => (Number.isFinite(counters[field]) ? (counters[field] as number) : 0);
  const pvrRecords = (await state.getPvrs(rec.name, pvrNames)).filter((r) => r !== undefined);
  const pvrCounts = { total: pvrRecords.length, New: 0, InProgress: 0, Completed: 0, Failed: 0, Canceling: 0, Canceled: 0, TimedOut: 0 };
  for (const r of pvrRecords) {
    if (r.timedOut) pvrCounts.TimedOut++;
    else if ((PVR_PHASES as readonly string[]).includes(r.phase)) pvrCounts[r.phase as (typeof PVR_PHASES)[number]]++;
  }
  const ended = rec.completedAt !== undefined;
  return {
    ...toRestoreSummary(rec),
    spec: rec.spec,
    requestId: rec.requestId,
    progress: { totalItems: n('totalItems'), itemsRestored: n('itemsRestored') },
    itemResults: {
      created: n('itemsCreated'),
      updated: n('itemsUpdated'),
      existsSkipped: n('itemsSkipped'),
      failed: n('itemsFailed'),
      notSelected: n('itemsNotSelected'),
    },
    hookStatus: { hooksAttempted: n('hooksAttempted'), hooksFailed: n('hooksFailed') },
    podVolumeRestores: pvrCounts,
    tiers: tiers.map((t: RestoreTierPlan) => ({
      index: t.index,
      groupResources: t.groupResources,
      items: t.items,
      batches: t.batches,
      waitUntil: t.waitUntil,
    })),
    pvrs: pvrRecords.map((r) => ({
      name: r.name,
      pod: `${r.podNamespace}/${r.podName}`,
      volume: r.volume,
      snapshotID: r.snapshotID,
      phase: r.timedOut ? 'TimedOut' : r.phase,
      node: r.node,
      totalBytes: r.totalBytes,
      bytesDone: r.bytesDone,
      message: r.message,
      startTimestamp: r.startTimestamp,
      completionTimestamp: r.completionTimestamp,
    })),
    hookRuns: hookRuns.map((raw) => {
      const run = ended && raw.outcome === 'running' ? interruptedRun(raw, 'the restore ended') : raw;
      return {
        pod: `${run.podNamespace}/${run.podName}`,
        container: run.container,
        phase: run.phase,
        source: run.source,
        command: run.command,
        outcome: run.outcome,
        exitCode: run.exitCode,
        startedAt: iso(run.startedAt),
        endedAt: iso(run.endedAt),
        durationMs: run.startedAt !== undefined && run.endedAt !== undefined ? run.endedAt - run.startedAt : undefined,
        stdoutTail: run.stdoutTail,
        stderrTail: run.stderrTail,
        message: run.message,
      };
    }),
    errors: n('errors'),
    warnings: n('warnings'),
    failureReason: rec.failureReason,
    cancelRequestedAt: iso(rec.cancelRequestedAt),
  };
}

export async function readRestoreItems(
  state: RestoreState,
  name: string,
  query: { outcome?: string | undefined; limit: number; cursor?: string | undefined },
): Promise<z.output<typeof restoreItemListSchema>> {
  const all = Object.entries(await state.itemResults(name))
    .filter(([, r]) => query.outcome === undefined || r.outcome === query.outcome)
    .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
  const offset = query.cursor ? Number(query.cursor) : 0;
  const page = all.slice(offset, offset + query.limit);
  return {
    items: page.map(([key, r]) => ({ key, outcome: r.outcome, reason: r.reason, at: iso(r.at) ?? new Date(0).toISOString() })),
    total: all.length,
    ...(offset + page.length < all.length ? { nextCursor: String(offset + page.length) } : {}),
  };
}
