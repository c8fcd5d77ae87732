import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';

export interface ManagedProcessOptions {
  /** Short name used in messages and as the output prefix (`api`, `worker-1`, `node-a`). */
  name: string;
  command: string;
  args: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  /** Every output line goes here (appended). */
  logFile: string;
  /** Also hand each line to this (e.g. prefixed to the terminal with --verbose). */
  onLine?: (name: string, line: string) => void;
}

export interface ExitInfo {
  code: number | null;
  signal: NodeJS.Signals | null;
}

/**
 * A child process in its own process group, so stopping it also stops anything it started (no
 * orphan survives), with its output in a log file and the last lines kept for error messages.
 */
export class ManagedProcess {
  readonly name: string;
  readonly pid: number;
  readonly exited: Promise<ExitInfo>;
  readonly logFile: string;
  private readonly child: ChildProcess;
  private readonly log: WriteStream;
  private readonly tail: string[] = [];
  private exitInfo: ExitInfo | undefined;

  constructor(opts: ManagedProcessOptions) {
    this.name = opts.name;
    this.logFile = opts.logFile;
    this.log = createWriteStream(opts.logFile, { flags: 'a' });
    this.child = spawn(opts.command, [...opts.args], {
      cwd: opts.cwd,
      env: opts.env as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true, // its own process group: one kill reaches its children too
    });
    if (this.child.pid === undefined) throw new Error(`could not start ${opts.name} (${opts.command})`);
    this.pid = this.child.pid;
    this.exited = new Promise<ExitInfo>((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.exitInfo = { code, signal };
        resolve(this.exitInfo);
      });
    });
    for (const stream of [this.child.stdout, this.child.stderr]) {
      let rest = '';
      stream?.setEncoding('utf8');
      stream?.on('data', (chunk: string) => {
        this.log.write(chunk);
        rest += chunk;
        const lines = rest.split('\n');
        rest = lines.pop() ?? '';
        for (const line of lines) this.keep(line, opts);
      });
      stream?.on('end', () => {
        if (rest) this.keep(rest, opts);
        rest = '';
      });
    }
  }

  private keep(line: string, opts: ManagedProcessOptions): void {
    this.tail.push(line);
    if (this.tail.length > 40) this.tail.shift();
    opts.onLine?.(this.name, line);
  }

  get hasExited(): boolean {
    return this.exitInfo !== undefined;
  }

  /** The last lines it printed (for "why did it stop"). */
  lastLines(n = 15): string[] {
    return this.tail.slice(-n);
  }

  /** True while any process of its group is alive. */
  groupAlive(): boolean {
    try {
      process.kill(-this.pid, 0);
      return true;
    } catch (err) {
      return (err as NodeJS.ErrnoException).code === 'EPERM';
    }
  }

  /**
   * Signals the group only while the process is known alive (not yet reaped): its pid is then
   * still taken, and so is the group's id. Once it has exited, that pid may be another process's
   * (pids wrap), and a detached one leads a group of that id: it would get our signal.
   */
  private signalGroup(signal: NodeJS.Signals): void {
    if (this.hasExited) return;
    try {
      process.kill(-this.pid, signal);
    } catch {
      // the group is gone
    }
  }

  /** Synchronous last resort (process 'exit' handler): SIGKILL the whole group while the process lives. */
  killNow(): void {
    this.signalGroup('SIGKILL');
  }

  /**
   * SIGTERM to the group (the service shuts down gracefully), SIGKILL after `graceMs` if it still
   * runs; resolves once the process has exited and no member of its group is left (or 5 s after
   * the SIGKILL was due: what is left the caller reports). Safe to call twice, and after it exited.
   */
  async stop(graceMs = 15_000): Promise<ExitInfo> {
    this.signalGroup('SIGTERM');
    const deadline = Date.now() + graceMs;
    let killed = false;
    for (;;) {
      if (this.hasExited && !this.groupAlive()) break;
      if (!killed && Date.now() > deadline) {
        // A no-op once it has exited: members it left behind are reported, never signaled blind.
        this.signalGroup('SIGKILL');
        killed = true;
      }
      if (killed && Date.now() > deadline + 5_000) break; // unkillable: reported by the caller
      await new Promise((r) => setTimeout(r, 50));
    }
    const info = await Promise.race([this.exited, new Promise<ExitInfo>((r) => setTimeout(() => r({ code: null, signal: null }), 1_000))]);
    await new Promise<void>((resolve) => this.log.end(() => resolve()));
    return info;
  }
}
