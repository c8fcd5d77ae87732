import { createInterface } from 'node:readline/promises';
import { text } from 'node:stream/consumers';
import { runCli } from './cli.js';
import { ExitCode } from './errors.js';

// `stowage …`: the CLI entry (bin/stowage.js runs this through tsx; build.mjs bundles it into dist/stowage.mjs).
// `stowage backup logs x | head`: a reader that went away is not an error.
for (const stream of [process.stdout, process.stderr]) {
  stream.on('error', (err: NodeJS.ErrnoException) => {
    if (err.code === 'EPIPE') process.exit(process.exitCode ?? 0);
    throw err;
  });
}
runCli(process.argv.slice(2), process.env, {
  stdout: process.stdout,
  stderr: process.stderr,
  readStdin: () => text(process.stdin),
  // A destructive verb asks on a terminal (y/N); without one it needs --confirm.
  ...(process.stdin.isTTY
    ? {
        prompt: async (question: string) => {
          const rl = createInterface({ input: process.stdin, output: process.stderr });
          try {
            return await rl.question(question);
          } finally {
            rl.close();
          }
        },
      }
    : {}),
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
