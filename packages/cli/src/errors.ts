/**
 * The CLI's error catalogue. Every failure a user sees is one `CliError` with a stable code and
 * a message that says what went wrong and what to do; `problems` carries each validation
 * problem (`path: message`) when the API listed them.
 */
export const CliErrorCode = {
  usage: 'CLI_USAGE',
  config: 'CLI_CONFIG',
  specFile: 'CLI_SPEC_FILE',
  apiUnreachable: 'CLI_API_UNREACHABLE',
  apiTimeout: 'CLI_API_TIMEOUT',
  apiUnauthorized: 'CLI_API_UNAUTHORIZED',
  /** RBAC refused the caller (the message is the API server's). */
  forbidden: 'CLI_FORBIDDEN',
  notFound: 'CLI_NOT_FOUND',
  validation: 'CLI_VALIDATION',
  conflict: 'CLI_CONFLICT',
  notStowage: 'CLI_NOT_STOWAGE_API',
  apiFailed: 'CLI_API_FAILED',
  streamFailed: 'CLI_STREAM_FAILED',
  demoFailed: 'CLI_DEMO_FAILED',
} as const;
export type CliErrorCode = (typeof CliErrorCode)[keyof typeof CliErrorCode];

/** Process exit codes of `stowage`. */
export const ExitCode = {
  ok: 0,
  /** The request failed (API unreachable, refused, not found, invalid ...). */
  failed: 1,
  /** Bad command line. */
  usage: 2,
  /** `--wait`: the backup ended in a phase other than Completed. */
  backupNotCompleted: 3,
} as const;

export interface CliProblem {
  path: string;
  message: string;
}

export class CliError extends Error {
  override readonly name = 'CliError';
  constructor(
    readonly code: CliErrorCode,
    message: string,
    readonly problems: readonly CliProblem[] = [],
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }

  get exitCode(): number {
    return this.code === CliErrorCode.usage ? ExitCode.usage : ExitCode.failed;
  }
}

export const isCliError = (err: unknown): err is CliError => err instanceof CliError;

/** The lines a terminal shows for an error: the message, then each problem indented. */
export function formatCliError(err: CliError): string[] {
  return [err.message, ...err.problems.map((p) => `  ${p.path}: ${p.message}`)];
}
