/**
 * A minimal OpenAPI v3 surface, enough for `kubectl apply`/`create` to validate without
 * `--validate=false`: the root lists one document per group-version, and each document has, per
 * resource type, the collection path (POST) and the item path (PATCH) tagged with its
 * group-version-kind and the `fieldValidation` query parameter. kubectl then validates on the
 * server side (it sends `fieldValidation=Strict`) instead of downloading schemas. No component
 * schemas: `kubectl explain` is not served. Strategic merge patch is not advertised, so kubectl
 * computes apply patches as it does without OpenAPI.
 */
import { createHash } from 'node:crypto';
import type { ResourceRegistry, ResourceType } from './resource-registry.js';

const FIELD_VALIDATION = {
  name: 'fieldValidation',
  in: 'query',
  description: 'Ignore, Warn or Strict: how unknown or duplicate fields are treated',
  schema: { type: 'string', uniqueItems: true },
};

const jsonResponse = { description: 'OK', content: { 'application/json': { schema: { type: 'object' } } } };

function gvPath(group: string, version: string): string {
  return group === '' ? `api/${version}` : `apis/${group}/${version}`;
}

function pathsOf(type: ResourceType): Record<string, unknown> {
  const base = `/${gvPath(type.group, type.version)}${type.namespaced ? '/namespaces/{namespace}' : ''}/${type.plural}`;
  const gvk = { group: type.group, version: type.version, kind: type.kind };
  const pathParams = [...(type.namespaced ? [{ name: 'namespace', in: 'path', required: true, schema: { type: 'string' } }] : [])];
  return {
    [base]: {
      parameters: pathParams,
      post: {
        operationId: `create${type.kind}`,
        'x-kubernetes-action': 'post',
        'x-kubernetes-group-version-kind': gvk,
        parameters: [FIELD_VALIDATION],
        requestBody: { content: { 'application/json': { schema: { type: 'object' } } }, required: true },
        responses: { '200': jsonResponse, '201': jsonResponse },
      },
    },
    [`${base}/{name}`]: {
      parameters: [...pathParams, { name: 'name', in: 'path', required: true, schema: { type: 'string' } }],
      patch: {
        operationId: `patch${type.kind}`,
        'x-kubernetes-action': 'patch',
        'x-kubernetes-group-version-kind': gvk,
        parameters: [FIELD_VALIDATION],
        requestBody: {
          content: {
            'application/json-patch+json': { schema: { type: 'object' } },
            'application/merge-patch+json': { schema: { type: 'object' } },
          },
          required: true,
        },
        responses: { '200': jsonResponse },
      },
    },
  };
}

/** The document of one group-version, or undefined when nothing is served there. */
export function openApiGroupVersionDoc(registry: ResourceRegistry, group: string, version: string): Record<string, unknown> | undefined {
  const types = registry.groupVersion(group, version);
  if (!types || types.length === 0) return undefined;
  const paths: Record<string, unknown> = {};
  for (const type of [...types].sort((a, b) => a.plural.localeCompare(b.plural))) Object.assign(paths, pathsOf(type));
  return { openapi: '3.0.0', info: { title: 'Kubernetes (stowage simulator)', version: 'v1.32.0' }, paths };
}

/** `/openapi/v3`: every group-version with the URL of its document (the hash changes with it, for kubectl's cache). */
export function openApiRoot(registry: ResourceRegistry): Record<string, unknown> {
  const paths: Record<string, { serverRelativeURL: string }> = {};
  for (const [group, version] of registry.groupVersionPairs()) {
    const doc = openApiGroupVersionDoc(registry, group, version);
    if (!doc) continue;
    const hash = createHash('sha512').update(JSON.stringify(doc)).digest('hex').slice(0, 64).toUpperCase();
    paths[gvPath(group, version)] = { serverRelativeURL: `/openapi/v3/${gvPath(group, version)}?hash=${hash}` };
  }
  return { paths };
}
