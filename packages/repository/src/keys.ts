import { createHmac, hkdfSync, randomBytes, scrypt, timingSafeEqual } from 'node:crypto';
import { RepoError, RepoErrorCode } from './errors.js';

/** scrypt parameters stored in the repo config, so they can be raised later without breaking old repos. */
export interface KdfParams {
  readonly name: 'scrypt';
  readonly saltB64: string;
  readonly N: number;
  readonly r: number;
  readonly p: number;
}

/** Subkeys derived from the master key; each has exactly one use. */
export interface RepoKeys {
  /** HMAC-SHA256 key for chunk ids (ids reveal nothing about content hashes outside the repo). */
  readonly chunkIdKey: Buffer;
  /** AES-256-GCM key for chunks, pack indexes and snapshot manifests. */
  readonly encryptionKey: Buffer;
  /** Seed of the chunker's gear table (per-repo boundaries, so chunk sizes do not fingerprint content). */
  readonly chunkerSeed: Buffer;
  /** Key-check value compared with the one stored at init. */
  readonly keyCheck: Buffer;
}

export const DEFAULT_KDF = { name: 'scrypt', N: 2 ** 15, r: 8, p: 1 } as const;

export function newKdfParams(): KdfParams {
  return { ...DEFAULT_KDF, saltB64: randomBytes(32).toString('base64') };
}

export function requireKey(key: string | undefined | null): string {
  if (typeof key !== 'string' || key.length === 0) {
    throw new RepoError(
      RepoErrorCode.KeyMissing,
      'no repository key given: set STOWAGE_REPO_KEY (or mount the repository key Secret); there is no default key',
    );
  }
  return key;
}

function scryptAsync(password: string, salt: Buffer, params: KdfParams): Promise<Buffer> {
  return new Promise((resolve, reject) => {
    // maxmem must exceed 128·N·r, which is exactly 32 MiB (Node's default limit) for the defaults.
    const maxmem = 128 * params.N * params.r * 2 + 1024 * 1024;
    scrypt(password, salt, 32, { N: params.N, r: params.r, p: params.p, maxmem }, (error, derived) =>
      error ? reject(error) : resolve(derived),
    );
  });
}

function subkey(root: Buffer, info: string, length = 32): Buffer {
  return Buffer.from(hkdfSync('sha256', root, Buffer.alloc(0), `stowage/${info}`, length));
}

export async function deriveRepoKeys(masterKey: string, params: KdfParams): Promise<RepoKeys> {
  const root = await scryptAsync(masterKey, Buffer.from(params.saltB64, 'base64'), params);
  const keyCheckKey = subkey(root, 'key-check');
  return {
    chunkIdKey: subkey(root, 'chunk-id'),
    encryptionKey: subkey(root, 'encryption'),
    chunkerSeed: subkey(root, 'chunker'),
    keyCheck: createHmac('sha256', keyCheckKey).update('stowage repository key check v1').digest(),
  };
}

export function keyCheckMatches(keys: RepoKeys, storedB64: string): boolean {
  const stored = Buffer.from(storedB64, 'base64');
  return stored.length === keys.keyCheck.length && timingSafeEqual(stored, keys.keyCheck);
}

/** The chunk id: HMAC-SHA256 of the plaintext under the repo's chunk-id key, hex. */
export function chunkIdOf(keys: Pick<RepoKeys, 'chunkIdKey'>, plaintext: Uint8Array): string {
  return createHmac('sha256', keys.chunkIdKey).update(plaintext).digest('hex');
}
