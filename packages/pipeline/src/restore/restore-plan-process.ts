/*
 * Runs a restore's plan in a process of its own (restore-plan-child.ts): a backup's tarball is
 * untrusted input as large as the cluster it came from, so it is parsed where the V8 heap is capped
 * (STOWAGE_RESTORE_PLAN_HEAP_MB), with no credentials, apart from the process that serves the API
 * and hosts the restores queue: a plan that runs out of memory fails its restore with a message
 * naming the setting, never that process (issue #45). The parent streams the tarball in and
 * applies the plan's messages to the store in order, one at a time: the parent never holds the
 * plan, only the line in hand.
 */
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { Readable, type Writable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { StorageError, type StorageErrorCode } from '@stowage/storage';
import { PipelineErrorCode, UnrecoverablePipelineError } from '../errors.js';
import type { RunProblem } from '../state/run-state.js';
import type { RestorePlanInput, RestorePlanLogLine, RestorePlanOutcome, RestorePlanSink } from './restore-plan-compute.js';
import type { RestorePodPlan } from './restore-plan-types.js';

/**
 * One line of the plan's process on stdout: a sink call, then `done` or `error`. A `batch` line is
 * followed by one line of its items' JSON array, which the parent stores as it is, never parsed.
 */
export type RestorePlanMessage =
  | { t: 'log'; lines: RestorePlanLogLine[] }
  | { t: 'problem'; problem: RunProblem }
  | { t: 'snapshot'; request: Parameters<RestorePlanSink['provideSnapshot']>[0] }
  | { t: 'batch'; id: string }
  | { t: 'pod'; pod: RestorePodPlan }
  | { t: 'done'; outcome: RestorePlanOutcome; peakRssBytes: number }
  | { t: 'error'; message: string; code?: string };

/** Where the parent puts the plan: the sink's calls, a batch as the JSON text of its items (PlannedRestoreItem[]). */
export interface RestorePlanStore extends Omit<RestorePlanSink, 'batch'> {
  batch(id: string, itemsJson: string): Promise<void>;
}

export interface RestorePlanRun extends RestorePlanOutcome {
  /** The plan process's peak resident memory (VmHWM). */
  peakRssBytes: number;
}

/** The node arguments that run the child: its compiled `.js` beside this file, or (tests, tsx) its TypeScript source through tsx. */
function childEntry(): string[] {
  if (import.meta.url.endsWith('.ts')) {
    const tsx = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;
    return ['--conditions=@stowage/source', '--import', tsx, fileURLToPath(new URL('./restore-plan-child.ts', import.meta.url))];
  }
  return [fileURLToPath(new URL('./restore-plan-child.js', import.meta.url))];
}

const STDERR_TAIL_BYTES = 4096;

/**
 * Plans a restore in its own process, `heapMb` its V8 heap's cap: the tarball piped in, each
 * message of the plan applied to `store` before the next is read. Throws the plan's own error (a
 * corrupt archive is a StorageError, as when read in-process), the tarball's read error, or —
 * out of memory — an unrecoverable error naming STOWAGE_RESTORE_PLAN_HEAP_MB.
 */
export async function runRestorePlanProcess(
  input: RestorePlanInput,
  tarball: AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
  store: RestorePlanStore,
  opts: { heapMb: number },
): Promise<RestorePlanRun> {
  const child = spawn(process.execPath, [`--max-old-space-size=${opts.heapMb}`, ...childEntry()], {
    stdio: ['pipe', 'pipe', 'pipe', 'ipc'],
    env: {},
  });
  // Piped, so never null.
  const stdin = child.stdin as Writable;
  const stdout = child.stdout as Readable;
  const stderr = child.stderr as Readable;
  let stderrTail = '';
  stderr.setEncoding('utf8');
  stderr.on('data', (text: string) => {
    stderrTail = (stderrTail + text).slice(-STDERR_TAIL_BYTES);
  });
  const closed = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    child.once('close', (code, signal) => resolve({ code, signal })),
  );
  let spawnError: Error | undefined;
  child.once('error', (err) => {
    spawnError ??= err;
  });
  child.send(input);
  // The child's end closes its stdin under the feed (EPIPE): then its exit says why, not the feed.
  let feedError: Error | undefined;
  const feeding = pipeline(Readable.from(tarball), stdin).catch((err: Error & { code?: string }) => {
    if (err.code !== 'EPIPE' && err.code !== 'ERR_STREAM_PREMATURE_CLOSE' && err.code !== 'ERR_STREAM_DESTROYED') feedError = err;
    child.kill('SIGKILL');
  });

  let done: Extract<RestorePlanMessage, { t: 'done' }> | undefined;
  let failed: Extract<RestorePlanMessage, { t: 'error' }> | undefined;
  try {
    let pending = '';
    let batchId: string | undefined;
    stdout.setEncoding('utf8');
    for await (const text of stdout as AsyncIterable<string>) {
      pending += text;
      let end = pending.indexOf('\n');
      while (end >= 0) {
        const line = pending.slice(0, end);
        pending = pending.slice(end + 1);
        if (batchId !== undefined) {
          await store.batch(batchId, line);
          batchId = undefined;
        } else {
          const message = JSON.parse(line) as RestorePlanMessage;
          if (message.t === 'done') done = message;
          else if (message.t === 'error') failed = message;
          else if (message.t === 'batch') batchId = message.id;
          else await apply(store, message);
        }
        end = pending.indexOf('\n');
      }
    }
  } catch (err) {
    // The store failed (Redis, the API server): the plan stops with it.
    child.kill('SIGKILL');
    await closed;
    throw err;
  }
  const { code, signal } = await closed;
  await feeding;
  if (spawnError) throw spawnError;
  if (feedError) throw feedError;
  if (done && code === 0) return { ...done.outcome, peakRssBytes: done.peakRssBytes };
  if (failed) throw rebuiltError(failed);
  if (/heap out of memory|Reached heap limit/.test(stderrTail)) {
    throw new UnrecoverablePipelineError(
      PipelineErrorCode.restorePlanOutOfMemory,
      `the restore's plan needs more than its ${opts.heapMb} MiB heap (STOWAGE_RESTORE_PLAN_HEAP_MB); restore fewer namespaces or raise it`,
    );
  }
  // The error line of a crash, not Node's trailing version line or the stack.
  const lastLine =
    stderrTail
      .split('\n')
      .filter((line) => line.trim() && !/^Node\.js v|^\s+at /.test(line))
      .at(-1) ?? '';
  throw new Error(
    `the restore's plan process ${signal ? `was killed (${signal})` : `exited with ${code}`}${lastLine ? `: ${lastLine}` : ''}`,
  );
}

function apply(store: RestorePlanStore, message: Exclude<RestorePlanMessage, { t: 'done' | 'error' | 'batch' }>): Promise<void> {
  switch (message.t) {
    case 'log':
      return store.log(message.lines);
    case 'problem':
      return store.problem(message.problem);
    case 'snapshot':
      return store.provideSnapshot(message.request);
    case 'pod':
      return store.pod(message.pod);
  }
}

/** The child's error as the in-process read throws it: a storage error keeps its class and code. */
function rebuiltError(failed: Extract<RestorePlanMessage, { t: 'error' }>): Error {
  if (failed.code?.startsWith('STORAGE_')) {
    const prefix = `${failed.code}: `;
    return new StorageError(
      failed.code as StorageErrorCode,
      failed.message.startsWith(prefix) ? failed.message.slice(prefix.length) : failed.message,
    );
  }
  return new Error(failed.message);
}
