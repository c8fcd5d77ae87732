/*
 * Kubernetes Events of the stowage.dev controllers, recorded the way kube's own recorder does
 * (client-go's EventCorrelator): the same event again — same involved object, type and reason —
 * does not make a new Event but bumps the one recorded before (`count`, `lastTimestamp`, the latest
 * message), so `kubectl describe` shows "x5 over 3m" instead of five rows. Which Event stands for
 * which key is kept in memory, bounded: a new leader, or an Event the API server has expired (its
 * TTL, one hour by default), starts a new one, as kube's recorder does after a restart.
 */
import { isKubeError, type KubeClients } from '@stowage/kube';

/** The object an Event is about (core/v1 ObjectReference). */
export interface InvolvedObject {
  apiVersion: string;
  kind: string;
  name: string;
  uid: string;
  namespace?: string | undefined;
}

export interface EventRecorderDeps {
  kube: Pick<KubeClients, 'requestJson'>;
  logger: { warn(obj: object, msg?: string): void };
  /** `source.component` of every Event. */
  component: string;
  now?: () => number;
  /** Events remembered for correlation (least recently recorded forgotten first); default 4096. */
  maxRemembered?: number;
}

interface Recorded {
  namespace: string;
  name: string;
  count: number;
}

/** A reason as Kubernetes writes one: UpperCamelCase, no spaces. */
const reasonOf = (reason: string): string => reason.replace(/[^A-Za-z0-9]/g, '') || 'Unknown';

/** Longest message kept (kube-apiserver refuses an Event message over 1 KiB in events.k8s.io/v1 terms). */
const MESSAGE_MAX = 1024;

export class EventRecorder {
  private readonly recorded = new Map<string, Recorded>();
  private readonly max: number;

  constructor(private readonly deps: EventRecorderDeps) {
    this.max = deps.maxRemembered ?? 4096;
  }

  /**
   * Records an Event in `namespace` about `involved`: a new one, or the one recorded before for the
   * same object, type and reason, its count bumped. A failure is logged, never thrown: an Event is
   * a report, and the reconcile that made it goes on.
   */
  async record(namespace: string, involved: InvolvedObject, type: 'Normal' | 'Warning', reason: string, message: string): Promise<void> {
    const at = new Date((this.deps.now ?? Date.now)()).toISOString();
    const key = JSON.stringify([
      namespace,
      involved.apiVersion,
      involved.kind,
      involved.namespace ?? '',
      involved.name,
      involved.uid,
      type,
      reasonOf(reason),
    ]);
    const text = message.slice(0, MESSAGE_MAX);
    try {
      const before = this.recorded.get(key);
      if (before && (await this.bump(before, at, text))) {
        this.remember(key, { ...before, count: before.count + 1 });
        return;
      }
      const created = await this.deps.kube.requestJson<{ metadata?: { name?: string } }>({
        method: 'POST',
        path: `/api/v1/namespaces/${namespace}/events`,
        body: {
          apiVersion: 'v1',
          kind: 'Event',
          metadata: { generateName: `${involved.name}.`, namespace },
          involvedObject: {
            apiVersion: involved.apiVersion,
            kind: involved.kind,
            name: involved.name,
            uid: involved.uid,
            ...(involved.namespace ? { namespace: involved.namespace } : {}),
          },
          reason: reasonOf(reason),
          message: text,
          type,
          source: { component: this.deps.component },
          firstTimestamp: at,
          lastTimestamp: at,
          count: 1,
        },
        description: 'record an Event',
      });
      const name = created?.metadata?.name;
      if (name) this.remember(key, { namespace, name, count: 1 });
    } catch (err) {
      this.deps.logger.warn({ err, reason: reasonOf(reason), object: involved.name }, 'recording an Event failed');
    }
  }

  /** Patches count, lastTimestamp and message of an Event recorded before; false when it is gone (expired, deleted). */
  private async bump(before: Recorded, at: string, message: string): Promise<boolean> {
    try {
      await this.deps.kube.requestJson({
        method: 'PATCH',
        path: `/api/v1/namespaces/${before.namespace}/events/${before.name}`,
        body: { count: before.count + 1, lastTimestamp: at, message },
        contentType: 'application/merge-patch+json',
        description: 'bump a recorded Event',
      });
      return true;
    } catch (err) {
      if (isKubeError(err) && err.status === 404) return false;
      throw err;
    }
  }

  private remember(key: string, value: Recorded): void {
    this.recorded.delete(key);
    this.recorded.set(key, value);
    while (this.recorded.size > this.max) {
      const oldest = this.recorded.keys().next().value;
      if (oldest === undefined) break;
      this.recorded.delete(oldest);
    }
  }
}
