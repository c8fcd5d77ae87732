/** Server-side patch application: JSON merge patch, JSON patch and a strategic-merge approximation. */
import { apiError } from './api-status.js';
import { deepEqual, isPlainObject } from './kube-object.js';

/** RFC 7386: objects merge recursively, `null` deletes, anything else replaces. */
export function applyMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  const result: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (value === null) delete result[key];
    else result[key] = applyMergePatch(result[key], value);
  }
  return result;
}

/**
 * Strategic merge patch, approximated: like a merge patch, but lists whose items all carry a `name`
 * (containers, volumes, env, ports, volumeMounts) merge item by item on that key, `$patch: delete`
 * removes an item, `$patch: replace` replaces, and other `$` directives are dropped.
 */
export function applyStrategicMergePatch(target: unknown, patch: unknown): unknown {
  if (!isPlainObject(patch)) return structuredClone(patch);
  if (patch.$patch === 'replace') {
    const { $patch: _directive, ...rest } = patch;
    return stripDirectives(rest);
  }
  const result: Record<string, unknown> = isPlainObject(target) ? { ...target } : {};
  for (const [key, value] of Object.entries(patch)) {
    if (key.startsWith('$')) continue;
    if (value === null) {
      delete result[key];
    } else if (Array.isArray(value) && Array.isArray(result[key]) && isNamedList(value) && isNamedList(result[key] as unknown[])) {
      result[key] = mergeNamedLists(result[key] as Record<string, unknown>[], value as Record<string, unknown>[]);
    } else {
      result[key] = applyStrategicMergePatch(result[key], value);
    }
  }
  return result;
}

function isNamedList(list: unknown[]): boolean {
  return list.every((item) => isPlainObject(item) && typeof item.name === 'string');
}

function mergeNamedLists(current: Record<string, unknown>[], patch: Record<string, unknown>[]): Record<string, unknown>[] {
  const merged = current.map((item) => ({ ...item }));
  for (const patchItem of patch) {
    const index = merged.findIndex((item) => item.name === patchItem.name);
    if (patchItem.$patch === 'delete') {
      if (index >= 0) merged.splice(index, 1);
    } else if (index >= 0) {
      merged[index] = applyStrategicMergePatch(merged[index], patchItem) as Record<string, unknown>;
    } else {
      merged.push(stripDirectives(patchItem) as Record<string, unknown>);
    }
  }
  return merged;
}

function stripDirectives(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(stripDirectives);
  if (!isPlainObject(value)) return value;
  const out: Record<string, unknown> = {};
  for (const [key, item] of Object.entries(value)) if (!key.startsWith('$')) out[key] = stripDirectives(item);
  return out;
}

export interface JsonPatchOperation {
  op: string;
  path: string;
  from?: string;
  value?: unknown;
}

function parsePointer(pointer: string): string[] {
  if (pointer === '') return [];
  if (!pointer.startsWith('/')) throw apiError('BadRequest', `the JSON pointer "${pointer}" must start with "/"`);
  return pointer
    .slice(1)
    .split('/')
    .map((token) => token.replace(/~1/g, '/').replace(/~0/g, '~'));
}

function invalidPatch(message: string): Error {
  // The API server answers JSON patch failures with 422 (e.g. a failed "test" or a missing path).
  return apiError('Invalid', message);
}

function getParent(doc: unknown, tokens: string[], pointer: string): { parent: unknown; key: string } {
  let current = doc;
  for (const token of tokens.slice(0, -1)) {
    if (Array.isArray(current)) {
      const index = Number(token);
      if (!/^\d+$/.test(token) || index >= current.length) throw invalidPatch(`jsonpatch: unable to find path "${pointer}"`);
      current = current[index];
    } else if (isPlainObject(current)) {
      if (!Object.hasOwn(current, token)) throw invalidPatch(`jsonpatch: unable to find path "${pointer}"`);
      current = current[token];
    } else {
      throw invalidPatch(`jsonpatch: unable to find path "${pointer}"`);
    }
  }
  return { parent: current, key: tokens[tokens.length - 1]! };
}

function readPointer(doc: unknown, pointer: string): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return doc;
  const { parent, key } = getParent(doc, tokens, pointer);
  if (Array.isArray(parent)) {
    const index = Number(key);
    if (!/^\d+$/.test(key) || index >= parent.length) throw invalidPatch(`jsonpatch: unable to find path "${pointer}"`);
    return parent[index];
  }
  if (isPlainObject(parent) && Object.hasOwn(parent, key)) return parent[key];
  throw invalidPatch(`jsonpatch: unable to find path "${pointer}"`);
}

function addAt(doc: unknown, pointer: string, value: unknown, replaceOnly: boolean): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) return structuredClone(value);
  const { parent, key } = getParent(doc, tokens, pointer);
  if (Array.isArray(parent)) {
    if (replaceOnly) {
      const index = Number(key);
      if (!/^\d+$/.test(key) || index >= parent.length)
        throw invalidPatch(`jsonpatch: replace operation does not apply: doc is missing key: ${pointer}`);
      parent[index] = structuredClone(value);
    } else if (key === '-') {
      parent.push(structuredClone(value));
    } else {
      const index = Number(key);
      if (!/^\d+$/.test(key) || index > parent.length)
        throw invalidPatch(`jsonpatch: add operation does not apply: index out of range: ${pointer}`);
      parent.splice(index, 0, structuredClone(value));
    }
  } else if (isPlainObject(parent)) {
    if (replaceOnly && !Object.hasOwn(parent, key)) {
      throw invalidPatch(`jsonpatch: replace operation does not apply: doc is missing key: ${pointer}`);
    }
    parent[key] = structuredClone(value);
  } else {
    throw invalidPatch(`jsonpatch: unable to find path "${pointer}"`);
  }
  return doc;
}

function removeAt(doc: unknown, pointer: string): unknown {
  const tokens = parsePointer(pointer);
  if (tokens.length === 0) throw invalidPatch('jsonpatch: cannot remove the whole document');
  const { parent, key } = getParent(doc, tokens, pointer);
  if (Array.isArray(parent)) {
    const index = Number(key);
    if (!/^\d+$/.test(key) || index >= parent.length)
      throw invalidPatch(`jsonpatch: remove operation does not apply: doc is missing path: "${pointer}"`);
    parent.splice(index, 1);
  } else if (isPlainObject(parent) && Object.hasOwn(parent, key)) {
    delete parent[key];
  } else {
    throw invalidPatch(`jsonpatch: remove operation does not apply: doc is missing path: "${pointer}"`);
  }
  return doc;
}

/** RFC 6902 JSON patch over a copy of `target`. */
export function applyJsonPatch(target: unknown, operations: unknown): unknown {
  if (!Array.isArray(operations)) throw apiError('BadRequest', 'json patch must be a JSON array of operations');
  let doc = structuredClone(target);
  for (const raw of operations) {
    if (!isPlainObject(raw) || typeof raw.op !== 'string' || typeof raw.path !== 'string') {
      throw apiError('BadRequest', 'json patch operations need string "op" and "path"');
    }
    const op = raw as unknown as JsonPatchOperation;
    switch (op.op) {
      case 'add':
        if (!Object.hasOwn(raw, 'value')) throw apiError('BadRequest', 'jsonpatch add operation needs a value');
        doc = addAt(doc, op.path, op.value, false);
        break;
      case 'replace':
        if (!Object.hasOwn(raw, 'value')) throw apiError('BadRequest', 'jsonpatch replace operation needs a value');
        doc = addAt(doc, op.path, op.value, true);
        break;
      case 'remove':
        doc = removeAt(doc, op.path);
        break;
      case 'move':
      case 'copy': {
        if (typeof op.from !== 'string') throw apiError('BadRequest', `jsonpatch ${op.op} operation needs "from"`);
        const value = structuredClone(readPointer(doc, op.from));
        if (op.op === 'move') doc = removeAt(doc, op.from);
        doc = addAt(doc, op.path, value, false);
        break;
      }
      case 'test': {
        const actual = readPointer(doc, op.path);
        if (!deepEqual(actual, op.value)) throw invalidPatch(`jsonpatch: testing value ${op.path} failed`);
        break;
      }
      default:
        throw apiError('BadRequest', `jsonpatch: unexpected operation "${op.op}"`);
    }
  }
  return doc;
}
