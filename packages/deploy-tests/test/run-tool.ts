import { execFile } from 'node:child_process';
import { dirname, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

/** The repository root (this file lives in packages/deploy-tests/test). */
export const REPO_ROOT = resolve(dirname(fileURLToPath(import.meta.url)), '../../..');

export interface ToolResult {
  exitCode: number;
  stdout: string;
  stderr: string;
}

/**
 * Runs an external tool the deployment artefacts are checked with (kubectl, docker-compose).
 * A missing binary is a failure with an install hint, never a skip: CI installs both.
 */
export function runTool(binary: string, args: readonly string[], installHint: string, cwd = REPO_ROOT): Promise<ToolResult> {
  return new Promise((resolvePromise, reject) => {
    execFile(binary, args, { cwd, timeout: 60_000, maxBuffer: 32 * 1024 * 1024 }, (error, stdout, stderr) => {
      if (error && (error as NodeJS.ErrnoException).code === 'ENOENT') {
        reject(new Error(`${binary} is not installed or not on PATH: ${installHint}`, { cause: error }));
        return;
      }
      if (error?.killed) {
        reject(new Error(`${binary} ${args.join(' ')} did not finish within 60 s`, { cause: error }));
        return;
      }
      const exitCode = error ? (typeof error.code === 'number' ? error.code : 1) : 0;
      resolvePromise({ exitCode, stdout, stderr });
    });
  });
}

export const KUBECTL_HINT = 'install kubectl (Debian: apt-get install -y kubernetes-client; .ci/run does this)';
export const COMPOSE_HINT = 'install docker-compose (Debian: apt-get install -y docker-compose; .ci/run does this)';
