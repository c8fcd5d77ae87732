import { performance } from 'node:perf_hooks';
import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * The longest stretch a plan's synchronous work holds the event loop before it lets other work
 * run. The api plans backups in the process that answers requests, /readyz and lock renewals
 * included: a spec at its bounds against a large cluster held it for seconds in one turn (issue
 * #45); issue #23's fairness between backups' plans asks the same.
 */
export const TURN_MS = 10;

/** Time spent since the last turn ended; `due()` is true once a turn has lasted `turnMs`. */
export class TurnClock {
  private started = performance.now();

  constructor(private readonly turnMs: number = TURN_MS) {}

  due(): boolean {
    return performance.now() - this.started >= this.turnMs;
  }

  /** Lets the event loop go (a macrotask turn: I/O and timers run) and starts a new turn. */
  async pass(): Promise<void> {
    await nextTurn();
    this.started = performance.now();
  }

  /** pass() when the turn is due. */
  async maybePass(): Promise<void> {
    if (this.due()) await this.pass();
  }
}

/**
 * `items.map(fn)` that lets the event loop go whenever a turn has lasted TURN_MS (checked after
 * every `checkEvery` items). For the large synchronous steps of a plan: the process planning one
 * backup hosts every other backup's plan and the api's requests too (issues #23, #45).
 */
export async function mapInTurns<T, R>(items: Iterable<T>, checkEvery: number, fn: (item: T) => R): Promise<R[]> {
  const out: R[] = [];
  const turn = new TurnClock();
  for (const item of items) {
    out.push(fn(item));
    if (out.length % checkEvery === 0) await turn.maybePass();
  }
  return out;
}

/** Drives a stepwise computation (core's `*InSteps` generators) to its end, a turn at a time. */
export async function runInTurns<R>(steps: Generator<void, R, void>): Promise<R> {
  const turn = new TurnClock();
  for (;;) {
    const next = steps.next();
    if (next.done) return next.value;
    await turn.maybePass();
  }
}
