import { type ChildProcess, spawn } from 'node:child_process';
import { createWriteStream, type WriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createRequire } from 'node:module';
import { pathToFileURL } from 'node:url';

const TSX_LOADER = pathToFileURL(createRequire(import.meta.url).resolve('tsx')).href;

export interface ChildOptions {
  name: string;
  /** A TypeScript entry file, run with node + the tsx loader and the source condition. */
  script: string;
  /** A compiled JavaScript entry file, run with plain node: no loader, no source condition. */
  compiled?: boolean;
  /** Extra node flags (e.g. --cpu-prof). */
  nodeArgs?: readonly string[];
  env: Readonly<Record<string, string | undefined>>;
  cwd: string;
  logFile: string;
  /** Called with each stdout/stderr line (e.g. to notice a readiness line). */
  onLine?: (line: string) => void;
}

/**
 * A benchmark child (worker, node-agent host) in its own process group, output to a log file.
 * The pid is the node process itself (no wrapper), so /proc/<pid>/status is the service's.
 */
export class BenchChild {
  readonly name: string;
  readonly pid: number;
  readonly logFile: string;
  readonly exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  private readonly child: ChildProcess;
  private readonly log: WriteStream;
  private readonly tail: string[] = [];
  private hasExitedFlag = false;

  constructor(opts: ChildOptions) {
    this.name = opts.name;
    this.logFile = opts.logFile;
    this.log = createWriteStream(opts.logFile, { flags: 'a' });
    const loader = opts.compiled ? [] : ['--conditions=@stowage/source', '--import', TSX_LOADER];
    this.child = spawn(process.execPath, [...(opts.nodeArgs ?? []), ...loader, opts.script], {
      cwd: opts.cwd,
      env: opts.env as NodeJS.ProcessEnv,
      stdio: ['ignore', 'pipe', 'pipe'],
      detached: true,
    });
    if (this.child.pid === undefined) throw new Error(`could not start ${opts.name}`);
    this.pid = this.child.pid;
    this.exited = new Promise((resolve) => {
      this.child.once('exit', (code, signal) => {
        this.hasExitedFlag = true;
        resolve({ code, signal });
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
        for (const line of lines) {
          this.tail.push(line);
          if (this.tail.length > 30) this.tail.shift();
          opts.onLine?.(line);
        }
      });
    }
  }

  get hasExited(): boolean {
    return this.hasExitedFlag;
  }

  lastLines(n = 10): string[] {
    return this.tail.slice(-n);
  }

  /** Peak resident set size (VmHWM) in bytes, or undefined once the process is gone. */
  async peakRssBytes(): Promise<number | undefined> {
    const status = await readFile(`/proc/${this.pid}/status`, 'utf8').catch(() => undefined);
    const m = status ? /^VmHWM:\s+(\d+)\s+kB/m.exec(status) : null;
    return m?.[1] ? Number(m[1]) * 1024 : undefined;
  }

  /** CPU seconds (user + system) the process used so far, from /proc/<pid>/stat. */
  async cpuSeconds(): Promise<number | undefined> {
    const stat = await readFile(`/proc/${this.pid}/stat`, 'utf8').catch(() => undefined);
    if (!stat) return undefined;
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    const utime = Number(fields[11]);
    const stime = Number(fields[12]);
    return (utime + stime) / 100; // USER_HZ is 100 on Linux
  }

  /** Only while the child is known alive: once reaped, its pid (the group's id) may be another process's. */
  private signalGroup(signal: NodeJS.Signals): boolean {
    if (this.hasExited) return false;
    try {
      process.kill(-this.pid, signal);
      return true;
    } catch {
      return false;
    }
  }

  /** SIGKILL to the group, synchronously (process exit handler). */
  killNow(): void {
    this.signalGroup('SIGKILL');
  }

  /** SIGTERM to the group, SIGKILL after `graceMs`; resolves when it is gone. Safe to call twice. */
  async stop(graceMs = 10_000): Promise<void> {
    if (!this.hasExited) this.signalGroup('SIGTERM');
    const deadline = Date.now() + graceMs;
    while (!this.hasExited && Date.now() < deadline) await new Promise((r) => setTimeout(r, 50));
    this.signalGroup('SIGKILL'); // still running after the grace
    await Promise.race([this.exited, new Promise((r) => setTimeout(r, 2_000))]);
    await new Promise<void>((resolve) => this.log.end(() => resolve()));
  }
}
