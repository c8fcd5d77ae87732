import type { V1Node, V1Pod } from '@kubernetes/client-node';
import type { KubeClients } from './kube-clients.js';
import { callKube, isKubeError, KubeErrorCodes } from './kube-errors.js';

/**
 * Typed conveniences on client-node's CoreV1Api. These return client-node model objects
 * (timestamps are Date objects, unknown fields dropped); use listAll for manifests as the server
 * wrote them.
 */

/** undefined when the pod does not exist. */
export async function getPod(kube: KubeClients, namespace: string, name: string): Promise<V1Pod | undefined> {
  try {
    return await callKube(`get pod ${namespace}/${name}`, () => kube.core.readNamespacedPod({ namespace, name }));
  } catch (err) {
    if (isKubeError(err, KubeErrorCodes.notFound)) return undefined;
    throw err;
  }
}

export interface ReadPodsOptions {
  /** All namespaces when omitted. */
  namespace?: string | undefined;
  labelSelector?: string | undefined;
  /** e.g. `spec.nodeName=node-1` or `status.phase=Running`. */
  fieldSelector?: string | undefined;
  pageSize?: number | undefined;
}

/** Every matching pod, read page by page. */
export async function readPods(kube: KubeClients, options: ReadPodsOptions = {}): Promise<V1Pod[]> {
  const pods: V1Pod[] = [];
  let continueToken: string | undefined;
  do {
    const page = {
      labelSelector: options.labelSelector,
      fieldSelector: options.fieldSelector,
      limit: options.pageSize ?? 500,
      _continue: continueToken,
    };
    const list = await callKube(`list pods${options.namespace ? ` in ${options.namespace}` : ''}`, () =>
      options.namespace !== undefined
        ? kube.core.listNamespacedPod({ namespace: options.namespace, ...page })
        : kube.core.listPodForAllNamespaces(page),
    );
    pods.push(...list.items);
    continueToken = list.metadata?._continue || undefined;
  } while (continueToken !== undefined);
  return pods;
}

/** Every node (optionally by label), read page by page. */
export async function listNodes(kube: KubeClients, options: { labelSelector?: string | undefined } = {}): Promise<V1Node[]> {
  const nodes: V1Node[] = [];
  let continueToken: string | undefined;
  do {
    const list = await callKube('list nodes', () =>
      kube.core.listNode({ labelSelector: options.labelSelector, limit: 500, _continue: continueToken }),
    );
    nodes.push(...list.items);
    continueToken = list.metadata?._continue || undefined;
  } while (continueToken !== undefined);
  return nodes;
}
