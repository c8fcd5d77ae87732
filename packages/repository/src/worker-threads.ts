import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';

/**
 * Starts one of the repository's worker threads (`large-file-worker`, `chunk-open-worker`). The
 * compiled package runs `<name>.js` beside this file. From TypeScript sources (tests, `tsx`) the
 * worker is the `.ts` file, and a worker thread does not get the parent's TypeScript loader (nor
 * does `--import tsx` in its execArgv apply to its entry module on Node 20), so a two-line
 * bootstrap registers tsx's loader in the thread and then imports it.
 */
export function spawnRepoWorker(name: 'large-file-worker' | 'chunk-open-worker', workerData: unknown): Worker {
  let worker: Worker;
  if (import.meta.url.endsWith('.ts')) {
    // `require.resolve` picks tsx's CommonJS entry; the loader's register() is its ES module twin.
    const tsxApi = pathToFileURL(
      createRequire(import.meta.url)
        .resolve('tsx/esm/api')
        .replace(/\.cjs$/, '.mjs'),
    ).href;
    const entry = new URL(`./${name}.ts`, import.meta.url).href;
    const bootstrap = `import(${JSON.stringify(tsxApi)}).then((tsx) => tsx.register()).then(() => import(${JSON.stringify(entry)}))`;
    worker = new Worker(bootstrap, { eval: true, workerData });
  } else {
    worker = new Worker(new URL(`./${name}.js`, import.meta.url), { workerData });
  }
  // A crash is reported to the work in progress; between jobs it must not take the process down.
  worker.on('error', () => {});
  return worker;
}

/** How long a repository's worker threads stay up with no backup using them. */
export const THREADS_IDLE_MS = 30_000;

/**
 * Calls `stop` once `idleMs` has passed since `idle()` with no `busy()` since: the threads a
 * repository keeps between backups (small-file readers, large-file hashers) stop when unused.
 * The timer never holds the process open.
 */
export class IdleStop {
  private timer: NodeJS.Timeout | undefined;

  constructor(
    private readonly idleMs: number,
    private readonly stop: () => void,
  ) {}

  busy(): void {
    clearTimeout(this.timer);
    this.timer = undefined;
  }

  idle(): void {
    this.busy();
    this.timer = setTimeout(() => {
      this.timer = undefined;
      this.stop();
    }, this.idleMs);
    this.timer.unref();
  }
}
