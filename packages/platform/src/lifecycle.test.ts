import { EventEmitter } from 'node:events';
import { pino } from 'pino';
import { describe, expect, it } from 'vitest';
import { createLifecycle } from './lifecycle.js';

const logger = pino({ level: 'silent' });

describe('createLifecycle', () => {
  it('runs steps last-registered-first by default, or in declared order', async () => {
    for (const [order, expected] of [
      ['reverse', ['http', 'workers', 'redis']],
      ['declared', ['redis', 'workers', 'http']],
    ] as const) {
      const ran: string[] = [];
      const lifecycle = createLifecycle({ logger, timeoutMs: 1_000, order });
      for (const name of ['redis', 'workers', 'http']) lifecycle.onShutdown(name, async () => void ran.push(name));
      const report = await lifecycle.shutdown('test');
      expect(ran).toEqual(expected);
      expect(report.ok).toBe(true);
    }
  });

  it('keeps going when a step throws or hangs, and reports each outcome', async () => {
    const ran: string[] = [];
    const lifecycle = createLifecycle({ logger, timeoutMs: 5_000, order: 'declared' });
    lifecycle.onShutdown('throws', () => {
      throw new Error('close failed');
    });
    lifecycle.onShutdown('hangs', () => new Promise(() => {}), { timeoutMs: 50 });
    lifecycle.onShutdown('redis', () => void ran.push('redis'));
    const report = await lifecycle.shutdown('test');
    expect(ran).toEqual(['redis']);
    expect(report.ok).toBe(false);
    expect(report.steps.map((s) => [s.name, s.outcome, s.error])).toEqual([
      ['throws', 'error', 'close failed'],
      ['hangs', 'timeout', undefined],
      ['redis', 'ok', undefined],
    ]);
  });

  it('bounds the whole shutdown by timeoutMs: a step gets only the time that is left', async () => {
    const lifecycle = createLifecycle({ logger, timeoutMs: 100, order: 'declared' });
    let lateStepCalled = false;
    lifecycle.onShutdown('hangs', () => new Promise(() => {}));
    lifecycle.onShutdown('late', () => {
      lateStepCalled = true;
      return new Promise(() => {});
    });
    const report = await lifecycle.shutdown('test');
    expect(report.steps.map((s) => s.outcome)).toEqual(['timeout', 'timeout']);
    expect(lateStepCalled).toBe(true); // still started: closing sockets is better than not
  });

  it('is idempotent: a second shutdown returns the same run and no step runs twice', async () => {
    let runs = 0;
    const lifecycle = createLifecycle({ logger, timeoutMs: 1_000 });
    lifecycle.onShutdown('once', async () => {
      runs++;
    });
    const [a, b] = await Promise.all([lifecycle.shutdown('first'), lifecycle.shutdown('second')]);
    await lifecycle.shutdown('third');
    expect(runs).toBe(1);
    expect(a).toBe(b);
    expect(a.reason).toBe('first');
  });

  it('turns readiness off before the first step runs', async () => {
    const lifecycle = createLifecycle({ logger, timeoutMs: 1_000 });
    expect(lifecycle.isReady()).toBe(false);
    lifecycle.markReady();
    expect(lifecycle.isReady()).toBe(true);
    let readyDuringStep: boolean | undefined;
    lifecycle.onShutdown('probe', () => {
      readyDuringStep = lifecycle.isReady();
    });
    await lifecycle.shutdown('test');
    expect(readyDuringStep).toBe(false);
    lifecycle.markReady();
    expect(lifecycle.isReady()).toBe(false);
    expect(lifecycle.isShuttingDown()).toBe(true);
  });

  it('shuts down and exits on SIGTERM, exits at once on a second signal, exits 1 on a crash', async () => {
    const events = new EventEmitter();
    const exits: number[] = [];
    const lifecycle = createLifecycle({ logger, timeoutMs: 1_000, processEvents: events, exit: (code) => void exits.push(code) });
    let release: () => void = () => {};
    lifecycle.onShutdown('slow', () => new Promise<void>((resolve) => (release = resolve)));
    const uninstall = lifecycle.installProcessHandlers();
    events.emit('SIGTERM', 'SIGTERM');
    events.emit('SIGINT', 'SIGINT');
    expect(exits).toEqual([1]); // the second signal does not wait
    await new Promise((r) => setImmediate(r)); // let the step start
    release();
    await lifecycle.shutdown('ignored');
    await new Promise((r) => setImmediate(r));
    expect(exits).toEqual([1, 0]);
    uninstall();
    expect(events.listenerCount('SIGTERM')).toBe(0);

    const crashEvents = new EventEmitter();
    const crashExits: number[] = [];
    const crashing = createLifecycle({ logger, timeoutMs: 1_000, processEvents: crashEvents, exit: (code) => void crashExits.push(code) });
    crashing.installProcessHandlers();
    crashEvents.emit('unhandledRejection', new Error('forgot an await'));
    await crashing.shutdown('ignored');
    await new Promise((r) => setImmediate(r));
    expect(crashExits).toEqual([1]);
  });
});
