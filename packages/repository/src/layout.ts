import { randomBytes } from 'node:crypto';
import { join } from 'node:path';

/**
 * On-disk layout of a repository directory:
 *
 *   config.json              plaintext: format version, KDF salt and parameters, key-check value, chunker sizes
 *   data/<ab>/<chunk id>     a large chunk, one sealed blob per file ("loose")
 *   packs/<ab>/<pack id>     small chunks' sealed blobs, concatenated
 *   index/<pack id>          sealed index of one pack: chunk id → offset, length
 *   snapshots/<snapshot id>  sealed snapshot manifest
 *   tmp/                     files being written; renamed into place when complete
 */
export const CONFIG_FILE = 'config.json';

export function configPath(dir: string): string {
  return join(dir, CONFIG_FILE);
}
export function loosePath(dir: string, chunkId: string): string {
  return join(dir, 'data', chunkId.slice(0, 2), chunkId);
}
export function packPath(dir: string, packId: string): string {
  return join(dir, 'packs', packId.slice(0, 2), packId);
}
export function indexDir(dir: string): string {
  return join(dir, 'index');
}
export function indexPath(dir: string, packId: string): string {
  return join(dir, 'index', packId);
}
export function snapshotsDir(dir: string): string {
  return join(dir, 'snapshots');
}
export function snapshotPath(dir: string, snapshotId: string): string {
  return join(dir, 'snapshots', snapshotId);
}
export function tmpPath(dir: string): string {
  return join(dir, 'tmp', `${randomId()}.tmp`);
}

/** Every directory `init` creates; the 256 fan-out directories exist up front so writers never mkdir. */
export function layoutDirs(dir: string): string[] {
  const fanOut = Array.from({ length: 256 }, (_, i) => i.toString(16).padStart(2, '0'));
  return [
    join(dir, 'tmp'),
    indexDir(dir),
    snapshotsDir(dir),
    ...fanOut.map((ab) => join(dir, 'data', ab)),
    ...fanOut.map((ab) => join(dir, 'packs', ab)),
  ];
}

/** 128-bit random hex id (snapshots, packs, temp files). */
export function randomId(): string {
  return randomBytes(16).toString('hex');
}

export const HEX_ID = /^[0-9a-f]{32}$/;
export const CHUNK_ID = /^[0-9a-f]{64}$/;
