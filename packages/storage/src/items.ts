import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants, createGzip, gzipSync } from 'node:zlib';
import type { BackupStorage } from './backup-storage.js';
import { StorageError, StorageErrorCode } from './errors.js';
import { listSegments, readSegment } from './item-segments.js';
import { backupLayout } from './layout.js';
import { type TarEntry, writeTar } from './tar-writer.js';

/** Up to this much tar (before gzip) is assembled in memory and written in one put. */
const IN_MEMORY_TAR_BYTES = 4 * 1024 * 1024;

/** Velero's `metadata/version` content: the backup format version (docs/velero.md#storage-layout). */
export const BACKUP_FORMAT_VERSION = '1.1.0';

export interface AssembleOptions {
  /** mtime of every tar entry; the same value makes a re-assembly byte-identical. Default now. */
  mtime?: Date;
  /**
   * Also write Velero's `resources/<gr>/<version>-preferredversion/…` copy of every item (same
   * bytes), as Velero does; the version comes from the item's apiVersion. Default true.
   */
  preferredVersionCopies?: boolean;
}

export interface AssembleResult {
  /** Key of the tarball written. */
  key: string;
  /** Staged items in the tarball. */
  items: number;
  /** Velero's resource list: `"<apiVersion>/<Kind>"` → sorted `ns/name` (or `name`), for the -resource-list sidecar. */
  resourceList: Record<string, string[]>;
}

interface ParsedItem {
  apiVersion: string;
  kind: string;
  namespace: string | undefined;
  name: string;
}

function parseStagedItem(key: string, bytes: Buffer): ParsedItem {
  let value: unknown;
  try {
    value = JSON.parse(bytes.toString('utf8'));
  } catch (cause) {
    throw new StorageError(StorageErrorCode.corruptItem, `staged item ${key} is not JSON`, { cause });
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    throw new StorageError(StorageErrorCode.corruptItem, `staged item ${key} is not a JSON object`);
  }
  const object = value as { apiVersion?: unknown; kind?: unknown; metadata?: { name?: unknown; namespace?: unknown } };
  const str = (v: unknown): string | undefined => (typeof v === 'string' && v !== '' ? v : undefined);
  return {
    apiVersion: str(object.apiVersion) ?? '',
    kind: str(object.kind) ?? '',
    namespace: str(object.metadata?.namespace),
    name:
      str(object.metadata?.name) ??
      key
        .split('/')
        .at(-1)
        ?.replace(/\.json$/, '') ??
      '',
  };
}

/**
 * Assembles `backups/<name>/<name>.tar.gz` from the staged segments: `metadata/version` first,
 * then every item at its Velero path (`resources/<gr>/namespaces/<ns>/<name>.json`,
 * `resources/<gr>/cluster/<name>.json`), entries mode 0755. Items come segment by segment,
 * newest segment first; an item staged twice (a re-delivered job) is packed once, the newest
 * copy. The same segments give the same bytes. Up to IN_MEMORY_TAR_BYTES it is built in memory,
 * past that it streams (one segment in memory at a time); either way it is written atomically,
 * so assembling twice is safe. Every item packed is parsed: a cut one fails STORAGE_CORRUPT_ITEM.
 */
export async function assembleTarball(storage: BackupStorage, backupName: string, opts: AssembleOptions = {}): Promise<AssembleResult> {
  const layout = backupLayout(backupName);
  const mtime = opts.mtime ?? new Date();
  const preferredCopies = opts.preferredVersionCopies ?? true;
  const segments = await listSegments(storage, backupName);
  const resourceList = new Map<string, string[]>();
  const packed = new Set<string>();

  async function* entries(): AsyncGenerator<TarEntry> {
    yield { path: 'metadata/version', data: Buffer.from(`${BACKUP_FORMAT_VERSION}\n`) };
    for (const key of segments) {
      const data = await storage.getObject(key).catch((err: unknown) => {
        // A segment failing its checksum (an object store's) is a segment not whole: the same repair applies.
        if (err instanceof StorageError && err.code === StorageErrorCode.corruptObject) {
          throw new StorageError(StorageErrorCode.corruptItem, `staged segment ${key} is not whole: ${err.message}`, { cause: err });
        }
        throw err;
      });
      if (!data) throw new StorageError(StorageErrorCode.corruptItem, `staged segment ${key} disappeared during assembly`);
      for (const { path, json } of readSegment(key, data)) {
        if (packed.has(path)) continue;
        packed.add(path);
        const item = parseStagedItem(`${key}: ${path}`, json);
        yield { path: `resources/${path}`, data: json };
        const version = item.apiVersion.split('/').at(-1);
        if (preferredCopies && version) {
          const slash = path.indexOf('/');
          yield { path: `resources/${path.slice(0, slash)}/${version}-preferredversion${path.slice(slash)}`, data: json };
        }
        const listKey = `${item.apiVersion}/${item.kind}`;
        const entry = item.namespace ? `${item.namespace}/${item.name}` : item.name;
        const names = resourceList.get(listKey);
        if (names) names.push(entry);
        else resourceList.set(listKey, [entry]);
      }
    }
  }

  // Level 1 (fastest): on finalize's critical path the default level 6 cost ~5× the CPU. The
  // price is size — 1.5× on the benchmark's uniform generated pods — for an archive that holds
  // only manifests; any gzip reader (Velero's included) reads either.
  // A small archive is built in memory and deflated in one call (a few milliseconds): streaming it
  // costs a thread-pool round trip per chunk and per file call, each a wait for a core when the
  // machine is busy. Past IN_MEMORY_TAR_BYTES the rest streams, so memory stays bounded.
  const tar = writeTar(entries(), { mtime, mode: 0o755 })[Symbol.asyncIterator]();
  const head: Buffer[] = [];
  let headBytes = 0;
  let done = false;
  while (headBytes <= IN_MEMORY_TAR_BYTES) {
    const next = await tar.next();
    if (next.done) {
      done = true;
      break;
    }
    head.push(next.value);
    headBytes += next.value.length;
  }
  if (done) {
    await storage.putObject(layout.tarball, gzipSync(Buffer.concat(head, headBytes), { level: constants.Z_BEST_SPEED }));
  } else {
    const gzip = createGzip({ level: constants.Z_BEST_SPEED });
    const rest = { [Symbol.asyncIterator]: () => tar };
    const produced = pipeline(
      Readable.from(
        (async function* () {
          yield* head;
          yield* rest;
        })(),
      ),
      gzip,
    );
    // If the tar side fails, `pipeline` destroys gzip and putStream rejects too; keep the first error.
    produced.catch(() => {});
    await Promise.all([storage.putStream(layout.tarball, gzip), produced]);
  }

  const sorted: Record<string, string[]> = {};
  for (const listKey of [...resourceList.keys()].sort()) sorted[listKey] = (resourceList.get(listKey) ?? []).sort();
  return { key: layout.tarball, items: packed.size, resourceList: sorted };
}
