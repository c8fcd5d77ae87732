import {
  createKubeClients,
  groupVersionPath,
  isKubeError,
  type KubeClients,
  KubeErrorCodes,
  selectListableResources,
  splitGroupVersion,
} from '@stowage/kube';
import { CliError, CliErrorCode } from '../errors.js';
import { objectRef, type PlannedObject } from './install-plan.js';
import type { KubeManifest } from './manifests.js';

/*
 * Applies and deletes the install's objects through the Kubernetes API with the user's kubeconfig:
 * server-side apply (field manager `stowage`), so a second install with the same options changes
 * nothing and the API server, not this CLI, merges with what is there. Which path serves a kind is
 * asked of the server (each group version's resource list).
 */

export const FIELD_MANAGER = 'stowage';

export type ApplyOutcome = 'created' | 'configured' | 'unchanged';
export type DeleteOutcome = 'deleted' | 'not found';

export interface ClusterTarget {
  kubeconfig?: string | undefined;
  context?: string | undefined;
}

interface ResourceInfo {
  resource: string;
  namespaced: boolean;
}

export class Cluster {
  private readonly resources = new Map<string, Promise<Map<string, ResourceInfo>>>();

  private constructor(private readonly kube: KubeClients) {}

  static connect(target: ClusterTarget): Cluster {
    try {
      return new Cluster(createKubeClients({ kubeconfigPath: target.kubeconfig, context: target.context, requestTimeoutMs: 30_000 }));
    } catch (err) {
      throw new CliError(CliErrorCode.config, `kubeconfig: ${(err as Error).message}`, [], { cause: err });
    }
  }

  get server(): string {
    return this.kube.server;
  }

  /** The object's API path (`/apis/apps/v1/namespaces/stowage/deployments/stowage-api`). */
  private async pathOf(object: Pick<KubeManifest, 'apiVersion' | 'kind' | 'metadata'>): Promise<string> {
    let kinds = this.resources.get(object.apiVersion);
    if (!kinds) {
      const { group, version } = splitGroupVersion(object.apiVersion);
      kinds = this.kube
        .requestJson<{ resources?: [] }>({ path: groupVersionPath(group, version), description: `discovery of ${object.apiVersion}` })
        .then((list) => new Map(selectListableResources(object.apiVersion, list).map((r) => [r.kind, r])));
      this.resources.set(object.apiVersion, kinds);
    }
    const info = (await kinds.catch((err: unknown) => this.fail(err))).get(object.kind);
    if (!info) throw new CliError(CliErrorCode.apiFailed, `the cluster does not serve ${object.kind} in ${object.apiVersion}`);
    const { group, version } = splitGroupVersion(object.apiVersion);
    const ns = info.namespaced ? `/namespaces/${encodeURIComponent(object.metadata.namespace ?? 'default')}` : '';
    return `${groupVersionPath(group, version)}${ns}/${info.resource}/${encodeURIComponent(object.metadata.name)}`;
  }

  private fail(err: unknown): never {
    if (isKubeError(err)) {
      const code = err.code === KubeErrorCodes.unavailable ? CliErrorCode.apiUnreachable : CliErrorCode.apiFailed;
      throw new CliError(code, `kubernetes: ${err.message}`, [], { cause: err });
    }
    throw err;
  }

  /** The stored object, or undefined. */
  async get(object: Pick<KubeManifest, 'apiVersion' | 'kind' | 'metadata'>): Promise<KubeManifest | undefined> {
    const path = await this.pathOf(object);
    try {
      return await this.kube.requestJson<KubeManifest>({ path, description: `get ${objectRef(object)}` });
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return undefined;
      return this.fail(err);
    }
  }

  /** Server-side apply (or, for a create-only object, a create that leaves an existing one alone). */
  async apply(planned: PlannedObject): Promise<ApplyOutcome> {
    const { object } = planned;
    const path = await this.pathOf(object);
    const before = await this.get(object);
    if (planned.createOnly && before) return 'unchanged';
    try {
      const after = await this.kube.requestJson<KubeManifest>({
        method: 'PATCH',
        path,
        query: { fieldManager: FIELD_MANAGER, force: true },
        body: object,
        contentType: 'application/apply-patch+yaml',
        description: `apply ${objectRef(object)}`,
      });
      if (!before) return 'created';
      const rv = (o: KubeManifest) => (o.metadata as { resourceVersion?: string }).resourceVersion;
      return rv(after) === rv(before) ? 'unchanged' : 'configured';
    } catch (err) {
      return this.fail(err);
    }
  }

  async delete(object: Pick<KubeManifest, 'apiVersion' | 'kind' | 'metadata'>): Promise<DeleteOutcome> {
    const path = await this.pathOf(object);
    try {
      await this.kube.requestJson({
        method: 'DELETE',
        path,
        body: { kind: 'DeleteOptions', apiVersion: 'v1', propagationPolicy: 'Background' },
        description: `delete ${objectRef(object)}`,
      });
      return 'deleted';
    } catch (err) {
      if (isKubeError(err, KubeErrorCodes.notFound)) return 'not found';
      return this.fail(err);
    }
  }
}
