/*
 * JSON Schema (what zod 4's `z.toJSONSchema` writes, draft 2020-12) → a structural OpenAPI v3
 * schema that a CustomResourceDefinition accepts. Kubernetes' rules
 * (apiextensions.k8s.io/v1, "Specifying a structural schema"): every node has a `type`, unless it
 * says `x-kubernetes-preserve-unknown-fields: true`; no `additionalProperties: false` (unknown
 * fields are pruned, and refused by `kubectl apply`'s strict field validation); `properties` and
 * `additionalProperties` never together; `nullable: true` instead of a `null` type; no
 * `$schema`, `propertyNames`, `const`, `default`. What zod checks in code (a refine) has no
 * JSON Schema form and stays core's check, reported in the resource's status.
 */

export type JsonSchema = Record<string, unknown>;

/** A `{}` schema: anything. */
const isAnything = (schema: JsonSchema): boolean => Object.keys(schema).filter((k) => k !== 'description').length === 0;

const PRESERVE = 'x-kubernetes-preserve-unknown-fields';

/** Keywords copied as they are (value validations OpenAPI v3 and Kubernetes share). */
const KEPT = ['description', 'enum', 'pattern', 'minLength', 'maxLength', 'minimum', 'maximum', 'minItems', 'maxItems', 'format'];

export function toStructuralSchema(schema: JsonSchema): JsonSchema {
  return convert(schema);
}

function convert(input: JsonSchema): JsonSchema {
  const schema = { ...input };
  delete schema.$schema;

  // anyOf / oneOf: `X | null` is X, nullable; several shapes of one type merge; else anything.
  const union = (schema.anyOf ?? schema.oneOf) as JsonSchema[] | undefined;
  if (union) {
    const nullable = union.some((branch) => branch.type === 'null');
    const branches = union.filter((branch) => branch.type !== 'null');
    const merged = mergeBranches(branches);
    const description = schema.description;
    return { ...merged, ...(description !== undefined ? { description } : {}), ...(nullable ? { nullable: true } : {}) };
  }

  if (isAnything(schema)) return { ...(schema.description ? { description: schema.description } : {}), [PRESERVE]: true };

  let type = schema.type;
  let nullable = false;
  if (Array.isArray(type)) {
    nullable = type.includes('null');
    const types = type.filter((t) => t !== 'null');
    if (types.length !== 1) return { [PRESERVE]: true, ...(nullable ? { nullable: true } : {}) };
    type = types[0];
  }
  if (schema.const !== undefined) schema.enum = [schema.const];

  const out: JsonSchema = {};
  if (typeof type === 'string') out.type = type;
  for (const key of KEPT) if (schema[key] !== undefined) out[key] = schema[key];
  if (typeof schema.exclusiveMinimum === 'number') {
    out.minimum = schema.exclusiveMinimum;
    out.exclusiveMinimum = true;
  }
  if (typeof schema.exclusiveMaximum === 'number') {
    out.maximum = schema.exclusiveMaximum;
    out.exclusiveMaximum = true;
  }
  if (nullable) out.nullable = true;

  if (type === 'array') {
    const items = schema.items as JsonSchema | undefined;
    out.items = items ? convert(items) : { [PRESERVE]: true };
  }
  if (type === 'object') {
    const properties = schema.properties as Record<string, JsonSchema> | undefined;
    const additional = schema.additionalProperties;
    if (properties && Object.keys(properties).length > 0) {
      out.properties = Object.fromEntries(Object.entries(properties).map(([name, prop]) => [name, convert(prop)]));
      const required = schema.required as string[] | undefined;
      if (required && required.length > 0) out.required = required;
      // Known fields plus anything else (a container's fields beyond name and image): keep the rest.
      if (typeof additional === 'object' && additional !== null) out[PRESERVE] = true;
    } else if (typeof additional === 'object' && additional !== null && !isAnything(additional as JsonSchema)) {
      out.additionalProperties = convert(additional as JsonSchema);
    } else {
      out[PRESERVE] = true;
    }
  }
  return out;
}

function mergeBranches(branches: JsonSchema[]): JsonSchema {
  if (branches.length === 0) return { [PRESERVE]: true };
  const converted = branches.map(convert);
  if (converted.length === 1) return converted[0] as JsonSchema;
  const types = new Set(converted.map((branch) => branch.type));
  if (types.size !== 1 || types.has(undefined)) return { [PRESERVE]: true };
  const [type] = types;
  if (type !== 'object') {
    const enums = converted.every((b) => Array.isArray(b.enum)) ? [...new Set(converted.flatMap((b) => b.enum as unknown[]))] : undefined;
    return { type, ...(enums ? { enum: enums } : {}) };
  }
  // Objects of several shapes: every field any shape has (a field's checks are the first shape's).
  const properties: Record<string, JsonSchema> = {};
  for (const branch of converted)
    for (const [name, prop] of Object.entries((branch.properties as Record<string, JsonSchema> | undefined) ?? {}))
      properties[name] ??= prop;
  return Object.keys(properties).length > 0 ? { type: 'object', properties } : { type: 'object', [PRESERVE]: true };
}
