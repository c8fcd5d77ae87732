/*
 * The restore plan's process (restore-plan-process.ts starts it): the input arrives as the one IPC
 * message, the backup's tarball on stdin; the plan leaves on stdout as JSON lines, one sink call
 * each (RestorePlanMessage), ending with `done` (or `error`). A write waits while the pipe is full,
 * so the plan goes no faster than the parent stores it. It imports only core, the tarball reader
 * and the plan's pure modules: no Redis, no Kubernetes client, no S3 SDK, and no environment.
 */
import { readFileSync } from 'node:fs';
import { computeRestorePlan, type RestorePlanInput, type RestorePlanSink } from './restore-plan-compute.js';
import type { RestorePlanMessage } from './restore-plan-process.js';

function send(message: RestorePlanMessage, payload?: string): Promise<void> {
  return new Promise((resolve, reject) => {
    const lines = payload === undefined ? `${JSON.stringify(message)}\n` : `${JSON.stringify(message)}\n${payload}\n`;
    process.stdout.write(lines, (err) => (err ? reject(err) : resolve()));
  });
}

const sink: RestorePlanSink = {
  log: (lines) => (lines.length > 0 ? send({ t: 'log', lines }) : Promise.resolve()),
  problem: (problem) => send({ t: 'problem', problem }),
  provideSnapshot: (request) => send({ t: 'snapshot', request }),
  // The items as Redis stores them: the parent passes the line on unparsed.
  batch: (id, items) => send({ t: 'batch', id }, JSON.stringify(items)),
  pod: (pod) => send({ t: 'pod', pod }),
};

/** The process's peak resident memory (VmHWM), for the parent's log and the memory benchmark. */
function peakRssBytes(): number {
  const match = /^VmHWM:\s+(\d+)\s+kB/m.exec(readFileSync('/proc/self/status', 'utf8'));
  return match?.[1] ? Number(match[1]) * 1024 : 0;
}

process.once('message', (input: RestorePlanInput) => {
  // The channel carried its one message; closed on the next turn (closing it inside its own 'message' handler crashes Node 20).
  setImmediate(() => process.disconnect());
  computeRestorePlan(input, process.stdin, sink)
    .then((outcome) => send({ t: 'done', outcome, peakRssBytes: peakRssBytes() }))
    .then(
      () => process.exit(0),
      async (err: Error & { code?: unknown }) => {
        await send({ t: 'error', message: err.message, ...(typeof err.code === 'string' ? { code: err.code } : {}) }).catch(() => {});
        process.exit(1);
      },
    );
});
