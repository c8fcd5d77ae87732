/**
 * Validation of custom resources against a CRD's structural openAPIV3Schema: types, required,
 * enum, string/number/array bounds, pattern, and pruning of unknown fields.
 */
import type { StatusCause } from './api-status.js';
import { isPlainObject } from './kube-object.js';

type Schema = Record<string, unknown>;

export interface ValidationResult {
  /** The object with unknown fields pruned. */
  value: unknown;
  causes: StatusCause[];
  /** Paths of the fields pruned (what `fieldValidation=Strict` rejects and `Warn` warns of). */
  unknownFields: string[];
}

function typeName(value: unknown): string {
  if (value === null) return 'null';
  if (Array.isArray(value)) return 'array';
  if (typeof value === 'number') return Number.isInteger(value) ? 'integer' : 'number';
  return typeof value;
}

function matchesType(expected: string, value: unknown): boolean {
  switch (expected) {
    case 'object':
      return isPlainObject(value);
    case 'array':
      return Array.isArray(value);
    case 'string':
      return typeof value === 'string';
    case 'boolean':
      return typeof value === 'boolean';
    case 'integer':
      return typeof value === 'number' && Number.isInteger(value);
    case 'number':
      return typeof value === 'number' && Number.isFinite(value);
    default:
      return true;
  }
}

function describe(value: unknown): string {
  const text = JSON.stringify(value);
  return text === undefined ? String(value) : text.length > 60 ? `${text.slice(0, 57)}...` : text;
}

function validateNode(schema: Schema, value: unknown, path: string, causes: StatusCause[], unknown: string[]): unknown {
  if (value === null) {
    if (schema.nullable === true) return value;
    // A null is dropped like an absent field when the schema does not allow it (as the API server's defaulting does).
    return undefined;
  }
  const expected = typeof schema.type === 'string' ? schema.type : undefined;
  const intOrString = schema['x-kubernetes-int-or-string'] === true;
  if (intOrString) {
    if (typeof value !== 'string' && !(typeof value === 'number' && Number.isInteger(value))) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: path,
        message: `Invalid value: ${describe(value)}: ${path} in body must be of type integer or string`,
      });
    }
    return value;
  }
  if (expected && !matchesType(expected, value)) {
    causes.push({
      reason: 'FieldValueTypeInvalid',
      field: path,
      message: `Invalid value: "${typeName(value)}": ${path} in body must be of type ${expected}: "${typeName(value)}"`,
    });
    return value;
  }
  if (Array.isArray(schema.enum) && !schema.enum.some((allowed) => JSON.stringify(allowed) === JSON.stringify(value))) {
    const allowed = schema.enum.map((v) => JSON.stringify(v)).join(', ');
    causes.push({
      reason: 'FieldValueNotSupported',
      field: path,
      message: `Unsupported value: ${describe(value)}: supported values: ${allowed}`,
    });
  }
  if (typeof value === 'string') {
    if (typeof schema.minLength === 'number' && value.length < schema.minLength) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: path,
        message: `Invalid value: ${describe(value)}: ${path} in body should be at least ${schema.minLength} chars long`,
      });
    }
    if (typeof schema.maxLength === 'number' && value.length > schema.maxLength) {
      causes.push({ reason: 'FieldValueTooLong', field: path, message: `Too long: may not be more than ${schema.maxLength} bytes` });
    }
    if (typeof schema.pattern === 'string') {
      let pattern: RegExp | undefined;
      try {
        pattern = new RegExp(schema.pattern, 'u');
      } catch {
        pattern = undefined;
      }
      if (pattern && !pattern.test(value)) {
        causes.push({
          reason: 'FieldValueInvalid',
          field: path,
          message: `Invalid value: ${describe(value)}: ${path} in body should match '${schema.pattern}'`,
        });
      }
    }
    if (schema.format === 'date-time' && Number.isNaN(Date.parse(value))) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: path,
        message: `Invalid value: ${describe(value)}: ${path} in body must be of type date-time`,
      });
    }
  }
  if (typeof value === 'number') {
    if (typeof schema.minimum === 'number' && (schema.exclusiveMinimum === true ? value <= schema.minimum : value < schema.minimum)) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: path,
        message: `Invalid value: ${value}: ${path} in body should be greater than or equal to ${schema.minimum}`,
      });
    }
    if (typeof schema.maximum === 'number' && (schema.exclusiveMaximum === true ? value >= schema.maximum : value > schema.maximum)) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: path,
        message: `Invalid value: ${value}: ${path} in body should be less than or equal to ${schema.maximum}`,
      });
    }
  }
  if (Array.isArray(value)) {
    if (typeof schema.minItems === 'number' && value.length < schema.minItems) {
      causes.push({
        reason: 'FieldValueInvalid',
        field: path,
        message: `Invalid value: ${value.length}: ${path} in body should have at least ${schema.minItems} items`,
      });
    }
    if (typeof schema.maxItems === 'number' && value.length > schema.maxItems) {
      causes.push({
        reason: 'FieldValueTooMany',
        field: path,
        message: `Too many: ${value.length}: must have at most ${schema.maxItems} items`,
      });
    }
    const items = isPlainObject(schema.items) ? schema.items : undefined;
    if (items) {
      return value.map((item, i) => validateNode(items, item, `${path}[${i}]`, causes, unknown)).filter((item) => item !== undefined);
    }
    return value;
  }
  if (isPlainObject(value)) return validateObject(schema, value, path, causes, unknown);
  return value;
}

function validateObject(
  schema: Schema,
  value: Record<string, unknown>,
  path: string,
  causes: StatusCause[],
  unknown: string[],
): Record<string, unknown> {
  const properties = isPlainObject(schema.properties) ? (schema.properties as Record<string, Schema>) : undefined;
  const additional = schema.additionalProperties;
  const preserveUnknown = schema['x-kubernetes-preserve-unknown-fields'] === true;
  const out: Record<string, unknown> = {};
  for (const [key, child] of Object.entries(value)) {
    const childPath = path ? `${path}.${key}` : key;
    const childSchema = properties?.[key];
    if (childSchema && isPlainObject(childSchema)) {
      const validated = validateNode(childSchema, child, childPath, causes, unknown);
      if (validated !== undefined) out[key] = validated;
    } else if (isPlainObject(additional)) {
      const validated = validateNode(additional, child, childPath, causes, unknown);
      if (validated !== undefined) out[key] = validated;
    } else if (additional === true || preserveUnknown || (!properties && additional === undefined && !schema.type)) {
      out[key] = child;
    } else if (!properties && additional === undefined && schema.type === 'object' && path === 'metadata') {
      out[key] = child;
    } else {
      // Unknown to a structural schema: pruned (and reported for fieldValidation).
      unknown.push(childPath);
    }
  }
  if (Array.isArray(schema.required)) {
    for (const required of schema.required) {
      if (typeof required === 'string' && out[required] === undefined) {
        causes.push({ reason: 'FieldValueRequired', field: path ? `${path}.${required}` : required, message: 'Required value' });
      }
    }
  }
  if (Array.isArray(schema.oneOf)) checkOneOf(schema.oneOf, out, path, causes);
  return out;
}

/**
 * `oneOf` as structural schemas use it: branches that only list `required` fields (a union of
 * mutually exclusive fields, e.g. a VolumeSnapshot's source). Exactly one branch must hold.
 */
function checkOneOf(branches: unknown[], value: Record<string, unknown>, path: string, causes: StatusCause[]): void {
  const holding = branches.filter(
    (branch) =>
      isPlainObject(branch) &&
      Array.isArray(branch.required) &&
      branch.required.every((field) => typeof field === 'string' && value[field] !== undefined),
  ).length;
  if (holding === 1) return;
  causes.push({
    reason: 'FieldValueInvalid',
    field: path,
    message: `Invalid value: "object": ${path} in body must validate one and only one schema (oneOf). ${holding === 0 ? 'Found none valid' : `Found ${holding} valid alternatives`}`,
  });
}

/**
 * Validates and prunes a custom resource. `apiVersion`, `kind` and `metadata` are never pruned:
 * the API server manages them itself.
 */
export function validateCustomResource(schema: Schema | undefined, object: Record<string, unknown>): ValidationResult {
  if (!schema) return { value: object, causes: [], unknownFields: [] };
  const causes: StatusCause[] = [];
  const unknownFields: string[] = [];
  const { apiVersion, kind, metadata, ...rest } = object;
  const rootSchema: Schema = {
    ...schema,
    required: (Array.isArray(schema.required) ? schema.required : []).filter((r) => r !== 'metadata' && r !== 'apiVersion' && r !== 'kind'),
  };
  if (isPlainObject(rootSchema.properties)) {
    const { apiVersion: _a, kind: _k, metadata: _m, ...properties } = rootSchema.properties;
    rootSchema.properties = properties;
  }
  const validated = validateObject(rootSchema, rest, '', causes, unknownFields);
  return { value: { apiVersion, kind, metadata, ...validated }, causes, unknownFields };
}
