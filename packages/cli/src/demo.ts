import { rmSync } from 'node:fs';
import { DEMO_USAGE, parseDemoArgs } from './demo/demo-options.js';
import { runDemo } from './demo/demo-runner.js';
import type { ManagedProcess } from './demo/managed-process.js';
import { CliError, ExitCode } from './errors.js';

// `pnpm demo`: see demo/demo-runner.ts. Ctrl-C (or SIGTERM) aborts and still cleans up; a second
// one kills every started process group at once and exits.
const controller = new AbortController();
const started: ManagedProcess[] = [];
const tempDirs: string[] = [];
// A closed terminal (SIGHUP, a pipe that went away) must not crash the demo before it has
// stopped what it started: output is best effort, clean-up is not.
process.stdout.on('error', () => {});
process.stderr.on('error', () => {});
let signals = 0;
const onSignal = (sig: NodeJS.Signals) => {
  signals++;
  if (signals === 1) {
    controller.abort(new Error(sig));
    return;
  }
  for (const p of started) p.killNow();
  process.exit(130);
};
process.on('SIGINT', onSignal);
process.on('SIGTERM', onSignal);
process.on('SIGHUP', onSignal);
// Last resort if this process dies some other way: no service outlives it.
process.on('exit', () => {
  for (const p of started) p.killNow();
  for (const dir of tempDirs) rmSync(dir, { recursive: true, force: true });
});

try {
  const opts = parseDemoArgs(process.argv.slice(2));
  if (opts.help) {
    process.stdout.write(`${DEMO_USAGE}\n`);
    process.exit(ExitCode.ok);
  }
  const { exitCode } = await runDemo(
    opts,
    { stdout: process.stdout, stderr: process.stderr },
    process.env,
    controller.signal,
    (p) => started.push(p),
    (dir) => tempDirs.push(dir),
  );
  process.exitCode = exitCode;
} catch (err) {
  if (err instanceof CliError) {
    process.stderr.write(`demo: ${err.message}\n`);
    process.exitCode = err.exitCode;
  } else {
    process.stderr.write(`demo: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = ExitCode.failed;
  }
}
