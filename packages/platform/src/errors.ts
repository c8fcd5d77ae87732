/** Error codes of @stowage/platform (one catalogue). */
export const PlatformErrorCode = {
  /** Environment configuration is invalid; `problems` lists every variable and how to fix it. */
  configInvalid: 'PLATFORM_CONFIG_INVALID',
  /** No `redis-server` binary on PATH for the embedded Redis. */
  redisNotFound: 'PLATFORM_REDIS_NOT_FOUND',
  /** The embedded `redis-server` did not start or answer. */
  redisStartFailed: 'PLATFORM_REDIS_START_FAILED',
} as const;
export type PlatformErrorCode = (typeof PlatformErrorCode)[keyof typeof PlatformErrorCode];

export class PlatformError extends Error {
  override readonly name = 'PlatformError';
  constructor(
    readonly code: PlatformErrorCode,
    message: string,
    options?: { cause?: unknown },
  ) {
    super(`${code}: ${message}`, options);
  }
}
