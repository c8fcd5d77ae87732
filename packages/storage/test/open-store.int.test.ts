import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { getFreePort, type S3Target, useTestS3 } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { FileSystemStorage, type ObjectStoreLocation, openCheckedObjectStore, S3Storage } from '../src/index.js';

/** The AWS chain reads credentials from the environment; each case sets its own. */
async function withCredentials<T>(accessKeyId: string, secretAccessKey: string, fn: () => Promise<T>): Promise<T> {
  const saved = { id: process.env.AWS_ACCESS_KEY_ID, secret: process.env.AWS_SECRET_ACCESS_KEY };
  process.env.AWS_ACCESS_KEY_ID = accessKeyId;
  process.env.AWS_SECRET_ACCESS_KEY = secretAccessKey;
  try {
    return await fn();
  } finally {
    if (saved.id === undefined) delete process.env.AWS_ACCESS_KEY_ID;
    else process.env.AWS_ACCESS_KEY_ID = saved.id;
    if (saved.secret === undefined) delete process.env.AWS_SECRET_ACCESS_KEY;
    else process.env.AWS_SECRET_ACCESS_KEY = saved.secret;
  }
}

describe('openCheckedObjectStore: a store that cannot be used is one line naming the variable', () => {
  let s3: S3Target & { stop: () => Promise<void> };
  let scratch: string;
  beforeAll(async () => {
    s3 = await useTestS3();
    scratch = await mkdtemp(join(tmpdir(), 'stowage-open-store-'));
  }, 30_000);
  afterAll(async () => {
    await s3?.stop();
    if (scratch) await rm(scratch, { recursive: true, force: true });
  });

  const location = (over: Partial<Extract<ObjectStoreLocation, { kind: 's3' }>> = {}): ObjectStoreLocation => ({
    kind: 's3',
    bucket: s3.bucket,
    prefix: s3.prefix,
    endpoint: s3.endpoint,
    region: s3.region,
    forcePathStyle: s3.forcePathStyle,
    ...over,
  });

  it('opens a reachable bucket with accepted credentials, and a writable directory', async () => {
    const opened = await withCredentials(s3.accessKeyId, s3.secretAccessKey, () => openCheckedObjectStore(location()));
    expect(opened.ok && opened.store).toBeInstanceOf(S3Storage);
    if (opened.ok) (opened.store as S3Storage).close();
    const dir = await openCheckedObjectStore({ kind: 'filesystem', path: join(scratch, 'new', 'storage') });
    expect(dir.ok && dir.store).toBeInstanceOf(FileSystemStorage);
  });

  it('a bucket that does not exist', async () => {
    const opened = await withCredentials(s3.accessKeyId, s3.secretAccessKey, () =>
      openCheckedObjectStore(location({ bucket: 'no-such-bucket-here' })),
    );
    expect(opened).toEqual({
      ok: false,
      message: `STOWAGE_STORAGE (s3://no-such-bucket-here/${s3.prefix}): bucket "no-such-bucket-here" does not exist at ${s3.endpoint}`,
    });
  });

  it('credentials the server refuses', async () => {
    const opened = await withCredentials('NOT-A-KEY', 'nope', () => openCheckedObjectStore(location()));
    expect(opened.ok).toBe(false);
    expect(!opened.ok && opened.message).toMatch(
      /^AWS credentials \(AWS_ACCESS_KEY_ID\/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or a web identity\): .* refused our credentials for bucket "stowage-test" \(HTTP 403/,
    );
    expect(!opened.ok && opened.message).not.toContain('nope');
  });

  it('an endpoint nothing listens on', async () => {
    const endpoint = `http://127.0.0.1:${await getFreePort()}`;
    const opened = await withCredentials(s3.accessKeyId, s3.secretAccessKey, () => openCheckedObjectStore(location({ endpoint })));
    expect(!opened.ok && opened.message).toMatch(new RegExp(`^STOWAGE_S3_ENDPOINT: ${endpoint} is unreachable: ECONNREFUSED`));
  }, 60_000);

  it('a storage path that is a file, not a directory', async () => {
    const file = join(scratch, 'a-file');
    await writeFile(file, 'x');
    await chmod(file, 0o444);
    const opened = await openCheckedObjectStore({ kind: 'filesystem', path: file });
    expect(!opened.ok && opened.message).toMatch(
      new RegExp(`^STOWAGE_STORAGE \\(dir:${file}\\): the storage directory ${file} is not a writable directory: E`),
    );
  });
});
