/*
 * JSON helpers for the restore rules: structural equality, field paths that may be refilled by
 * the cluster, and JSON merge patches (RFC 7386).
 */
import type { JsonObject } from './types.js';

export function isJsonObject(value: unknown): value is JsonObject {
  return typeof value === 'object' && value !== null && !Array.isArray(value);
}

/** Structural equality of two JSON values (key order ignored, array order kept). */
export function jsonEqual(a: unknown, b: unknown): boolean {
  if (a === b) return true;
  if (Array.isArray(a)) return Array.isArray(b) && a.length === b.length && a.every((value, i) => jsonEqual(value, b[i]));
  if (isJsonObject(a) && isJsonObject(b)) {
    const keys = Object.keys(a);
    if (keys.length !== Object.keys(b).length) return false;
    return keys.every((key) => Object.hasOwn(b, key) && jsonEqual(a[key], b[key]));
  }
  return false;
}

/** `spec.ports[3].nodePort` matches the pattern `spec.ports[*].nodePort`. */
export function pathMatches(pattern: string, path: string): boolean {
  if (!pattern.includes('[*]')) return pattern === path;
  const source = pattern
    .replace(/[.+?^${}()|\\]/g, '\\$&')
    .replace(/\[\*\]/g, '\\[\\d+\\]')
    .replace(/\[(?!\\d)/g, '\\[');
  return new RegExp(`^${source}$`).test(path);
}

/** `a.b`, `a[0]`, `metadata.labels["app.kubernetes.io/name"]`. */
export function childPath(parent: string, key: string | number): string {
  if (typeof key === 'number') return `${parent}[${key}]`;
  if (/^[A-Za-z_$][\w$]*$/.test(key)) return parent ? `${parent}.${key}` : key;
  return `${parent}[${JSON.stringify(key)}]`;
}

/**
 * The JSON merge patch that turns `from` into `to`; a field `to` lacks is deleted (null) unless
 * its path matches one of `keepPaths` (fields the server owns). Undefined when nothing changes.
 */
export function createMergePatch(from: JsonObject, to: JsonObject, keepPaths: readonly string[] = [], path = ''): JsonObject | undefined {
  const patch: JsonObject = {};
  for (const [key, value] of Object.entries(to)) {
    const current = from[key];
    if (jsonEqual(current, value)) continue;
    if (isJsonObject(current) && isJsonObject(value)) {
      const nested = createMergePatch(current, value, keepPaths, childPath(path, key));
      if (nested !== undefined) patch[key] = nested;
    } else {
      patch[key] = structuredClone(value);
    }
  }
  for (const key of Object.keys(from)) {
    if (Object.hasOwn(to, key)) continue;
    const fieldPath = childPath(path, key);
    if (keepPaths.some((pattern) => pathMatches(pattern, fieldPath))) continue;
    patch[key] = null;
  }
  return Object.keys(patch).length > 0 ? patch : undefined;
}
