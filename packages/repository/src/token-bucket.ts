/**
 * A token-bucket throttle on bytes. `take(n)` spends n tokens and, when the bucket is in debt,
 * waits until the refill has paid it back, so the long-run rate never exceeds `bytesPerSecond`
 * while bursts up to `burstBytes` pass at once. Several readers may share one bucket (one per
 * node agent, say): each waits for its own share of the debt, in arrival order.
 *
 * Clock and sleep are injectable so tests need no real waiting.
 */
export interface TokenBucketOptions {
  /** Tokens that may be spent at once after idling. Default: one second's worth. */
  readonly burstBytes?: number;
  /** Monotonic clock in milliseconds. */
  readonly now?: () => number;
  readonly sleep?: (ms: number, signal?: AbortSignal) => Promise<void>;
}

export class TokenBucket {
  readonly bytesPerSecond: number;
  readonly burstBytes: number;
  private tokens: number;
  private lastRefillMs: number;
  private readonly now: () => number;
  private readonly sleep: (ms: number, signal?: AbortSignal) => Promise<void>;

  constructor(bytesPerSecond: number, options: TokenBucketOptions = {}) {
    if (!(Number.isFinite(bytesPerSecond) && bytesPerSecond > 0)) {
      throw new RangeError(`bytesPerSecond must be a positive number, got ${bytesPerSecond}`);
    }
    this.bytesPerSecond = bytesPerSecond;
    this.burstBytes = options.burstBytes ?? bytesPerSecond;
    this.now = options.now ?? (() => performance.now());
    this.sleep = options.sleep ?? abortableSleep;
    this.tokens = this.burstBytes;
    this.lastRefillMs = this.now();
  }

  /** Spends `bytes` tokens; resolves when the caller may go on. Rejects with the signal's reason on abort. */
  async take(bytes: number, signal?: AbortSignal): Promise<void> {
    signal?.throwIfAborted();
    const nowMs = this.now();
    this.tokens = Math.min(this.burstBytes, this.tokens + ((nowMs - this.lastRefillMs) * this.bytesPerSecond) / 1000);
    this.lastRefillMs = nowMs;
    this.tokens -= bytes;
    if (this.tokens >= 0) return;
    await this.sleep((-this.tokens * 1000) / this.bytesPerSecond, signal);
  }
}

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason);
      return;
    }
    const onAbort = () => {
      clearTimeout(timer);
      reject(signal?.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}
