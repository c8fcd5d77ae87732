/*
 * Runs `pnpm demo --json` as the demo e2e tests do: the demo's entry point in one node process (a
 * signal reaches the demo itself, which stops its processes on SIGTERM), with an environment free
 * of the caller's STOWAGE_*, REDIS_URL, KUBECONFIG and PORT plus what the test sets.
 */
import { REPO_ROOT, spawnService } from '../../packages/testing/src/index.js';

export interface DemoRun {
  code: number | null;
  stdout: string;
  stderr: string;
}

const DEMO = 'packages/cli/src/demo.ts';

/** The demo's run to its end (at most `timeoutMs`, then SIGTERM and a rejection with its stderr). */
export function runDemo(args: readonly string[], env: Record<string, string>, timeoutMs = 420_000): Promise<DemoRun> {
  const childEnv: Record<string, string | undefined> = { ...process.env };
  for (const k of Object.keys(childEnv))
    if (k.startsWith('STOWAGE_') || k === 'REDIS_URL' || k === 'KUBECONFIG' || k === 'PORT') delete childEnv[k];
  Object.assign(childEnv, env);
  return new Promise((resolve, reject) => {
    const child = spawnService(DEMO, { cwd: REPO_ROOT, env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] }, [
      '--json',
      '--timeout-s',
      '300',
      ...args,
    ]);
    let stdout = '';
    let stderr = '';
    child.stdout?.setEncoding('utf8').on('data', (d: string) => (stdout += d));
    child.stderr?.setEncoding('utf8').on('data', (d: string) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGTERM'); // the demo cleans up on SIGTERM
      reject(new Error(`the demo did not finish within ${timeoutMs / 1000} s\n${stderr}`));
    }, timeoutMs);
    child.once('error', reject);
    child.once('close', (code) => {
      clearTimeout(timer);
      resolve({ code, stdout, stderr });
    });
  });
}
