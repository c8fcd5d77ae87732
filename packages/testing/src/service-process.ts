import { type ChildProcess, type SpawnOptions, spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';

/** The repository's root directory, with a trailing slash. */
export const REPO_ROOT = fileURLToPath(new URL('../../../', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(`${REPO_ROOT}package.json`).resolve('tsx')).href;

/**
 * Runs a TypeScript entry point (`main`, relative to `options.cwd`: a service, the demo) as
 * production runs it from source, in one node process with tsx as its loader: a signal sent to the
 * child reaches the program itself. (The tsx command runs the script in a child node process of its
 * own, which a SIGKILL of tsx left running: services of one test living on into the next.)
 */
export function spawnService(main: string, options: SpawnOptions, args: readonly string[] = []): ChildProcess {
  return spawn(process.execPath, ['--conditions=@stowage/source', '--import', TSX_LOADER, main, ...args], options);
}
