import { execFile } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { promisify } from 'node:util';
import { parseAllDocuments } from 'yaml';
import { CliError, CliErrorCode } from '../errors.js';

/*
 * The deployment `stowage install` applies is k8s/ itself, rendered by kustomize: `k8s/base`
 * (backups on the stowage-backups claim) and `k8s/overlays/s3` (the base with the s3-storage
 * component). The bundle carries both renderings (build.mjs runs `kubectl kustomize` and defines
 * STOWAGE_K8S_RENDERED); run from the sources, the CLI renders them from the checkout the same
 * way. No manifest is written twice.
 */

/** Which rendering of k8s/: the filesystem claim or an S3 bucket. */
export type StorageLayout = 'claim' | 's3';

/** The kustomize directory of each layout, relative to the repository root. */
export const KUSTOMIZE_DIRS: Readonly<Record<StorageLayout, string>> = { claim: 'k8s/base', s3: 'k8s/overlays/s3' };

/** Replaced by the bundle's build: each layout's `kubectl kustomize` output. */
declare const STOWAGE_K8S_RENDERED: Record<StorageLayout, string> | undefined;

/** A Kubernetes object as kustomize renders it (only what the installer reads is typed). */
export interface KubeManifest {
  apiVersion: string;
  kind: string;
  metadata: { name: string; namespace?: string; labels?: Record<string, string>; annotations?: Record<string, string> };
  [field: string]: unknown;
}

const run = promisify(execFile);

async function renderFromCheckout(layout: StorageLayout): Promise<string> {
  const root = fileURLToPath(new URL('../../../../', import.meta.url));
  try {
    const { stdout } = await run('kubectl', ['kustomize', KUSTOMIZE_DIRS[layout]], { cwd: root, maxBuffer: 64 * 1024 * 1024 });
    return stdout;
  } catch (err) {
    throw new CliError(
      CliErrorCode.config,
      `install: rendering ${KUSTOMIZE_DIRS[layout]} with kubectl kustomize failed (the CLI run from a checkout renders k8s/ itself; the installed CLI carries it): ${(err as Error).message}`,
      [],
      { cause: err },
    );
  }
}

/** Parses kustomize output into objects, in its order (namespaces and CRDs first, workloads last). */
export function parseManifests(text: string, source: string): KubeManifest[] {
  const objects: KubeManifest[] = [];
  for (const doc of parseAllDocuments(text)) {
    if (doc.errors.length > 0) throw new Error(`${source}: ${doc.errors[0]?.message}`);
    const value = doc.toJSON() as KubeManifest | null;
    if (value === null) continue;
    if (typeof value.apiVersion !== 'string' || typeof value.kind !== 'string' || typeof value.metadata?.name !== 'string')
      throw new Error(`${source}: a document without apiVersion, kind and metadata.name`);
    objects.push(value);
  }
  return objects;
}

/** The rendered k8s/ deployment for a storage layout. */
export async function loadManifests(layout: StorageLayout): Promise<KubeManifest[]> {
  const text = typeof STOWAGE_K8S_RENDERED === 'object' ? STOWAGE_K8S_RENDERED[layout] : await renderFromCheckout(layout);
  return parseManifests(text, KUSTOMIZE_DIRS[layout]);
}
