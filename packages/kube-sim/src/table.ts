/*
 * Server-side printing (`meta.k8s.io/v1` Table), as kube-apiserver answers `kubectl get`: kubectl
 * asks `Accept: application/json;as=Table;v=v1;g=meta.k8s.io, …, application/json` and prints the
 * columns the server sends. For custom resources the columns are the CRD version's
 * `additionalPrinterColumns` after `Name` (kube-apiserver's CRD table convertor; a version without
 * them gets `Age`), each cell the first JSONPath result: strings as printed, integers, numbers and
 * booleans as values, dates as a human age (`5m`, `3h`, `2d`). Built-in kinds are answered as
 * plain JSON (kubectl then prints names and ages itself).
 */
import type { JsonObject, KubeObject } from './kube-object.js';
import type { ResourceType } from './resource-registry.js';

export interface PrinterColumn {
  name: string;
  type: string;
  jsonPath: string;
  format?: string;
  description?: string;
  priority?: number;
}

/** Whether the client prefers a Table (its first media type asks for one of meta.k8s.io v1 or v1beta1). */
export function wantsTable(accept: string | undefined): 'v1' | 'v1beta1' | undefined {
  if (!accept) return undefined;
  const first = accept.split(',')[0] ?? '';
  const params = new Map(
    first
      .split(';')
      .slice(1)
      .map((part) => part.trim().split('=') as [string, string]),
  );
  if (params.get('as') !== 'Table' || params.get('g') !== 'meta.k8s.io') return undefined;
  const version = params.get('v');
  return version === 'v1' || version === 'v1beta1' ? version : undefined;
}

const AGE: PrinterColumn = { name: 'Age', type: 'date', jsonPath: '.metadata.creationTimestamp' };

/** The Table of `objects` for a custom resource type; `includeObject` as the request asked (default Metadata). */
export function toTable(
  type: ResourceType,
  objects: readonly KubeObject[],
  listMetadata: Record<string, unknown>,
  version: 'v1' | 'v1beta1',
  includeObject: string | null,
  now: number = Date.now(),
): JsonObject {
  const columns = type.printerColumns && type.printerColumns.length > 0 ? type.printerColumns : [AGE];
  const columnDefinitions = [
    { name: 'Name', type: 'string', format: 'name', description: 'Name must be unique within a namespace.', priority: 0 },
    ...columns.map((c) => ({
      name: c.name,
      type: c.type,
      format: c.format ?? '',
      description: c.description ?? '',
      priority: c.priority ?? 0,
    })),
  ];
  const rows = objects.map((object) => ({
    cells: [object.metadata.name ?? '', ...columns.map((column) => cellOf(column, object, now))],
    object: rowObject(object, includeObject),
  }));
  return { kind: 'Table', apiVersion: `meta.k8s.io/${version}`, metadata: listMetadata, columnDefinitions, rows } as unknown as JsonObject;
}

function rowObject(object: KubeObject, includeObject: string | null): unknown {
  if (includeObject === 'None') return undefined;
  if (includeObject === 'Object') return object;
  return { kind: 'PartialObjectMetadata', apiVersion: 'meta.k8s.io/v1', metadata: object.metadata };
}

function cellOf(column: PrinterColumn, object: KubeObject, now: number): unknown {
  const value = valueAt(object, column.jsonPath);
  if (value === undefined || value === null) return null;
  switch (column.type) {
    case 'integer':
      return typeof value === 'number' ? Math.trunc(value) : null;
    case 'number':
      return typeof value === 'number' ? value : null;
    case 'boolean':
      return typeof value === 'boolean' ? value : null;
    case 'date': {
      const at = typeof value === 'string' ? Date.parse(value) : Number.NaN;
      return Number.isNaN(at) ? null : humanDuration(now - at);
    }
    default:
      return typeof value === 'string' ? value : JSON.stringify(value);
  }
}

/** The value of a simple JSONPath (`.status.progress.summary`, `.spec.items[0].name`), or undefined. */
function valueAt(object: unknown, jsonPath: string): unknown {
  const path = jsonPath.replace(/^\{?\.?/, '').replace(/\}$/, '');
  let node: unknown = object;
  for (const part of path.split('.').filter((p) => p !== '')) {
    const match = /^([^[\]]*)((?:\[\d+\])*)$/.exec(part);
    if (!match) return undefined;
    if (match[1]) node = typeof node === 'object' && node !== null ? (node as Record<string, unknown>)[match[1]] : undefined;
    for (const index of (match[2] ?? '').match(/\d+/g) ?? []) node = Array.isArray(node) ? node[Number(index)] : undefined;
  }
  return node;
}

/** apimachinery's `duration.HumanDuration`: `45s`, `3m20s`, `15m`, `5h30m`, `20h`, `3d4h`, `30d`, `2y10d`. */
export function humanDuration(ms: number): string {
  const seconds = Math.floor(ms / 1000);
  if (seconds < -1) return '<invalid>';
  if (seconds < 0) return '0s';
  if (seconds < 120) return `${seconds}s`;
  const minutes = Math.floor(seconds / 60);
  if (minutes < 10) return seconds % 60 === 0 ? `${minutes}m` : `${minutes}m${seconds % 60}s`;
  if (minutes < 180) return `${minutes}m`;
  const hours = Math.floor(minutes / 60);
  if (hours < 8) return minutes % 60 === 0 ? `${hours}h` : `${hours}h${minutes % 60}m`;
  if (hours < 48) return `${hours}h`;
  if (hours < 24 * 8) return hours % 24 === 0 ? `${Math.floor(hours / 24)}d` : `${Math.floor(hours / 24)}d${hours % 24}h`;
  if (hours < 24 * 365 * 2) return `${Math.floor(hours / 24)}d`;
  const days = Math.floor(hours / 24);
  if (hours < 24 * 365 * 8) return days % 365 === 0 ? `${Math.floor(days / 365)}y` : `${Math.floor(days / 365)}y${days % 365}d`;
  return `${Math.floor(days / 365)}y`;
}
