import { mkdtemp, readdir, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { GetObjectCommand, ListObjectsV2Command, PutObjectCommand } from '@aws-sdk/client-s3';
import { type S3Target, useTestS3 } from '@stowage/testing';
import { afterAll, afterEach, beforeAll, beforeEach } from 'vitest';
import { FileSystemStorage, type ObjectStore, S3Storage } from '../../src/index.js';

/**
 * The storage tests run once per backend: a directory, and an S3 bucket (a private S3 server,
 * or the endpoint named by STOWAGE_TEST_S3_ENDPOINT; see @stowage/testing useTestS3).
 */
export const BACKENDS = ['directory', 's3'] as const;
export type BackendKind = (typeof BACKENDS)[number];

export interface BackendUnderTest {
  readonly kind: BackendKind;
  readonly storage: ObjectStore;
  /** True when the S3 endpoint is the user's (STOWAGE_TEST_S3_ENDPOINT), not the private test server. */
  readonly externalS3: boolean;
  /** A scratch directory of the test (for system tar/gzip). */
  readonly scratch: string;
  /** Every key physically present, temp files/objects of atomic writes included. */
  rawKeys(): Promise<string[]>;
  /** Copies an object to a local file, for system tools (tar, gzip). */
  localFile(key: string): Promise<string>;
  /**
   * Replaces an object's stored bytes behind the store's back, as bit rot or a cut write would
   * (on S3 the recorded checksum stays that of the old bytes).
   */
  tamper(key: string, bytes: Buffer): Promise<void>;
}

export function openS3Storage(t: S3Target, extra: Partial<ConstructorParameters<typeof S3Storage>[0]> = {}): S3Storage {
  return new S3Storage({
    bucket: t.bucket,
    prefix: t.prefix,
    endpoint: t.endpoint,
    region: t.region,
    forcePathStyle: t.forcePathStyle,
    credentials: { accessKeyId: t.accessKeyId, secretAccessKey: t.secretAccessKey },
    ...extra,
  });
}

/** Registers the hooks of one backend in the enclosing describe and returns its current state. */
export function useBackend(kind: BackendKind): () => BackendUnderTest {
  let current: BackendUnderTest | undefined;
  let s3: Awaited<ReturnType<typeof useTestS3>> | undefined;
  let cleanup: (() => Promise<void>) | undefined;
  if (kind === 's3') {
    beforeAll(async () => {
      s3 = await useTestS3();
    }, 30_000);
    afterAll(async () => {
      await s3?.stop();
    });
  }
  beforeEach(async () => {
    const scratch = await mkdtemp(join(tmpdir(), `stowage-storage-${kind}-`));
    if (kind === 'directory') {
      const root = join(scratch, 'storage');
      const storage = new FileSystemStorage(root);
      current = {
        kind,
        storage,
        scratch,
        externalS3: false,
        rawKeys: async () => allFiles(root),
        localFile: async (key) => join(root, key),
        tamper: (key, bytes) => writeFile(join(root, key), bytes),
      };
      cleanup = () => rm(scratch, { recursive: true, force: true });
      return;
    }
    const target = s3!;
    const sub = `t${Math.random().toString(36).slice(2, 10)}`;
    const storage = openS3Storage({ ...target, prefix: `${target.prefix}/${sub}` });
    const client = storage.client;
    const fullPrefix = `${storage.prefix}/`;
    current = {
      kind,
      storage,
      scratch,
      externalS3: target.external,
      rawKeys: async () => {
        const keys: string[] = [];
        let token: string | undefined;
        do {
          const out = await client.send(new ListObjectsV2Command({ Bucket: storage.bucket, Prefix: fullPrefix, ContinuationToken: token }));
          for (const o of out.Contents ?? []) keys.push((o.Key ?? '').slice(fullPrefix.length));
          token = out.IsTruncated ? out.NextContinuationToken : undefined;
        } while (token);
        return keys.sort();
      },
      localFile: async (key) => {
        const path = join(scratch, key.replaceAll('/', '__'));
        const bytes = await storage.getObject(key);
        if (!bytes) throw new Error(`no object ${key}`);
        await writeFile(path, bytes);
        return path;
      },
      tamper: async (key, bytes) => {
        const old = await client.send(new GetObjectCommand({ Bucket: storage.bucket, Key: fullPrefix + key }));
        await old.Body?.transformToByteArray();
        await client.send(new PutObjectCommand({ Bucket: storage.bucket, Key: fullPrefix + key, Body: bytes, Metadata: old.Metadata }));
      },
    };
    cleanup = async () => {
      await storage.deletePrefix('');
      storage.close();
      await rm(scratch, { recursive: true, force: true });
    };
  });
  afterEach(async () => {
    await cleanup?.();
    cleanup = undefined;
    current = undefined;
  });
  return () => {
    if (!current) throw new Error('backend used outside a test');
    return current;
  };
}

async function allFiles(dir: string): Promise<string[]> {
  const entries = await readdir(dir, { recursive: true, withFileTypes: true }).catch(() => []);
  return entries
    .filter((e) => e.isFile())
    .map((e) => join(e.parentPath, e.name).slice(dir.length + 1))
    .sort();
}
