import { ScaledObject } from '@kubernetes-models/keda/keda.sh/v1alpha1/ScaledObject';
import { CustomResourceDefinition } from 'kubernetes-models/apiextensions.k8s.io/v1/CustomResourceDefinition';
import { DaemonSet } from 'kubernetes-models/apps/v1/DaemonSet';
import { Deployment } from 'kubernetes-models/apps/v1/Deployment';
import { StatefulSet } from 'kubernetes-models/apps/v1/StatefulSet';
import { HorizontalPodAutoscaler } from 'kubernetes-models/autoscaling/v2/HorizontalPodAutoscaler';
import { NetworkPolicy } from 'kubernetes-models/networking.k8s.io/v1/NetworkPolicy';
import { PodDisruptionBudget } from 'kubernetes-models/policy/v1/PodDisruptionBudget';
import { ClusterRole } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRole';
import { ClusterRoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/ClusterRoleBinding';
import { Role } from 'kubernetes-models/rbac.authorization.k8s.io/v1/Role';
import { RoleBinding } from 'kubernetes-models/rbac.authorization.k8s.io/v1/RoleBinding';
import { ConfigMap } from 'kubernetes-models/v1/ConfigMap';
import { Namespace } from 'kubernetes-models/v1/Namespace';
import { PersistentVolumeClaim } from 'kubernetes-models/v1/PersistentVolumeClaim';
import { Secret } from 'kubernetes-models/v1/Secret';
import { Service } from 'kubernetes-models/v1/Service';
import { ServiceAccount } from 'kubernetes-models/v1/ServiceAccount';
import type { KubeObject } from './manifests.js';

type Validate = (object: KubeObject) => void;

/**
 * The generated OpenAPI validator of every kind the manifests use, keyed `apiVersion/kind`.
 * Each model's `validate()` throws on a missing required field, a wrong type or a bad enum
 * value. (These schemas allow unknown fields, like the OpenAPI v2 the API server publishes;
 * the tests assert the fields that matter by value, so a misspelt one fails there.)
 */
const VALIDATORS: Record<string, Validate> = {
  'v1/Namespace': (o) => new Namespace(o as never).validate(),
  'v1/ServiceAccount': (o) => new ServiceAccount(o as never).validate(),
  'v1/ConfigMap': (o) => new ConfigMap(o as never).validate(),
  'v1/Secret': (o) => new Secret(o as never).validate(),
  'v1/Service': (o) => new Service(o as never).validate(),
  'v1/PersistentVolumeClaim': (o) => new PersistentVolumeClaim(o as never).validate(),
  'apps/v1/Deployment': (o) => new Deployment(o as never).validate(),
  'apps/v1/StatefulSet': (o) => new StatefulSet(o as never).validate(),
  'apps/v1/DaemonSet': (o) => new DaemonSet(o as never).validate(),
  'autoscaling/v2/HorizontalPodAutoscaler': (o) => new HorizontalPodAutoscaler(o as never).validate(),
  'policy/v1/PodDisruptionBudget': (o) => new PodDisruptionBudget(o as never).validate(),
  'networking.k8s.io/v1/NetworkPolicy': (o) => new NetworkPolicy(o as never).validate(),
  'rbac.authorization.k8s.io/v1/Role': (o) => new Role(o as never).validate(),
  'rbac.authorization.k8s.io/v1/ClusterRole': (o) => new ClusterRole(o as never).validate(),
  'rbac.authorization.k8s.io/v1/RoleBinding': (o) => new RoleBinding(o as never).validate(),
  'rbac.authorization.k8s.io/v1/ClusterRoleBinding': (o) => new ClusterRoleBinding(o as never).validate(),
  'apiextensions.k8s.io/v1/CustomResourceDefinition': (o) => new CustomResourceDefinition(o as never).validate(),
  // KEDA's own CRD schema, generated into @kubernetes-models/keda
  'keda.sh/v1alpha1/ScaledObject': (o) => new ScaledObject(o as never).validate(),
};

/** Schema problems of one object, or a problem saying its kind has no validator (never a silent pass). */
export function schemaProblems(object: KubeObject): string[] {
  const key = `${object.apiVersion}/${object.kind}`;
  const validate = VALIDATORS[key];
  if (!validate) return [`${key} ${object.metadata.name}: no schema validator for this kind (add one to schema-validation.ts)`];
  try {
    validate(object);
    return [];
  } catch (error) {
    return [`${key} ${object.metadata.name}: ${error instanceof Error ? error.message : String(error)}`];
  }
}

interface JsonSchema {
  type?: string;
  properties?: Record<string, JsonSchema>;
  items?: JsonSchema;
  additionalProperties?: JsonSchema | boolean;
  'x-kubernetes-preserve-unknown-fields'?: boolean;
  'x-kubernetes-int-or-string'?: boolean;
  [keyword: string]: unknown;
}

/**
 * The API server's structural-schema rules that the apiextensions OpenAPI schema cannot
 * express: every node names its type (unless int-or-string or preserve-unknown-fields),
 * and `properties` / `items` / `additionalProperties` only appear under the matching type;
 * `properties` and `additionalProperties` never together, `additionalProperties: false`
 * never, one type per node (`nullable` instead of a null type), and none of the JSON Schema
 * keywords Kubernetes does not take (`$ref`, `anyOf`/`oneOf`/`allOf` of types, `const`, …).
 */
export function structuralSchemaProblems(schema: JsonSchema, path = 'openAPIV3Schema'): string[] {
  const problems: string[] = [];
  const typeOptional = schema['x-kubernetes-int-or-string'] === true || schema['x-kubernetes-preserve-unknown-fields'] === true;
  if (schema.type === undefined && !typeOptional) problems.push(`${path}: no type`);
  if ((schema.properties || typeof schema.additionalProperties === 'object') && schema.type !== 'object') {
    problems.push(`${path}: properties on a non-object`);
  }
  if (schema.items && schema.type !== 'array') problems.push(`${path}: items on a non-array`);
  if (schema.type === 'array' && !schema.items) problems.push(`${path}: array without items`);
  if (Array.isArray(schema.type)) problems.push(`${path}: more than one type`);
  if (schema.properties && schema.additionalProperties !== undefined)
    problems.push(`${path}: properties and additionalProperties together`);
  if (schema.additionalProperties === false) problems.push(`${path}: additionalProperties: false`);
  for (const keyword of ['$schema', '$ref', '$defs', 'anyOf', 'oneOf', 'allOf', 'const', 'propertyNames', 'default']) {
    if (schema[keyword] !== undefined) problems.push(`${path}: ${keyword} is not allowed`);
  }
  for (const [name, child] of Object.entries(schema.properties ?? {})) {
    problems.push(...structuralSchemaProblems(child, `${path}.properties.${name}`));
  }
  if (schema.items) problems.push(...structuralSchemaProblems(schema.items, `${path}.items`));
  if (typeof schema.additionalProperties === 'object') {
    problems.push(...structuralSchemaProblems(schema.additionalProperties, `${path}.additionalProperties`));
  }
  return problems;
}

/** The schema node a simple JSONPath like `.status.progress.bytesDone` points at, if any. */
export function schemaAt(schema: JsonSchema, jsonPath: string): JsonSchema | undefined {
  let node: JsonSchema | undefined = schema;
  for (const segment of jsonPath.replace(/^\./, '').split('.')) {
    node = node?.properties?.[segment];
  }
  return node;
}

export type { JsonSchema };
