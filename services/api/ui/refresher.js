// A record a page keeps fresh while a run's events come in (a backup's, a restore's): read again
// soon after each event, at most one read at a time.
//
// One at a time is what keeps the page right: two overlapping reads may be answered in either
// order, and a read sent before the run ended, answered after the read sent once its stream had
// ended, would leave the page showing a phase the run has left — for good, since nothing asks
// again once the stream is over. So a refresh asked for while a read is out runs after it.

/** How long a page waits before reading a record again after a failed read. */
export const RETRY_MS = 3000;

/**
 * Whether a failed read is worth repeating: no answer at all, a 5xx or a 429 may pass; any other
 * refusal (a 404, a 403) stands. (A 401 sends the whole console back to its token prompt.)
 */
export function mayRetry(err) {
  const status = err?.status;
  return status === undefined || status === 429 || status >= 500;
}

/**
 * `load()` reads the record; `onValue(value)` gets each answer, in the order the reads were sent;
 * `onError(err)` each failure. `soon(delayMs)`: read after `delayMs` (no sooner than a wait already
 * pending; after the read in flight, if any). `stop()`: no further reads or calls.
 */
export function createRefresher({ load, onValue, onError = () => {} }) {
  let timer;
  let dueAt = Infinity;
  let inFlight = false;
  /** A refresh asked for during the read in flight: its delay, or undefined. */
  let queuedDelay;
  let stopped = false;

  function start() {
    timer = undefined;
    dueAt = Infinity;
    inFlight = true;
    load()
      .then(
        (value) => {
          if (!stopped) onValue(value);
        },
        (err) => {
          if (!stopped) onError(err);
        },
      )
      .finally(() => {
        inFlight = false;
        if (stopped || queuedDelay === undefined) return;
        const delay = queuedDelay;
        queuedDelay = undefined;
        soon(delay);
      });
  }

  function soon(delayMs = 0) {
    if (stopped) return;
    if (inFlight) {
      queuedDelay = queuedDelay === undefined ? delayMs : Math.min(queuedDelay, delayMs);
      return;
    }
    const at = Date.now() + delayMs;
    if (timer !== undefined) {
      if (at >= dueAt) return;
      clearTimeout(timer);
    }
    dueAt = at;
    timer = setTimeout(start, delayMs);
  }

  return {
    soon,
    stop() {
      stopped = true;
      clearTimeout(timer);
      timer = undefined;
    },
  };
}
