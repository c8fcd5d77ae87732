import { createHash, randomUUID } from 'node:crypto';
import { Readable } from 'node:stream';
import {
  CopyObjectCommand,
  DeleteObjectCommand,
  DeleteObjectsCommand,
  GetObjectCommand,
  HeadBucketCommand,
  HeadObjectCommand,
  ListObjectsV2Command,
  PutObjectCommand,
  S3Client,
  type S3ClientConfig,
} from '@aws-sdk/client-s3';
import { Upload } from '@aws-sdk/lib-storage';
import {
  type ListPage,
  type ListPageOptions,
  MAX_LIST_PAGE,
  type ObjectInfo,
  type ObjectStore,
  type PutOptions,
} from './backup-storage.js';
import { assertChecksum, sha256Hex } from './checksum.js';
import { StorageError, StorageErrorCode, StorageUnavailableError } from './errors.js';
import { assertRange, assertValidKey, assertValidPrefix, TEMP_FILE_MARKER } from './keys.js';
import { countStorageRequest, type StorageOperation } from './request-meter.js';

/** User metadata holding the SHA-256 of the object's bytes, written with every object and checked on every read. */
export const SHA256_METADATA = 'stowage-sha256';

/** S3's limit for CopyObject, the last step of a streamed put (see putStream). */
const MAX_COPY_BYTES = 5 * 1024 ** 3;

export interface S3StorageOptions {
  bucket: string;
  /** Key prefix inside the bucket, without leading or trailing '/' ('' for the bucket's root). */
  prefix?: string;
  /** Custom endpoint (MinIO, Ceph, a test server); default AWS. */
  endpoint?: string;
  /** Default us-east-1 (MinIO and most S3-compatible servers accept any region). */
  region?: string;
  /** Path-style URLs (`http://host/bucket/key`), which MinIO and test servers need. */
  forcePathStyle?: boolean;
  /** Explicit credentials; default the standard AWS chain (env, shared files, web identity, IMDS). */
  credentials?: S3ClientConfig['credentials'];
  /** Attempts per request of the SDK's retry strategy (default 6: 503 SlowDown, 500s and dropped connections back off and retry). */
  maxAttempts?: number;
  /** 'standard' (default) or 'adaptive' (adds client-side rate limiting after throttling). */
  retryMode?: 'standard' | 'adaptive';
  /** Multipart part size for streamed puts (default 8 MiB); a stream shorter than one part is one PutObject. */
  partSize?: number;
  /** Parts in flight per streamed put (default 2): memory ≈ partSize × (queueSize + 1). */
  queueSize?: number;
  /** Per-request socket timeout in ms (default 60,000): a stalled connection fails and is retried. */
  requestTimeoutMs?: number;
}

type SdkError = Error & { $metadata?: { httpStatusCode?: number }; Code?: string; code?: string };

function statusOf(err: unknown): number | undefined {
  return (err as SdkError)?.$metadata?.httpStatusCode;
}

function isNotFound(err: unknown): boolean {
  const name = (err as SdkError)?.name;
  return name === 'NoSuchKey' || name === 'NotFound' || statusOf(err) === 404;
}

/**
 * Backup storage in an S3-compatible bucket through the AWS SDK: its retry strategy (backoff on
 * 503 SlowDown, 5xx and dropped connections), its request checksums (the server verifies each
 * upload's CRC32), its SigV4 signing. On top of that, every object carries the SHA-256 of its
 * bytes in user metadata, and every read checks it: a cut or changed object is an error
 * (STORAGE_CORRUPT_OBJECT), never silently wrong bytes.
 *
 * Atomicity: a PutObject is visible whole or not at all, and so is a multipart upload until it
 * completes. A streamed put longer than one part is uploaded under a temporary key (a segment
 * starting with TEMP_FILE_MARKER, never listed) and then copied to its key with its checksum in
 * one server-side CopyObject, so the final key never shows an object without its checksum.
 */
export class S3Storage implements ObjectStore {
  readonly bucket: string;
  readonly prefix: string;
  readonly location: string;
  readonly client: S3Client;
  private readonly partSize: number;
  private readonly queueSize: number;
  private readonly endpoint: string | undefined;

  constructor(opts: S3StorageOptions) {
    if (!/^[a-z0-9][a-z0-9.-]{1,61}[a-z0-9]$/.test(opts.bucket)) {
      throw new StorageError(StorageErrorCode.badName, `bucket ${JSON.stringify(opts.bucket)} is not a valid S3 bucket name`);
    }
    const prefix = opts.prefix ?? '';
    if (prefix !== '') {
      assertValidPrefix(prefix);
      if (prefix.endsWith('/')) throw new StorageError(StorageErrorCode.badKey, `prefix ${JSON.stringify(prefix)} must not end with '/'`);
    }
    this.bucket = opts.bucket;
    this.prefix = prefix;
    this.location = `s3://${opts.bucket}${prefix ? `/${prefix}` : ''}`;
    this.endpoint = opts.endpoint;
    this.partSize = opts.partSize ?? 8 * 1024 * 1024;
    this.queueSize = opts.queueSize ?? 2;
    this.client = new S3Client({
      // STOWAGE_S3_REGION, else the AWS chain's AWS_REGION, else us-east-1 (MinIO accepts any).
      region: opts.region ?? process.env.AWS_REGION ?? process.env.AWS_DEFAULT_REGION ?? 'us-east-1',
      endpoint: opts.endpoint,
      forcePathStyle: opts.forcePathStyle ?? false,
      credentials: opts.credentials,
      maxAttempts: opts.maxAttempts ?? 6,
      retryMode: opts.retryMode ?? 'standard',
      // A stalled request is an error (then retried), not only a logged warning.
      requestHandler: { connectionTimeout: 5_000, requestTimeout: opts.requestTimeoutMs ?? 60_000, throwOnRequestTimeout: true },
    });
    // Inside the SDK's retry loop (the deserialize step runs once per attempt): every request the
    // server answered is counted, retries included (request-meter.ts).
    this.client.middlewareStack.add(
      (next) => async (args) => {
        const request = args.request as SentRequest;
        const op = operationOf(request);
        try {
          const out = await next(args);
          countStorageRequest(op, bytesSent(request), bytesReceived(request, out.response as ReceivedResponse));
          return out;
        } catch (err) {
          if (statusOf(err) !== undefined) countStorageRequest(op, bytesSent(request), 0);
          throw err;
        }
      },
      { step: 'deserialize', priority: 'high', name: 'stowageRequestMeter' },
    );
  }

  private fullKey(key: string): string {
    return this.prefix ? `${this.prefix}/${key}` : key;
  }

  private relativeKey(fullKey: string): string {
    return this.prefix ? fullKey.slice(this.prefix.length + 1) : fullKey;
  }

  private fail(action: string, key: string, err: unknown): StorageError {
    if (err instanceof StorageError) return err;
    const status = statusOf(err);
    const detail = `${(err as Error)?.name ?? 'Error'}${status ? ` (HTTP ${status})` : ''}: ${(err as Error)?.message ?? err}`;
    return new StorageError(StorageErrorCode.io, `${action} ${JSON.stringify(key)} in ${this.location} failed: ${detail}`, { cause: err });
  }

  async putObject(key: string, data: Buffer | string, opts: PutOptions = {}): Promise<void> {
    assertValidKey(key);
    if (opts.sha256 !== undefined) assertChecksum(key, data, opts.sha256);
    const body = typeof data === 'string' ? Buffer.from(data) : data;
    const exists = () =>
      new StorageError(
        StorageErrorCode.exists,
        `create-only put of ${JSON.stringify(key)} in ${this.location} refused: the key already holds an object`,
      );
    // The check first: some S3-compatible servers ignore If-None-Match on PUT.
    if (opts.ifAbsent && (await this.exists(key))) throw exists();
    try {
      await this.client.send(
        new PutObjectCommand({
          Bucket: this.bucket,
          Key: this.fullKey(key),
          Body: body,
          ContentLength: body.length,
          Metadata: { [SHA256_METADATA]: sha256Hex(body) },
          ...(opts.ifAbsent ? { IfNoneMatch: '*' } : {}),
        }),
      );
    } catch (err) {
      if (opts.ifAbsent && statusOf(err) === 412) throw exists();
      throw this.fail('writing', key, err);
    }
  }

  async putStream(key: string, body: AsyncIterable<Uint8Array>): Promise<void> {
    assertValidKey(key);
    const iterator = body[Symbol.asyncIterator]();
    // Read up to one part: a stream that ends within it is a single PutObject.
    const head: Buffer[] = [];
    let headBytes = 0;
    let done = false;
    try {
      while (headBytes < this.partSize) {
        const next = await iterator.next();
        if (next.done) {
          done = true;
          break;
        }
        const chunk = Buffer.from(next.value.buffer, next.value.byteOffset, next.value.byteLength);
        head.push(chunk);
        headBytes += chunk.length;
      }
    } catch (err) {
      throw this.fail('writing', key, err);
    }
    if (done) {
      await this.putObject(key, Buffer.concat(head, headBytes));
      return;
    }
    const tempKey = this.tempKeyBeside(key);
    const hash = createHash('sha256');
    let size = 0;
    async function* hashed(): AsyncGenerator<Buffer> {
      for (const chunk of head) {
        hash.update(chunk);
        size += chunk.length;
        yield chunk;
      }
      head.length = 0;
      for (let next = await iterator.next(); !next.done; next = await iterator.next()) {
        const chunk = Buffer.from(next.value.buffer, next.value.byteOffset, next.value.byteLength);
        hash.update(chunk);
        size += chunk.length;
        yield chunk;
      }
    }
    try {
      const upload = new Upload({
        client: this.client,
        params: { Bucket: this.bucket, Key: this.fullKey(tempKey), Body: Readable.from(hashed()) },
        partSize: this.partSize,
        queueSize: this.queueSize,
        leavePartsOnError: false, // a failed upload is aborted: its parts are never an object
      });
      await upload.done();
      if (size > MAX_COPY_BYTES) {
        throw new StorageError(
          StorageErrorCode.io,
          `streamed object ${JSON.stringify(key)} is ${size} bytes; S3's CopyObject limit is ${MAX_COPY_BYTES}`,
        );
      }
      await this.client.send(
        new CopyObjectCommand({
          Bucket: this.bucket,
          Key: this.fullKey(key),
          CopySource: encodeCopySource(this.bucket, this.fullKey(tempKey)),
          MetadataDirective: 'REPLACE',
          Metadata: { [SHA256_METADATA]: hash.digest('hex') },
        }),
      );
    } catch (err) {
      throw this.fail('writing', key, err);
    } finally {
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.fullKey(tempKey) })).catch(() => {
        // Best effort: a leftover temp object is never listed or read, and deletePrefix removes it.
      });
    }
  }

  /** A temp key in the same "directory", so deletePrefix of the directory also removes leftovers. */
  private tempKeyBeside(key: string): string {
    const cut = key.lastIndexOf('/');
    return `${cut >= 0 ? key.slice(0, cut + 1) : ''}${TEMP_FILE_MARKER}${randomUUID()}`;
  }

  private async getResponse(key: string) {
    try {
      return await this.client.send(new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw this.fail('reading', key, err);
    }
  }

  async getObject(key: string): Promise<Buffer | undefined> {
    const stream = await this.getStream(key);
    if (!stream) return undefined;
    const chunks: Buffer[] = [];
    for await (const chunk of stream) chunks.push(chunk);
    return Buffer.concat(chunks);
  }

  async getStream(key: string): Promise<AsyncIterable<Buffer> | undefined> {
    assertValidKey(key);
    const response = await this.getResponse(key);
    if (!response?.Body) return undefined;
    const expectedSha = response.Metadata?.[SHA256_METADATA];
    const expectedSize = response.ContentLength;
    const body = response.Body as Readable;
    const fail = (err: unknown) => this.fail('reading', key, err);
    const corrupt = (what: string) =>
      new StorageError(
        StorageErrorCode.corruptObject,
        `object ${JSON.stringify(key)} in ${this.location} ${what}: it was cut or changed after it was written`,
      );
    async function* verified(): AsyncGenerator<Buffer> {
      const hash = createHash('sha256');
      let size = 0;
      try {
        for await (const chunk of body) {
          hash.update(chunk);
          size += chunk.length;
          yield chunk;
        }
      } catch (err) {
        throw fail(err);
      }
      if (expectedSize !== undefined && size !== expectedSize) throw corrupt(`ended after ${size} of ${expectedSize} bytes`);
      if (expectedSha === undefined) throw corrupt(`has no ${SHA256_METADATA} checksum (not written by Stowage, or written halfway)`);
      const actual = hash.digest('hex');
      if (actual !== expectedSha) throw corrupt(`hashes to sha256 ${actual}, not the ${expectedSha} recorded when it was written`);
    }
    return verified();
  }

  async getRange(key: string, offset: number, length: number): Promise<Buffer | undefined> {
    assertValidKey(key);
    assertRange(key, offset, length);
    try {
      const out = await this.client.send(
        new GetObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key), Range: `bytes=${offset}-${offset + length - 1}` }),
      );
      return Buffer.from((await out.Body?.transformToByteArray()) ?? new Uint8Array());
    } catch (err) {
      if (isNotFound(err)) return undefined;
      if (statusOf(err) === 416) return Buffer.alloc(0); // the range starts past the end
      throw this.fail('reading', key, err);
    }
  }

  async head(key: string): Promise<ObjectInfo | undefined> {
    assertValidKey(key);
    try {
      const out = await this.client.send(new HeadObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
      return { key, size: out.ContentLength ?? 0, sha256: out.Metadata?.[SHA256_METADATA] };
    } catch (err) {
      if (isNotFound(err)) return undefined;
      throw this.fail('checking', key, err);
    }
  }

  async exists(key: string): Promise<boolean> {
    return (await this.head(key)) !== undefined;
  }

  async delete(key: string): Promise<void> {
    assertValidKey(key);
    try {
      // One request: S3 answers 204 whether or not the key held an object.
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: this.fullKey(key) }));
    } catch (err) {
      throw this.fail('deleting', key, err);
    }
  }

  /** One ListObjectsV2 page of raw keys (temp objects included), relative to the storage prefix. */
  private async rawPage(prefix: string, after: string | undefined, limit: number) {
    try {
      const out = await this.client.send(
        new ListObjectsV2Command({
          Bucket: this.bucket,
          Prefix: this.fullKey(prefix),
          StartAfter: after === undefined ? undefined : this.fullKey(after),
          MaxKeys: limit,
        }),
      );
      const objects = (out.Contents ?? []).map((o) => ({ key: this.relativeKey(o.Key ?? ''), size: o.Size ?? 0 }));
      return { objects, truncated: out.IsTruncated === true };
    } catch (err) {
      throw this.fail('listing', prefix, err);
    }
  }

  async listPage(prefix: string, opts: ListPageOptions = {}): Promise<ListPage> {
    assertValidPrefix(prefix);
    const limit = Math.min(Math.max(1, opts.limit ?? MAX_LIST_PAGE), MAX_LIST_PAGE);
    const page = await this.rawPage(prefix, opts.after, limit);
    const last = page.objects.at(-1)?.key;
    return {
      objects: page.objects.filter((o) => !isTempKey(o.key)),
      next: page.truncated && last !== undefined ? last : undefined,
    };
  }

  private async listRaw(prefix: string): Promise<string[]> {
    const keys: string[] = [];
    let after: string | undefined;
    for (;;) {
      const page = await this.rawPage(prefix, after, MAX_LIST_PAGE);
      for (const o of page.objects) keys.push(o.key);
      after = page.objects.at(-1)?.key;
      if (!page.truncated || after === undefined) return keys;
    }
  }

  async list(prefix: string): Promise<string[]> {
    assertValidPrefix(prefix);
    // S3 sorts by UTF-8 bytes; the contract is code-unit order.
    return (await this.listRaw(prefix)).filter((key) => !isTempKey(key)).sort();
  }

  async deletePrefix(prefix: string): Promise<number> {
    assertValidPrefix(prefix);
    const keys = await this.listRaw(prefix); // temp leftovers go too
    for (let i = 0; i < keys.length; i += MAX_LIST_PAGE) {
      const batch = keys.slice(i, i + MAX_LIST_PAGE);
      try {
        const out = await this.client.send(
          new DeleteObjectsCommand({
            Bucket: this.bucket,
            Delete: { Objects: batch.map((key) => ({ Key: this.fullKey(key) })), Quiet: true },
          }),
        );
        const failed = out.Errors ?? [];
        if (failed.length > 0) {
          const first = failed[0];
          throw new StorageError(
            StorageErrorCode.io,
            `deleting ${failed.length} object(s) under ${JSON.stringify(prefix)} in ${this.location} failed, e.g. ${first?.Key}: ${first?.Code} ${first?.Message ?? ''}`.trim(),
          );
        }
      } catch (err) {
        throw this.fail('deleting under', prefix, err);
      }
    }
    return keys.filter((key) => !isTempKey(key)).length;
  }

  /**
   * HeadBucket, then a put and delete of a probe object under the prefix (write permission).
   * Each failure is one StorageUnavailableError naming what to fix.
   */
  async checkAccess(): Promise<void> {
    const where = this.endpoint ?? 'the AWS default endpoint';
    const explain = (err: unknown): StorageUnavailableError => {
      const e = err as SdkError;
      const status = statusOf(err);
      const name = e?.name ?? 'Error';
      const code = e?.code ?? (e?.cause as NodeJS.ErrnoException | undefined)?.code;
      if (name === 'CredentialsProviderError' || (/credential/i.test(e?.message ?? '') && status === undefined)) {
        return new StorageUnavailableError('credentials', `no AWS credentials were found (${e.message})`, { cause: err });
      }
      if (status === undefined) {
        return new StorageUnavailableError('endpoint', `${where} is unreachable: ${code ?? name}: ${e?.message ?? err}`, { cause: err });
      }
      if (status === 404 || name === 'NoSuchBucket' || name === 'NotFound') {
        return new StorageUnavailableError('bucket', `bucket ${JSON.stringify(this.bucket)} does not exist at ${where}`, { cause: err });
      }
      if (status === 403 || status === 401) {
        return new StorageUnavailableError(
          'credentials',
          `${where} refused our credentials for bucket ${JSON.stringify(this.bucket)} (HTTP ${status} ${name})`,
          { cause: err },
        );
      }
      if (status === 301 || name === 'PermanentRedirect') {
        return new StorageUnavailableError(
          'endpoint',
          `bucket ${JSON.stringify(this.bucket)} is in another region than the one configured (HTTP ${status})`,
          { cause: err },
        );
      }
      return new StorageUnavailableError('endpoint', `${where} answered HTTP ${status} ${name} for bucket ${JSON.stringify(this.bucket)}`, {
        cause: err,
      });
    };
    try {
      await this.client.send(new HeadBucketCommand({ Bucket: this.bucket }));
    } catch (err) {
      throw explain(err);
    }
    const probe = this.fullKey(`${TEMP_FILE_MARKER}probe-${randomUUID()}`);
    try {
      await this.client.send(new PutObjectCommand({ Bucket: this.bucket, Key: probe, Body: Buffer.alloc(0) }));
      await this.client.send(new DeleteObjectCommand({ Bucket: this.bucket, Key: probe }));
    } catch (err) {
      throw explain(err);
    }
  }

  /** Closes the SDK's sockets (tests, shutdown). */
  close(): void {
    this.client.destroy();
  }
}

/** The parts of a signed request the meter reads (smithy's HttpRequest). */
interface SentRequest {
  method: string;
  path: string;
  query?: Record<string, unknown>;
  headers: Record<string, string | undefined>;
}
interface ReceivedResponse {
  statusCode?: number;
  headers?: Record<string, string | undefined>;
}

/** The request's operation as S3 classes it (request-meter.ts). */
function operationOf(request: SentRequest): StorageOperation {
  const query = request.query ?? {};
  switch (request.method) {
    case 'HEAD':
      return 'head';
    case 'GET':
      return 'list-type' in query ? 'list' : 'get'; // ListObjectsV2 always sends list-type=2
    case 'DELETE':
      return 'delete';
    case 'POST':
      return 'delete' in query ? 'delete' : 'put'; // DeleteObjects, else a multipart create or complete
    default:
      return 'put';
  }
}

/** Object bytes in a put's body (a copy sends none); the decoded length of an aws-chunked body. */
function bytesSent(request: SentRequest): number {
  if (request.method !== 'PUT' || request.headers['x-amz-copy-source'] !== undefined) return 0;
  return Number(request.headers['x-amz-decoded-content-length'] ?? request.headers['content-length'] ?? 0) || 0;
}

/** Object bytes in a get's answer (a listing's XML is not object bytes). */
function bytesReceived(request: SentRequest, response: ReceivedResponse | undefined): number {
  if (operationOf(request) !== 'get' || !response?.statusCode || response.statusCode >= 300) return 0;
  return Number(response.headers?.['content-length'] ?? 0) || 0;
}

function isTempKey(key: string): boolean {
  return key.split('/').some((segment) => segment.startsWith(TEMP_FILE_MARKER));
}

/** CopySource is `bucket/key` with the key URL-encoded except its '/'. */
function encodeCopySource(bucket: string, key: string): string {
  return `${bucket}/${key.split('/').map(encodeURIComponent).join('/')}`;
}
