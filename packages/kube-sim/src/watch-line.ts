import type { KubeObject } from './kube-object.js';

/**
 * One watch event as the line a watch stream sends. A change reaches every watcher of its kind
 * (twenty node agents watch every PVR), so an object's JSON is made once and kept by identity:
 * stored objects are never mutated in place (object-store.ts), so the text cannot go stale, and
 * it goes away with the object.
 */
const objectJson = new WeakMap<object, string>();

export function watchLine(event: { type: string; object: unknown }): string {
  const { object } = event;
  if (typeof object !== 'object' || object === null) return `${JSON.stringify(event)}\n`;
  let json = objectJson.get(object);
  if (json === undefined) {
    json = JSON.stringify(object);
    objectJson.set(object, json);
  }
  return `{"type":${JSON.stringify(event.type)},"object":${json}}\n`;
}

/**
 * The object as served under `apiVersion` (a CRD's other version): one copy per stored object and
 * version, so every watcher of that version shares it (and its JSON) rather than copying per watcher.
 */
const servedCopies = new WeakMap<KubeObject, Map<string, KubeObject>>();

export function servedAs(object: KubeObject, apiVersion: string): KubeObject {
  if (object.apiVersion === apiVersion) return object;
  let copies = servedCopies.get(object);
  if (!copies) {
    copies = new Map();
    servedCopies.set(object, copies);
  }
  let copy = copies.get(apiVersion);
  if (!copy) {
    copy = { ...object, apiVersion };
    copies.set(apiVersion, copy);
  }
  return copy;
}
