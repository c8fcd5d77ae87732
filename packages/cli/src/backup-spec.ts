import { readFile } from 'node:fs/promises';
import { parse as parseYaml } from 'yaml';
import type { CreateBackupRequest } from './api-types.js';
import { csv } from './args.js';
import { CliError, CliErrorCode } from './errors.js';

/**
 * The flags that select what a backup takes and a restore restores, as Velero names them: the same
 * flags and spec fields in `backup create`, `schedule create` and `restore create`.
 */
export const SELECTION_OPTIONS = {
  'include-namespaces': { type: 'string' },
  'exclude-namespaces': { type: 'string' },
  'include-resources': { type: 'string' },
  'exclude-resources': { type: 'string' },
  selector: { type: 'string', short: 'l' },
  'include-cluster-resources': { type: 'boolean' },
} as const;

export const SELECTION_FLAGS = Object.keys(SELECTION_OPTIONS) as ReadonlyArray<keyof typeof SELECTION_OPTIONS>;

/** The `backup create` flags that shape the spec (all optional; the API validates values). */
export interface BackupSpecFlags {
  name?: string | undefined;
  includeNamespaces?: string | undefined;
  excludeNamespaces?: string | undefined;
  includeResources?: string | undefined;
  excludeResources?: string | undefined;
  selector?: string | undefined;
  includeClusterResources?: boolean | undefined;
  defaultVolumesToFsBackup?: boolean | undefined;
  fsBackupTimeout?: string | undefined;
  ttl?: string | undefined;
}

export interface LabelSelector {
  matchLabels?: Record<string, string>;
  matchExpressions?: Array<{ key: string; operator: 'In' | 'NotIn' | 'Exists' | 'DoesNotExist'; values?: string[] }>;
}

/**
 * kubectl's selector syntax to a LabelSelector: `k=v`, `k==v`, `k!=v`, `k in (a,b)`,
 * `k notin (a,b)`, `k` (exists), `!k` (does not exist), joined by commas. Keys and values are
 * checked by the API; here only the shape.
 */
export function parseSelector(text: string): LabelSelector {
  const terms: string[] = [];
  let depth = 0;
  let current = '';
  for (const c of text) {
    if (c === '(') depth++;
    if (c === ')') depth = Math.max(0, depth - 1);
    if (c === ',' && depth === 0) {
      terms.push(current);
      current = '';
    } else current += c;
  }
  terms.push(current);
  const matchLabels: Record<string, string> = {};
  const matchExpressions: NonNullable<LabelSelector['matchExpressions']> = [];
  for (const raw of terms) {
    const term = raw.trim();
    if (term === '') throw new CliError(CliErrorCode.usage, `--selector ${JSON.stringify(text)} has an empty term`);
    let m = /^([^\s=!()]+)\s+(in|notin)\s*\(([^()]*)\)$/.exec(term);
    if (m) {
      matchExpressions.push({ key: m[1] as string, operator: m[2] === 'in' ? 'In' : 'NotIn', values: csv(m[3] as string) });
      continue;
    }
    m = /^([^\s=!()]+)\s*!=\s*([^\s=!()]*)$/.exec(term);
    if (m) {
      matchExpressions.push({ key: m[1] as string, operator: 'NotIn', values: [m[2] as string] });
      continue;
    }
    m = /^([^\s=!()]+)\s*==?\s*([^\s=!()]*)$/.exec(term);
    if (m) {
      matchLabels[m[1] as string] = m[2] as string;
      continue;
    }
    m = /^!\s*([^\s=!()]+)$/.exec(term);
    if (m) {
      matchExpressions.push({ key: m[1] as string, operator: 'DoesNotExist' });
      continue;
    }
    m = /^([^\s=!()]+)$/.exec(term);
    if (m) {
      matchExpressions.push({ key: m[1] as string, operator: 'Exists' });
      continue;
    }
    throw new CliError(
      CliErrorCode.usage,
      `--selector term ${JSON.stringify(term)} is not understood; use k=v, k!=v, "k in (a,b)", "k notin (a,b)", k or !k`,
    );
  }
  return {
    ...(Object.keys(matchLabels).length > 0 ? { matchLabels } : {}),
    ...(matchExpressions.length > 0 ? { matchExpressions } : {}),
  };
}

/** The spec fields the selection flags set (flags not given set nothing). */
export function selectionSpec(flags: BackupSpecFlags): Record<string, unknown> {
  const spec: Record<string, unknown> = {};
  if (flags.includeNamespaces !== undefined) spec.includedNamespaces = csv(flags.includeNamespaces);
  if (flags.excludeNamespaces !== undefined) spec.excludedNamespaces = csv(flags.excludeNamespaces);
  if (flags.includeResources !== undefined) spec.includedResources = csv(flags.includeResources);
  if (flags.excludeResources !== undefined) spec.excludedResources = csv(flags.excludeResources);
  if (flags.selector !== undefined) spec.labelSelector = parseSelector(flags.selector);
  if (flags.includeClusterResources !== undefined) spec.includeClusterResources = flags.includeClusterResources;
  return spec;
}

/** The spec fields the flags set (flags not given set nothing). */
export function specFromFlags(flags: BackupSpecFlags): Record<string, unknown> {
  const spec = selectionSpec(flags);
  if (flags.defaultVolumesToFsBackup !== undefined) spec.defaultVolumesToFsBackup = flags.defaultVolumesToFsBackup;
  if (flags.fsBackupTimeout !== undefined) spec.fsBackupTimeout = flags.fsBackupTimeout;
  if (flags.ttl !== undefined) spec.ttl = flags.ttl;
  return spec;
}

const isRecord = (v: unknown): v is Record<string, unknown> => typeof v === 'object' && v !== null && !Array.isArray(v);

/**
 * A spec document to a request. Accepted shapes: `{name?, spec}` (the API's body), a Velero-style
 * `Backup` manifest (`kind: Backup`, `metadata.name`, `spec`), or a bare spec. Fields inside the
 * spec are passed through untouched: the API validates them and names every problem.
 */
export function requestFromDocument(doc: unknown, source: string): CreateBackupRequest {
  if (!isRecord(doc)) throw new CliError(CliErrorCode.specFile, `${source}: expected a mapping (a backup spec), got ${describe(doc)}`);
  if (doc.kind !== undefined || doc.apiVersion !== undefined) {
    if (doc.kind !== 'Backup')
      throw new CliError(CliErrorCode.specFile, `${source}: kind must be Backup, got ${JSON.stringify(doc.kind ?? null)}`);
    const meta = isRecord(doc.metadata) ? doc.metadata : {};
    const spec = doc.spec ?? {};
    if (!isRecord(spec)) throw new CliError(CliErrorCode.specFile, `${source}: spec must be a mapping, got ${describe(spec)}`);
    return {
      ...(typeof meta.name === 'string' ? { name: meta.name } : {}),
      ...(isRecord(meta.labels) ? { labels: meta.labels as Record<string, string> } : {}),
      ...(isRecord(meta.annotations) ? { annotations: meta.annotations as Record<string, string> } : {}),
      spec,
    };
  }
  if ('spec' in doc) {
    const extra = Object.keys(doc).filter((k) => !['spec', 'name', 'labels', 'annotations'].includes(k));
    if (extra.length > 0)
      throw new CliError(
        CliErrorCode.specFile,
        `${source}: unexpected top-level field(s) ${extra.join(', ')}; a request is {name, labels, annotations, spec}`,
      );
    if (!isRecord(doc.spec)) throw new CliError(CliErrorCode.specFile, `${source}: spec must be a mapping, got ${describe(doc.spec)}`);
    if (doc.name !== undefined && typeof doc.name !== 'string')
      throw new CliError(CliErrorCode.specFile, `${source}: name must be a string, got ${describe(doc.name)}`);
    return {
      ...(typeof doc.name === 'string' ? { name: doc.name } : {}),
      ...(isRecord(doc.labels) ? { labels: doc.labels as Record<string, string> } : {}),
      ...(isRecord(doc.annotations) ? { annotations: doc.annotations as Record<string, string> } : {}),
      spec: doc.spec,
    };
  }
  return { spec: doc };
}

/** Reads a YAML or JSON spec file (`-` = stdin text given by the caller). */
export async function readSpecFile(path: string, stdinText?: () => Promise<string>): Promise<CreateBackupRequest> {
  let text: string;
  try {
    text = path === '-' && stdinText ? await stdinText() : await readFile(path, 'utf8');
  } catch (err) {
    const code = (err as NodeJS.ErrnoException).code;
    throw new CliError(
      CliErrorCode.specFile,
      `cannot read the spec file ${path}: ${code === 'ENOENT' ? 'no such file' : code === 'EISDIR' ? 'it is a directory' : (err as Error).message}`,
      [],
      { cause: err },
    );
  }
  let doc: unknown;
  try {
    // YAML is a superset of JSON, so one parser reads both; several documents are an error.
    doc = parseYaml(text, { prettyErrors: true, uniqueKeys: true });
  } catch (err) {
    const message = (err as Error).message.split('\n')[0];
    throw new CliError(CliErrorCode.specFile, `${path} is not valid YAML/JSON: ${message}`, [], { cause: err });
  }
  return requestFromDocument(doc, path);
}

/** File request + flags: a flag wins over the same field of the file; `--name` over the file's name. */
export function mergeRequest(fromFile: CreateBackupRequest | undefined, flags: BackupSpecFlags): CreateBackupRequest {
  const spec = { ...(fromFile?.spec ?? {}), ...specFromFlags(flags) };
  const name = flags.name ?? fromFile?.name;
  return {
    ...(name !== undefined ? { name } : {}),
    ...(fromFile?.labels ? { labels: fromFile.labels } : {}),
    ...(fromFile?.annotations ? { annotations: fromFile.annotations } : {}),
    spec,
  };
}

function describe(v: unknown): string {
  if (v === null) return 'null';
  if (Array.isArray(v)) return 'a list';
  return typeof v === 'string' ? `the string ${JSON.stringify(v.slice(0, 40))}` : `a ${typeof v}`;
}
