import { createRequire } from 'node:module';
import { type DestinationStream, type Logger, type LoggerOptions, pino } from 'pino';
import type { LogLevel } from './config.js';

export type { Logger } from 'pino';

/**
 * Paths whose values never reach a log line: tokens, auth headers, cookies, the repository key.
 * pino's wildcard matches one level, so the common shapes are listed at the top, one and two
 * levels down.
 */
const SECRET_KEYS = [
  'authorization',
  'Authorization',
  'cookie',
  'token',
  'tokens',
  'apiTokens',
  'accessToken',
  'bearerToken',
  'password',
  'secret',
  'repoKey',
  'repositoryKey',
  'STOWAGE_REPO_KEY',
  'STOWAGE_API_TOKENS',
];

export const REDACT_PATHS: readonly string[] = [
  ...SECRET_KEYS,
  ...SECRET_KEYS.map((key) => `*.${key}`),
  ...SECRET_KEYS.map((key) => `*.*.${key}`),
  'req.headers.authorization',
  'req.headers.cookie',
  'headers.authorization',
  'config.api.tokens',
  'config.repository.key',
  'repository.key',
];

export const REDACTED = '[redacted]';

export interface CreateLoggerOptions {
  level: LogLevel;
  /** The process or service name (`api`, `worker`, `node-agent`), on every line. */
  name: string;
  /** Human-readable output through pino-pretty (dev only; falls back to JSON when it is not installed). */
  pretty?: boolean;
  /** Where lines go; default stdout. Tests pass a stream to capture output. */
  destination?: DestinationStream;
}

function prettyAvailable(): boolean {
  try {
    createRequire(import.meta.url).resolve('pino-pretty');
    return true;
  } catch {
    return false;
  }
}

/**
 * The one logger of a process: JSON lines to stdout, secrets redacted, errors serialised under
 * `err`. Log objects first, message second: `logger.info({ backup }, 'backup started')`.
 */
export function createLogger(opts: CreateLoggerOptions): Logger {
  const options: LoggerOptions = {
    name: opts.name,
    level: opts.level,
    redact: { paths: [...REDACT_PATHS], censor: REDACTED },
    serializers: { err: pino.stdSerializers.err, error: pino.stdSerializers.err },
    timestamp: pino.stdTimeFunctions.isoTime,
  };
  if (opts.pretty && !opts.destination) {
    if (prettyAvailable()) {
      return pino({ ...options, transport: { target: 'pino-pretty', options: { colorize: true, translateTime: 'SYS:HH:MM:ss.l' } } });
    }
    const logger = pino(options);
    logger.warn('pino-pretty is not installed (it is a dev dependency); logging JSON');
    return logger;
  }
  return opts.destination ? pino(options, opts.destination) : pino(options);
}

/** A child logger for one component of a process: `{ component }` on every line. */
export function componentLogger(logger: Logger, component: string): Logger {
  return logger.child({ component });
}

/** The fields a job's log lines carry, so one backup's logs join up across services. */
export interface JobLogContext {
  backup: string;
  block?: string | undefined;
  jobId?: string | undefined;
  attempt?: number | undefined;
  requestId?: string | undefined;
}

/** A child logger for one job; undefined fields are left out. */
export function jobLogger(logger: Logger, context: JobLogContext): Logger {
  const bindings: Record<string, string | number> = {};
  for (const [key, value] of Object.entries(context)) if (value !== undefined) bindings[key] = value;
  return logger.child(bindings);
}
