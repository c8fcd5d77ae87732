import { type ChildProcess, spawn } from 'node:child_process';
import { fileURLToPath } from 'node:url';
import { getFreePort } from '@stowage/platform';

const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const WORKER_MAIN = 'services/worker/src/main.ts';
const TSX = `${REPO_ROOT}node_modules/.bin/tsx`;

export interface WorkerProcess {
  child: ChildProcess;
  port: number;
  output: string[];
  /** SIGTERM, then waits (bounded) for exit; returns the exit code. */
  stop(): Promise<number | null>;
}

/**
 * Spawns a real worker process (a test of any package can run the worker service as it runs in production) (`tsx --conditions=@stowage/source services/worker/src/main.ts`)
 * with the given env and waits until /readyz answers 200.
 */
export async function spawnWorker(env: Record<string, string>, readyTimeoutMs = 30_000): Promise<WorkerProcess> {
  const port = await getFreePort();
  const output: string[] = [];
  const child = spawn(TSX, ['--conditions=@stowage/source', WORKER_MAIN], {
    cwd: REPO_ROOT,
    env: { ...process.env, LOG_LEVEL: 'warn', ...env, PORT: String(port) },
    stdio: ['ignore', 'pipe', 'pipe'],
    // Its own process group: tsx runs the worker in a child node process, which a SIGKILL of tsx
    // alone would leave running.
    detached: true,
  });
  // tsx and the node process running the worker.
  const signalGroup = (signal: NodeJS.Signals) => {
    if (child.pid === undefined) return;
    try {
      process.kill(-child.pid, signal);
    } catch (err) {
      if ((err as NodeJS.ErrnoException).code !== 'ESRCH') throw err; // the group is gone already
    }
  };
  child.stdout?.on('data', (d: Buffer) => output.push(d.toString()));
  child.stderr?.on('data', (d: Buffer) => output.push(d.toString()));
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)));
  const until = Date.now() + readyTimeoutMs;
  for (;;) {
    const ok = await fetch(`http://127.0.0.1:${port}/readyz`)
      .then((r) => r.status === 200)
      .catch(() => false);
    if (ok) break;
    if (child.exitCode !== null) throw new Error(`worker exited with ${child.exitCode} before it was ready:\n${output.join('')}`);
    if (Date.now() > until) {
      signalGroup('SIGKILL');
      throw new Error(`worker not ready after ${readyTimeoutMs} ms:\n${output.join('')}`);
    }
    await new Promise((r) => setTimeout(r, 200));
  }
  return {
    child,
    port,
    output,
    async stop() {
      if (child.exitCode !== null) return child.exitCode;
      child.kill('SIGTERM'); // tsx passes it on to the worker and exits with its code
      const timer = setTimeout(() => signalGroup('SIGKILL'), 15_000);
      const code = await exited;
      clearTimeout(timer);
      return code;
    },
  };
}
