import type { Backup, Block, HookRun } from './api-types.js';
import { TERMINAL_PVB_PHASES } from './api-types.js';
import { msBetween } from './format.js';

/** A post hook run and how long after its block's last PVB finished it started. */
export interface PostHookLag {
  blockId: string;
  pod: string;
  container: string;
  outcome: string;
  exitCode: number | null;
  startedAt: string | null;
  /** How many PVBs the block had; 0 = the hook had nothing to wait for (lag is null). */
  blockPvbs: number;
  /** Latest completionTimestamp of the block's PVBs; null when the block had none or one lacks it. */
  lastPvbCompletedAt: string | null;
  /** hook start − last PVB completion, in ms; null when either time is unknown. */
  lagMs: number | null;
}

export interface HookRunSummary {
  blockId: string;
  pod: string;
  container: string;
  phase: 'pre' | 'post';
  outcome: string;
  exitCode: number | null;
  durationMs: number | null;
}

export interface PvbSummary {
  name: string;
  blockId: string;
  pod: string;
  node: string;
  volume: string;
  phase: string;
  bytesDone: number | null;
  totalBytes: number | null;
  durationMs: number | null;
}

/** What a finished backup amounts to: the numbers the demo and `describe --json` print. */
export interface BackupReport {
  name: string;
  phase: string;
  failureReason: string | null;
  durationMs: number | null;
  items: { total: number; backedUp: number };
  blocks: number;
  pvbs: { total: number; byPhase: Record<string, number>; bytes: number; list: PvbSummary[] };
  hooks: { attempted: number; failed: number; runs: HookRunSummary[] };
  postHookLags: PostHookLag[];
  errors: number;
  warnings: number;
}

const hookDuration = (r: HookRun): number | null => msBetween(r.startedAt, r.endedAt) ?? null;

/**
 * For every post hook: the block's last PVB completion and the hook's start. The post hook must
 * never start before every PVB of its block is terminal, so a negative lag is a real defect.
 */
export function postHookLags(blocks: readonly Block[]): PostHookLag[] {
  const out: PostHookLag[] = [];
  for (const b of blocks) {
    const pvbs = b.podVolumeBackups;
    let last: number | undefined;
    let complete = pvbs.length > 0;
    for (const p of pvbs) {
      const t = p.completionTimestamp ? Date.parse(p.completionTimestamp) : Number.NaN;
      if (!TERMINAL_PVB_PHASES.has(p.phase) || !Number.isFinite(t)) complete = false;
      else last = last === undefined ? t : Math.max(last, t);
    }
    for (const r of b.hookRuns) {
      if (r.phase !== 'post') continue;
      const started = r.startedAt ? Date.parse(r.startedAt) : Number.NaN;
      const lastIso = complete && last !== undefined ? new Date(last).toISOString() : null;
      out.push({
        blockId: b.id,
        pod: r.pod,
        container: r.container,
        outcome: r.outcome,
        exitCode: r.exitCode ?? null,
        startedAt: r.startedAt ?? null,
        blockPvbs: pvbs.length,
        lastPvbCompletedAt: lastIso,
        lagMs: lastIso !== null && Number.isFinite(started) && last !== undefined ? started - last : null,
      });
    }
  }
  return out;
}

export function buildBackupReport(backup: Backup, blocks: readonly Block[]): BackupReport {
  const byPhase: Record<string, number> = {};
  const list: PvbSummary[] = [];
  let bytes = 0;
  const runs: HookRunSummary[] = [];
  for (const b of blocks) {
    for (const p of b.podVolumeBackups) {
      byPhase[p.phase] = (byPhase[p.phase] ?? 0) + 1;
      const done = p.phase === 'Completed' ? (p.totalBytes ?? p.bytesDone) : p.bytesDone;
      bytes += done ?? 0;
      list.push({
        name: p.name,
        blockId: b.id,
        pod: p.pod,
        node: p.node,
        volume: p.volume,
        phase: p.phase,
        bytesDone: done ?? null,
        totalBytes: p.totalBytes ?? null,
        durationMs: msBetween(p.startTimestamp, p.completionTimestamp) ?? null,
      });
    }
    for (const r of b.hookRuns) {
      runs.push({
        blockId: b.id,
        pod: r.pod,
        container: r.container,
        phase: r.phase,
        outcome: r.outcome,
        exitCode: r.exitCode ?? null,
        durationMs: hookDuration(r),
      });
    }
  }
  return {
    name: backup.name,
    phase: backup.phase,
    failureReason: backup.failureReason ?? null,
    durationMs: msBetween(backup.startedAt ?? backup.createdAt, backup.completedAt) ?? null,
    items: { total: backup.progress.totalItems, backedUp: backup.progress.itemsBackedUp },
    blocks: blocks.length,
    pvbs: { total: list.length, byPhase, bytes, list },
    hooks: { attempted: backup.hookStatus.hooksAttempted, failed: backup.hookStatus.hooksFailed, runs },
    postHookLags: postHookLags(blocks),
    errors: backup.errors,
    warnings: backup.warnings,
  };
}
