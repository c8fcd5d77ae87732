import { execFile } from 'node:child_process';
import { createRequire } from 'node:module';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { promisify } from 'node:util';

const CHILD = fileURLToPath(new URL('./backup-child.ts', import.meta.url));
const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
/**
 * Root reads any file whatever its mode (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH). Without those two
 * capabilities root is held to the modes like any user, while the checkout and node_modules stay
 * readable: root owns them. (Switching to another uid instead fails wherever the checkout's parent
 * is closed to that uid — a clone under a 0700 directory — as the process then cannot load its code.)
 */
const WITHOUT_DAC_OVERRIDE = ['--inh-caps=-dac_override,-dac_read_search', '--bounding-set=-dac_override,-dac_read_search'];

export type ChildBackup = { ok: true; snapshotId: string } | { ok: false; code: string; message: string; details: Record<string, unknown> };

/**
 * Backs up `source` into the repository at `repoDir` in a child process that file modes apply to,
 * root or not (`setpriv` from util-linux drops root's override), with `threads` large-file threads.
 */
export async function backupInChild(repoDir: string, key: string, source: string, threads?: number): Promise<ChildBackup> {
  const node = [process.execPath, '--conditions=@stowage/source', '--import', TSX_LOADER, CHILD, repoDir, key, source];
  const [command, ...args] = process.getuid?.() === 0 ? ['setpriv', ...WITHOUT_DAC_OVERRIDE, ...node] : node;
  const env = { ...process.env, ...(threads === undefined ? {} : { STOWAGE_REPO_THREADS: String(threads) }) };
  const { stdout } = await promisify(execFile)(command!, args, { env, timeout: 60_000 });
  return JSON.parse(stdout.trim().split('\n').at(-1)!) as ChildBackup;
}
