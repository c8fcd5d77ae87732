import type { Informer, PodVolumeBackup, PvbClient } from '@stowage/kube';

export interface TestPvbControllerOptions {
  pvbs: PvbClient;
  /** How long a PVB stays InProgress (per PVB). Default 200 ms. */
  durationMs?: number | ((pvb: PodVolumeBackup) => number);
  /** PVBs for which this returns a message end Failed with it. */
  failWith?: (pvb: PodVolumeBackup) => string | undefined;
  /** At most this many PVBs InProgress per node (a node agent's loadConcurrency). Default 1. */
  perNodeConcurrency?: number;
  /** Bytes reported per PVB. Default 1024. */
  totalBytes?: number;
  /** Ignore spec.cancel (a stuck agent). Default false. */
  ignoreCancel?: boolean;
}

/**
 * Stands in for the node agent in pipeline tests: watches PVBs and moves each New → InProgress →
 * Completed (or Failed) after a delay, at most `perNodeConcurrency` per node, and honours
 * `spec.cancel` (→ Canceled). It writes status through the PVB client, like an agent would.
 */
export class TestPvbController {
  private informer: Informer<PodVolumeBackup> | undefined;
  private readonly queued = new Map<string, string[]>(); // node → PVB names waiting
  private readonly running = new Map<string, Set<string>>(); // node → PVB names InProgress
  private readonly timers = new Map<string, NodeJS.Timeout>();
  private readonly seen = new Set<string>();
  private stopped = false;
  private sweepTimer: NodeJS.Timeout | undefined;
  readonly errors: string[] = [];

  constructor(private readonly opts: TestPvbControllerOptions) {}

  async start(): Promise<void> {
    this.informer = this.opts.pvbs.watchPvbs({
      onEvent: (event) => {
        if (event.type !== 'DELETED') this.onPvb(event.object);
      },
      onError: (err) => this.errors.push(err.message),
    });
    await this.informer.synced;
    // Like an agent's resync: anything not terminal and not in hand is picked up again, so a
    // missed event or a failed status write never strands a PVB.
    // A real LIST every 5th sweep: watch events can be lost (seen under a 10k create burst), and
    // an agent must not strand a PVB until its informer's next resync.
    let tick = 0;
    this.sweepTimer = setInterval(() => {
      tick++;
      const fromCache = this.informer?.list() ?? [];
      const sweep = (pvbs: PodVolumeBackup[]) => {
        for (const pvb of pvbs) {
          const name = pvb.metadata.name;
          if (this.stopped || this.isInHand(pvb.spec.node, name)) continue;
          this.seen.delete(name);
          this.onPvb(pvb);
        }
      };
      sweep(fromCache);
      if (tick % 5 === 0) {
        this.opts.pvbs.listPvbs().then(sweep, (err: Error) => this.errors.push(`list: ${err.message}`));
      }
    }, 2_000);
  }

  private isInHand(node: string, name: string): boolean {
    return this.running.get(node)?.has(name) === true || (this.queued.get(node) ?? []).includes(name);
  }

  async stop(): Promise<void> {
    this.stopped = true;
    clearInterval(this.sweepTimer);
    for (const timer of this.timers.values()) clearTimeout(timer);
    this.timers.clear();
    await this.informer?.stop();
  }

  private onPvb(pvb: PodVolumeBackup): void {
    if (this.stopped) return;
    const name = pvb.metadata.name;
    const phase = pvb.status?.phase;
    const node = pvb.spec.node;
    if (phase === 'Completed' || phase === 'Failed' || phase === 'Canceled') return;
    if (pvb.spec.cancel && !this.opts.ignoreCancel) {
      this.cancel(pvb);
      return;
    }
    // New, or InProgress but not ours (a status write that failed half-way): (re)run it.
    if (
      (phase === undefined || phase === 'New' || (phase === 'InProgress' && !this.timers.has(name))) &&
      !this.seen.has(name) &&
      !this.isInHand(node, name)
    ) {
      this.seen.add(name);
      this.queued.set(node, [...(this.queued.get(node) ?? []), name]);
      this.pump(node);
    }
  }

  private pump(node: string): void {
    const limit = this.opts.perNodeConcurrency ?? 1;
    const running = this.running.get(node) ?? new Set();
    this.running.set(node, running);
    const queue = this.queued.get(node) ?? [];
    while (running.size < limit && queue.length > 0) {
      const name = queue.shift() as string;
      running.add(name);
      void this.run(node, name);
    }
  }

  private async run(node: string, name: string): Promise<void> {
    try {
      const pvb = await this.opts.pvbs.getPvb(name);
      if (!pvb || this.stopped) return this.release(node, name);
      const phase = pvb.status?.phase;
      if (phase === 'Completed' || phase === 'Failed' || phase === 'Canceled') return this.release(node, name);
      if (pvb.spec.cancel && !this.opts.ignoreCancel) return this.cancel(pvb);
      const totalBytes = this.opts.totalBytes ?? 1024;
      await this.opts.pvbs.patchPvbStatus(name, {
        phase: 'InProgress',
        startTimestamp: new Date().toISOString(),
        progress: { totalBytes, bytesDone: 0 },
      });
      const duration = typeof this.opts.durationMs === 'function' ? this.opts.durationMs(pvb) : (this.opts.durationMs ?? 200);
      this.timers.set(
        name,
        setTimeout(() => {
          this.timers.delete(name);
          void this.finish(node, pvb, totalBytes);
        }, duration),
      );
    } catch (err) {
      // Left to the sweep, which picks it up again.
      this.errors.push(`${name}: ${(err as Error).message}`);
      this.seen.delete(name);
      this.release(node, name);
    }
  }

  private async finish(node: string, pvb: PodVolumeBackup, totalBytes: number): Promise<void> {
    const name = pvb.metadata.name;
    try {
      if (this.stopped) return;
      const failure = this.opts.failWith?.(pvb);
      await this.opts.pvbs.patchPvbStatus(
        name,
        failure
          ? { phase: 'Failed', message: failure, completionTimestamp: new Date().toISOString() }
          : {
              phase: 'Completed',
              completionTimestamp: new Date().toISOString(),
              snapshotID: `snap-${name}`,
              path: `/pods/${pvb.spec.pod.uid}/volumes/${pvb.spec.volume}`,
              progress: { totalBytes, bytesDone: totalBytes },
            },
      );
    } catch (err) {
      this.errors.push(`${name}: ${(err as Error).message}`);
      this.seen.delete(name);
    } finally {
      this.release(node, name);
    }
  }

  private cancel(pvb: PodVolumeBackup): void {
    const name = pvb.metadata.name;
    const timer = this.timers.get(name);
    if (timer) clearTimeout(timer);
    this.timers.delete(name);
    void this.opts.pvbs
      .patchPvbStatus(name, { phase: 'Canceled', message: 'canceled on request', completionTimestamp: new Date().toISOString() })
      .catch((err: Error) => this.errors.push(`${name}: ${err.message}`))
      .finally(() => this.release(pvb.spec.node, name));
  }

  private release(node: string, name: string): void {
    const running = this.running.get(node);
    if (running?.delete(name)) this.pump(node);
  }
}
