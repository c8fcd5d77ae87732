import { describe, expect, it } from 'vitest';
import { exitCodeFromStatus } from './pod-exec.js';
import { TailBuffer, tailWritable } from './tail-buffer.js';

describe('TailBuffer', () => {
  it('keeps the last bytes across many small writes and counts all of them', () => {
    const tail = new TailBuffer(10);
    for (let i = 0; i < 100; i++) tail.push(Buffer.from(String(i % 10)));
    expect(tail.toString()).toBe('0123456789');
    expect(tail.totalBytes).toBe(100);
  });

  it('keeps the end of one chunk bigger than the limit', () => {
    const tail = new TailBuffer(4);
    tail.push(Buffer.from('ab'));
    tail.push(Buffer.from('cdefgh'));
    expect(tail.toString()).toBe('efgh');
    tail.push(Buffer.from('ij'));
    expect(tail.toString()).toBe('ghij');
  });

  it('as a Writable, ignores writes after end instead of throwing', async () => {
    const tail = new TailBuffer(16);
    const stream = tailWritable(tail);
    stream.write('hello ');
    stream.end('world');
    stream.write('late');
    await new Promise((resolve) => setImmediate(resolve));
    expect(tail.toString()).toBe('hello world');
  });
});

describe('exitCodeFromStatus', () => {
  it('reads Success as 0 and NonZeroExitCode from causes', () => {
    expect(exitCodeFromStatus({ status: 'Success' })).toBe(0);
    expect(
      exitCodeFromStatus({ status: 'Failure', reason: 'NonZeroExitCode', details: { causes: [{ reason: 'ExitCode', message: '3' }] } }),
    ).toBe(3);
  });

  it('has no exit code for a Failure without one', () => {
    expect(exitCodeFromStatus({ status: 'Failure', reason: 'InternalError', message: 'container not found' })).toBeUndefined();
    expect(exitCodeFromStatus({ status: 'Failure', details: { causes: [{ reason: 'ExitCode', message: 'x' }] } })).toBeUndefined();
  });
});
