import { randomBytes } from 'node:crypto';

/**
 * Object keys of a repository (see RepoBackend; in a directory they are paths):
 *
 *   config.json              plaintext: format version, KDF salt and parameters, key-check value, chunker sizes
 *   data/<ab>/<chunk id>     a chunk stored alone ("loose"; written by older versions for large chunks)
 *   packs/<ab>/<pack id>     sealed chunk blobs, concatenated
 *   index/<id>               sealed index of several packs: per pack, chunk id → offset, length (older: one per pack, named by it)
 *   snapshots/<snapshot id>  sealed snapshot manifest
 *   prune/                   prune's lock, retired indexes and loose chunks, retirement batches
 *   leases/<id>              a running backup's lease: prune deletes no retired data it may reference
 *   tmp/                     (directory backend) files being written; renamed into place when complete
 */
export const CONFIG_KEY = 'config.json';
export const LOOSE_PREFIX = 'data/';
export const INDEX_PREFIX = 'index/';
export const SNAPSHOT_PREFIX = 'snapshots/';
/** Prune's retired data (README "Prune"): indexes and loose chunks moved out of sight of new backups, deleted after a grace period. */
export const RETIRED_INDEX_PREFIX = 'prune/retired-index/';
export const RETIRED_LOOSE_PREFIX = 'prune/retired-data/';
export function retiredIndexKey(packId: string): string {
  return `${RETIRED_INDEX_PREFIX}${packId}`;
}
export function retiredLooseKey(chunkId: string): string {
  return `${RETIRED_LOOSE_PREFIX}${chunkId.slice(0, 2)}/${chunkId}`;
}

export function looseKey(chunkId: string): string {
  return `data/${chunkId.slice(0, 2)}/${chunkId}`;
}
export function packKey(packId: string): string {
  return `packs/${packId.slice(0, 2)}/${packId}`;
}
export function indexKey(name: string): string {
  return `${INDEX_PREFIX}${name}`;
}
export function snapshotKey(snapshotId: string): string {
  return `${SNAPSHOT_PREFIX}${snapshotId}`;
}
/** The last `/`-separated part of a key. */
export function baseName(key: string): string {
  return key.slice(key.lastIndexOf('/') + 1);
}

/** 128-bit random hex id (snapshots, packs, temp files). */
export function randomId(): string {
  return randomBytes(16).toString('hex');
}

export const HEX_ID = /^[0-9a-f]{32}$/;
export const CHUNK_ID = /^[0-9a-f]{64}$/;
