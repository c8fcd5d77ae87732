import type { ChildProcess } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { getFreePort, type S3Server, spawnService, startS3Server, useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const REPO = fileURLToPath(new URL('../../../', import.meta.url));

/** Runs a service's main.ts with only `env`; resolves its exit code and everything it printed. */
function runMain(
  service: 'api' | 'worker' | 'node-agent',
  env: Record<string, string>,
  onStarted: (child: ChildProcess) => void = () => {},
): Promise<{ code: number | null; out: string }> {
  const child = spawnService('src/main.ts', {
    cwd: `${REPO}services/${service}`,
    // The SDK warns on Node 20 that its releases after January 2027 need Node 22 (see the storage README).
    env: {
      PATH: process.env.PATH ?? '',
      HOME: process.env.HOME ?? '/tmp',
      AWS_SDK_JS_NODE_VERSION_SUPPORT_WARNING_DISABLED: 'true',
      ...env,
    },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d) => {
    out += String(d);
  });
  child.stderr?.on('data', (d) => {
    out += String(d);
  });
  onStarted(child);
  const timer = setTimeout(() => child.kill('SIGKILL'), 60_000);
  return new Promise((resolve) =>
    child.once('exit', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    }),
  );
}

describe('services refuse to start on S3 storage they cannot use: one line naming the variable, exit 1, nothing served', () => {
  let s3: S3Server;
  beforeAll(async () => {
    s3 = await startS3Server();
  }, 30_000);
  afterAll(async () => {
    await s3?.stop();
  });

  // REDIS_URL points at a closed port: the storage check comes before any connection is made.
  const base = async () => ({ ...s3.env, REDIS_URL: `redis://127.0.0.1:${await getFreePort()}`, PORT: String(await getFreePort()) });

  it('api: a bucket that does not exist', async () => {
    const run = await runMain('api', { ...(await base()), STOWAGE_STORAGE: 's3://missing-bucket/backups', STOWAGE_AUTH: 'disabled' });
    expect(run.code).toBe(1);
    expect(run.out).toBe(
      `Stowage api cannot start: STOWAGE_STORAGE (s3://missing-bucket/backups): bucket "missing-bucket" does not exist at ${s3.endpoint}\n`,
    );
  }, 70_000);

  it('worker: credentials the server refuses', async () => {
    const run = await runMain('worker', { ...(await base()), AWS_ACCESS_KEY_ID: 'WRONG', AWS_SECRET_ACCESS_KEY: 'wrong-secret' });
    expect(run.code).toBe(1);
    expect(run.out).toMatch(
      /^Stowage worker cannot start: AWS credentials \(AWS_ACCESS_KEY_ID\/AWS_SECRET_ACCESS_KEY, AWS_PROFILE or a web identity\): .*refused our credentials .*\n$/,
    );
    expect(run.out).not.toContain('wrong-secret');
  }, 70_000);

  it('node agent: an endpoint nothing listens on', async () => {
    const endpoint = `http://127.0.0.1:${await getFreePort()}`;
    const run = await runMain('node-agent', {
      ...(await base()),
      STOWAGE_S3_ENDPOINT: endpoint,
      STOWAGE_NODE_NAME: 'node-a',
      STOWAGE_REPO_KEY: 'k',
      STOWAGE_REPOSITORY_DIR: '/tmp/unused-repository',
    });
    expect(run.code).toBe(1);
    expect(run.out).toMatch(
      new RegExp(`^Stowage node agent cannot start: STOWAGE_S3_ENDPOINT: ${endpoint} is unreachable: ECONNREFUSED[^\\n]*\\n$`),
    );
  }, 70_000);
});

describe('on S3 storage it can use, a service serves and stops cleanly', () => {
  let s3: S3Server;
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  beforeAll(async () => {
    [s3, redis, sim] = await Promise.all([startS3Server(), useTestRedis(), startSimulator({ fixture: { objects: [] }, port: 0 })]);
  }, 30_000);
  afterAll(async () => {
    await sim?.close();
    await redis?.stop();
    await s3?.stop();
  });

  it('worker: ready on s3://, exit 0 on SIGTERM', async () => {
    const port = await getFreePort();
    let ready = false;
    const run = await runMain(
      'worker',
      { ...s3.env, REDIS_URL: redis.url, KUBECONFIG: sim.kubeconfigPath, STOWAGE_QUEUE_PREFIX: `{s3-start-${port}}`, PORT: String(port) },
      (child) => {
        void (async () => {
          for (let i = 0; i < 200 && child.exitCode === null; i++) {
            const ok = await fetch(`http://127.0.0.1:${port}/readyz`).then(
              (r) => r.status === 200,
              () => false,
            );
            if (ok) {
              ready = true;
              child.kill('SIGTERM');
              return;
            }
            await new Promise((r) => setTimeout(r, 250));
          }
        })();
      },
    );
    expect(ready, run.out).toBe(true);
    expect(run.code, run.out).toBe(0);
  }, 70_000);
});
