import type { Logger } from 'pino';

export type ShutdownStep = () => void | Promise<void>;

export interface StepReport {
  name: string;
  outcome: 'ok' | 'error' | 'timeout';
  durationMs: number;
  error?: string;
}

export interface ShutdownReport {
  reason: string;
  /** True when every step finished without error within its bound. */
  ok: boolean;
  steps: StepReport[];
}

/** The events a lifecycle listens to; `process` by default, an EventEmitter in tests. */
export interface ProcessEvents {
  on(event: string, listener: (...args: unknown[]) => void): unknown;
  off(event: string, listener: (...args: unknown[]) => void): unknown;
}

export interface LifecycleOptions {
  logger: Logger;
  /** Bound on the whole shutdown; keep it below the pod's terminationGracePeriodSeconds. */
  timeoutMs: number;
  /**
   * `reverse` (default): last registered, first stopped — register Redis, then workers, then the
   * HTTP server, and shutdown closes HTTP → workers → Redis. `declared`: in registration order.
   */
  order?: 'reverse' | 'declared';
  /** Default process.exit; injectable for tests. */
  exit?: (code: number) => void;
  /** Default process; injectable for tests. */
  processEvents?: ProcessEvents;
}

export interface StepOptions {
  /** A tighter bound for this step; it never exceeds what is left of the overall timeout. */
  timeoutMs?: number;
}

export interface Lifecycle {
  /** Registers a shutdown step (close a server, a worker, a connection). */
  onShutdown(name: string, step: ShutdownStep, opts?: StepOptions): void;
  /** Readiness for /readyz: false until markReady(), false again as soon as shutdown starts. */
  isReady(): boolean;
  markReady(): void;
  isShuttingDown(): boolean;
  /**
   * Runs every step once: readiness off, then each step in order, each in its own try/catch and
   * bounded by the time left. Calling it again returns the same promise.
   */
  shutdown(reason: string): Promise<ShutdownReport>;
  /**
   * SIGINT/SIGTERM → shutdown then exit (0 if clean, 1 otherwise); a second signal exits 1 at
   * once. uncaughtException/unhandledRejection → logged fatal, shutdown, exit 1. Returns an uninstaller.
   */
  installProcessHandlers(): () => void;
}

const TIMED_OUT = Symbol('timed out');

export function createLifecycle(opts: LifecycleOptions): Lifecycle {
  const { logger, timeoutMs } = opts;
  const exit = opts.exit ?? ((code: number) => process.exit(code));
  const events: ProcessEvents = opts.processEvents ?? (process as unknown as ProcessEvents);
  const steps: { name: string; step: ShutdownStep; timeoutMs: number | undefined }[] = [];
  let ready = false;
  let running: Promise<ShutdownReport> | undefined;

  async function runStep(name: string, step: ShutdownStep, boundMs: number): Promise<StepReport> {
    const started = Date.now();
    let timer: NodeJS.Timeout | undefined;
    try {
      const timeout = new Promise<typeof TIMED_OUT>((resolve) => {
        timer = setTimeout(() => resolve(TIMED_OUT), Math.max(0, boundMs));
      });
      // Promise.resolve().then: a step that throws synchronously is caught like a rejection.
      const outcome = await Promise.race([Promise.resolve().then(step), timeout]);
      const durationMs = Date.now() - started;
      if (outcome === TIMED_OUT) {
        logger.error({ step: name, timeoutMs: boundMs }, 'shutdown step timed out; moving on');
        return { name, outcome: 'timeout', durationMs };
      }
      logger.info({ step: name, durationMs }, 'shutdown step done');
      return { name, outcome: 'ok', durationMs };
    } catch (err) {
      logger.error({ step: name, err }, 'shutdown step failed; moving on');
      return { name, outcome: 'error', durationMs: Date.now() - started, error: (err as Error)?.message ?? String(err) };
    } finally {
      clearTimeout(timer);
    }
  }

  async function run(reason: string): Promise<ShutdownReport> {
    ready = false;
    const deadline = Date.now() + timeoutMs;
    logger.info({ reason, steps: steps.length, timeoutMs }, 'shutting down');
    const ordered = (opts.order ?? 'reverse') === 'reverse' ? [...steps].reverse() : [...steps];
    const reports: StepReport[] = [];
    for (const { name, step, timeoutMs: stepTimeoutMs } of ordered) {
      const left = deadline - Date.now();
      reports.push(await runStep(name, step, stepTimeoutMs === undefined ? left : Math.min(stepTimeoutMs, left)));
    }
    const report = { reason, ok: reports.every((r) => r.outcome === 'ok'), steps: reports };
    logger.info({ reason, ok: report.ok }, 'shutdown finished');
    return report;
  }

  const lifecycle: Lifecycle = {
    onShutdown(name, step, stepOpts) {
      if (running) logger.warn({ step: name }, 'shutdown step registered after shutdown began; it will not run');
      steps.push({ name, step, timeoutMs: stepOpts?.timeoutMs });
    },
    isReady: () => ready && !running,
    markReady() {
      if (!running) ready = true;
    },
    isShuttingDown: () => running !== undefined,
    shutdown(reason) {
      running ??= run(reason);
      return running;
    },
    installProcessHandlers() {
      let signals = 0;
      const onSignal = (signal: unknown) => {
        signals++;
        if (signals > 1) {
          logger.warn({ signal }, 'second signal: exiting now');
          exit(1);
          return;
        }
        void lifecycle.shutdown(String(signal)).then((report) => exit(report.ok ? 0 : 1));
      };
      const onFatal = (kind: string) => (err: unknown) => {
        logger.fatal({ err }, kind);
        void lifecycle.shutdown(kind).then(() => exit(1));
      };
      const handlers: [string, (...args: unknown[]) => void][] = [
        ['SIGINT', onSignal],
        ['SIGTERM', onSignal],
        ['uncaughtException', onFatal('uncaughtException')],
        ['unhandledRejection', onFatal('unhandledRejection')],
      ];
      for (const [event, handler] of handlers) events.on(event, handler);
      return () => {
        for (const [event, handler] of handlers) events.off(event, handler);
      };
    },
  };
  return lifecycle;
}
