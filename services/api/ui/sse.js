// Server-Sent Events over fetch + ReadableStream: EventSource cannot send a bearer header.
// Reconnects with Last-Event-ID after a drop, so no event is missed or repeated.

import { apiFetch, UnauthorizedError } from './api.js';

const TERMINAL = new Set(['Completed', 'PartiallyFailed', 'Failed', 'FailedValidation', 'Canceled']);
/** Heartbeats come every 15 s; nothing at all for this long means the connection is dead. */
const SILENCE_MS = 45_000;

/**
 * Follows `/v1/backups/<name>/events` (or `/v1/restores/<name>/events` with kind 'restore').
 * `onEvent({ id, type, at, data })` for each event; `onStatus(text)` for connection state;
 * resolves when the run reached a terminal phase or `stop()` was called. Returns `{ stop, done }`.
 */
export function followEvents(name, { onEvent, onStatus = () => {}, kind = 'backup' }) {
  const controller = new AbortController();
  let lastEventId;
  let retryMs = 2000;
  let stopped = false;

  async function readOnce() {
    const headers = lastEventId ? { 'last-event-id': lastEventId } : {};
    const res = await apiFetch(`/v1/${kind}s/${encodeURIComponent(name)}/events`, {
      headers: { ...headers, accept: 'text/event-stream' },
      signal: controller.signal,
    });
    onStatus('live');
    const reader = res.body.pipeThrough(new TextDecoderStream()).getReader();
    let buffer = '';
    let event = { data: [] };
    let ended = false;
    let watchdog;
    const arm = () => {
      clearTimeout(watchdog);
      watchdog = setTimeout(() => reader.cancel('no data or heartbeat for 45 s').catch(() => {}), SILENCE_MS);
    };
    arm();
    try {
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        arm();
        buffer += value;
        let nl = buffer.indexOf('\n');
        while (nl >= 0) {
          const line = buffer.slice(0, nl).replace(/\r$/, '');
          buffer = buffer.slice(nl + 1);
          nl = buffer.indexOf('\n');
          if (line === '') {
            if (event.data.length > 0) {
              if (event.id) lastEventId = event.id;
              const parsed = JSON.parse(event.data.join('\n'));
              onEvent(parsed);
              if (parsed.type === `${kind}.phase` && TERMINAL.has(parsed.data?.to)) ended = true;
            }
            event = { data: [] };
            continue;
          }
          if (line.startsWith(':')) continue; // heartbeat comment
          const colon = line.indexOf(':');
          const field = colon < 0 ? line : line.slice(0, colon);
          const val = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
          if (field === 'data') event.data.push(val);
          else if (field === 'id') event.id = val;
          else if (field === 'event') event.type = val;
          else if (field === 'retry' && /^\d+$/.test(val)) retryMs = Number(val);
        }
      }
    } finally {
      clearTimeout(watchdog);
    }
    return ended;
  }

  const done = (async () => {
    let failures = 0;
    while (!stopped) {
      try {
        if (await readOnce()) {
          onStatus('ended');
          return 'ended';
        }
        // The server ends the stream after the terminal event; an end without one is a drop.
        failures = 0;
      } catch (err) {
        if (stopped) break;
        if (err instanceof UnauthorizedError) {
          onStatus('unauthorized');
          return 'unauthorized';
        }
        if (err?.status === 404) {
          onStatus('not found');
          return 'not-found';
        }
        failures++;
      }
      if (stopped) break;
      onStatus('reconnecting…');
      await new Promise((r) => setTimeout(r, Math.min(retryMs * 2 ** Math.min(failures, 4), 30_000)));
    }
    return 'stopped';
  })();

  return {
    done,
    stop() {
      stopped = true;
      controller.abort();
    },
  };
}
