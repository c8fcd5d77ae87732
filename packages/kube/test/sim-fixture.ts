import { fileURLToPath } from 'node:url';
import type { Fixture } from '@stowage/kube-sim';

/** The shared PVB CRD, loaded into every simulator these tests start. */
export const pvbCrdFile = fileURLToPath(new URL('../../../k8s/base/crd-podvolumebackups.yaml', import.meta.url));
/** The shared PVR CRD. */
export const pvrCrdFile = fileURLToPath(new URL('../../../k8s/base/crd-podvolumerestores.yaml', import.meta.url));

/** A small cluster: two nodes, namespaces `stowage` and `apps`, one running pod with two containers. */
export function smallCluster(extra: unknown[] = []): Fixture {
  return {
    objects: [
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'stowage' } },
      { apiVersion: 'v1', kind: 'Namespace', metadata: { name: 'apps' } },
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-a', labels: { pool: 'big' } } },
      { apiVersion: 'v1', kind: 'Node', metadata: { name: 'node-b', labels: { pool: 'small' } } },
      {
        apiVersion: 'v1',
        kind: 'Pod',
        metadata: { name: 'db', namespace: 'apps', labels: { app: 'db' } },
        spec: {
          nodeName: 'node-a',
          containers: [
            { name: 'main', image: 'postgres:16' },
            { name: 'sidecar', image: 'busybox' },
          ],
        },
        status: { phase: 'Running' },
      },
      ...extra,
    ],
  };
}

/** Waits until `check` returns a value other than undefined, polling every 20 ms, at most `timeoutMs`. */
export async function waitFor<T>(what: string, check: () => T | undefined | Promise<T | undefined>, timeoutMs = 10_000): Promise<T> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await check();
    if (value !== undefined) return value;
    if (Date.now() > deadline) throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
    await new Promise((resolve) => setTimeout(resolve, 20));
  }
}
