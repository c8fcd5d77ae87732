import { setImmediate as nextTurn } from 'node:timers/promises';

/**
 * `items.map(fn)` that lets the event loop go after every `perTurn` items. For the large
 * synchronous steps of a plan: the process planning one backup hosts every other backup's plan
 * too, and each of their reads waits for the turn in progress to end (issue #23, fairness).
 */
export async function mapInTurns<T, R>(items: Iterable<T>, perTurn: number, fn: (item: T) => R): Promise<R[]> {
  const out: R[] = [];
  for (const item of items) {
    out.push(fn(item));
    if (out.length % perTurn === 0) await nextTurn();
  }
  return out;
}
