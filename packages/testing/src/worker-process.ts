import type { ChildProcess } from 'node:child_process';
import { listeningPort } from './listening-ports.js';
import { REPO_ROOT, spawnService } from './service-process.js';

const WORKER_MAIN = 'services/worker/src/main.ts';

export interface ServiceProcess {
  child: ChildProcess;
  port: number;
  output: string[];
  /** SIGTERM, then waits (bounded) for exit; returns the exit code. */
  stop(): Promise<number | null>;
}

export type WorkerProcess = ServiceProcess;

export interface ReadyServiceOptions {
  /** The child's whole environment (nothing is inherited); PORT is set to 0. */
  env: NodeJS.ProcessEnv;
  /** `main` is relative to it. */
  cwd: string;
  readyTimeoutMs: number;
  /** Names the service in the errors. */
  name: string;
}

/**
 * Spawns a real service process from source (spawnService) and waits until /readyz answers 200. It runs with PORT=0, and its port
 * is the one it then listens on: a port probed free before the spawn can be bound by another process before the service binds it
 * (listening-ports.ts).
 */
export async function spawnReadyService(main: string, options: ReadyServiceOptions): Promise<ServiceProcess> {
  const { name, readyTimeoutMs } = options;
  const output: string[] = [];
  const child = spawnService(main, {
    cwd: options.cwd,
    env: { ...options.env, PORT: '0' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const until = Date.now() + readyTimeoutMs;
  let port: number | undefined;
  for (;;) {
    if (child.pid !== undefined) port ??= await listeningPort(child.pid);
    const ok =
      port !== undefined &&
      (await fetch(`http://127.0.0.1:${port}/readyz`)
        .then((r) => r.status === 200)
        .catch(() => false));
    if (ok) break;
    if (child.exitCode !== null) throw new Error(`${name} exited with ${child.exitCode} before it was ready:\n${output.join('')}`);
    if (Date.now() > until) {
      child.kill('SIGKILL');
      throw new Error(`${name} not ready after ${readyTimeoutMs} ms:\n${output.join('')}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    child,
    port: port as number,
    output,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM');
      const timer = setTimeout(() => child.kill('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}

/**
 * Spawns a real worker process (a test of any package can run the worker service as it runs in production, from source) with the
 * given env on top of this process's, and waits until it is ready (spawnReadyService).
 */
export async function spawnWorker(env: Record<string, string>, readyTimeoutMs = 30_000): Promise<WorkerProcess> {
  return spawnReadyService(WORKER_MAIN, {
    cwd: REPO_ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env },
    readyTimeoutMs,
    name: 'worker',
  });
}
