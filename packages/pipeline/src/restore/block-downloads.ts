/*
 * A moved block volume's restore (docs/architecture.md#csi-snapshots-and-the-data-mover), shaped
 * like Velero's DataDownload: its data is one file in the repository (the device's bytes), and a
 * block device cannot carry the done marker a PodVolumeRestore leaves in a filesystem, so the
 * volume is filled before the restored claim may bind to it:
 *
 * 1. the restored claim is created with a `selector` (restore-plan), so no provisioner makes it a
 *    volume: it waits for an Available one labelled for it;
 * 2. expose — a temporary Block claim `<name>` in Stowage's namespace, of the claim's class and
 *    size, and a temporary pod `<name>` holding it as a device on a node with an agent (the
 *    restored pod's node when it has one);
 * 3. download — a DataDownload `<name>` asks that node's agent to write the repository snapshot
 *    into the device;
 * 4. hand over — the volume kept (reclaim policy Retain) and labelled for the restored claim's
 *    selector; the temporary pod and claim deleted; once both are gone the volume's `claimRef` is
 *    cleared, so it is Available and the restored claim binds to it; then its reclaim policy is
 *    set back.
 *
 * The restored pod's restore-hooks job drives these steps (its post-restore hooks run only once
 * every one is done; the pod itself cannot start before its claim is bound). Every step is
 * idempotent (deterministic names, 409 = made already, 404 = gone already) and the state is in
 * the job's data, so a worker that dies between two steps is followed by one that does the rest.
 */
import {
  createDataDownloadClient,
  dataDownloadLabels,
  getPod,
  isKubeError,
  isVolumeOperationTerminal,
  type KubeClients,
  KubeErrorCodes,
} from '@stowage/kube';
import type { PipelineDeps } from '../deps.js';
import { MOVER_VOLUME, moverPod } from '../snapshots/data-mover.js';
import { type PlannedBlockDownload, RESTORE_VOLUME_LABEL } from './block-download-plan.js';

export interface DownloadState {
  stage: 'exposing' | 'downloading' | 'handover' | 'binding' | 'done' | 'failed';
  since: number;
  node: string;
  pv?: string;
  /** The volume's reclaim policy before the hand-over (set back once it is bound). */
  reclaimPolicy?: string;
  bytes?: number;
  message?: string;
  polls?: number;
}

const enc = encodeURIComponent;
const GONE = [KubeErrorCodes.notFound];
const EXISTS = [KubeErrorCodes.alreadyExists, KubeErrorCodes.conflict];

async function ignoring<T>(codes: string[], work: () => Promise<T>): Promise<T | undefined> {
  try {
    return await work();
  } catch (err) {
    if (codes.some((code) => isKubeError(err, code as never))) return undefined;
    throw err;
  }
}

interface PvObject {
  metadata?: { labels?: Record<string, string> };
  spec?: { persistentVolumeReclaimPolicy?: string; claimRef?: { namespace?: string; name?: string; uid?: string } | null };
  status?: { phase?: string };
}

type DownloadDeps = Pick<PipelineDeps, 'kube' | 'clock' | 'config' | 'agents'>;

export interface DownloadLook {
  state: DownloadState;
  changed: boolean;
  event?: { type: string; data: Record<string, unknown> };
  /** Why the volume was not restored (an error of the restore). */
  problem?: string;
}

export function isDownloadSettled(state: DownloadState | undefined): boolean {
  return state?.stage === 'done' || state?.stage === 'failed';
}

/** One look at one download: its next step, done. */
export async function stepBlockDownload(
  deps: DownloadDeps,
  input: {
    restoreName: string;
    podNamespace: string;
    podName: string;
    planned: PlannedBlockDownload;
    state: DownloadState | undefined;
    canceled: boolean;
    deadlineAt: number;
  },
): Promise<DownloadLook> {
  const { kube } = deps;
  const ns = deps.config.namespace;
  const { planned } = input;
  const now = deps.clock.now();
  const what = `block volume ${planned.volume} of pod ${input.podNamespace}/${input.podName} (claim ${planned.claim})`;
  const state = input.state;
  if (!state) {
    const agents = await deps.agents.nodesWithAgent();
    const pod = await getPod(kube, input.podNamespace, input.podName);
    const podNode = pod?.spec?.nodeName;
    const node = podNode && agents.has(podNode) ? podNode : [...agents].sort()[0];
    if (!node)
      return failed(
        deps,
        { stage: 'failed', since: now, node: '' },
        planned,
        `${what} was not restored: no node agent runs to write its data`,
      );
    return {
      state: { stage: 'exposing', since: now, node },
      changed: true,
      event: { type: 'datadownload.exposing', data: { dataDownload: planned.name, node, claim: `${input.podNamespace}/${planned.claim}` } },
    };
  }
  if (isDownloadSettled(state)) return { state, changed: false };
  if (input.canceled) return failed(deps, state, planned, `${what} was not restored: the restore was canceled`);
  if (now >= input.deadlineAt) {
    return failed(deps, state, planned, `${what} was not restored within the restore's itemOperationTimeout (stage ${state.stage})`);
  }
  const client = createDataDownloadClient(kube, { namespace: ns });
  if (state.stage === 'exposing') {
    await ignoring(EXISTS, () =>
      kube.requestJson({
        method: 'POST',
        path: `/api/v1/namespaces/${enc(ns)}/persistentvolumeclaims`,
        body: {
          apiVersion: 'v1',
          kind: 'PersistentVolumeClaim',
          metadata: { name: planned.name, namespace: ns, labels: { 'stowage.dev/data-mover': 'restore' } },
          spec: {
            accessModes: ['ReadWriteOnce'],
            volumeMode: 'Block',
            ...(planned.storageClassName ? { storageClassName: planned.storageClassName } : {}),
            resources: { requests: { storage: planned.storage } },
          },
        },
      }),
    );
    await ignoring(EXISTS, () =>
      kube.requestJson({
        method: 'POST',
        path: `/api/v1/namespaces/${enc(ns)}/pods`,
        body: moverPod({
          name: planned.name,
          namespace: ns,
          node: state!.node,
          image: deps.config.restoreWaitImage,
          block: true,
          claim: planned.name,
          readOnly: false,
          role: 'restore',
        }),
      }),
    );
    const pod = await getPod(kube, ns, planned.name);
    if (pod?.status?.phase === 'Failed') {
      return failed(
        deps,
        state,
        planned,
        `${what} was not restored: temporary pod ${ns}/${planned.name} failed: ${pod.status.message ?? 'no message'}`,
      );
    }
    if (!pod?.metadata?.uid || pod.status?.phase !== 'Running') return waiting(state);
    await client.create({
      metadata: {
        name: planned.name,
        labels: { [dataDownloadLabels.node]: state.node, [dataDownloadLabels.restoreName]: input.restoreName },
      },
      spec: {
        node: state.node,
        pod: { namespace: ns, name: planned.name, uid: pod.metadata.uid },
        volume: MOVER_VOLUME,
        snapshotID: planned.snapshotID,
        backupStorageLocation: deps.config.backupStorageLocation,
        volumeMode: 'Block',
        target: { namespace: input.podNamespace, name: planned.claim },
      },
    });
    return {
      state: { ...state, stage: 'downloading', since: now, polls: 0 },
      changed: true,
      event: { type: 'datadownload.created', data: { dataDownload: planned.name, node: state.node, volume: planned.volume } },
    };
  }
  if (state.stage === 'downloading') {
    const dd = await client.get(planned.name);
    if (!dd) return failed(deps, state, planned, `${what} was not restored: DataDownload ${ns}/${planned.name} does not exist (deleted?)`);
    if (!isVolumeOperationTerminal(dd)) return waiting(state);
    if (dd.status?.phase !== 'Completed') {
      return failed(
        deps,
        state,
        planned,
        `${what} was not restored: DataDownload ${ns}/${planned.name} ended ${dd.status?.phase}: ${dd.status?.message ?? 'no message'}`,
      );
    }
    const claim = await ignoring(GONE, () =>
      kube.requestJson<{ spec?: { volumeName?: string } }>({
        path: `/api/v1/namespaces/${enc(ns)}/persistentvolumeclaims/${enc(planned.name)}`,
      }),
    );
    const pvName = claim?.spec?.volumeName;
    if (!pvName) return failed(deps, state, planned, `${what} was not restored: temporary claim ${ns}/${planned.name} has no volume`);
    const pv = await readPv(kube, pvName);
    if (!pv) return failed(deps, state, planned, `${what} was not restored: its volume ${pvName} is gone`);
    return {
      state: {
        ...state,
        stage: 'handover',
        since: now,
        polls: 0,
        pv: pvName,
        reclaimPolicy: pv.spec?.persistentVolumeReclaimPolicy ?? 'Delete',
        bytes: dd.status?.progress?.totalBytes ?? 0,
      },
      changed: true,
      event: { type: 'datadownload.done', data: { dataDownload: planned.name, bytes: dd.status?.progress?.totalBytes ?? 0 } },
    };
  }
  const pvName = state.pv!;
  if (state.stage === 'handover') {
    // Kept while it changes hands, and labelled for the restored claim's selector.
    await kube.requestJson({
      method: 'PATCH',
      path: `/api/v1/persistentvolumes/${enc(pvName)}`,
      body: { metadata: { labels: { [RESTORE_VOLUME_LABEL]: planned.selectorValue } }, spec: { persistentVolumeReclaimPolicy: 'Retain' } },
      contentType: 'application/merge-patch+json',
      description: `keep PersistentVolume ${pvName} for claim ${input.podNamespace}/${planned.claim}`,
    });
    await deleteTemporary(kube, ns, planned.name);
    const podLeft = await getPod(kube, ns, planned.name);
    const claimLeft = await ignoring(GONE, () =>
      kube.requestJson({ path: `/api/v1/namespaces/${enc(ns)}/persistentvolumeclaims/${enc(planned.name)}` }),
    );
    if (podLeft || claimLeft) return waiting(state);
    await kube.requestJson({
      method: 'PATCH',
      path: `/api/v1/persistentvolumes/${enc(pvName)}`,
      body: { spec: { claimRef: null } },
      contentType: 'application/merge-patch+json',
      description: `release PersistentVolume ${pvName} for claim ${input.podNamespace}/${planned.claim}`,
    });
    return { state: { ...state, stage: 'binding', since: now, polls: 0 }, changed: true };
  }
  // binding: the restored claim takes the volume; its reclaim policy is then set back.
  const pv = await readPv(kube, pvName);
  if (!pv) return failed(deps, state, planned, `${what} was not restored: its volume ${pvName} is gone`);
  const ref = pv.spec?.claimRef;
  if (!ref?.uid || ref.namespace !== input.podNamespace || ref.name !== planned.claim) return waiting(state);
  if (pv.spec?.persistentVolumeReclaimPolicy !== state.reclaimPolicy) {
    await kube.requestJson({
      method: 'PATCH',
      path: `/api/v1/persistentvolumes/${enc(pvName)}`,
      body: { spec: { persistentVolumeReclaimPolicy: state.reclaimPolicy ?? 'Delete' } },
      contentType: 'application/merge-patch+json',
      description: `set the reclaim policy of PersistentVolume ${pvName} back`,
    });
  }
  return {
    state: { ...state, stage: 'done', since: now },
    changed: true,
    event: {
      type: 'datadownload.bound',
      data: { dataDownload: planned.name, pv: pvName, claim: `${input.podNamespace}/${planned.claim}`, bytes: state.bytes ?? 0 },
    },
  };
}

function waiting(state: DownloadState): DownloadLook {
  return { state: { ...state, polls: (state.polls ?? 0) + 1 }, changed: false };
}

async function readPv(kube: KubeClients, name: string): Promise<PvObject | undefined> {
  return ignoring(GONE, () => kube.requestJson<PvObject>({ path: `/api/v1/persistentvolumes/${enc(name)}` }));
}

async function deleteTemporary(kube: KubeClients, ns: string, name: string): Promise<void> {
  await ignoring(GONE, () => kube.requestJson({ method: 'DELETE', path: `/api/v1/namespaces/${enc(ns)}/pods/${enc(name)}` }));
  await ignoring(GONE, () =>
    kube.requestJson({ method: 'DELETE', path: `/api/v1/namespaces/${enc(ns)}/persistentvolumeclaims/${enc(name)}` }),
  );
}

/** Ends a download that failed: the temporary pod and claim go (with them a volume not yet handed over). */
async function failed(deps: DownloadDeps, state: DownloadState, planned: PlannedBlockDownload, message: string): Promise<DownloadLook> {
  const ns = deps.config.namespace;
  if (state.stage === 'downloading') await createDataDownloadClient(deps.kube, { namespace: ns }).requestCancel(planned.name);
  if (state.pv && (state.stage === 'handover' || state.stage === 'binding')) {
    // Not handed over: the volume goes back to its own policy, so deleting its claim reclaims it.
    await ignoring(GONE, () =>
      deps.kube.requestJson({
        method: 'PATCH',
        path: `/api/v1/persistentvolumes/${enc(state.pv!)}`,
        body: { spec: { persistentVolumeReclaimPolicy: state.reclaimPolicy ?? 'Delete' } },
        contentType: 'application/merge-patch+json',
        description: `set the reclaim policy of PersistentVolume ${state.pv} back`,
      }),
    );
  }
  await deleteTemporary(deps.kube, ns, planned.name);
  return {
    state: { ...state, stage: 'failed', since: deps.clock.now(), message },
    changed: true,
    event: { type: 'datadownload.failed', data: { dataDownload: planned.name, message } },
    problem: message,
  };
}

/** How long until the next look at downloads that waited `waitedMs` in their stage: a quarter of it, within the poll bounds and 2 s. */
export function downloadRecheckMs(deps: Pick<PipelineDeps, 'config'>, waitedMs: number): number {
  return Math.max(deps.config.pvbPollBaseMs, Math.min(2_000, Math.floor(waitedMs / 4)));
}
