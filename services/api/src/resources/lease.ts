/*
 * One controller at a time across api replicas: a coordination.k8s.io/v1 Lease, taken when absent
 * or expired (its renewTime + leaseDurationSeconds has passed) and renewed while held. Writes carry
 * the resourceVersion read, so two replicas racing for an expired lease cannot both win (the API
 * server answers one of them 409). A leader that cannot renew within the lease stops leading.
 */
import { isKubeError, type KubeClients } from '@stowage/kube';

export interface LeaderElectionOptions {
  kube: Pick<KubeClients, 'requestJson'>;
  namespace: string;
  name: string;
  /** This replica's identity (pod name + random suffix). */
  identity: string;
  /** How long a lease is good for without a renewal; default 15 s. */
  leaseDurationMs?: number;
  /** How often the leader renews and followers try; default 2 s. */
  retryEveryMs?: number;
  now?: () => number;
  onError?: (err: unknown) => void;
}

export interface LeaderElection {
  isLeader(): boolean;
  /** Stops trying; a held lease is left to expire (another replica takes it after leaseDurationMs). */
  stop(): Promise<void>;
}

interface LeaseJson {
  metadata?: { resourceVersion?: string };
  spec?: { holderIdentity?: string; leaseDurationSeconds?: number; renewTime?: string; acquireTime?: string; leaseTransitions?: number };
}

const microTime = (ms: number) => new Date(ms).toISOString().replace('Z', '000Z');

export function startLeaderElection(opts: LeaderElectionOptions): LeaderElection {
  const now = opts.now ?? Date.now;
  const durationMs = opts.leaseDurationMs ?? 15_000;
  const everyMs = opts.retryEveryMs ?? 2_000;
  const path = `/apis/coordination.k8s.io/v1/namespaces/${opts.namespace}/leases/${opts.name}`;
  let leader = false;
  let lastRenewAt = 0;
  let stopped = false;
  let timer: NodeJS.Timeout | undefined;

  const spec = (prev: LeaseJson['spec'] | undefined, at: number) => ({
    holderIdentity: opts.identity,
    leaseDurationSeconds: Math.ceil(durationMs / 1000),
    acquireTime: prev?.holderIdentity === opts.identity && prev.acquireTime ? prev.acquireTime : microTime(at),
    renewTime: microTime(at),
    leaseTransitions: (prev?.leaseTransitions ?? 0) + (prev?.holderIdentity === opts.identity ? 0 : prev ? 1 : 0),
  });

  async function attempt(): Promise<boolean> {
    const at = now();
    let current: LeaseJson | undefined;
    try {
      current = await opts.kube.requestJson<LeaseJson>({ path, description: 'read the controller Lease' });
    } catch (err) {
      if (!(isKubeError(err) && err.status === 404)) throw err;
    }
    if (!current) {
      await opts.kube.requestJson({
        method: 'POST',
        path: `/apis/coordination.k8s.io/v1/namespaces/${opts.namespace}/leases`,
        body: { apiVersion: 'coordination.k8s.io/v1', kind: 'Lease', metadata: { name: opts.name }, spec: spec(undefined, at) },
        description: 'create the controller Lease',
      });
      return true;
    }
    const held = current.spec?.holderIdentity;
    const renewedAt = Date.parse(current.spec?.renewTime ?? '') || 0;
    const validFor = (current.spec?.leaseDurationSeconds ?? 0) * 1000;
    if (held && held !== opts.identity && renewedAt + validFor > at) return false;
    await opts.kube.requestJson({
      method: 'PUT',
      path,
      body: {
        apiVersion: 'coordination.k8s.io/v1',
        kind: 'Lease',
        metadata: { name: opts.name, namespace: opts.namespace, resourceVersion: current.metadata?.resourceVersion },
        spec: spec(current.spec, at),
      },
      description: 'take or renew the controller Lease',
    });
    return true;
  }

  async function tick(): Promise<void> {
    const at = now();
    try {
      leader = await attempt();
      if (leader) lastRenewAt = at;
    } catch (err) {
      // Conflict: another replica wrote first. Anything else: lead on only while surely within the lease.
      if (isKubeError(err) && err.status === 409) leader = false;
      else opts.onError?.(err);
      if (now() - lastRenewAt > (durationMs * 2) / 3) leader = false;
    }
    if (!stopped) timer = setTimeout(() => void tick(), everyMs);
  }
  const first = tick();

  return {
    isLeader: () => leader && !stopped,
    async stop() {
      stopped = true;
      leader = false;
      if (timer) clearTimeout(timer);
      await first;
    },
  };
}
