/* Builders of backed-up items for the restore tests (test-only; not exported from core). */
import type { BackedUpItem, JsonObject, RestoreObject } from './types.js';

export function item(
  groupResource: string,
  namespace: string | null,
  name: string,
  fields: JsonObject = {},
  metadata: JsonObject = {},
): BackedUpItem {
  const dot = groupResource.indexOf('.');
  const group = dot < 0 ? '' : groupResource.slice(dot + 1);
  const resource = dot < 0 ? groupResource : groupResource.slice(0, dot);
  const object: RestoreObject = {
    apiVersion: group ? `${group}/v1` : 'v1',
    kind: resource,
    metadata: { name, ...(namespace !== null ? { namespace } : {}), ...metadata } as RestoreObject['metadata'],
    ...fields,
  };
  return { group, resource, namespace, name, object };
}

export function pod(namespace: string, name: string, spec: JsonObject = {}, metadata: JsonObject = {}, status?: JsonObject): BackedUpItem {
  return item(
    'pods',
    namespace,
    name,
    { kind: 'Pod', spec: { containers: [{ name: 'app', image: 'nginx' }], ...spec }, ...(status ? { status } : {}) },
    metadata,
  );
}
