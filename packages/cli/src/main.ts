import { text } from 'node:stream/consumers';
import { runCli } from './cli.js';
import { ExitCode } from './errors.js';

// `stowage …`: the CLI entry (bin/stowage.js runs this through tsx).
runCli(process.argv.slice(2), process.env, {
  stdout: process.stdout,
  stderr: process.stderr,
  readStdin: () => text(process.stdin),
}).then(
  (code) => {
    process.exitCode = code;
  },
  (err: unknown) => {
    // Not an expected failure: a bug or a broken invariant; show it whole.
    process.stderr.write(`stowage: unexpected error: ${err instanceof Error ? (err.stack ?? err.message) : String(err)}\n`);
    process.exitCode = ExitCode.failed;
  },
);
