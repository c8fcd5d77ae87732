import type { ChildProcess } from 'node:child_process';
import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { type Simulator, startSimulator } from '@stowage/kube-sim';
import { listeningPort, spawnService, uniquePrefix, useTestRedis } from '@stowage/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';

const SERVICE_DIR = fileURLToPath(new URL('..', import.meta.url));
const TOKEN = 'process-token-0123456789abcdef';

interface Run {
  child: ChildProcess;
  out: () => string;
  exited: Promise<number | null>;
}

function runMain(env: Record<string, string>): Run {
  const child = spawnService('src/main.ts', {
    cwd: SERVICE_DIR,
    env: { PATH: process.env.PATH ?? '', HOME: process.env.HOME ?? '/tmp', ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  child.stdout?.on('data', (d) => {
    out += String(d);
  });
  child.stderr?.on('data', (d) => {
    out += String(d);
  });
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  return { child, out: () => out, exited };
}

async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: NodeJS.Timeout | undefined;
  try {
    return await Promise.race([
      p,
      new Promise<T>((_, reject) => (timer = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms))),
    ]);
  } finally {
    clearTimeout(timer);
  }
}

describe('src/main.ts as a process', () => {
  let redis: { url: string; stop: () => Promise<void> };
  let sim: Simulator;
  let storage: string;
  beforeAll(async () => {
    redis = await useTestRedis();
    sim = await startSimulator({ fixture: { objects: [] }, port: 0 });
    storage = await mkdtemp(join(tmpdir(), 'stowage-api-main-'));
  });
  afterAll(async () => {
    await sim?.close();
    await redis?.stop();
    if (storage) await rm(storage, { recursive: true, force: true });
  });

  it('refuses to start without API tokens, naming the variable and the explicit opt-out', async () => {
    const run = runMain({ REDIS_URL: redis.url, KUBECONFIG: sim.kubeconfigPath, STOWAGE_STORAGE: storage });
    // Bounded generously: tsx compiles main.ts's import graph cold, slow on a loaded 2-core machine.
    expect(await within(run.exited, 45_000, 'exit')).toBe(1);
    expect(run.out()).toContain('STOWAGE_API_TOKENS');
    expect(run.out()).toContain('STOWAGE_AUTH=disabled');
  }, 60_000);

  it('serves, keeps tokens out of its logs, and shuts down cleanly on SIGTERM', async () => {
    // PORT=0: it binds a port of the kernel's choosing, read back from /proc (a port probed free
    // before the spawn may be another process's by the time main binds it).
    const run = runMain({
      REDIS_URL: redis.url,
      KUBECONFIG: sim.kubeconfigPath,
      STOWAGE_STORAGE: storage,
      STOWAGE_API_TOKENS: `${TOKEN},another-token-abcdef0123`,
      STOWAGE_QUEUE_PREFIX: uniquePrefix(),
      PORT: '0',
      LOG_LEVEL: 'debug',
    });
    try {
      let base = '';
      await within(
        (async () => {
          for (;;) {
            const port = await listeningPort(run.child.pid as number);
            if (port !== undefined) base = `http://127.0.0.1:${port}`;
            const ok =
              base !== '' &&
              (await fetch(`${base}/readyz`).then(
                (r) => r.status === 200,
                () => false,
              ));
            if (ok) return;
            if (run.child.exitCode !== null) throw new Error(`main exited: ${run.out()}`);
            await new Promise((r) => setTimeout(r, 200));
          }
        })(),
        30_000,
        'readiness',
      );
      expect((await fetch(`${base}/v1/backups`)).status).toBe(401);
      expect((await fetch(`${base}/v1/backups`, { headers: { authorization: `Bearer ${TOKEN}` } })).status).toBe(200);
      expect((await fetch(`${base}/v1/backups?access_token=${TOKEN}`)).status).toBe(401);
      run.child.kill('SIGTERM');
      expect(await within(run.exited, 20_000, 'graceful shutdown')).toBe(0);
      const out = run.out();
      expect(out).toContain('"msg":"api started"');
      expect(out).toContain('/v1/backups');
      expect(out).not.toContain(TOKEN);
    } finally {
      if (run.child.exitCode === null) run.child.kill('SIGKILL');
    }
  }, 60_000);
});
