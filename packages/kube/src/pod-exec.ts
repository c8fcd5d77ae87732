import { Exec, type V1Status } from '@kubernetes/client-node';
import WebSocket from 'ws';
import type { KubeClients } from './kube-clients.js';
import { isConnectionError, KubeError, KubeErrorCodes } from './kube-errors.js';
import { computeBackoffMs } from './retry-policy.js';
import { TailBuffer, tailWritable } from './tail-buffer.js';

export interface ExecInPodOptions {
  namespace: string;
  pod: string;
  container: string;
  /** argv; never run through a shell by us. */
  command: string[];
  /** Covers connecting and running. On expiry the socket is closed and the outcome is `timeout`. */
  timeoutMs: number;
  signal?: AbortSignal | undefined;
  /** Bytes of stdout and of stderr kept (the end of each). Default 4096. */
  tailBytes?: number | undefined;
}

interface ExecTimes {
  stdoutTail: string;
  stderrTail: string;
  /** ISO timestamps of the call and of its settlement. */
  startedAt: string;
  endedAt: string;
  durationMs: number;
}

export type ExecErrorReason =
  /** The WebSocket upgrade failed (pod or container missing, RBAC, server down after retries). */
  | 'connect-failed'
  /** The socket closed before the server sent the exit status. */
  | 'closed-without-status'
  /** The server sent a Failure status that carries no exit code (e.g. the container is not running). */
  | 'failure-status'
  /** The caller's signal fired. */
  | 'aborted';

export type ExecResult =
  | ({ outcome: 'exited'; exitCode: number } & ExecTimes)
  | ({ outcome: 'timeout'; message: string } & ExecTimes)
  | ({ outcome: 'error'; reason: ExecErrorReason; message: string } & ExecTimes);

type ExecSocket = WebSocket;

/** What client-node's Exec asks of its transport (WebSocketInterface, not exported by 1.4.0). */
type ExecTransport = NonNullable<ConstructorParameters<typeof Exec>[1]>;

const channelProtocols = ['v5.channel.k8s.io', 'v4.channel.k8s.io', 'v3.channel.k8s.io', 'v2.channel.k8s.io', 'channel.k8s.io'];
const closeChannel = 255;

/**
 * Our transport for client-node's Exec: the same subprotocols and the kubeconfig's own TLS/auth
 * options (applyToHTTPSOptions), but we hold the socket from the moment it is created, so a
 * timeout can end it even while connecting. client-node's default handler also routes v5
 * close-channel frames to process.stdout/stderr, which must never be ended in a service.
 */
function execTransport(kube: Pick<KubeClients, 'kubeConfig' | 'connections'>, onSocket: (socket: WebSocket) => void): ExecTransport {
  return {
    async connect(path, textHandler, binaryHandler) {
      const cluster = kube.kubeConfig.getCurrentCluster();
      if (!cluster) throw new Error('kubeconfig has no current cluster');
      const url = cluster.server.replace(/\/+$/, '').replace(/^http/, 'ws') + path;
      const options: WebSocket.ClientOptions = {};
      await kube.kubeConfig.applyToHTTPSOptions(options);
      // client-node made a fresh agent for this socket: the shared keep-alive one instead, so the
      // upgrade goes over an idle connection when there is one (it leaves the pool once upgraded)
      // and no connection is set up per exec. A proxy's agent is kept.
      options.agent = kube.connections.sharedAgentFor(options.agent) ?? options.agent;
      return new Promise<WebSocket>((resolve, reject) => {
        const socket = new WebSocket(url, channelProtocols, options);
        onSocket(socket);
        let opened = false;
        socket.on('open', () => {
          opened = true;
          resolve(socket);
        });
        // Before open an error fails the connect; after open the close that follows settles the exec.
        socket.on('error', (err) => {
          if (!opened) reject(err);
        });
        socket.on('message', (data: Buffer, isBinary: boolean) => {
          if (!isBinary) {
            if (textHandler && !textHandler(data.toString('utf8'))) socket.close();
            return;
          }
          if (data.length < 1) return;
          const channel = data.readUInt8(0);
          if (channel === closeChannel) return;
          if (binaryHandler && !binaryHandler(channel, data.subarray(1))) socket.close();
        });
      });
    },
  };
}

/** The exit code from a channel-3 Status: Success → 0, NonZeroExitCode → causes[reason=ExitCode]. */
export function exitCodeFromStatus(status: V1Status): number | undefined {
  if (status.status === 'Success') return 0;
  const cause = status.details?.causes?.find((c) => c.reason === 'ExitCode');
  if (cause?.message === undefined) return undefined;
  const code = Number.parseInt(cause.message, 10);
  return Number.isNaN(code) ? undefined : code;
}

/** A failed upgrade the command never saw: safe to try again. */
function isRetryableConnectFailure(err: unknown): boolean {
  const event = err as { message?: unknown; error?: unknown } | undefined;
  const message = typeof event?.message === 'string' ? event.message : err instanceof Error ? err.message : '';
  if (/Unexpected server response: (429|500|502|503|504)\b/.test(message)) return true;
  return isConnectionError(event?.error) || isConnectionError(err);
}

function describeConnectFailure(err: unknown): string {
  const event = err as { message?: unknown; error?: unknown } | undefined;
  if (typeof event?.message === 'string' && event.message) return event.message;
  if (event?.error instanceof Error) return event.error.message;
  return err instanceof Error ? err.message : String(err);
}

function closeSocket(socket: ExecSocket): void {
  if (socket.readyState === WebSocket.CONNECTING) {
    socket.terminate();
    return;
  }
  try {
    socket.close();
  } catch {
    // already closing
  }
  // A server that never answers the close handshake must not keep the socket open.
  const kill = setTimeout(() => {
    if (socket.readyState !== WebSocket.CLOSED) socket.terminate();
  }, 1000);
  kill.unref();
}

/**
 * Runs a command in a container over the exec WebSocket and waits for it with a real timeout.
 * client-node's Exec resolves when the socket opens and may never call its status callback; this
 * settles on the status frame, on the socket closing without one, on the timer, or on `signal`.
 * Closing the socket does not kill the remote process on a real kubelet (client-node #2532).
 * Upgrade failures with 429/5xx or connection errors are retried within the timeout (the command
 * never started); nothing after the socket opened is retried.
 */
export function execInPod(kube: KubeClients, options: ExecInPodOptions): Promise<ExecResult> {
  const { command, timeoutMs } = options;
  if (!Array.isArray(command) || command.length === 0 || command.some((arg) => typeof arg !== 'string')) {
    throw new KubeError({ code: KubeErrorCodes.badArgument, message: 'execInPod: command must be a non-empty array of strings' });
  }
  if (!Number.isFinite(timeoutMs) || timeoutMs <= 0) {
    throw new KubeError({ code: KubeErrorCodes.badArgument, message: `execInPod: timeoutMs must be a positive number, got ${timeoutMs}` });
  }
  const tailBytes = options.tailBytes ?? 4096;
  const stdoutTail = new TailBuffer(tailBytes);
  const stderrTail = new TailBuffer(tailBytes);
  const stdout = tailWritable(stdoutTail);
  const stderr = tailWritable(stderrTail);
  let pendingSocket: WebSocket | undefined;
  const exec = new Exec(
    kube.kubeConfig,
    execTransport(kube, (created) => {
      pendingSocket = created;
    }),
  );
  const started = Date.now();
  const target = `${options.namespace}/${options.pod}/${options.container}`;

  return new Promise<ExecResult>((resolve) => {
    let settled = false;
    let socket: ExecSocket | undefined;

    type Settlement =
      | { outcome: 'exited'; exitCode: number }
      | { outcome: 'timeout'; message: string }
      | { outcome: 'error'; reason: ExecErrorReason; message: string };
    const settle = (settlement: Settlement) => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      options.signal?.removeEventListener('abort', onAbort);
      const open = socket ?? pendingSocket;
      if (open) closeSocket(open);
      const ended = Date.now();
      resolve({
        ...settlement,
        stdoutTail: stdoutTail.toString(),
        stderrTail: stderrTail.toString(),
        startedAt: new Date(started).toISOString(),
        endedAt: new Date(ended).toISOString(),
        durationMs: ended - started,
      });
    };

    const timer = setTimeout(() => settle({ outcome: 'timeout', message: `exec in ${target} timed out after ${timeoutMs} ms` }), timeoutMs);
    const onAbort = () => settle({ outcome: 'error', reason: 'aborted', message: `exec in ${target} aborted by the caller` });
    if (options.signal?.aborted) {
      onAbort();
      return;
    }
    options.signal?.addEventListener('abort', onAbort, { once: true });

    const onStatus = (status: V1Status) => {
      const exitCode = exitCodeFromStatus(status);
      if (exitCode !== undefined) settle({ outcome: 'exited', exitCode });
      else
        settle({
          outcome: 'error',
          reason: 'failure-status',
          message: `exec in ${target}: ${status.reason ?? 'Failure'}: ${status.message ?? 'no message'}`,
        });
    };

    const connect = async () => {
      for (let attempt = 1; ; attempt++) {
        try {
          kube.retry.stats.attempts++;
          const opened = await exec.exec(options.namespace, options.pod, options.container, command, stdout, stderr, null, false, onStatus);
          if (settled) {
            closeSocket(opened);
            return;
          }
          socket = opened;
          opened.on('close', (code: number) => {
            settle({
              outcome: 'error',
              reason: 'closed-without-status',
              message: `exec in ${target}: connection closed without exit status (code ${code})`,
            });
          });
          return;
        } catch (err) {
          if (settled) return;
          const elapsed = Date.now() - started;
          const delayMs = computeBackoffMs(attempt - 1, kube.retry.policy, kube.retry.deps.random);
          if (isRetryableConnectFailure(err) && attempt < kube.retry.policy.maxAttempts && elapsed + delayMs < timeoutMs) {
            kube.retry.stats.retries++;
            kube.retry.stats.retriesByReason['exec-connect'] = (kube.retry.stats.retriesByReason['exec-connect'] ?? 0) + 1;
            await kube.retry.deps.sleep(delayMs);
            if (settled) return;
            continue;
          }
          settle({ outcome: 'error', reason: 'connect-failed', message: `exec in ${target}: ${describeConnectFailure(err)}` });
          return;
        }
      }
    };
    void connect();
  });
}
