import { pvbWatchJobId } from '@stowage/core';
import { type Informer, isPvbTerminal, type PodVolumeBackup, type PvbClient, pvbLabels } from '@stowage/kube';
import { JobName } from '@stowage/queue';
import { Job, type Queue } from 'bullmq';
import type { PipelineLogger } from '../deps.js';

export interface PvbInformerHubOptions {
  pvbs: PvbClient;
  /** The pvb-watch queue: delayed watch jobs are promoted here. Omit to only cache. */
  watchQueue?: Queue | undefined;
  logger: PipelineLogger;
  /** The cache counts as healthy only if no watch error was reported for this long. Default 10 s. */
  quietAfterErrorMs?: number;
  now?: () => number;
}

/**
 * One PVB informer per worker process. It keeps a cache of the namespace's PVBs (so pvb-watch
 * jobs read O(1) from memory instead of the API server) and, the moment a PVB turns terminal,
 * promotes its delayed pvb-watch job so the post hooks follow within milliseconds. Polling stays
 * the source of truth: the cache is used only while healthy, and jobs still GET periodically.
 */
export class PvbInformerHub {
  private informer: Informer<PodVolumeBackup> | undefined;
  private isSynced = false;
  private lastErrorAt = 0;
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly quietAfterErrorMs: number;
  private readonly now: () => number;
  /** Promotions that found a delayed job and moved it (for tests and metrics). */
  promotions = 0;

  constructor(private readonly opts: PvbInformerHubOptions) {
    this.quietAfterErrorMs = opts.quietAfterErrorMs ?? 10_000;
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    if (this.informer) return;
    const informer = this.opts.pvbs.watchPvbs({
      onEvent: (event) => {
        if (event.type === 'DELETED') return;
        this.notify(event.object.metadata.name);
        // Objects of the first list are old news; the pollers pick those up themselves.
        if (this.isSynced && isPvbTerminal(event.object)) void this.promote(event.object);
      },
      onError: (err) => {
        this.lastErrorAt = this.now();
        this.opts.logger.warn({ err: err.message, code: err.code }, 'PVB informer error (pvb-watch falls back to GET)');
      },
      livenessTimeoutMs: 60_000,
    });
    this.informer = informer;
    void informer.synced.then((ok) => {
      this.isSynced = ok;
    });
  }

  /** The cached PVB, or undefined when the cache cannot be trusted right now (not synced, recent error). */
  cached(name: string): PodVolumeBackup | undefined {
    if (!this.healthy()) return undefined;
    return this.informer?.get(name, this.opts.pvbs.namespace);
  }

  healthy(): boolean {
    return this.informer !== undefined && this.isSynced && this.now() - this.lastErrorAt > this.quietAfterErrorMs;
  }

  /** Resolves on the next event for `name` or after `timeoutMs` (inline mode waits with this). */
  waitForChange(name: string, timeoutMs: number): Promise<void> {
    return new Promise<void>((resolve) => {
      const set = this.waiters.get(name) ?? new Set();
      this.waiters.set(name, set);
      const done = () => {
        clearTimeout(timer);
        set.delete(done);
        if (set.size === 0) this.waiters.delete(name);
        resolve();
      };
      const timer = setTimeout(done, timeoutMs);
      set.add(done);
    });
  }

  async stop(): Promise<void> {
    const informer = this.informer;
    this.informer = undefined;
    this.isSynced = false;
    for (const set of this.waiters.values()) for (const wake of [...set]) wake();
    await informer?.stop();
  }

  private notify(name: string): void {
    const set = this.waiters.get(name);
    if (set) for (const wake of [...set]) wake();
  }

  /**
   * Promotes the PVB's pvb-watch job if the cache already shows the PVB terminal. For a watch job
   * added parked: a PVB that ended before its job existed sent its event to nobody.
   */
  async promoteIfTerminal(name: string): Promise<void> {
    const pvb = this.cached(name);
    if (pvb && isPvbTerminal(pvb)) await this.promote(pvb);
  }

  /**
   * One attempt: a job that is not parked right now was promoted by another worker's informer, is
   * done, or is running a look — which promotes it itself once parked if it missed this end (see
   * processPvbWatch). So there is nothing to retry.
   */
  private async promote(pvb: PodVolumeBackup): Promise<void> {
    const queue = this.opts.watchQueue;
    const backupName = pvb.metadata.labels?.[pvbLabels.backupName] ?? pvb.spec.tags?.backup;
    if (!queue || !backupName) return;
    const jobId = pvbWatchJobId(backupName, pvb.metadata.name);
    // Promote by id (the script checks the job is delayed): no read of the job before it.
    try {
      await new Job(queue, JobName.watchPvb, {}, {}, jobId).promote();
      this.promotions++;
    } catch (err) {
      const message = String((err as Error)?.message);
      // "not in the delayed state" / "Missing key": waiting, running, done or not added yet.
      if (!/not in the delayed state|missing key/i.test(message)) {
        this.opts.logger.warn({ err: message, jobId }, 'could not promote pvb-watch job');
      }
    }
  }
}
