import type { BackupEvent, Block } from './api-types.js';
import { TERMINAL_PVB_PHASES } from './api-types.js';
import { bar, formatBytes, formatDuration } from './format.js';

interface PvbProgress {
  phase: string;
  bytesDone?: number;
  totalBytes?: number;
}

export interface ProgressSnapshot {
  backup: string;
  phase: string;
  elapsedMs: number;
  blocks: { done: number; started: number; planned: number; planDone: boolean };
  items: number;
  pvbs: { total: number; done: number; failed: number; bytesDone: number; totalBytes: number };
  hooks: { started: number; done: number; failed: number };
}

const num = (v: unknown): number | undefined => (typeof v === 'number' && Number.isFinite(v) ? v : undefined);
const str = (v: unknown): string | undefined => (typeof v === 'string' ? v : undefined);

/**
 * The live state of one backup, built from its event stream (and refreshed from GET /blocks for
 * PVB byte counts, which the events carry only now and then). Pure: no I/O, time comes in.
 */
export class BackupProgress {
  phase = 'New';
  private planned = 0;
  private planDone = false;
  private items = 0;
  private readonly started = new Set<string>();
  private readonly done = new Set<string>();
  private readonly pvbs = new Map<string, PvbProgress>();
  private hooksStarted = 0;
  private hooksDone = 0;
  private hooksFailed = 0;
  readonly startedAt: number;

  constructor(
    readonly backup: string,
    now: number,
  ) {
    this.startedAt = now;
  }

  /** Applies one event; returns true when it is worth a line in non-TTY output. */
  apply(ev: BackupEvent): boolean {
    const d = ev.data;
    switch (ev.type) {
      case 'backup.created':
        this.phase = str(d.phase) ?? this.phase;
        return false;
      case 'backup.phase':
        this.phase = str(d.to) ?? this.phase;
        return true;
      case 'plan.progress':
        this.planned = Math.max(this.planned, num(d.blocks) ?? 0);
        this.items = Math.max(this.items, num(d.items) ?? 0);
        return false;
      case 'plan.done':
        this.planned = num(d.blocks) ?? this.planned;
        this.items = num(d.items) ?? this.items;
        this.planDone = true;
        return true;
      case 'block.started': {
        const id = str(d.blockId);
        if (id) this.started.add(id);
        return false;
      }
      case 'block.done': {
        const id = str(d.blockId);
        if (id) {
          this.started.add(id);
          this.done.add(id);
        }
        return false;
      }
      case 'pvb.created': {
        const name = str(d.pvb);
        if (name && !this.pvbs.has(name)) this.pvbs.set(name, { phase: 'New' });
        return false;
      }
      case 'pvb.phase': {
        const name = str(d.pvb);
        if (!name) return false;
        const p = this.pvbs.get(name) ?? { phase: 'New' };
        p.phase = str(d.to) ?? p.phase;
        this.pvbs.set(name, p);
        return TERMINAL_PVB_PHASES.has(p.phase);
      }
      case 'pvb.progress': {
        const name = str(d.pvb);
        if (!name) return false;
        const p = this.pvbs.get(name) ?? { phase: 'InProgress' };
        p.bytesDone = num(d.bytesDone) ?? p.bytesDone;
        p.totalBytes = num(d.totalBytes) ?? p.totalBytes;
        this.pvbs.set(name, p);
        return false;
      }
      case 'hook.started':
        this.hooksStarted++;
        return false;
      case 'hook.done':
        this.hooksDone++;
        if (d.ok === false) this.hooksFailed++;
        return true;
      default:
        return false;
    }
  }

  /** Fills PVB phases and bytes from the blocks endpoint (the PVBs' own status). */
  applyBlocks(blocks: readonly Block[]): void {
    for (const b of blocks) {
      if (b.state !== 'Pending') this.started.add(b.id);
      for (const pvb of b.podVolumeBackups) {
        const p = this.pvbs.get(pvb.name) ?? { phase: pvb.phase };
        // An event may be newer than the read: never move a terminal PVB back.
        if (!TERMINAL_PVB_PHASES.has(p.phase)) p.phase = pvb.phase;
        if (pvb.bytesDone !== undefined) p.bytesDone = Math.max(p.bytesDone ?? 0, pvb.bytesDone);
        if (pvb.totalBytes !== undefined) p.totalBytes = pvb.totalBytes;
        this.pvbs.set(pvb.name, p);
      }
    }
  }

  snapshot(now: number): ProgressSnapshot {
    let done = 0;
    let failed = 0;
    let bytesDone = 0;
    let totalBytes = 0;
    for (const p of this.pvbs.values()) {
      const terminal = TERMINAL_PVB_PHASES.has(p.phase);
      if (terminal) done++;
      if (p.phase === 'Failed' || p.phase === 'Canceled') failed++;
      if (p.totalBytes !== undefined) {
        totalBytes += p.totalBytes;
        bytesDone += p.phase === 'Completed' ? p.totalBytes : Math.min(p.bytesDone ?? 0, p.totalBytes);
      }
    }
    return {
      backup: this.backup,
      phase: this.phase,
      elapsedMs: now - this.startedAt,
      blocks: {
        done: this.done.size,
        started: this.started.size,
        planned: Math.max(this.planned, this.started.size),
        planDone: this.planDone,
      },
      items: this.items,
      pvbs: { total: this.pvbs.size, done, failed, bytesDone, totalBytes },
      hooks: { started: this.hooksStarted, done: this.hooksDone, failed: this.hooksFailed },
    };
  }
}

/** The bars: one line per phase of work. */
export function renderBars(s: ProgressSnapshot, width = 24): string[] {
  const planNote = s.blocks.planDone ? '' : ' (planning…)';
  const pvbBytes = s.pvbs.totalBytes > 0 ? `${formatBytes(s.pvbs.bytesDone)} / ${formatBytes(s.pvbs.totalBytes)}` : 'bytes -';
  return [
    `backup ${s.backup}  ${s.phase}  ${formatDuration(s.elapsedMs)}`,
    `  blocks  ${bar(s.blocks.done, s.blocks.planned, width)} ${s.blocks.done}/${s.blocks.planned} done${planNote}`,
    `  PVBs    ${bar(s.pvbs.totalBytes > 0 ? s.pvbs.bytesDone : s.pvbs.done, s.pvbs.totalBytes > 0 ? s.pvbs.totalBytes : s.pvbs.total, width)} ${pvbBytes}  ${s.pvbs.done}/${s.pvbs.total} PVBs${s.pvbs.failed ? ` (${s.pvbs.failed} failed)` : ''}`,
    `  hooks   ${bar(s.hooks.done, Math.max(s.hooks.started, s.hooks.done), width)} ${s.hooks.done}/${Math.max(s.hooks.started, s.hooks.done)} runs${s.hooks.failed ? ` (${s.hooks.failed} failed)` : ''}`,
  ];
}

/** One status line for non-TTY output. */
export function renderStatusLine(s: ProgressSnapshot): string {
  return `${s.phase}: blocks ${s.blocks.done}/${s.blocks.planned}${s.blocks.planDone ? '' : '+'}, PVBs ${s.pvbs.done}/${s.pvbs.total} (${formatBytes(s.pvbs.bytesDone)}), hooks ${s.hooks.done}/${s.hooks.started} after ${formatDuration(s.elapsedMs)}`;
}

/** A line for an event worth telling in non-TTY output (see BackupProgress.apply). */
export function describeEvent(ev: BackupEvent): string | undefined {
  const d = ev.data;
  switch (ev.type) {
    case 'backup.phase':
      return `phase ${String(d.from ?? '?')} → ${String(d.to)}`;
    case 'plan.done':
      return `planned ${String(d.blocks)} blocks, ${String(d.items)} items`;
    case 'pvb.phase':
      return `PVB ${String(d.pod ?? d.pvb)} ${d.volume ? `volume ${String(d.volume)} ` : ''}${d.node ? `on ${String(d.node)} ` : ''}${String(d.to)}${d.timedOut ? ' (timed out)' : ''}${typeof d.message === 'string' && d.message ? `: ${d.message}` : ''}`;
    case 'hook.done':
      return `${String(d.phase)} hook ${String(d.pod)}/${String(d.container)} ${d.ok === false ? 'FAILED' : 'ok'}${d.exitCode !== null && d.exitCode !== undefined ? ` (exit ${String(d.exitCode)})` : ''}`;
    default:
      return undefined;
  }
}

export interface ProgressOutput {
  write(text: string): void;
  isTTY: boolean;
}

/**
 * Draws progress: on a TTY the bars redraw in place (at most every `intervalMs`); otherwise one
 * line per notable event plus a status line at most every `statusEveryMs`.
 */
export class ProgressRenderer {
  private drawn = 0;
  private lastDraw = Number.NEGATIVE_INFINITY;
  private lastStatus = Number.NEGATIVE_INFINITY;
  private dirty = false;

  constructor(
    private readonly out: ProgressOutput,
    private readonly model: BackupProgress,
    private readonly clock: () => number = Date.now,
    private readonly intervalMs = 100,
    private readonly statusEveryMs = 2_000,
  ) {}

  onEvent(ev: BackupEvent, notable: boolean): void {
    this.dirty = true;
    if (!this.out.isTTY && notable) {
      const line = describeEvent(ev);
      if (line) this.out.write(`${line}\n`);
    }
    this.tick();
  }

  /** Redraw if due (call on a timer too, so elapsed time moves). */
  tick(force = false): void {
    const now = this.clock();
    if (this.out.isTTY) {
      if (!force && now - this.lastDraw < this.intervalMs) return;
      this.lastDraw = now;
      const lines = renderBars(this.model.snapshot(now));
      const up = this.drawn > 0 ? `\x1b[${this.drawn}A` : '';
      this.out.write(`${up}${lines.map((l) => `\x1b[2K${l}`).join('\n')}\n`);
      this.drawn = lines.length;
    } else if (this.dirty && (force || now - this.lastStatus >= this.statusEveryMs)) {
      this.lastStatus = now;
      this.dirty = false;
      this.out.write(`${renderStatusLine(this.model.snapshot(now))}\n`);
    }
  }

  finish(): void {
    this.dirty = true;
    this.tick(true);
  }
}
