/**
 * The raw store: objects by storage key, namespace and name; one global, monotonic resourceVersion;
 * a bounded history of change events for watch resumption; live watch subscribers.
 * Stored objects are never mutated in place: every write replaces the object, so readers may hold
 * references (and serialise them) without copying.
 */
import type { KubeObject } from './kube-object.js';

export type ChangeType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface ChangeEvent {
  rv: number;
  type: ChangeType;
  key: string;
  namespace: string;
  object: KubeObject;
  /** The object before this change (MODIFIED/DELETED), for selector transitions. */
  previous?: KubeObject;
}

export type ChangeListener = (event: ChangeEvent) => void;

interface Bucket {
  namespaces: Map<string, Map<string, KubeObject>>;
  /** `namespace/name` keys in list order, rebuilt lazily after adds and removals. */
  sortedKeys: string[] | null;
}

export class ObjectStore {
  private currentRv = 0;
  private readonly buckets = new Map<string, Bucket>();
  private history: ChangeEvent[] = [];
  private historyStart = 0;
  /** Highest RV whose event is no longer in history: watches from below it get 410. */
  private compactedRv = 0;
  private readonly listeners = new Map<string, Set<ChangeListener>>();
  /** Serial of the last change per bucket (any put or remove, recorded or not), for caches derived from a bucket. */
  private readonly lastChange = new Map<string, number>();
  private changeSerial = 0;
  private clearedAt = 0;

  constructor(private readonly historyLimit: number) {}

  get resourceVersion(): number {
    return this.currentRv;
  }

  get oldestResumableRv(): number {
    return this.compactedRv;
  }

  nextRv(): number {
    this.currentRv += 1;
    return this.currentRv;
  }

  private bucket(key: string): Bucket {
    let bucket = this.buckets.get(key);
    if (!bucket) {
      bucket = { namespaces: new Map(), sortedKeys: null };
      this.buckets.set(key, bucket);
    }
    return bucket;
  }

  /** A number that changes whenever anything in bucket `key` changes (also on clear). */
  generation(key: string): number {
    return Math.max(this.lastChange.get(key) ?? 0, this.clearedAt);
  }

  private changed(key: string): void {
    this.lastChange.set(key, ++this.changeSerial);
  }

  get(key: string, namespace: string, name: string): KubeObject | undefined {
    return this.buckets.get(key)?.namespaces.get(namespace)?.get(name);
  }

  count(key: string, namespace?: string): number {
    const bucket = this.buckets.get(key);
    if (!bucket) return 0;
    if (namespace !== undefined) return bucket.namespaces.get(namespace)?.size ?? 0;
    let total = 0;
    for (const objects of bucket.namespaces.values()) total += objects.size;
    return total;
  }

  /** Objects of one namespace (or all, when undefined) in stable (namespace, name) order. */
  *list(key: string, namespace: string | undefined, afterKey?: string): Generator<KubeObject> {
    const bucket = this.buckets.get(key);
    if (!bucket) return;
    if (namespace !== undefined) {
      const objects = bucket.namespaces.get(namespace);
      if (!objects) return;
      const names = [...objects.keys()].sort();
      const afterName = afterKey?.startsWith(`${namespace}/`) ? afterKey.slice(namespace.length + 1) : undefined;
      let index = afterName === undefined ? 0 : upperBound(names, afterName);
      for (; index < names.length; index++) {
        const object = objects.get(names[index]!);
        if (object) yield object;
      }
      return;
    }
    const keys = this.sortedKeysOf(bucket);
    for (let index = afterKey === undefined ? 0 : upperBound(keys, afterKey); index < keys.length; index++) {
      const entry = keys[index]!;
      const slash = entry.indexOf('/');
      const object = bucket.namespaces.get(entry.slice(0, slash))?.get(entry.slice(slash + 1));
      if (object) yield object;
    }
  }

  /**
   * Objects as they were at `atRv` (for the pages of one list: a continue token pins its first
   * page's snapshot, as the API server does), in the same order as `list`; undefined when history
   * after `atRv` has been compacted and that state can no longer be rebuilt.
   */
  listAt(key: string, namespace: string | undefined, atRv: number, afterKey?: string): Generator<KubeObject> | undefined {
    const then = this.changedSince(key, namespace, atRv);
    if (!then) return undefined;
    if (then.size === 0) return this.list(key, namespace, afterKey);
    return this.mergeSnapshot(this.list(key, namespace, afterKey), then, afterKey);
  }

  /**
   * How many objects `listAt` yields after `afterKey`, counted without walking them (a list's
   * remainingItemCount: walking the rest of a 100k-pod list for each of its 200 pages kept the
   * simulator busy for seconds per list and everything else waiting). Undefined as for listAt.
   */
  countAt(key: string, namespace: string | undefined, atRv: number, afterKey?: string): number | undefined {
    const then = this.changedSince(key, namespace, atRv);
    if (!then) return undefined;
    let count = this.countAfter(key, namespace, afterKey);
    for (const [entry, was] of then) {
      if (afterKey !== undefined && entry <= afterKey) continue;
      const slash = entry.indexOf('/');
      const now = this.get(key, entry.slice(0, slash), entry.slice(slash + 1));
      count += (was ? 1 : 0) - (now ? 1 : 0);
    }
    return count;
  }

  /** Entries (`namespace/name`) changed after `atRv`, each with what it was at `atRv` (null: absent); undefined once compacted. */
  private changedSince(key: string, namespace: string | undefined, atRv: number): Map<string, KubeObject | null> | undefined {
    const then = new Map<string, KubeObject | null>();
    if (atRv >= this.currentRv) return then;
    const later = this.eventsSince(key, atRv);
    if (!later) return undefined;
    // The oldest change after atRv says what the object was at atRv: absent (ADDED) or `previous`.
    for (const event of later) {
      if (namespace !== undefined && event.namespace !== namespace) continue;
      const entry = `${event.namespace}/${event.object.metadata.name}`;
      if (!then.has(entry)) then.set(entry, event.type === 'ADDED' ? null : (event.previous ?? null));
    }
    return then;
  }

  /** Objects stored now after `afterKey`, in the order of `list`. */
  private countAfter(key: string, namespace: string | undefined, afterKey: string | undefined): number {
    const bucket = this.buckets.get(key);
    if (!bucket) return 0;
    if (namespace !== undefined) {
      const objects = bucket.namespaces.get(namespace);
      if (!objects) return 0;
      const afterName = afterKey?.startsWith(`${namespace}/`) ? afterKey.slice(namespace.length + 1) : undefined;
      return afterName === undefined ? objects.size : objects.size - upperBound([...objects.keys()].sort(), afterName);
    }
    const keys = this.sortedKeysOf(bucket);
    return keys.length - (afterKey === undefined ? 0 : upperBound(keys, afterKey));
  }

  private sortedKeysOf(bucket: Bucket): string[] {
    if (!bucket.sortedKeys) {
      const keys: string[] = [];
      for (const [ns, objects] of bucket.namespaces) for (const name of objects.keys()) keys.push(`${ns}/${name}`);
      keys.sort();
      bucket.sortedKeys = keys;
    }
    return bucket.sortedKeys;
  }

  private *mergeSnapshot(current: Iterable<KubeObject>, then: Map<string, KubeObject | null>, afterKey: string | undefined) {
    const restored = [...then]
      .filter((pair): pair is [string, KubeObject] => pair[1] !== null && (afterKey === undefined || pair[0] > afterKey))
      .sort(([a], [b]) => (a < b ? -1 : a > b ? 1 : 0));
    let next = 0;
    for (const object of current) {
      const entry = `${object.metadata.namespace ?? ''}/${object.metadata.name}`;
      while (next < restored.length && restored[next]![0] < entry) yield restored[next++]![1];
      if (then.has(entry)) {
        if (next < restored.length && restored[next]![0] === entry) yield restored[next++]![1];
        continue;
      }
      yield object;
    }
    while (next < restored.length) yield restored[next++]![1];
  }

  keys(): string[] {
    return [...this.buckets.keys()];
  }

  namespacesOf(key: string): string[] {
    return [...(this.buckets.get(key)?.namespaces.keys() ?? [])];
  }

  /** Stores `object` (whose metadata.resourceVersion the caller set from nextRv) and records the event. */
  put(key: string, object: KubeObject, options: { record: boolean } = { record: true }): ChangeEvent {
    const namespace = object.metadata.namespace ?? '';
    const name = object.metadata.name!;
    const bucket = this.bucket(key);
    let objects = bucket.namespaces.get(namespace);
    if (!objects) {
      objects = new Map();
      bucket.namespaces.set(namespace, objects);
    }
    const previous = objects.get(name);
    if (!previous) bucket.sortedKeys = null;
    objects.set(name, object);
    this.changed(key);
    const event: ChangeEvent = {
      rv: Number(object.metadata.resourceVersion),
      type: previous ? 'MODIFIED' : 'ADDED',
      key,
      namespace,
      object,
    };
    if (previous) event.previous = previous;
    if (options.record) this.record(event);
    return event;
  }

  /** Removes an object; `finalState` (carrying the deletion RV) is what DELETED watchers see. */
  remove(key: string, finalState: KubeObject, options: { record: boolean } = { record: true }): ChangeEvent | undefined {
    const namespace = finalState.metadata.namespace ?? '';
    const name = finalState.metadata.name!;
    const bucket = this.buckets.get(key);
    const objects = bucket?.namespaces.get(namespace);
    const previous = objects?.get(name);
    if (!bucket || !objects || !previous) return undefined;
    objects.delete(name);
    this.changed(key);
    if (objects.size === 0) bucket.namespaces.delete(namespace);
    bucket.sortedKeys = null;
    const event: ChangeEvent = {
      rv: Number(finalState.metadata.resourceVersion),
      type: 'DELETED',
      key,
      namespace,
      object: finalState,
      previous,
    };
    if (options.record) this.record(event);
    return event;
  }

  dropBucket(key: string): void {
    this.buckets.delete(key);
    this.changed(key);
  }

  /** Forgets every object and all history; RVs keep counting up so clients never see one go backwards. */
  clear(): void {
    this.buckets.clear();
    this.clearedAt = ++this.changeSerial;
    this.history = [];
    this.historyStart = 0;
    this.compactedRv = this.currentRv;
  }

  /** Marks the current RV as the oldest a watch may resume from (after a bulk load). */
  compactHistory(): void {
    this.history = [];
    this.historyStart = 0;
    this.compactedRv = this.currentRv;
  }

  private record(event: ChangeEvent): void {
    this.history.push(event);
    if (this.history.length - this.historyStart > this.historyLimit) {
      const dropped = this.history[this.historyStart]!;
      this.compactedRv = dropped.rv;
      this.historyStart += 1;
      // Compact the array now and then instead of shifting on every event.
      if (this.historyStart > this.historyLimit) {
        this.history = this.history.slice(this.historyStart);
        this.historyStart = 0;
      }
    }
    const listeners = this.listeners.get(event.key);
    if (listeners) for (const listener of [...listeners]) listener(event);
  }

  /** Events of `key` with rv > sinceRv; undefined when that part of history has been compacted. */
  eventsSince(key: string, sinceRv: number): ChangeEvent[] | undefined {
    if (sinceRv < this.compactedRv) return undefined;
    const events: ChangeEvent[] = [];
    for (let i = this.historyStart; i < this.history.length; i++) {
      const event = this.history[i]!;
      if (event.rv > sinceRv && event.key === key) events.push(event);
    }
    return events;
  }

  subscribe(key: string, listener: ChangeListener): () => void {
    let listeners = this.listeners.get(key);
    if (!listeners) {
      listeners = new Set();
      this.listeners.set(key, listeners);
    }
    listeners.add(listener);
    return () => {
      listeners.delete(listener);
    };
  }
}

/** Index of the first element greater than `value` in a sorted array. */
function upperBound(sorted: string[], value: string): number {
  let low = 0;
  let high = sorted.length;
  while (low < high) {
    const mid = (low + high) >> 1;
    if (sorted[mid]! <= value) low = mid + 1;
    else high = mid;
  }
  return low;
}
