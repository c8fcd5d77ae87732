import type { Informer, InformerOptions } from '@stowage/kube';
import { promoteParked } from '@stowage/queue';
import type { Queue } from 'bullmq';
import type { PipelineLogger } from '../deps.js';

/**
 * What a hub watches, and which parked job each object's change may release: PodVolumeBackups
 * (a block's post-hooks job), PodVolumeRestores (a restored pod's restore-hooks job), restored
 * pods (restore-hooks jobs).
 */
export interface PromotingSource<T> {
  /** For log lines: `PVB`, `PVR`, `restored pod`. */
  label: string;
  /** Where the objects live when they all live in one namespace (Stowage's, for PVBs and PVRs). */
  namespace?: string | undefined;
  watch(options: Omit<InformerOptions<T>, 'path'>): Informer<T>;
  nameOf(object: T): string;
  /**
   * The object is in the state its parked job waits for (a volume operation ended, a container
   * runs). `cached` reads the hub's cache (for a job that waits on several objects).
   */
  shouldPromote(object: T, cached: (name: string) => T | undefined): boolean;
  /** Sees every event first (e.g. to index objects by the job they name). */
  observe?(type: 'ADDED' | 'MODIFIED' | 'DELETED', object: T): void;
  /** The id of the job waiting for this object, or undefined when the object names none. */
  jobIdOf(object: T): string | undefined;
  /** The job's name (the id alone is enough to promote; the name is BullMQ's formality). */
  jobName: string;
}

/**
 * For a job that waits on a group of objects (a block's post-hooks job on the block's PVBs, a
 * restored pod's restore-hooks job on the pod's PVRs): `observe` indexes the objects by the group
 * they name, and `shouldPromote` holds when one ends and every object of its group in the cache
 * has ended too — one promotion per group, not one per object. An object not in the cache yet
 * only makes the job look early and re-park. Objects that name no group promote nothing.
 */
export function groupPromotion<T>(opts: {
  nameOf(object: T): string;
  /** The group's key (it must identify the waiting job), or undefined. */
  groupOf(object: T): string | undefined;
  hasEnded(object: T): boolean;
}): Pick<PromotingSource<T>, 'observe' | 'shouldPromote'> {
  const members = new Map<string, Set<string>>();
  return {
    observe(type, object) {
      const key = opts.groupOf(object);
      if (!key) return;
      const name = opts.nameOf(object);
      const names = members.get(key);
      if (type === 'DELETED') {
        names?.delete(name);
        if (names?.size === 0) members.delete(key);
      } else if (names) names.add(name);
      else members.set(key, new Set([name]));
    },
    shouldPromote(object, cached) {
      if (!opts.hasEnded(object)) return false;
      const key = opts.groupOf(object);
      if (!key) return false;
      const self = opts.nameOf(object);
      for (const name of members.get(key) ?? []) {
        const other = name === self ? object : cached(name);
        if (!other || !opts.hasEnded(other)) return false;
      }
      return true;
    },
  };
}

export interface PromotingInformerHubOptions<T> {
  source: PromotingSource<T>;
  /** The queue holding the parked jobs: delayed ones are promoted here. Omit to only cache. */
  jobQueue?: Queue | undefined;
  logger: PipelineLogger;
  /** The cache counts as healthy only if no watch error was reported for this long. Default 10 s. */
  quietAfterErrorMs?: number;
  now?: () => number;
}

/**
 * "Watch, park, promote": one informer per worker process and kind of object. It keeps a cache
 * (so parked jobs read O(1) from memory instead of the API server) and, the moment an object
 * reaches the state its job waits for, promotes that delayed job, so what waits on it (post
 * hooks, restore hooks) follows within milliseconds. Polling stays the source of truth: the
 * cache is used only while healthy, and jobs still GET now and then.
 */
export class PromotingInformerHub<T> {
  private informer: Informer<T> | undefined;
  private isSynced = false;
  private lastErrorAt = 0;
  private readonly waiters = new Map<string, Set<() => void>>();
  private readonly quietAfterErrorMs: number;
  private readonly now: () => number;
  /** Promotions that found a delayed job and moved it (for tests and metrics). */
  promotions = 0;

  constructor(private readonly opts: PromotingInformerHubOptions<T>) {
    this.quietAfterErrorMs = opts.quietAfterErrorMs ?? 10_000;
    this.now = opts.now ?? Date.now;
  }

  start(): void {
    if (this.informer) return;
    const { source } = this.opts;
    const informer = source.watch({
      onEvent: (event) => {
        source.observe?.(event.type, event.object);
        if (event.type === 'DELETED') return;
        this.notify(source.nameOf(event.object));
        // Objects of the first list are old news; the pollers pick those up themselves.
        if (this.isSynced && source.shouldPromote(event.object, this.fromCache)) void this.promote(event.object);
      },
      onError: (err) => {
        this.lastErrorAt = this.now();
        this.opts.logger.warn({ err, code: err.code }, `${source.label} informer error (parked jobs fall back to GET)`);
      },
      livenessTimeoutMs: 60_000,
    });
    this.informer = informer;
    void informer.synced.then((ok) => {
      this.isSynced = ok;
    });
  }

  /** The cached object, or undefined when the cache cannot be trusted right now (not synced, recent error). */
  cached(name: string, namespace: string | undefined = this.opts.source.namespace): T | undefined {
    if (!this.healthy()) return undefined;
    return this.informer?.get(name, namespace);
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
   * Promotes the object's job if the cache already shows the state it waits for (`isDue`, by
   * default the source's). For a job just parked: a change that came while it was running (or
   * before it existed) was promoted to nobody.
   */
  async promoteIfDue(name: string, namespace?: string, isDue?: (object: T) => boolean): Promise<void> {
    const object = this.cached(name, namespace);
    if (object && (isDue ? isDue(object) : this.opts.source.shouldPromote(object, this.fromCache))) await this.promote(object);
  }

  private readonly fromCache = (name: string): T | undefined => this.cached(name);

  /**
   * One attempt: a job that is not parked right now was promoted by another worker's informer, is
   * done, is waiting for its children, or is running a look — which promotes it itself once
   * parked if it missed this change (promoteIfDue). So there is nothing to retry.
   */
  private async promote(object: T): Promise<void> {
    const queue = this.opts.jobQueue;
    const jobId = this.opts.source.jobIdOf(object);
    if (!queue || !jobId) return;
    try {
      if (await promoteParked(queue, this.opts.source.jobName, jobId)) this.promotions++;
    } catch (err) {
      this.opts.logger.warn({ err, jobId }, `could not promote the job of a ${this.opts.source.label}`);
    }
  }
}
