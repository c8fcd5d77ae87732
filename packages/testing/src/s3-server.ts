import { type ChildProcess, spawn } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { mkdir, mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

/** What a client needs to reach one S3 bucket: the variables Stowage and the AWS chain read. */
export interface S3Target {
  readonly endpoint: string;
  readonly bucket: string;
  /** Key prefix inside the bucket for this user (unique per test on a shared endpoint). */
  readonly prefix: string;
  readonly region: string;
  readonly accessKeyId: string;
  readonly secretAccessKey: string;
  readonly forcePathStyle: boolean;
  /** `s3://bucket/prefix`, the STOWAGE_STORAGE value. */
  readonly storageUrl: string;
  /** STOWAGE_STORAGE, STOWAGE_S3_* and AWS_* for a child process. */
  readonly env: Readonly<Record<string, string>>;
}

export interface S3Server extends S3Target {
  readonly port: number;
  /** The directory holding the server's buckets and objects (tests corrupt objects there). */
  readonly dir: string;
  /** The file holding the bytes of `key` (relative to `prefix`) in the server's directory. */
  objectFile(key: string): string;
  /** Stops the server and removes its directory. Safe to call twice. */
  stop(): Promise<void>;
}

/**
 * s3rver encrypts ListObjectsV2 continuation tokens with DES, which Node 20's OpenSSL 3 keeps in
 * its legacy provider: without it every truncated listing fails with HTTP 500.
 */
const S3_SERVER_NODE_FLAGS = ['--openssl-legacy-provider'];

/** s3rver's built-in account; any other key pair is refused (InvalidAccessKeyId). */
export const S3_SERVER_ACCESS_KEY_ID = 'S3RVER';
export const S3_SERVER_SECRET_ACCESS_KEY = 'S3RVER';

export function s3TargetEnv(t: Omit<S3Target, 'env' | 'storageUrl'>): { storageUrl: string; env: Record<string, string> } {
  const storageUrl = `s3://${t.bucket}${t.prefix ? `/${t.prefix}` : ''}`;
  return {
    storageUrl,
    env: {
      STOWAGE_STORAGE: storageUrl,
      STOWAGE_S3_ENDPOINT: t.endpoint,
      STOWAGE_S3_REGION: t.region,
      STOWAGE_S3_FORCE_PATH_STYLE: String(t.forcePathStyle),
      AWS_ACCESS_KEY_ID: t.accessKeyId,
      AWS_SECRET_ACCESS_KEY: t.secretAccessKey,
    },
  };
}

/**
 * Starts a private S3-protocol server (@20minutes/s3rver, see the README for why) in a child
 * process on a free loopback port, with its objects in a temp dir and one bucket created.
 */
export async function startS3Server(opts: { bucket?: string; prefix?: string; dir?: string } = {}): Promise<S3Server> {
  // A directory the caller names is kept at stop (the demo's --out); a temp dir is removed.
  const dir = opts.dir ?? (await mkdtemp(join(tmpdir(), 'stowage-s3-')));
  await mkdir(dir, { recursive: true });
  const bucket = opts.bucket ?? 'stowage-test';
  const prefix = opts.prefix ?? '';
  const script = fileURLToPath(new URL('./s3-server-process.cjs', import.meta.url));
  const child: ChildProcess = spawn(process.execPath, [...S3_SERVER_NODE_FLAGS, script, dir, bucket], { stdio: ['pipe', 'pipe', 'pipe'] });
  const killOnExit = () => child.kill('SIGKILL');
  process.on('exit', killOnExit);
  let stderr = '';
  child.stderr?.on('data', (d: Buffer) => {
    stderr += d.toString();
  });
  const port = await new Promise<number>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`S3 server did not start within 15 s: ${stderr}`)), 15_000);
    createInterface({ input: child.stdout! }).once('line', (line) => {
      clearTimeout(timer);
      resolve((JSON.parse(line) as { port: number }).port);
    });
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`S3 server exited with code ${code}: ${stderr}`));
    });
  });
  const base = {
    endpoint: `http://127.0.0.1:${port}`,
    bucket,
    prefix,
    region: 'us-east-1',
    accessKeyId: S3_SERVER_ACCESS_KEY_ID,
    secretAccessKey: S3_SERVER_SECRET_ACCESS_KEY,
    forcePathStyle: true,
  };
  let stopped = false;
  return {
    ...base,
    ...s3TargetEnv(base),
    port,
    dir,
    // s3rver keeps `<dir>/<bucket>/<key>._S3rver_object` beside its metadata files.
    objectFile: (key: string) => join(dir, bucket, ...(prefix ? `${prefix}/${key}` : key).split('/')) + '._S3rver_object',
    async stop() {
      if (stopped) return;
      stopped = true;
      process.off('exit', killOnExit);
      if (child.exitCode === null) {
        const exited = new Promise((resolve) => child.once('exit', resolve));
        child.stdin?.end();
        child.kill('SIGTERM');
        await exited;
      }
      if (!opts.dir) await rm(dir, { recursive: true, force: true });
    },
  };
}

/**
 * The S3 bucket a test file should use: the endpoint named by STOWAGE_TEST_S3_ENDPOINT (MinIO,
 * AWS, …; with STOWAGE_TEST_S3_BUCKET, STOWAGE_TEST_S3_ACCESS_KEY_ID, STOWAGE_TEST_S3_SECRET_ACCESS_KEY,
 * optional STOWAGE_TEST_S3_REGION and STOWAGE_TEST_S3_FORCE_PATH_STYLE) under a prefix of its own,
 * else a private server. `stop` stops a private server; on a shared endpoint the test deletes its
 * own prefix (it never touches other keys of the bucket).
 */
export async function useTestS3(): Promise<S3Target & { external: boolean; stop: () => Promise<void>; server?: S3Server }> {
  const env = process.env;
  const endpoint = env.STOWAGE_TEST_S3_ENDPOINT?.trim();
  const prefix = `stowage-test-${randomUUID()}`;
  if (endpoint) {
    const missing = ['STOWAGE_TEST_S3_BUCKET', 'STOWAGE_TEST_S3_ACCESS_KEY_ID', 'STOWAGE_TEST_S3_SECRET_ACCESS_KEY'].filter(
      (v) => !env[v]?.trim(),
    );
    if (missing.length > 0) throw new Error(`STOWAGE_TEST_S3_ENDPOINT is set, so ${missing.join(', ')} must be set too`);
    const base = {
      endpoint,
      bucket: env.STOWAGE_TEST_S3_BUCKET!.trim(),
      prefix,
      region: env.STOWAGE_TEST_S3_REGION?.trim() || 'us-east-1',
      accessKeyId: env.STOWAGE_TEST_S3_ACCESS_KEY_ID!.trim(),
      secretAccessKey: env.STOWAGE_TEST_S3_SECRET_ACCESS_KEY!.trim(),
      forcePathStyle: (env.STOWAGE_TEST_S3_FORCE_PATH_STYLE?.trim() || 'true') === 'true',
    };
    return { ...base, ...s3TargetEnv(base), external: true, stop: async () => {} };
  }
  const server = await startS3Server({ prefix });
  return { ...server, external: false, stop: () => server.stop(), server };
}
