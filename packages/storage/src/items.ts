import { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { constants, createGzip, gzipSync } from 'node:zlib';
import type { BackupStorage, PutOptions } from './backup-storage.js';
import { StorageError, StorageErrorCode } from './errors.js';
import { backupLayout, type ItemRef, itemStagingKey } from './layout.js';
import { type TarEntry, writeTar } from './tar-writer.js';

/** An item as an item-block job backs it up: where it goes, and the object itself. */
export interface BackupItem extends ItemRef {
  /** The Kubernetes object (after any item actions), written as JSON. */
  object: Record<string, unknown>;
}

/**
 * Stages one item under `backups/<name>/items/…`. Idempotent: a re-delivered job writes the same
 * key again (atomically), so the tarball holds each item once. Returns the key. With
 * `durable: false` the item is not flushed to disk (PutOptions): whoever packs it must validate
 * it — assembleTarball parses every staged item and rejects an empty or truncated one.
 */
export async function writeItem(storage: BackupStorage, backupName: string, item: BackupItem, opts: PutOptions = {}): Promise<string> {
  const key = itemStagingKey(backupName, item);
  await storage.putObject(key, JSON.stringify(item.object), opts);
  return key;
}

/** Up to this much tar (before gzip) is assembled in memory and written in one put. */
const IN_MEMORY_TAR_BYTES = 4 * 1024 * 1024;

/** Staged items read ahead of the tar writer while assembling. */
const READ_AHEAD = 16;

/** Velero's `metadata/version` content: the backup format version (velero-semantics §8.2). */
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
 * Assembles `backups/<name>/<name>.tar.gz` from the staged items: `metadata/version` first,
 * then every item at its Velero path (`resources/<gr>/namespaces/<ns>/<name>.json`,
 * `resources/<gr>/cluster/<name>.json`), in sorted key order, entries mode 0755. Up to
 * IN_MEMORY_TAR_BYTES it is built in memory, past that it streams item by item (memory stays
 * bounded); either way it is written atomically, so assembling twice is safe.
 */
export async function assembleTarball(storage: BackupStorage, backupName: string, opts: AssembleOptions = {}): Promise<AssembleResult> {
  const layout = backupLayout(backupName);
  const mtime = opts.mtime ?? new Date();
  const preferredCopies = opts.preferredVersionCopies ?? true;
  const keys = await storage.list(layout.itemsPrefix);
  const resourceList = new Map<string, string[]>();

  // Reads run a few items ahead of the tar writer: one after another, each read's latency (open,
  // stat, read, close) added up to most of finalize's time for many small items.
  const pending: Array<Promise<Buffer | undefined>> = [];
  let nextRead = 0;
  const readAhead = () => {
    while (nextRead < keys.length && pending.length < READ_AHEAD) {
      const read = storage.getObject(keys[nextRead++] as string);
      read.catch(() => {}); // awaited in order below; a failure must not be unhandled meanwhile
      pending.push(read);
    }
  };
  async function* entries(): AsyncGenerator<TarEntry> {
    yield { path: 'metadata/version', data: Buffer.from(`${BACKUP_FORMAT_VERSION}\n`) };
    for (const key of keys) {
      readAhead();
      const data = await pending.shift();
      if (!data) throw new StorageError(StorageErrorCode.corruptItem, `staged item ${key} disappeared during assembly`);
      const item = parseStagedItem(key, data);
      const relative = key.slice(layout.itemsPrefix.length); // <gr>/namespaces/<ns>/<name>.json | <gr>/cluster/<name>.json
      yield { path: `resources/${relative}`, data };
      const version = item.apiVersion.split('/').at(-1);
      if (preferredCopies && version) {
        const slash = relative.indexOf('/');
        yield { path: `resources/${relative.slice(0, slash)}/${version}-preferredversion${relative.slice(slash)}`, data };
      }
      const listKey = `${item.apiVersion}/${item.kind}`;
      const entry = item.namespace ? `${item.namespace}/${item.name}` : item.name;
      const names = resourceList.get(listKey);
      if (names) names.push(entry);
      else resourceList.set(listKey, [entry]);
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
  return { key: layout.tarball, items: keys.length, resourceList: sorted };
}
