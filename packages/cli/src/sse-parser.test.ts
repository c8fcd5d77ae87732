import { describe, expect, it } from 'vitest';
import { SseParser } from './sse-parser.js';

const STREAM =
  'retry: 2000\n\n: heartbeat 2026-01-01T00:00:00Z\n\nid: 1-0\nevent: backup.phase\ndata: {"a":1}\n\nid: 2-0\nevent: pvb.progress\ndata: line one\ndata: line two\n\n';

describe('SseParser', () => {
  it('parses events, skips heartbeats and keeps the last id and retry', () => {
    const p = new SseParser();
    const events = p.feed(STREAM);
    expect(events).toEqual([
      { id: '1-0', event: 'backup.phase', data: '{"a":1}' },
      { id: '2-0', event: 'pvb.progress', data: 'line one\nline two' },
    ]);
    expect(p.lastEventId).toBe('2-0');
    expect(p.retryMs).toBe(2000);
  });

  it('gives the same events whatever the chunking, including CRLF split across chunks', () => {
    const crlf = STREAM.replaceAll('\n', '\r\n');
    for (const text of [STREAM, crlf]) {
      const whole = new SseParser().feed(text);
      for (const size of [1, 2, 3, 7, 13]) {
        const p = new SseParser();
        const got = [];
        for (let i = 0; i < text.length; i += size) got.push(...p.feed(text.slice(i, i + size)));
        expect(got).toEqual(whole);
      }
    }
  });

  it('does not dispatch an event until its blank line arrives', () => {
    const p = new SseParser();
    expect(p.feed('id: 5-0\nevent: x\ndata: {}\n')).toEqual([]);
    expect(p.feed('\n')).toEqual([{ id: '5-0', event: 'x', data: '{}' }]);
  });
});
