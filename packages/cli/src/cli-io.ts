import { CliError, CliErrorCode } from './errors.js';

/** Where the CLI reads and writes; injected so tests and the demo can capture it. */
export interface CliIo {
  stdout: { write(text: string): void; isTTY?: boolean };
  stderr: { write(text: string): void; isTTY?: boolean };
  /** All of stdin as text (for `-f -`). */
  readStdin?: () => Promise<string>;
  /** Asks a question on the terminal and returns the answer line; absent when stdin is not a terminal. */
  prompt?: (question: string) => Promise<string>;
}

export type CliEnv = Readonly<Record<string, string | undefined>>;

/**
 * Velero's confirmation of a destructive verb: `--confirm` says yes; otherwise the question is
 * asked on a terminal (y/N), and without one the verb refuses, naming the flag.
 */
export async function confirm(io: CliIo, confirmed: boolean, what: string, question: string): Promise<boolean> {
  if (confirmed) return true;
  if (!io.prompt) throw new CliError(CliErrorCode.usage, `${what}: this cannot be undone; add --confirm (there is no terminal to ask on)`);
  const answer = await io.prompt(`${question}? This cannot be undone. [y/N] `);
  return /^y(es)?$/i.test(answer.trim());
}
