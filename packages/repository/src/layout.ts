import { randomBytes } from 'node:crypto';

/**
 * Object keys of a repository (see RepoBackend; in a directory they are paths):
 *
 *   config.json              plaintext: format version, KDF salt and parameters, key-check value, chunker sizes
 *   data/<ab>/<chunk id>     a chunk stored alone ("loose"; written by older versions for large chunks)
 *   packs/<ab>/<pack id>     sealed chunk blobs, concatenated
 *   index/<pack id>          sealed index of one pack: chunk id → offset, length
 *   snapshots/<snapshot id>  sealed snapshot manifest
 *   tmp/                     (directory backend) files being written; renamed into place when complete
 */
export const CONFIG_KEY = 'config.json';
export const LOOSE_PREFIX = 'data/';
export const INDEX_PREFIX = 'index/';
export const SNAPSHOT_PREFIX = 'snapshots/';

export function looseKey(chunkId: string): string {
  return `data/${chunkId.slice(0, 2)}/${chunkId}`;
}
export function packKey(packId: string): string {
  return `packs/${packId.slice(0, 2)}/${packId}`;
}
export function indexKey(packId: string): string {
  return `${INDEX_PREFIX}${packId}`;
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
