/**
 * A cap on concurrent calls (requests in flight against the API server from one process's
 * restore jobs). Callers beyond the cap wait in FIFO order; nothing is dropped.
 */
export class InFlightLimit {
  private active = 0;
  private readonly queue: Array<() => void> = [];
  /** The most calls ever in flight at once (for tests and the benchmark). */
  peak = 0;

  constructor(readonly max: number) {
    if (!Number.isInteger(max) || max < 1) throw new RangeError(`InFlightLimit: max must be a positive integer, got ${max}`);
  }

  get inFlight(): number {
    return this.active;
  }

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.active >= this.max) await new Promise<void>((resolve) => this.queue.push(resolve));
    this.active++;
    if (this.active > this.peak) this.peak = this.active;
    try {
      return await fn();
    } finally {
      this.active--;
      this.queue.shift()?.();
    }
  }
}
