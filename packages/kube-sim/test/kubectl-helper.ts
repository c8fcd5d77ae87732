import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

/**
 * Runs the real kubectl with a private HOME and discovery cache (nothing leaks between runs),
 * answering its exit code and output instead of throwing, so tests can check refusals.
 */
export function kubectlRunner(defaultKubeconfig: string) {
  const home = mkdtempSync(join(tmpdir(), 'kube-sim-kubectl-'));
  const run = (args: string[], options: { kubeconfig?: string; stdin?: string } = {}) =>
    new Promise<{ code: number; stdout: string; stderr: string }>((resolve) => {
      const child = execFile(
        'kubectl',
        ['--cache-dir', join(home, 'cache'), ...args],
        { env: { PATH: process.env.PATH, HOME: home, KUBECONFIG: options.kubeconfig ?? defaultKubeconfig }, timeout: 30_000 },
        (error, stdout, stderr) => resolve({ code: error ? ((error as { code?: number }).code ?? 1) : 0, stdout, stderr }),
      );
      if (options.stdin !== undefined) child.stdin?.end(options.stdin);
    });
  return { run, home, cleanup: () => rmSync(home, { recursive: true, force: true }) };
}
