import { type KubernetesObject, Watch } from '@kubernetes/client-node';
import type { KubeClients } from './kube-clients.js';
import { KubeError, KubeErrorCodes, kubeErrorFromResponse, toKubeError } from './kube-errors.js';
import { listCollection } from './list-all.js';
import { computeBackoffMs } from './retry-policy.js';

export type InformerEventType = 'ADDED' | 'MODIFIED' | 'DELETED';

export interface InformerEvent<T> {
  type: InformerEventType;
  object: T;
}

export interface InformerOptions<T> {
  /** Collection path, e.g. `/api/v1/namespaces/ns1/pods`. */
  path: string;
  labelSelector?: string | undefined;
  fieldSelector?: string | undefined;
  /** Called once per change. Keep it quick; a throw or rejection is reported to onError and ignored. */
  onEvent: (event: InformerEvent<T>) => void | Promise<void>;
  /** Every list/watch failure (the informer keeps going); for logs and metrics. */
  onError?: ((err: KubeError) => void) | undefined;
  /** Full re-list even when the watch looks healthy. Default 5 min. */
  resyncIntervalMs?: number | undefined;
  /** Restart (re-list) when no event or bookmark arrived for this long. Default 2 min. */
  livenessTimeoutMs?: number | undefined;
  /** Backoff between failed attempts: full jitter from base, doubling, up to max. Default 500 ms / 30 s. */
  backoffBaseMs?: number | undefined;
  backoffMaxMs?: number | undefined;
  pageSize?: number | undefined;
}

export interface InformerStats {
  lists: number;
  watchesStarted: number;
  /** Watches that ended with an error (dropped connections, 429/5xx answers). */
  watchErrors: number;
  /** Watches the server closed cleanly. */
  watchCloses: number;
  /** Restarts because nothing arrived within livenessTimeoutMs. */
  livenessRestarts: number;
  /** Relists because the resourceVersion expired (410). */
  expiredRelists: number;
  events: number;
  /** Date.now() of the last event or bookmark. */
  lastActivityAt: number;
}

export interface Informer<T> {
  /** true once the first list is in the cache; false if stopped before that. */
  readonly synced: Promise<boolean>;
  readonly stats: InformerStats;
  /** The cached objects. */
  list(): T[];
  get(name: string, namespace?: string): T | undefined;
  /** Stops watching and waits for the loop to end. Safe to call twice. */
  stop(): Promise<void>;
}

type SessionEnd =
  | { reason: 'closed'; delivered: boolean; lastedMs: number }
  | { reason: 'error'; error: KubeError }
  | { reason: 'expired' }
  | { reason: 'stale' }
  | { reason: 'resync' }
  | { reason: 'stopped' };

interface WatchEventObject extends KubernetesObject {
  code?: number;
  reason?: string;
  message?: string;
}

function keyOf(obj: KubernetesObject): string {
  return `${obj.metadata?.namespace ?? ''}/${obj.metadata?.name ?? ''}`;
}

/**
 * List + watch that does not silently die: restarts after errors and closes with backoff and
 * jitter, re-lists on 410 and periodically, and treats a watch that stays quiet longer than
 * livenessTimeoutMs (no event, no bookmark) as dead. Re-lists are diffed against the cache, so a
 * restart emits only real changes (not an `update` for every object, client-node #301).
 * Built on client-node's Watch for the stream and this package's retrying list for the list.
 */
export function startInformer<T extends KubernetesObject>(kube: KubeClients, options: InformerOptions<T>): Informer<T> {
  const resyncIntervalMs = options.resyncIntervalMs ?? 5 * 60_000;
  const livenessTimeoutMs = options.livenessTimeoutMs ?? 2 * 60_000;
  const backoff = { baseDelayMs: options.backoffBaseMs ?? 500, maxDelayMs: options.backoffMaxMs ?? 30_000 };
  const stats: InformerStats = {
    lists: 0,
    watchesStarted: 0,
    watchErrors: 0,
    watchCloses: 0,
    livenessRestarts: 0,
    expiredRelists: 0,
    events: 0,
    lastActivityAt: Date.now(),
  };
  const cache = new Map<string, T>();
  let resourceVersion = '';
  let lastListAt = 0;
  let stopped = false;
  let wake: (() => void) | undefined;
  let endSession: ((end: SessionEnd) => void) | undefined;
  let resolveSynced: (synced: boolean) => void = () => undefined;
  const synced = new Promise<boolean>((resolve) => {
    resolveSynced = resolve;
  });

  const reportError = (err: unknown, context: string) => {
    const kubeErr = toKubeError(err, context);
    try {
      options.onError?.(kubeErr);
    } catch {
      // a logging callback must not stop the informer
    }
  };

  const emit = (type: InformerEventType, object: T) => {
    stats.events++;
    try {
      const pending = options.onEvent({ type, object });
      if (pending && typeof pending.then === 'function') pending.catch((err) => reportError(err, `informer ${options.path} onEvent`));
    } catch (err) {
      reportError(err, `informer ${options.path} onEvent`);
    }
  };

  const upsert = (object: T) => {
    const key = keyOf(object);
    const previous = cache.get(key);
    cache.set(key, object);
    if (!previous) emit('ADDED', object);
    else if (previous.metadata?.resourceVersion !== object.metadata?.resourceVersion) emit('MODIFIED', object);
  };

  const relist = async () => {
    stats.lists++;
    const fresh = new Map<string, T>();
    let listVersion = '';
    for await (const page of listCollection<T>(kube, {
      path: options.path,
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
      pageSize: options.pageSize,
    })) {
      for (const item of page.items) fresh.set(keyOf(item), item);
      // Watch from the first page's resourceVersion. An API server gives every page of one list
      // that same snapshot version; a server that serves later pages from newer state (the
      // simulator did) can leave out objects created between pages that sort before the cursor,
      // and only a watch from the first page's version replays those.
      if (listVersion === '') listVersion = page.resourceVersion;
    }
    if (stopped) return;
    for (const [key, previous] of cache) {
      if (!fresh.has(key)) {
        cache.delete(key);
        emit('DELETED', previous);
      }
    }
    for (const item of fresh.values()) upsert(item);
    resourceVersion = listVersion;
    lastListAt = Date.now();
    stats.lastActivityAt = lastListAt;
  };

  const watchOnce = (): Promise<SessionEnd> =>
    new Promise<SessionEnd>((resolve) => {
      const startedAt = Date.now();
      let done = false;
      let delivered = false;
      let controller: AbortController | undefined;
      let livenessTimer: NodeJS.Timeout | undefined;
      const finish = (end: SessionEnd) => {
        if (done) return;
        done = true;
        clearTimeout(livenessTimer);
        clearTimeout(resyncTimer);
        endSession = undefined;
        controller?.abort();
        resolve(end);
      };
      const armLiveness = () => {
        clearTimeout(livenessTimer);
        livenessTimer = setTimeout(() => finish({ reason: 'stale' }), livenessTimeoutMs);
      };
      const resyncTimer = setTimeout(() => finish({ reason: 'resync' }), Math.max(0, lastListAt + resyncIntervalMs - Date.now()));
      endSession = finish;
      armLiveness();
      stats.watchesStarted++;
      const query: Record<string, string | boolean> = { allowWatchBookmarks: true };
      if (resourceVersion) query.resourceVersion = resourceVersion;
      if (options.labelSelector) query.labelSelector = options.labelSelector;
      if (options.fieldSelector) query.fieldSelector = options.fieldSelector;
      new Watch(kube.kubeConfig)
        .watch(
          options.path,
          query,
          (type: string, object: WatchEventObject) => {
            if (done) return;
            armLiveness();
            stats.lastActivityAt = Date.now();
            switch (type) {
              case 'ADDED':
              case 'MODIFIED':
                delivered = true;
                upsert(object as T);
                break;
              case 'DELETED': {
                delivered = true;
                const key = keyOf(object);
                if (cache.delete(key)) emit('DELETED', object as T);
                break;
              }
              case 'BOOKMARK':
                break;
              case 'ERROR':
                if (object.code === 410) finish({ reason: 'expired' });
                else finish({ reason: 'error', error: kubeErrorFromResponse(object.code ?? 500, object, `watch ${options.path}`) });
                return;
              default:
                return;
            }
            const version = object.metadata?.resourceVersion;
            if (version) resourceVersion = version;
          },
          (err: unknown) => {
            if (!err) {
              finish({ reason: 'closed', delivered, lastedMs: Date.now() - startedAt });
              return;
            }
            const status = (err as { statusCode?: unknown }).statusCode;
            if (status === 410) finish({ reason: 'expired' });
            else if (typeof status === 'number')
              finish({ reason: 'error', error: kubeErrorFromResponse(status, '', `watch ${options.path}`, err) });
            else finish({ reason: 'error', error: toKubeError(err, `watch ${options.path}`) });
          },
        )
        .then(
          (abortController) => {
            controller = abortController;
            if (done) abortController.abort();
          },
          (err: unknown) => finish({ reason: 'error', error: toKubeError(err, `watch ${options.path}`) }),
        );
    });

  const pause = (ms: number) =>
    new Promise<void>((resolve) => {
      const timer = setTimeout(() => {
        wake = undefined;
        resolve();
      }, ms);
      wake = () => {
        clearTimeout(timer);
        wake = undefined;
        resolve();
      };
    });

  const loop = async () => {
    let failures = 0;
    let needList = true;
    while (!stopped) {
      if (needList) {
        try {
          await relist();
          needList = false;
          resolveSynced(true);
        } catch (err) {
          failures++;
          reportError(err, `informer list ${options.path}`);
        }
      }
      if (!needList && !stopped) {
        const end = await watchOnce();
        switch (end.reason) {
          case 'stopped':
            break;
          case 'closed':
            stats.watchCloses++;
            // A watch that closes at once, empty-handed, is a failure: back off (client-node #1933).
            failures = end.delivered || end.lastedMs > 1000 ? 0 : failures + 1;
            break;
          case 'error':
            stats.watchErrors++;
            failures++;
            // Re-list before the next watch (as client-go's reflector does): while watches keep
            // failing, lists still bring the cache up to date instead of it going stale until
            // the next resync (minutes).
            needList = true;
            reportError(end.error, `informer watch ${options.path}`);
            break;
          case 'expired':
            stats.expiredRelists++;
            needList = true;
            break;
          case 'stale':
            stats.livenessRestarts++;
            needList = true;
            reportError(
              new KubeError({ code: KubeErrorCodes.unavailable, message: `no event or bookmark for ${livenessTimeoutMs} ms; re-listing` }),
              `informer watch ${options.path}`,
            );
            break;
          case 'resync':
            needList = true;
            failures = 0;
            break;
        }
      }
      if (failures > 0 && !stopped) await pause(computeBackoffMs(failures - 1, backoff, kube.retry.deps.random));
    }
    resolveSynced(false);
  };

  const running = loop().catch((err) => reportError(err, `informer ${options.path}`));

  let stopping: Promise<void> | undefined;
  return {
    synced,
    stats,
    list: () => [...cache.values()],
    get: (name, namespace) => cache.get(`${namespace ?? ''}/${name}`),
    stop: () => {
      if (!stopping) {
        stopped = true;
        endSession?.({ reason: 'stopped' });
        wake?.();
        stopping = running.then(() => undefined);
      }
      return stopping;
    },
  };
}

export interface WatchPodsOptions extends Omit<InformerOptions<KubernetesObject>, 'path'> {
  /** All namespaces when omitted. */
  namespace?: string | undefined;
}

/** An informer on pods (raw JSON objects), e.g. with fieldSelector `spec.nodeName=<node>`. */
export function watchPods(kube: KubeClients, options: WatchPodsOptions): Informer<KubernetesObject> {
  const path = options.namespace ? `/api/v1/namespaces/${encodeURIComponent(options.namespace)}/pods` : '/api/v1/pods';
  return startInformer(kube, { ...options, path });
}
